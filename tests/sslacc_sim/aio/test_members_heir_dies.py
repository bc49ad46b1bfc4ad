"""Two deaths closer together than a member's verdict: the first heir dies before the last member
has judged the first death.

Issue 22: "no lost bytes at any instant", and the campaign's ``double`` fault (the new owner
killed within a second of its takeover). Three members in network namespaces (root, iproute2,
nftables; never skipped), each reading its connections slowly (``--stall-ms``: the client's
bytes wait in the member's kernel, acknowledged and not consumed); 15 curl uploads of 4 MiB at
full speed, five in each member's buckets. Member B is cut and killed 1 s in; C takes
B's buckets over and hands each connection to its own mirror, A (``adopt``, before it receives
a byte of it); C is cut and killed as soon as it reports its takeover. A has not judged B dead
yet (its verdict takes 0.5 s), so its watch on C kept only C's own buckets. It must now keep
B's connections too: each ``adopt`` carries the client bytes C put back into its receive
queue, and A's record looks back into the bytes it heard of connections it did not keep
(:class:`~sslacc_sim.aio.linux.sniff.Recent`). A then takes over C and everything C held, and
every upload's receipt must be exact. Before this, A restored B's connections without the bytes
C had acknowledged: those uploads were lost (the first bucket campaign's test saw it once).
"""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from sslacc_sim.aio.linux.buckets import bucket_of
from sslacc_sim.aio.linux.cluster import start_members
from sslacc_sim.aio.linux.failover import (
    HOSTNAME,
    FailoverFailed,
    lines_of,
    site_credentials,
    wait_line,
)
from sslacc_sim.aio.linux.netns import ADDRESSES, VIP, Topology

from .member_loads import four_mib_site, ports_of_members, receipts, uploads

pytestmark = [pytest.mark.interop, pytest.mark.usefixtures("namespaces"), pytest.mark.timeout(300)]

_BUCKETS = 16
_UPLOADS = 15
_STALL_MS = "40"  # one read of up to 64 KiB per 40 ms: a 4 MiB upload takes about 3 s


@pytest.mark.parametrize("first", ["kill", "hang"])
def test_the_first_heir_dying_before_the_verdict_loses_no_upload(tmp_path: Path, first: str) -> None:
    """B killed, or hung (its kernel still completes the handshake of A's links to it, so an
    ``adopt`` A sent it would wait unanswered); then C killed as soon as it took B over."""
    docroot, body, cert, key = four_mib_site(tmp_path)
    with ExitStack() as stack:
        topo = stack.enter_context(Topology(tag=f"t3h{first[0]}", shared_vip=True))
        procs = start_members(topo, stack, members=3, docroot=docroot, cert=cert, key=key,
                              buckets=_BUCKETS, member_args=["--stall-ms", _STALL_MS],
                              logs=tmp_path)  # fmt: skip
        ports = ports_of_members(_UPLOADS, 3, _BUCKETS)  # five uploads on each member
        curls = uploads(topo, cert, tmp_path, body, ports)
        time.sleep(1.0)
        topo.cut("b")
        if first == "kill":
            procs["b"].kill()
        else:
            procs["b"].send_signal(signal.SIGSTOP)
        first = json.loads(wait_line(procs["c"], "RESTORED", 10).split(" ", 1)[1])
        topo.cut("c")  # at once: A's verdict on B is still 0.3 s or more away
        procs["c"].kill()
        killed_c = time.monotonic()
        try:
            said = _first_lines(procs["a"], ("RESTORED", "MIRROR DEAD"), 10)
        except FailoverFailed as exc:
            raise AssertionError(f"{exc}; A's errors: {(tmp_path / 'a.stderr').read_text()[-2000:]}") from None
        last = json.loads(said["RESTORED"].split(" ", 1)[1])
        outs = [c.communicate(timeout=90) for c in curls]
        ok = receipts(curls, tmp_path, body)
    assert first["member"] == 1 and first["failed"] == [] and first["connections"] >= 5
    assert last["member"] == 2 and last["failed"] == []
    assert last["detected"] < killed_c + 0.3, "A took C over before judging B: the case under test"
    assert said["MIRROR DEAD"].startswith("MIRROR DEAD member 1")
    assert all(ok), (f"{ok.count(False)} of {len(ok)} uploads lost (by member: "
                     f"{[(i % 3, good) for i, good in enumerate(ok)]}); "
                     f"errors: {[err.strip()[:120] for _, err in outs if err.strip()]}")  # fmt: skip


def _first_lines(proc: subprocess.Popen[str], starts: tuple[str, ...], timeout: float) -> dict[str, str]:
    """The first line starting with each of ``starts``, in whatever order ``proc`` prints them."""
    deadline, found, seen = time.monotonic() + timeout, {}, []
    q = lines_of(proc)
    while len(found) < len(starts):
        try:
            line = q.get(timeout=max(deadline - time.monotonic(), 0.001))
        except queue.Empty:
            raise FailoverFailed(f"no {set(starts) - set(found)} within {timeout} s; said {seen}") from None
        if line is None:
            raise FailoverFailed(f"exited before printing {set(starts) - set(found)}")
        seen.append(line[:200])
        found |= {s: line for s in starts if line.startswith(s) and s not in found}
    return found


def test_after_two_deaths_closer_than_the_verdict_every_bucket_is_served(tmp_path: Path) -> None:
    """No load: B killed, C killed as soon as it took B over (no connection of B's to hand A,
    so A learns of B's death only from its own verdict), then one new connection in each of
    the 16 buckets. A serves them all: its filter follows its table, which gave it B's buckets
    -- empty ones too -- when it judged B dead after C (a filter that took only the buckets of
    the connections it held left B's empty ones to nobody)."""
    docroot = tmp_path / "www"
    docroot.mkdir()
    (docroot / "small").write_bytes(b"small file\n")
    cert, key = site_credentials(tmp_path)
    ports = [next(p for p in range(30000, 40000) if bucket_of(ADDRESSES["client"], p, _BUCKETS) == b)
             for b in range(_BUCKETS)]  # fmt: skip
    with ExitStack() as stack:
        topo = stack.enter_context(Topology(tag="t3e", shared_vip=True))
        procs = start_members(topo, stack, members=3, docroot=docroot, cert=cert, key=key,
                              buckets=_BUCKETS, logs=tmp_path)  # fmt: skip
        topo.cut("b")
        procs["b"].kill()
        wait_line(procs["c"], "RESTORED", 10)
        topo.cut("c")
        procs["c"].kill()
        said = _first_lines(procs["a"], ("RESTORED", "MIRROR DEAD"), 10)
        assert said["MIRROR DEAD"].startswith("MIRROR DEAD member 1")
        got = [topo.run("client", [
            "curl", "-sS", "--cacert", str(cert), "--resolve", f"{HOSTNAME}:443:{VIP}",
            "--local-port", str(port), "--max-time", "5", f"https://{HOSTNAME}/small"])
            for port in ports]  # fmt: skip
    lost = [(b, r.stderr.strip()[:80]) for b, r in enumerate(got) if r.stdout != "small file\n"]
    assert not lost, f"buckets not served after the two deaths: {lost}"
