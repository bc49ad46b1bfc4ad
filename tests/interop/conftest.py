"""Fixtures shared by the interop tests: a docroot and our HTTPS server.

``credentials`` and ``cert_files`` come from the root ``tests/conftest.py``.

One :class:`testbed.apps.harness.BackgroundServer` per test module (in a thread
with its own event loop) serves every implemented suite; the clients under
test pick one suite each.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.apps.harness import BackgroundServer
from tests.interop.tls_peers import ALL_SUITES, SIZES, make_docroot
from tls12.certs import Credentials
from tls12.config import ServerConfig
from tls12.session import InMemorySessionStore


@pytest.fixture(scope="module")
def docroot(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, bytes]]:
    """A directory with ``file_<size>.bin`` for every size in ``SIZES``, and the contents."""
    root = tmp_path_factory.mktemp("www")
    return root, make_docroot(root, SIZES)


@pytest.fixture(scope="module")
def https_server(credentials: Credentials, docroot: tuple[Path, dict[int, bytes]]) -> Iterator[BackgroundServer]:
    """Our HTTPS server with every suite and a session cache, on a free loopback port."""
    config = ServerConfig(
        credentials=credentials,
        cipher_suites=tuple(ALL_SUITES),
        session_store=InMemorySessionStore(),
    )
    with BackgroundServer(docroot[0], config, handshake_timeout=20.0, idle_timeout=20.0) as server:
        yield server
