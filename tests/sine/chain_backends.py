"""Run a test module once per :mod:`sine.chaincrypto` backend (the C extension and its twin).

Import :func:`chain_backend` into a test module (``from tests.sine.chain_backends import
chain_backend  # noqa: F401``): the autouse fixture points :class:`sine.verifier.StreamVerifier`
at one backend for the whole module, then at the other.  The C parameter is skipped when the
extension is not built (a scratch copy of ``make mutation``, which copies only ``tls12``'s
build); ``tests/sine/test_chaincrypto.py`` is the test that fails then, unless
``SINE_PURE_PYTHON=1``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import sine.verifier
from sine.chaincrypto import c_verify_run, py_verify_run

BACKENDS = ("c", "python")


def backend_function(name: str) -> object:
    """The ``verify_run`` of backend ``name``; fails when C is not built (``make build``)."""
    if name == "python":
        return py_verify_run
    assert c_verify_run is not None, "sine._chaincrypto is not built: run `make build`"
    return c_verify_run


@pytest.fixture(scope="module", params=BACKENDS, autouse=True)
def chain_backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """The module's tests with ``sine.verifier`` using backend ``request.param``."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sine.verifier, "verify_run", backend_function(request.param))
        yield request.param
