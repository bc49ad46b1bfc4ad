"""The bucket layout serving for real: every member answers exactly the connections of its
buckets, each mirrored to the next member (issue 22: "N >= 2 nodes ..., the paper's bucket
assignment of the 4-tuple").

Three members in network namespaces (root, iproute2, nftables; never skipped). Sixty curl
downloads from the client's namespace, each on a new connection (a new source port), must all be
byte-exact. Each member counts the SYNs that pass its filter (an nftables counter in the input
hook, after the bucket filter's drop); the counts must be exactly what the table says for the
ports curl used (``bucket_of`` is the kernel's hash in Python), so every connection was
answered by its owner and by no other node. The mirror's side: each member's predecessor
mirrored to it (``ss`` shows the cluster links). With one member, the filter owns everything.

With two members, member A is killed (or hung) under 24 rate-limited downloads spread over both
members' buckets: every download must arrive whole -- B's own (their mirror died: B goes on
alone) and A's (B takes A's buckets over). The negative control (``--no-takeover``) loses
A's (those not already whole in the client's kernel) and none of B's.
"""

from __future__ import annotations

import json
import signal
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

import pytest

from sslacc_sim.aio.linux.buckets import bucket_of
from sslacc_sim.aio.linux.campaign_load import unread_lines
from sslacc_sim.aio.linux.cluster import start_members
from sslacc_sim.aio.linux.failover import HOSTNAME, file_bytes, site_credentials, wait_line
from sslacc_sim.aio.linux.netns import ADDRESSES, VIP, Topology
from sslacc_sim.aio.linux.threads import NODE_NICE
from sslacc_sim.buckets import BucketTable

from .member_loads import arrived, four_mib_site, slow_downloads

pytestmark = [pytest.mark.interop, pytest.mark.usefixtures("namespaces"), pytest.mark.timeout(300)]

_BUCKETS = 16
_COUNT_SYNS = f"""
table ip test_count {{
    chain input {{
        type filter hook input priority 0; policy accept;
        ip daddr {VIP} tcp dport 443 tcp flags & (syn | ack) == syn counter
    }}
}}
"""


def _syns(topo: Topology, node: str) -> int:
    out = topo.run(node, ["nft", "-j", "list", "table", "ip", "test_count"], check=True,
                   capture_output=True).stdout
    for item in json.loads(out)["nftables"]:
        rule = item.get("rule")
        if rule:
            for expr in rule["expr"]:
                if "counter" in expr:
                    return int(expr["counter"]["packets"])
    raise AssertionError("no counter in the test table")


def _nice_values(pid: int) -> set[int]:
    """The nice values of process ``pid``'s threads (field 19 of each ``/proc`` stat)."""
    values = set()
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        text = stat.read_text()
        values.add(int(text[text.rindex(")") + 2:].split()[16]))
    return values


@pytest.mark.parametrize("members", [1, 3])
def test_every_member_answers_exactly_its_buckets(tmp_path: Path, members: int) -> None:
    docroot = tmp_path / "www"
    docroot.mkdir()
    body = file_bytes(200_000)
    (docroot / "f").write_bytes(body)
    cert, key = site_credentials(tmp_path)
    names = ["a", "b", "c"][:members]
    with ExitStack() as stack:
        topo = stack.enter_context(Topology(tag=f"tm{members}", shared_vip=True))
        procs = start_members(topo, stack, members=members, docroot=docroot, cert=cert,
                              key=key, buckets=_BUCKETS)  # fmt: skip
        # every thread of every member runs ahead of the clients (threads.NODE_NICE)
        assert {name: _nice_values(p.pid) for name, p in procs.items()} == \
            {name: {NODE_NICE} for name in names}  # fmt: skip
        rules = tmp_path / "count.nft"
        rules.write_text(_COUNT_SYNS)
        for name in names:
            topo.run(name, ["nft", "-f", str(rules)], check=True)
        ports = []
        for i in range(60):
            out = tmp_path / f"out{i}"
            done = topo.run("client", [
                "curl", "-sS", "--cacert", str(cert), "--resolve", f"{HOSTNAME}:443:{VIP}",
                "-o", str(out), "-w", "%{local_port}", "--max-time", "20",
                f"https://{HOSTNAME}/f"], capture_output=True, timeout=30)  # fmt: skip
            assert done.returncode == 0, done.stderr
            assert out.read_bytes() == body, f"download {i} differs"
            ports.append(int(done.stdout))
        counted = {name: _syns(topo, name) for name in names}
        links = {name: topo.run(name, ["ss", "-Htn", "state", "established", "sport", "= :7400"],
                                capture_output=True).stdout for name in names}  # fmt: skip
    table = BucketTable(members, _BUCKETS)
    expected = Counter(names[table.owner[bucket_of(ADDRESSES["client"], p, _BUCKETS)]]
                       for p in ports)  # fmt: skip
    assert counted == {name: expected[name] for name in names}
    if members > 1:
        assert all(n > 0 for n in counted.values()), "each member owns some of 60 connections"
        # each member holds its predecessor's keepalive link at least
        assert all(links[name].strip() for name in names), links


