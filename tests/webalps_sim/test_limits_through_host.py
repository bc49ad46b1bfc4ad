"""Over a guardian limit, one client fails closed and the host serves everyone else.

The guardian keeps at most ``--max-sessions`` key handles (least recently used first out).  With
a limit of 2 and three kept-alive clients, the first client's handle is evicted by the third
handshake: its next request cannot be opened (the guardian answers ``UNKNOWN_HANDLE``), so the
host ends that connection -- the client gets no response, never a wrong one -- while the two
others and new clients are served byte-exact by the same host and guardian processes.
"""

from __future__ import annotations

import http.client
import os
from pathlib import Path

import pytest

from tests.webalps_sim.guardian_helpers import (
    SUITE_NAMES,
    GuardianProcess,
    HostProcess,
    client_context,
    provision,
)
from webalps_sim.aio.host import WEBALPS_SUITES

pytestmark = pytest.mark.interop


def _get(conn: http.client.HTTPSConnection) -> bytes:
    conn.request("GET", "/f")
    return conn.getresponse().read()


def test_an_evicted_session_fails_closed_and_the_others_are_served(tmp_path: Path) -> None:
    prov = provision(tmp_path)
    docroot = tmp_path / "www"
    docroot.mkdir()
    body = os.urandom(40_000)
    (docroot / "f").write_bytes(body)
    sock = tmp_path / "guardian.sock"
    ctx = client_context(prov.ca_pem, SUITE_NAMES[WEBALPS_SUITES[0]])
    with GuardianProcess(prov.state_dir, sock, "--max-sessions", "2") as guardian, \
            HostProcess(docroot, sock) as host:
        clients = [http.client.HTTPSConnection("localhost", host.port, context=ctx, timeout=30)
                   for _ in range(3)]
        for c in clients:
            assert _get(c) == body  # three handshakes: the first handle is evicted
        with pytest.raises((http.client.HTTPException, ConnectionError, OSError)):
            _get(clients[0])
        assert _get(clients[1]) == body and _get(clients[2]) == body
        fresh = http.client.HTTPSConnection("localhost", host.port, context=ctx, timeout=30)
        assert _get(fresh) == body
        assert host.alive and guardian.proc is not None and guardian.proc.poll() is None
