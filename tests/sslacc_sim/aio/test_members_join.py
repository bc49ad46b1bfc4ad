"""A member joins a running ring under load (issue 22: "join and leave").

In network namespaces (root, iproute2, nftables; never skipped): three members A, B, C serve
16 buckets; rate-limited 4 MiB downloads run in the even buckets (so that each member has busy
buckets and idle ones). One second in, D joins (:mod:`sslacc_sim.aio.linux.join`): A, the
master, asks each member for idle buckets -- D ends with 4, the odd ones its donors' kernels
held no connection of -- and tells B and C; C, now D's predecessor, hands D every running
connection (``adopt``) and releases A, its old mirror, which retires its watch without a death.

* Nobody dies: every download arrives byte-exact, no member says ``DEAD`` or ``RESTORED``,
  and afterwards one new connection in each bucket is served (D's four by D: no donor holds
  them any more).
* The newcomer's predecessor dies after the join (``c``): D takes C's buckets over with the
  connections C handed it before the join's end; or the newcomer dies (``d``), with
  downloads started after the join in its buckets: A, its successor and mirror, takes them
  over. Every download byte-exact, every bucket served afterwards.
* The newcomer dies during its join: a bare newcomer (the join's first frame from D's node,
  then nothing: no link, no listener) is admitted and gone. A, its successor, has had no
  keepalive from it within :data:`~sslacc_sim.aio.linux.join.LINK_WITHIN_S` and takes its
  buckets over; C, whose re-target to it never linked, forgets it when A tells it. Every
  download byte-exact, every bucket served afterwards.
* A dead member's node joins again: C is killed, A takes it over; C's node, revived
  (:func:`~sslacc_sim.aio.linux.cluster.revive`), joins under a fresh id (3) and is given
  buckets. Every download byte-exact, every bucket served afterwards.
"""

from __future__ import annotations

import queue
import subprocess
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from sslacc_sim.aio.linux.buckets import bucket_of
from sslacc_sim.aio.linux.campaign_buckets import bucket_answers
from sslacc_sim.aio.linux.campaign_load import unread_lines
from sslacc_sim.aio.linux.cluster import join_member, revive, start_members
from sslacc_sim.aio.linux.failover import HOSTNAME, lines_of, node_env, wait_line
from sslacc_sim.aio.linux.join import LINK_WITHIN_S
from sslacc_sim.aio.linux.netns import ADDRESSES, CLUSTER_ADDRESSES, VIP, Topology

from .member_loads import arrived, four_mib_site, served_buckets

pytestmark = [pytest.mark.interop, pytest.mark.usefixtures("namespaces"), pytest.mark.timeout(300)]

_BUCKETS = 16
#: Donors give their lowest idle buckets: A 3 and 9, B 1, C 5 (the downloads keep the even
#: ones busy).
_D_BUCKETS = [1, 3, 5, 9]


def _bucket(port: int) -> int:
    return bucket_of(ADDRESSES["client"], port, _BUCKETS)