def _downloads_across_a_fault(tmp_path: Path, tag: str, fault: str, member_args: tuple[str, ...] = ()
                              ) -> tuple[list[bool], list[int], str, list[str]]:  # fmt: skip
    """24 rate-limited curl downloads of 4 MiB (4 s each) from two members; member A fails 1 s
    in (``kill``: link cut, SIGKILL; ``hang``: link cut, SIGSTOP, woken 1.5 s later while the
    downloads go on; ``partition``: A's cluster-LAN link cut while both are stopped for 0.5 s,
    B woken 20 ms before A, so that both see the other die, B first). Returns which
    downloads arrived byte-exact, their source ports, and the report line of the member that
    took the other over (B; A after a partition) and what the other said."""
    docroot, body, cert, key = four_mib_site(tmp_path)
    with ExitStack() as stack:
        topo = stack.enter_context(Topology(tag=tag, shared_vip=True))
        procs = start_members(topo, stack, members=2, docroot=docroot, cert=cert, key=key,
                              buckets=_BUCKETS, member_args=member_args)  # fmt: skip
        curls = slow_downloads(topo, cert, tmp_path, 24)
        time.sleep(1.0)
        if fault == "partition":
            # both stopped while the cut comes, B woken first: it finds A's keepalives overdue
            # 20 ms before A finds B's, and must still let A, the lower id, fence it
            for p in procs.values():
                p.send_signal(signal.SIGSTOP)
            topo.partition("a")
            time.sleep(0.5)
            procs["b"].send_signal(signal.SIGCONT)
            time.sleep(0.02)
            procs["a"].send_signal(signal.SIGCONT)
        else:
            topo.cut("a")
        if fault == "kill":
            procs["a"].kill()
        elif fault == "hang":  # woken while the downloads go on: a zombie's byte or fence would show
            procs["a"].send_signal(signal.SIGSTOP)
            time.sleep(1.5)
            topo.uncut("a")
            procs["a"].send_signal(signal.SIGCONT)
        outs = [c.communicate(timeout=60) for c in curls]
        heir, other = ("a", "b") if fault == "partition" else ("b", "a")
        said = wait_line(procs[heir], "DEAD" if member_args else "RESTORED", 10)
        other_said = unread_lines(procs[other])
    ok = arrived(curls, tmp_path, body)
    return ok, [int(out or 0) for out, _ in outs], said, other_said


@pytest.mark.parametrize("fault", ["kill", "hang"])
def test_two_members_lose_no_connection_when_one_fails(tmp_path: Path, fault: str) -> None:
    """B goes on alone with its own connections (their mirror, A, is dead) and takes A's
    buckets over: every download arrives whole, on both members' buckets."""
    ok, ports, said, _ = _downloads_across_a_fault(tmp_path, f"tf{fault[0]}", fault)
    table = BucketTable(2, _BUCKETS)
    owners = Counter(table.owner[bucket_of(ADDRESSES["client"], p, _BUCKETS)] for p in ports)
    assert owners[0] and owners[1], f"both members must serve some downloads: {owners}"
    assert all(ok), f"{ok.count(False)} of {len(ok)} downloads lost; B said: {said[-2000:]}"
    report = json.loads(said.split("RESTORED ", 1)[1])
    assert report["member"] == 0 and report["failed"] == []


def test_two_members_cut_apart_only_one_fences_the_other(tmp_path: Path) -> None:
    """A's cluster link is cut, both live: each sees the other die (both woken from a stop, B
    20 ms first). B, the higher id, waits (:data:`~sslacc_sim.aio.linux.member.TIE_BREAK_S`),
    so A fences it first and takes its buckets over; B finds its own port down and fences
    itself. Every download arrives whole. Without the wait B, first to see the death, fences A
    and takes it over instead (or both fence the other and every download is lost)."""
    ok, ports, said, b_said = _downloads_across_a_fault(tmp_path, "tfp", "partition")
    table = BucketTable(2, _BUCKETS)
    owners = Counter(table.owner[bucket_of(ADDRESSES["client"], p, _BUCKETS)] for p in ports)
    assert owners[0] and owners[1], f"both members must serve some downloads: {owners}"
    assert all(ok), f"{ok.count(False)} of {len(ok)} downloads lost; A said: {said[-2000:]} {b_said}"
    report = json.loads(said.split("RESTORED ", 1)[1])
    assert report["member"] == 1 and report["failed"] == []
    assert any(line.startswith("FENCED") for line in b_said), b_said


def test_control_without_the_takeover_the_dead_members_connections_are_lost(tmp_path: Path
                                                                             ) -> None:  # fmt: skip
    """``--no-takeover``: B still goes on alone with its own connections, but A's die with A."""
    ok, ports, said, _ = _downloads_across_a_fault(tmp_path, "tfn", "kill", ("--no-takeover",))
    table = BucketTable(2, _BUCKETS)
    mine = [table.owner[bucket_of(ADDRESSES["client"], p, _BUCKETS)] == 1 for p in ports]
    assert "DEAD member 0" in said
    assert all(o for o, m in zip(ok, mine, strict=True) if m), "B's own downloads survive"
    # A's connections whose whole response was in the client's kernel already survive A; the
    # rest are lost (with the takeover, none is)
    assert any(not o for o, m in zip(ok, mine, strict=True) if not m), "some of A's are lost"
