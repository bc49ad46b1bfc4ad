"""Session resumption through a WebALPS host: the cache holds key handles, the guardian the secrets.

Python's ``ssl`` resumes a session by ID through the host (``session_reused``) and the abbreviated
handshake's data is byte-exact.  A session evicted from the host's cache has its handle released
in the guardian; a guardian that restarts empties the cache (every old handle is gone), and the
next connection makes a full handshake instead of failing.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from pathlib import Path

import pytest

from tests.webalps_sim.guardian_helpers import (
    SUITE_NAMES,
    GuardianProcess,
    client_context,
    provision,
    webalps_host,
)
from tls12.delegate import DelegateRequest, KeyHandle
from webalps_sim import protocol as p
from webalps_sim.aio.host import WEBALPS_SUITES, GuardianSessionStore
from webalps_sim.questions import HandleLost

pytestmark = pytest.mark.interop


def _get(port: int, ctx: ssl.SSLContext, session: ssl.SSLSession | None
         ) -> tuple[bytes, ssl.SSLSession, bool]:
    with socket.create_connection(("127.0.0.1", port), timeout=60) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost", session=session) as tls:
        tls.sendall(b"GET /f HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := tls.recv(65536):
            data += chunk
        assert tls.session is not None
        return data.split(b"\r\n\r\n", 1)[1], tls.session, tls.session_reused


def test_resumption_through_the_guardian(tmp_path: Path) -> None:
    prov = provision(tmp_path)
    docroot = tmp_path / "www"
    docroot.mkdir()
    (docroot / "f").write_bytes(bytes(range(256)) * 100)
    sock = tmp_path / "g.sock"
    guardian = GuardianProcess(prov.state_dir, sock).start()
    server, remote = webalps_host(docroot, sock, store_size=2)
    try:
        with server:
            store = server.config.session_store
            assert isinstance(store, GuardianSessionStore)
            ctx = client_context(prov.ca_pem, SUITE_NAMES[WEBALPS_SUITES[0]])
            body, session, reused = _get(server.port, ctx, None)
            assert body == (docroot / "f").read_bytes() and not reused
            body, _, reused = _get(server.port, ctx, session)
            assert body == (docroot / "f").read_bytes() and reused

            # two more full handshakes evict the first session: its handle is released
            first = next(iter(store._sessions.values())).handle
            assert isinstance(first, KeyHandle)
            _get(server.port, ctx, None)
            _get(server.port, ctx, None)
            assert len(store) == 2 and not store.holds(first)
            server.wait_idle()
            # asked on the host's own channel (handles belong to the host connection)
            asked = asyncio.run_coroutine_threadsafe(
                remote.answer(DelegateRequest(0, "verify_data", (first, False, b"t" * 32))),
                server._loop).result(30)  # type: ignore[arg-type]
            assert isinstance(asked, HandleLost) and asked.code == p.ErrorCode.UNKNOWN_HANDLE
            _, _, reused = _get(server.port, ctx, session)
            assert not reused

            # a restarted guardian: the cache is emptied, a full handshake follows
            _, session, _ = _get(server.port, ctx, None)
            guardian.kill()
            guardian = GuardianProcess(prov.state_dir, sock).start()
            body, _, reused = _get(server.port, ctx, session)
            assert body == (docroot / "f").read_bytes() and not reused
            assert remote.reconnects == 1 and len(store) == 1
    finally:
        guardian.stop()
        remote.close()