def _ports_in(buckets: list[int], count: int, first: int = 30000) -> list[int]:
    """``count`` client source ports spread over ``buckets`` in turn."""
    by_bucket: dict[int, list[int]] = {b: [] for b in buckets}
    port = first
    while any(len(p) < -(-count // len(buckets)) for p in by_bucket.values()):
        if _bucket(port) in by_bucket:
            by_bucket[_bucket(port)].append(port)
        port += 1
    return [by_bucket[buckets[i % len(buckets)]][i // len(buckets)] for i in range(count)]


def _downloads(topo: Topology, cert: Path, tmp_path: Path, ports: list[int], first: int = 0
               ) -> list[subprocess.Popen[str]]:  # fmt: skip
    return [topo.popen("client", [
        "curl", "-sS", "--cacert", str(cert), "--resolve", f"{HOSTNAME}:443:{VIP}",
        "--local-port", str(port), "--limit-rate", "1M", "-o", str(tmp_path / f"out{first + i}"),
        "--max-time", "40", f"https://{HOSTNAME}/f"]) for i, port in enumerate(ports)]  # fmt: skip


def _until(proc: subprocess.Popen[str], prefix: str, seen: list[str], timeout: float = 10
           ) -> str:  # fmt: skip
    """The first line ``proc`` prints that starts with ``prefix``; every line read on the way
    is kept in ``seen`` (so that a death said before it is not missed)."""
    q, deadline = lines_of(proc), time.monotonic() + timeout
    while (line := q.get(timeout=max(0.01, deadline - time.monotonic()))) is not None:
        seen.append(line.rstrip("\n"))
        if line.startswith(prefix):
            return seen[-1]
    raise AssertionError(f"exited before {prefix!r}: {seen}")


def _said(procs: dict[str, subprocess.Popen[str]], tmp_path: Path) -> dict[str, list[str]]:
    """What each member printed that nobody read, and its standard error (for a failure)."""
    return {name: unread_lines(p) + (tmp_path / f"{name}.stderr").read_text().splitlines()
            for name, p in procs.items()}  # fmt: skip


def _join_d(topo: Topology, stack: ExitStack, tmp_path: Path, cert: Path, key: Path,
            docroot: Path) -> subprocess.Popen[str]:  # fmt: skip
    return join_member(topo, stack, "d", docroot=docroot, cert=cert, key=key, buckets=_BUCKETS,
                       logs=tmp_path)  # fmt: skip


@dataclass
class _Ring:
    """Three members serving rate-limited downloads in the even buckets, started 1 s ago."""

    topo: Topology
    procs: dict[str, subprocess.Popen[str]]
    curls: list[subprocess.Popen[str]]
    docroot: Path
    body: bytes
    cert: Path
    key: Path


def _ring_under_load(stack: ExitStack, tmp_path: Path, tag: str, nodes: int, downloads: int
                     ) -> _Ring:  # fmt: skip
    docroot, body, cert, key = four_mib_site(tmp_path)
    topo = stack.enter_context(Topology(tag=tag, shared_vip=True, members=nodes))
    procs = start_members(topo, stack, members=3, docroot=docroot, cert=cert, key=key,
                          buckets=_BUCKETS, logs=tmp_path)  # fmt: skip
    curls = _downloads(topo, cert, tmp_path, _ports_in(list(range(0, 16, 2)), downloads))
    time.sleep(1.0)
    return _Ring(topo, procs, curls, docroot, body, cert, key)


def _settle(ring: _Ring, tmp_path: Path) -> tuple[list[bool], list[str], dict[str, list[str]]]:
    """Once every download ended: which arrived byte-exact, each bucket's answer to a new
    connection, and what each member said that nobody read."""
    for c in ring.curls:
        c.wait(timeout=60)
    served = served_buckets(ring.topo, ring.cert, _BUCKETS)
    return arrived(ring.curls, tmp_path, ring.body), served, _said(ring.procs, tmp_path)


def test_a_member_joins_under_load_and_nothing_is_lost(tmp_path: Path) -> None:
    with ExitStack() as stack:
        ring = _ring_under_load(stack, tmp_path, "tj", 4, 24)
        topo, procs, curls = ring.topo, ring.procs, ring.curls
        docroot, body, cert, key = ring.docroot, ring.body, ring.cert, ring.key
        d = _join_d(topo, stack, tmp_path, cert, key, docroot)
        seen: dict[str, list[str]] = {"a": [], "c": []}
        said = {"A": _until(procs["a"], "ADMITTED", seen["a"]),
                "C": _until(procs["c"], "MIRROR member", seen["c"]),
                "A released": _until(procs["a"], "RELEASED", seen["a"])}  # fmt: skip
        for c in curls:
            c.wait(timeout=60)
        served = served_buckets(topo, cert, _BUCKETS)
        rest = {name: seen.get(name, []) + unread_lines(p)
                for name, p in {**procs, "d": d}.items()}  # fmt: skip
    ok = arrived(curls, tmp_path, body)
    assert all(ok), f"{ok.count(False)} of {len(ok)} downloads lost; said: {said} {rest}"
    assert said["A"] == "ADMITTED member 3: 4 buckets"
    assert said["C"] == "MIRROR member 3"
    assert said["A released"] == "RELEASED by member 2"
    deaths = [f"{n}: {line}" for n, lines in rest.items() for line in lines
              if line.startswith(("DEAD", "MIRROR DEAD", "RESTORED", "FENCED"))]  # fmt: skip
    assert not deaths, deaths
    unserved = [b for b, code in enumerate(served) if code != "200"]
    assert not unserved, f"buckets nobody serves after D joined: {unserved}"


@pytest.mark.parametrize("victim", ["c", "d"])
def test_after_a_join_a_neighbour_of_the_newcomer_may_die(tmp_path: Path, victim: str) -> None:
    with ExitStack() as stack:
        ring = _ring_under_load(stack, tmp_path, f"tj{victim}", 4, 16)
        topo, procs, curls = ring.topo, ring.procs, ring.curls  # curls grows in place below
        docroot, cert, key = ring.docroot, ring.cert, ring.key
        procs["d"] = _join_d(topo, stack, tmp_path, cert, key, docroot)
        seen: list[str] = []
        try:
            _until(procs["a"], "RELEASED", seen)
        except queue.Empty:
            raise AssertionError(f"A was not released: {seen} {_said(procs, tmp_path)}") from None
        # after the join: downloads in D's buckets too (D's own connections, mirrored to A)
        curls += _downloads(topo, cert, tmp_path, _ports_in(_D_BUCKETS, 8, 31000), len(curls))
        time.sleep(0.5)
        topo.cut(victim)
        procs[victim].kill()
        heir = {"c": "d", "d": "a"}[victim]
        said = wait_line(procs[heir], "RESTORED", 10)
        ok, served, rest = _settle(ring, tmp_path)
    assert all(ok), f"{ok.count(False)} of {len(ok)} downloads lost; {heir} said: {said} {rest}"
    assert f'"member": {"abcd".index(victim)}' in said
    unserved = [b for b, code in enumerate(served) if code != "200"]
    assert not unserved, f"buckets nobody serves after {victim.upper()} died: {unserved} {rest}"


#: D's node asks A to let member 3 in, prints the answer's type and exits: admitted, it never
#: links to its successor nor listens (a newcomer that died just after the master's answer).
_BARE_NEWCOMER = f"""
from sslacc_sim.aio.linux.joinwire import SILENT_S, ask, join_frame
header, _ = ask(("{CLUSTER_ADDRESSES['a']}", 7400), join_frame(3, "{CLUSTER_ADDRESSES['d']}", "pd"),
                silent=SILENT_S)  # the master's beats are read past, as a newcomer does
print(header["type"], flush=True)
"""


def test_a_newcomer_that_dies_during_its_join_is_taken_over_by_its_successor(
        tmp_path: Path) -> None:  # fmt: skip
    with ExitStack() as stack:
        ring = _ring_under_load(stack, tmp_path, "tjn", 4, 16)
        topo, procs = ring.topo, ring.procs
        joined = time.monotonic()
        answer = topo.run("d", [sys.executable, "-c", _BARE_NEWCOMER], env=node_env(), timeout=60)
        assert answer.stdout.strip() == "table", answer.stderr
        # until its successor judges it, nobody serves the newcomer's buckets (the probe the
        # campaign's join modes end with can see an unserved bucket): one try each, at once
        before = bucket_answers(topo, ring.cert, _BUCKETS, "/f", at_once=_BUCKETS)
        assert time.monotonic() - joined < LINK_WITHIN_S, "the probe came too late to tell"
        seen: dict[str, list[str]] = {"a": [], "c": []}
        try:
            said = _until(procs["a"], "RESTORED", seen["a"], LINK_WITHIN_S + 10)
            forgot = _until(procs["c"], "TOLD DEAD member 3", seen["c"])
        except (queue.Empty, AssertionError):
            raise AssertionError(f"{seen} {_said(procs, tmp_path)}") from None
        taken = time.monotonic() - joined
        ok, served, rest = _settle(ring, tmp_path)
    assert all(ok), f"{ok.count(False)} of {len(ok)} downloads lost; said: {seen} {rest}"
    assert '"member": 3' in said and LINK_WITHIN_S <= taken < LINK_WITHIN_S + 5
    assert forgot == "TOLD DEAD member 3: it died before this member mirrored to it"
    given = int(next(line for line in seen["a"] if line.startswith("ADMITTED")).split()[3])
    assert given >= 1 and sum(code != "200" for code in before) == given, (before, seen["a"])
    unserved = [b for b, code in enumerate(served) if code != "200"]
    assert not unserved, f"buckets nobody serves after the newcomer died: {unserved} {rest}"


def test_a_dead_members_node_joins_again_under_a_fresh_id(tmp_path: Path) -> None:
    with ExitStack() as stack:
        ring = _ring_under_load(stack, tmp_path, "tjr", 3, 16)
        topo, procs = ring.topo, ring.procs
        docroot, cert, key = ring.docroot, ring.cert, ring.key
        topo.cut("c")
        procs["c"].kill()
        seen: list[str] = []
        try:
            _until(procs["a"], "RESTORED", seen)
            revive(topo, "c", buckets=_BUCKETS)
            procs["c"] = join_member(topo, stack, "c", docroot=docroot, cert=cert, key=key,
                                     buckets=_BUCKETS, logs=tmp_path, ring=["a", "b", "c", "c"])
            admitted = _until(procs["a"], "ADMITTED", seen)
        except (queue.Empty, AssertionError, RuntimeError):
            raise AssertionError(f"{seen} {_said(procs, tmp_path)}") from None
        ok, served, rest = _settle(ring, tmp_path)
    assert all(ok), f"{ok.count(False)} of {len(ok)} downloads lost; said: {seen} {rest}"
    given = int(admitted.removeprefix("ADMITTED member 3: ").split()[0])
    assert given >= 1, admitted
    unserved = [b for b, code in enumerate(served) if code != "200"]
    assert not unserved, f"buckets nobody serves after C joined again: {unserved} {rest}"
