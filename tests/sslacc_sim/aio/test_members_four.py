"""Four members: a death is told to every member, so the next death finds every table right;
and a member that leaves on purpose.

Issue 22: "N >= 2 nodes". With three members every member is a neighbour of any other (its
predecessor or its successor), and each neighbour learns of a death by itself. With four, D is
neither B's predecessor (A) nor its successor (C): only a notice tells it that B died
(:meth:`Member._tell_dead <sslacc_sim.aio.linux.member.Member._tell_dead>`, ``TOLD DEAD``).
Without it D's table still gives B's buckets to B, and when C, B's heir, dies next, D claims
C's own buckets and those of the connections C held, but not B's empty ones: new connections
to them would reach no member.

In network namespaces (root, iproute2, nftables; never skipped): four members, 30
rate-limited 4 MiB downloads in the buckets of A, C and D -- none in B's, so that nothing but
the notice tells D of B's death (a connection C took over from B and handed D would tell it
too, :meth:`Member._learn <sslacc_sim.aio.linux.member.Member._learn>`; the three-member tests
cover B's connections); B is killed 1 s in; 0.5 s after A mirrors to C (the ring re-formed),
C is killed too. Every download must arrive byte-exact, D must say ``TOLD DEAD member 1``,
and afterwards one new connection in each of the 16 buckets must be served (without the
notice applied, B's buckets are not: seen by a one-line mutation).
"""

from __future__ import annotations

import signal
import subprocess
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from sslacc_sim.aio.linux.buckets import bucket_of
from sslacc_sim.aio.linux.cluster import start_members
from sslacc_sim.aio.linux.failover import HOSTNAME, wait_line
from sslacc_sim.aio.linux.netns import ADDRESSES, VIP, Topology
from sslacc_sim.buckets import BucketTable

from .member_loads import arrived, four_mib_site, ports_of_members, served_buckets

pytestmark = [pytest.mark.interop, pytest.mark.usefixtures("namespaces"), pytest.mark.timeout(300)]

_BUCKETS = 16
_DOWNLOADS = 30


def _bucket(port: int) -> int:
    return bucket_of(ADDRESSES["client"], port, _BUCKETS)


def _downloads_ports() -> list[int]:
    """Source ports in the buckets of A, C and D in turn, none in B's."""
    table = BucketTable(4, _BUCKETS)
    return [p for p in ports_of_members(_DOWNLOADS * 2, 4, _BUCKETS)
            if table.owner[_bucket(p)] != 1][:_DOWNLOADS]  # fmt: skip


def _downloads(topo: Topology, cert: Path, tmp_path: Path, ports: list[int]
               ) -> list[subprocess.Popen[str]]:  # fmt: skip
    """Rate-limited downloads of ``/f`` from the client, one from each of ``ports``, into
    ``tmp_path / out<i>``."""
    return [topo.popen("client", [
        "curl", "-sS", "--cacert", str(cert), "--resolve", f"{HOSTNAME}:443:{VIP}",
        "--local-port", str(port), "--limit-rate", "1M", "-o", str(tmp_path / f"out{i}"),
        "--max-time", "40", f"https://{HOSTNAME}/f"]) for i, port in enumerate(ports)]  # fmt: skip


def test_four_members_lose_nothing_when_b_then_its_heir_die(tmp_path: Path) -> None:
    """B killed, then C (B's heir) after the ring re-formed: every download byte-exact, D told
    of B's death, every bucket served after both deaths (D holds B's and C's buckets)."""
    docroot, body, cert, key = four_mib_site(tmp_path)
    with ExitStack() as stack:
        topo = stack.enter_context(Topology(tag="t4", shared_vip=True, members=4))
        procs = start_members(topo, stack, members=4, docroot=docroot, cert=cert, key=key,
                              buckets=_BUCKETS, logs=tmp_path)  # fmt: skip
        curls = _downloads(topo, cert, tmp_path, _downloads_ports())
        time.sleep(1.0)
        topo.cut("b")
        procs["b"].kill()
        said = {"D": wait_line(procs["d"], "TOLD DEAD", 10),
                "A": wait_line(procs["a"], "MIRROR member", 10)}  # fmt: skip
        time.sleep(0.5)
        topo.cut("c")
        procs["c"].kill()
        said["D restored"] = wait_line(procs["d"], "RESTORED", 10)
        for c in curls:
            c.wait(timeout=60)
        served = served_buckets(topo, cert, _BUCKETS)
    ok = arrived(curls, tmp_path, body)
    assert all(ok), f"{ok.count(False)} of {len(ok)} downloads lost; said: {said}"
    assert said["D"] == "TOLD DEAD member 1"
    assert said["A"] == "MIRROR member 2"
    unserved = [b for b, code in enumerate(served) if code != "200"]
    assert not unserved, f"buckets nobody serves after B and C died: {unserved}"


def test_a_member_that_leaves_hands_its_connections_over(tmp_path: Path) -> None:
    """``cluster leave`` (SIGUSR1) while 30 downloads run in every member's buckets: D says
    ``LEFT`` and exits 0; A, its successor, takes its buckets and connections over; C, its
    predecessor, judges it gone at once (its listener refuses); B is told. Every download
    arrives byte-exact and every bucket is served afterwards."""
    docroot, body, cert, key = four_mib_site(tmp_path)
    with ExitStack() as stack:
        topo = stack.enter_context(Topology(tag="t4l", shared_vip=True, members=4))
        procs = start_members(topo, stack, members=4, docroot=docroot, cert=cert, key=key,
                              buckets=_BUCKETS, logs=tmp_path)  # fmt: skip
        curls = _downloads(topo, cert, tmp_path, ports_of_members(_DOWNLOADS, 4, _BUCKETS))
        time.sleep(1.0)
        procs["d"].send_signal(signal.SIGUSR1)
        said = {"D": wait_line(procs["d"], "LEFT", 10), "A": wait_line(procs["a"], "RESTORED", 10),
                "C": wait_line(procs["c"], "MIRROR DEAD", 10),
                "B": wait_line(procs["b"], "TOLD DEAD", 10)}  # fmt: skip
        status = procs["d"].wait(timeout=10)
        for c in curls:
            c.wait(timeout=60)
        served = served_buckets(topo, cert, _BUCKETS)
    ok = arrived(curls, tmp_path, body)
    assert all(ok), f"{ok.count(False)} of {len(ok)} downloads lost; said: {said}"
    assert status == 0
    assert '"member": 3' in said["A"]
    assert said["C"].startswith("MIRROR DEAD member 3") and said["C"].endswith("(judged after 0 s)")
    assert said["B"] == "TOLD DEAD member 3"
    unserved = [b for b, code in enumerate(served) if code != "200"]
    assert not unserved, f"buckets nobody serves after D left: {unserved}"
