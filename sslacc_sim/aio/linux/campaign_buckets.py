"""The campaign's trial on the bucket layout: ``campaign --layout buckets``.

The same load, faults and judgement as the chain's trial (:mod:`~sslacc_sim.aio.linux.campaign`),
on three members that each serve their own buckets, mirrored to the next
(:mod:`~sslacc_sim.aio.linux.member`, started by :func:`~sslacc_sim.aio.linux.cluster.start_members`).
Each fault trial draws its victim among the three members (from the trial's seed) as well as
its instant:

``kill``
    the victim's link is cut, then it gets SIGKILL: its successor takes its buckets over, its
    predecessor re-forms the ring;
``hang``
    the victim gets SIGSTOP and its link is cut; ``wake-after`` seconds later its link comes
    back and it gets SIGCONT: it must find itself fenced;
``double``
    the victim is killed, then its successor -- the new owner of the victim's connections,
    which it has handed to its own mirror -- at an instant uniform over the second after its
    takeover; the last member serves everything;
``join``
    nothing fails: a fourth node, D, joins the ring at the instant (``--modes join``,
    :mod:`~sslacc_sim.aio.linux.join`): the master gives it idle buckets, C hands it its
    running connections. The gap is measured from the join.

Two things differ from the chain's trial. Every member holds the virtual IP's MAC, so the
client's capture cannot tell the woken member's frames from the others': a ``hang`` trial
counts them on the victim's own switch port instead (``node sniff --incoming-only`` in the
switch's namespace: what the victim put on the LAN after it woke; the fence takes that port
down, and ``--control no-fence`` must let frames through). And the gap from the fault to each
client's next byte counts any server segment after the fault (the victim, cut first, sends
none).
"""

from __future__ import annotations

import random
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from ...buckets import BucketTable
from .buckets import bucket_of
from .campaign_load import Site, Trial, capture, client_capture, pcap, run_load
from .cluster import join_member, start_members
from .netns import ADDRESSES, Topology

if TYPE_CHECKING:
    from .campaign import CampaignConfig

__all__ = ["MEMBERS", "run_bucket_trial", "victim_of", "roles"]

#: Members of the bucket layout in a trial (the topology's nodes A, B, C).
MEMBERS = "abc"
_BUCKETS = 64
_PORT = 443
_READY_S = 30.0


def run_bucket_trial(site: Site, cfg: CampaignConfig, trial: Trial, rng: random.Random
                     ) -> Trial:  # fmt: skip
    """One trial (module docstring) in fresh namespaces, removed after."""
    work = Path(tempfile.mkdtemp(prefix=f"t{trial.index}-", dir=site.work))
    victim = victim_of(cfg.seed, trial.index)
    member_args = [*(["--no-fence"] if cfg.control == "no-fence" else []),
                   *(["--stall-ms", f"{cfg.stall_ms:g}"] if cfg.stall_ms else [])]  # fmt: skip
    joins = trial.mode == "join"  # a spare fourth node, which joins at the instant
    with Topology(tag=f"{cfg.tag_prefix}{trial.index % 100000}", shared_vip=True,
                  members=len(MEMBERS) + joins) as topo, \
            client_capture(topo, work, trial), pcap(topo, cfg.pcap, trial), \
            ExitStack() as stack:  # fmt: skip
        if trial.mode == "hang":  # what the victim puts on the LAN, for its zombie frames
            trial.zombie_capture = stack.enter_context(
                capture(topo, "lan", f"p{victim}", work / "port.json", incoming_only=True))
        procs = start_members(topo, stack, members=len(MEMBERS), docroot=site.work / "docroot",
                              cert=site.cert, key=site.key, port=_PORT, suite=cfg.suite,
                              buckets=_BUCKETS, ring=cfg.control != "no-ring", logs=work,
                              member_args=member_args)  # fmt: skip
        fail: Callable[[], threading.Thread | None] = (
            partial(_join, trial, topo, stack, procs, site, cfg, work) if joins
            else partial(_fail, trial, topo, procs, cfg, victim))  # fmt: skip
        run_load(site, cfg, trial, rng, work, topo, procs, fail)
    trial.victim = ""  # one MAC for every member: no segment is told apart as the victim's
    trial.victim_node = victim
    trial.work = work
    return trial


