"""What runs inside the guardian besides TLS: guardian applications and the cost-model hook.

A **guardian application** is the small, certified program the paper puts in the coprocessor
next to the SSL keys (``webalps.md`` §3.2, "a well-defined, reasonably small set of guardian
programs").  The guardian opens every application-data record, parses the plaintext HTTP/1.1
stream of each TLS connection (:mod:`webalps_sim.router`) and offers each whole request to the
application::

    class Hello:
        def handle(self, method, target, headers, body):
            if target != "/hello":
                return None                      # not mine: the host serves it
            return 200, [(b"content-type", b"text/plain")], b"hello from the guardian\\n"

A request the application answers never leaves the guardian in plaintext: the guardian seals
the response itself and the host only relays the records.  ``None`` hands the request's bytes,
unchanged, to the host, which serves it and asks the guardian to seal its answer.

Applications are chosen by name (``--app``): :data:`APPS` maps a name to
``factory(state_dir) -> GuardianApp``.  ``null`` claims nothing (the paper's null application,
used to measure the inherent cost of the trust boundary); ``evoting`` loads
``webalps_sim.evoting.EvotingApp`` (the §5 e-voting guardian).

The **cost model** makes the guardian as slow as an IBM 4758: the guardian calls
``cost.charge(op, nbytes)`` once per operation, with ``op`` one of :data:`COST_OPS` -- ``"rsa"``
(premaster decryption), ``"seal"`` / ``"open"`` (record protection, ``nbytes`` of plaintext),
``"transfer"`` (the host<->card copy of one request and its reply, ``nbytes`` both ways) and
``"finished"`` (a Finished computation or check).  The name given to ``--cost-model`` is looked
up with ``webalps_sim.aio.coprocessor.make_cost_model(name)``; ``off`` falls back to :class:`NoCost`,
which charges nothing, when that module is absent.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from .errors import WebAlpsError

__all__ = [
    "Headers",
    "Response",
    "GuardianApp",
    "NullApp",
    "AppUnavailable",
    "APPS",
    "load_app",
    "CostCharger",
    "NoCost",
    "COST_OPS",
    "load_cost_model",
]

Headers = list[tuple[bytes, bytes]]
"""HTTP header fields as h11 gives them: lower-case names, raw values."""

Response = tuple[int, Headers, bytes]
"""``(status, headers, body)``; the guardian adds ``content-length`` and the status line."""


@runtime_checkable
class GuardianApp(Protocol):
    """A guardian application: answers the requests it claims, inside the guardian.

    The guardian calls :meth:`handle` one request at a time (its server runs every request
    under one lock, as the single coprocessor would), so an application keeps no lock."""

    def handle(self, method: str, target: str, headers: Headers, body: bytes) -> Response | None:
        """The response to a whole request, or ``None``: "not mine, give it to the host"."""
        ...


class NullApp:
    """The null application: claims no request, so every request goes to the host."""

    def handle(self, method: str, target: str, headers: Headers, body: bytes) -> Response | None:
        return None


class AppUnavailable(WebAlpsError):
    """The named guardian application or cost model cannot be loaded (unknown or not installed)."""


def _evoting(state_dir: str | os.PathLike[str]) -> GuardianApp:
    try:
        module = importlib.import_module("webalps_sim.evoting")
    except ImportError as exc:
        raise AppUnavailable(f"--app evoting needs webalps_sim.evoting, which is missing: {exc}") from None
    cls = getattr(module, "EvotingApp", None)
    if cls is None:
        raise AppUnavailable("webalps_sim.evoting defines no EvotingApp")
    app: GuardianApp = cls(state_dir)
    return app


APPS: dict[str, Callable[[str | os.PathLike[str]], GuardianApp]] = {
    "null": lambda state_dir: NullApp(),
    "evoting": _evoting,
}
"""Application name -> ``factory(state_dir)``; the names ``--app`` accepts."""

#: The application modules measured into the guardian's certificate, by application name
#: (see :mod:`webalps_sim.measure`): a different application is a different guardian type.
APP_SOURCES: dict[str, tuple[str, ...]] = {
    "null": (),
    "evoting": ("webalps_sim/evoting.py", "webalps_sim/sealed.py"),
}


def load_app(name: str, state_dir: str | os.PathLike[str]) -> GuardianApp:
    """The application called ``name`` for the guardian whose state is in ``state_dir``."""
    try:
        factory = APPS[name]
    except KeyError:
        raise AppUnavailable(f"unknown guardian application {name!r} (known: {sorted(APPS)})") from None
    return factory(state_dir)


COST_OPS = ("rsa", "seal", "open", "transfer", "finished")
"""The operations the guardian charges to its cost model."""


@runtime_checkable
class CostCharger(Protocol):
    """What the guardian charges each operation to: makes it take as long as on the modelled
    hardware (the 4758 model is :class:`webalps_sim.aio.coprocessor.CoprocessorCostModel`)."""

    def charge(self, op: str, nbytes: int) -> None:
        """Account for (typically: sleep for) one operation on ``nbytes`` bytes."""
        ...


class NoCost:
    """The cost model ``off``: the guardian runs at this machine's native speed."""

    def charge(self, op: str, nbytes: int) -> None:
        return None


def load_cost_model(name: str) -> CostCharger:
    """``webalps_sim.aio.coprocessor.make_cost_model(name)``; for ``off`` without that module, :class:`NoCost`.

    ``off`` still goes through the cost-model module when it is there, so that its counters
    (which operations, how many bytes) are kept at native speed too.
    """
    try:
        module = importlib.import_module("webalps_sim.aio.coprocessor")
    except ImportError as exc:
        if name == "off":
            return NoCost()
        raise AppUnavailable(f"--cost-model {name} needs webalps_sim.aio.coprocessor: {exc}") from None
    make = getattr(module, "make_cost_model", None)
    if make is None:
        raise AppUnavailable("webalps_sim.aio.coprocessor defines no make_cost_model")
    try:
        model: CostCharger = make(name)
    except (KeyError, ValueError) as exc:
        raise AppUnavailable(f"unknown cost model {name!r}: {exc}") from None
    return model
