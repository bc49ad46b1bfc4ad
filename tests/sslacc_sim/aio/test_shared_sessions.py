"""The real cluster's shared session table: a session made on A resumes on B after A died, and
on C after B died too (SSLACC §4.9: "the SSL session cache must be shared across the entire
cluster").

In network namespaces (root and iproute2, as in CI; never skipped). The client is
``openssl s_client`` (``-sess_out`` / ``-sess_in``), which says ``Reused`` or ``New`` for each
handshake; every body is compared byte for byte. The negative control starts the buddies with
``--no-shared-sessions``: the same resumption then falls back to a full handshake.
"""

from __future__ import annotations

import re
import subprocess
from contextlib import ExitStack
from pathlib import Path

import pytest

from sslacc_sim.aio.linux.cluster import start_nodes
from sslacc_sim.aio.linux.failover import HOSTNAME, site_credentials, wait_line
from sslacc_sim.aio.linux.netns import VIP, Topology

pytestmark = [pytest.mark.interop, pytest.mark.usefixtures("namespaces")]

_BODY = b"a page from the shared-session test\n" * 40


def _fetch(topo: Topology, cert: Path, sess: Path, *, resume: bool, bind: str | None = None
           ) -> tuple[bool, bytes]:  # fmt: skip
    """One s_client GET of /page: (was the session reused, stdout); ``bind``: the client's
    ``address:port``."""
    argv = ["openssl", "s_client", "-connect", f"{VIP}:443", "-servername", HOSTNAME,
            "-CAfile", str(cert), "-verify_return_error", "-tls1_2", "-ign_eof",
            *(["-bind", bind] if bind else []),
            *(["-sess_in", str(sess)] if resume else []), "-sess_out", str(sess)]  # fmt: skip
    request = f"GET /page HTTP/1.1\r\nHost: {HOSTNAME}\r\nConnection: close\r\n\r\n".encode()
    done = topo.run("client", argv, input=request, capture_output=True, text=False, timeout=30)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert _BODY in out, out[-500:]
    said = re.findall(rb"^(New|Reused), \S+, Cipher is ", out, re.MULTILINE)
    assert len(said) == 1, out[:3000]
    return said[0] == b"Reused", out


def _kill(topo: Topology, procs: dict[str, subprocess.Popen[str]], node: str) -> None:
    topo.cut(node)
    procs[node].kill()
    procs[node].wait(timeout=10)


def _cluster(tmp_path: Path, stack: ExitStack, tag: str,
             backup_args: tuple[str, ...] = ()) -> tuple[Topology, Path, dict[str, subprocess.Popen[str]]]:  # fmt: skip
    docroot = tmp_path / "www"
    docroot.mkdir()
    (docroot / "page").write_bytes(_BODY)
    cert, key = site_credentials(tmp_path)
    topo = stack.enter_context(Topology(tag=tag))
    procs = start_nodes(topo, stack, nodes=3, docroot=docroot, cert=cert, key=key,
                        backup_args=backup_args)  # fmt: skip
    return topo, cert, procs


def test_a_session_made_on_a_resumes_on_b_and_then_on_c(tmp_path: Path) -> None:
    with ExitStack() as stack:
        topo, cert, procs = _cluster(tmp_path, stack, "tss")
        on_a, on_b = tmp_path / "a.sess", tmp_path / "b.sess"
        quiet = tmp_path / "quiet.sess"  # made on A, never used on B: only the table hand-over
        assert _fetch(topo, cert, quiet, resume=False)[0] is False
        assert _fetch(topo, cert, on_a, resume=False)[0] is False
        assert _fetch(topo, cert, on_a, resume=True)[0] is True  # A's own table
        _kill(topo, procs, "a")
        wait_line(procs["b"], "RESTORED", 10)
        # B learnt the session from the update that committed A's Finished
        assert _fetch(topo, cert, on_a, resume=True)[0] is True
        assert _fetch(topo, cert, on_b, resume=False)[0] is False  # a new one, made on B
        # B hands its whole table to C once it owns the address
        assert "SESSIONS" in wait_line(procs["b"], "SESSIONS", 10)
        _kill(topo, procs, "b")
        wait_line(procs["c"], "RESTORED", 10)
        assert _fetch(topo, cert, quiet, resume=True)[0] is True  # made on A, handed B -> C
        assert _fetch(topo, cert, on_a, resume=True)[0] is True  # resumed on B, mirrored to C
        assert _fetch(topo, cert, on_b, resume=True)[0] is True  # made on B, mirrored to C


def test_negative_control_without_shared_sessions_a_resumption_is_a_full_handshake(
        tmp_path: Path) -> None:  # fmt: skip
    with ExitStack() as stack:
        topo, cert, procs = _cluster(tmp_path, stack, "tsn", ("--no-shared-sessions",))
        sess = tmp_path / "a.sess"
        assert _fetch(topo, cert, sess, resume=False)[0] is False
        assert _fetch(topo, cert, sess, resume=True)[0] is True  # A still resumes its own
        _kill(topo, procs, "a")
        wait_line(procs["b"], "RESTORED", 10)
        reused, _ = _fetch(topo, cert, sess, resume=True)
        assert reused is False  # B never kept the session: a full handshake, the page intact