def victim_of(seed: int, index: int) -> str:
    """The member trial ``index`` of a campaign with ``seed`` breaks (drawn from both)."""
    return MEMBERS[random.Random(f"{seed}-victim-{index}").randrange(len(MEMBERS))]


def roles(flows: pd.DataFrame, seed: int) -> pd.Series:
    """Whose buckets each connection of ``flows`` was in, seen from its trial's (first)
    victim: ``victim`` (taken over by its successor), ``successor`` (the heir's own: killed
    too in a ``double``), ``predecessor`` (its mirror was the victim: it goes on alone after
    its verdict, then mirrors to the successor). What the campaign's gaps are split by
    (``gap_by_role``)."""
    table = BucketTable(len(MEMBERS), _BUCKETS)

    def role(trial: int, port: int) -> str:
        at = MEMBERS.index(victim_of(seed, trial))
        owner = table.owner[bucket_of(ADDRESSES["client"], port, _BUCKETS)]
        return {at: "victim", (at + 1) % len(MEMBERS): "successor"}.get(owner, "predecessor")

    return pd.Series([role(int(t), int(p)) for t, p in zip(flows["trial"], flows["port"],
                                                           strict=True)],
                     index=flows.index, dtype=object)  # fmt: skip


def _successor(node: str, dead: set[str]) -> str:
    """The live member after ``node`` round the ring (the table's rule: the mirror of
    ``node``'s buckets once ``dead`` are gone)."""
    table = BucketTable(len(MEMBERS), _BUCKETS)
    for gone in dead - {node}:
        table.remove(MEMBERS.index(gone))
    heir = table.next_fit(MEMBERS.index(node))
    if heir is None:
        raise ValueError("no live member left")
    return MEMBERS[heir]


def _fail(trial: Trial, topo: Topology, procs: dict[str, subprocess.Popen[str]],
          cfg: CampaignConfig, victim: str) -> threading.Thread | None:  # fmt: skip
    """At ``trial.kill_at`` after the load started: kill or hang ``victim`` (``double``: then
    its successor ``trial.second_after`` s after its takeover). Reads the last takeover's
    report; returns the thread that wakes a hung victim."""
    from .campaign import _report

    assert trial.kill_at is not None
    time.sleep(max(0.0, trial.start + trial.kill_at - time.monotonic()))
    heir = _successor(victim, {victim})
    if trial.mode == "hang":
        procs[victim].send_signal(signal.SIGSTOP)
        topo.cut(victim)
        trial.kill = time.monotonic()
        waker = threading.Thread(target=_wake, args=(trial, topo, procs[victim], victim, cfg))
        waker.start()
        trial.report = _report(procs[heir], max(5.0, cfg.wake_after))
        return waker
    topo.cut(victim)
    trial.kill = time.monotonic()
    procs[victim].kill()
    trial.report = _report(procs[heir], 5.0)
    if trial.mode == "double" and trial.report is not None:
        time.sleep(max(0.0, trial.report["claimed"] + trial.second_after - time.monotonic()))
        trial.first = {"kill": trial.kill, "report": trial.report, "victim": victim}
        last = _successor(heir, {victim, heir})
        topo.cut(heir)
        trial.kill = time.monotonic()
        procs[heir].kill()
        trial.report = _report(procs[last], 5.0)
    return None


def _join(trial: Trial, topo: Topology, stack: ExitStack, procs: dict[str, subprocess.Popen[str]],
          site: Site, cfg: CampaignConfig, logs: Path) -> None:  # fmt: skip
    """At ``trial.kill_at``: node D joins the ring (the instant is the trial's ``kill``)."""
    assert trial.kill_at is not None
    time.sleep(max(0.0, trial.start + trial.kill_at - time.monotonic()))
    trial.kill = time.monotonic()
    procs["d"] = join_member(topo, stack, "d", docroot=site.work / "docroot", cert=site.cert,
                             key=site.key, port=_PORT, suite=cfg.suite, buckets=_BUCKETS,
                             logs=logs)  # fmt: skip


def _wake(trial: Trial, topo: Topology, proc: subprocess.Popen[str], victim: str,
          cfg: CampaignConfig) -> None:  # fmt: skip
    assert trial.kill is not None
    time.sleep(max(0.0, trial.kill + cfg.wake_after - time.monotonic()))
    topo.uncut(victim)
    proc.send_signal(signal.SIGCONT)
    trial.woke = time.monotonic()
    time.sleep(1.0)  # long enough for it to find itself fenced, or for a zombie's frames

