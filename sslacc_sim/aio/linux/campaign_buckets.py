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
``join-kill``
    D starts at the instant and is cut and killed at an instant drawn uniformly over the
    :data:`JOIN_SPAN_S` seconds after it says ``JOINING`` (its program started, it sends its
    ``join`` next), wherever its join is then (``asking``:
    the master had not admitted it; ``admitted``: it had, and D never took the table in;
    ``entered``: D had the table and was linking; ``serving``: D had said ``ready`` and
    served its buckets). Once the master admitted it, its successor A must take its buckets
    over: at once if D had linked to it, after :data:`~sslacc_sim.aio.linux.join.LINK_WITHIN_S`
    if it never did. The gap is measured from D's death.
``master-kill``
    D starts at the instant as in ``join-kill``, and at an instant drawn uniformly over the
    :data:`~.campaign_config.DEATH_SPAN_S` seconds (``--death-within``) after it says ``JOINING`` the *master*
    A is cut and killed (the lowest live id, which admits D, and D's successor in the larger
    ring). B, A's successor, must take A's buckets over; the gap is measured from A's death.
    Each trial records how far the join had got (``master_phase``, from what A said before it
    died and what D had said by then): ``asking`` (A had said nothing of the join: it was asking the
    donors, or had not read D's ``join`` yet), ``applied`` (A had applied the join itself,
    ``JOINED member 3``, and was telling the others), ``admitted`` (A had answered D,
    ``ADMITTED``), ``entered`` (D had read the table, ``ENTERED``), ``serving`` (D had said
    ``ready``); D's fate at the trial's end (``newcomer_alive``, ``newcomer_ready``); and the
    members still on the LAN then (``on_lan_at_end``: alive, switch port up). B, C, and D once
    it said ``ready``, must be: one that is not was taken over although it lived (a false
    death, ``healthy_off_lan``).
``donor-kill``
    the same, but the member killed is a donor other than the master: B or C, drawn
    (:func:`donor_of`; each gives D a share). Its successor must take it over, and the join
    must end all the same: a donor that dies before it answers makes the master give the try
    up (every other donor serves its gift again at once, ``GAVE UP``), and D's next try is
    shared out among the members left. ``donor_phase``: ``asking`` (the donor had not given
    yet), ``given`` (it had, ``GIVEN``), ``applied``, ``entered``, ``serving`` (as above);
    ``given_up`` counts the master's ``GAVE UP`` lines.
``rejoin``
    a ``kill``, then the victim's node joins again under a fresh id (:func:`~sslacc_sim.aio.
    linux.cluster.revive`, then :func:`~sslacc_sim.aio.linux.cluster.join_member`) at an
    instant uniform over the :data:`REJOIN_SPAN_S` after its heir's takeover, under load.

After a trial of the join modes a new connection goes to each of the 64 buckets
(:func:`bucket_answers`): ``unserved`` counts those that no member answered (must be 0). A
``master-kill`` trial probes twice: right after the load (``unserved_after_load``), and again
once :data:`~sslacc_sim.aio.linux.join.JOIN_WITHIN_S` and 2 s more have passed since the kill
(``unserved``). A donor takes back the buckets it gave to a join that never ended after
``JOIN_WITHIN_S``, so the first probe may find them unserved for a while; a bucket the second
finds unserved is orphaned for good. Every line the members printed goes to the trial's
``said`` and to ``<node>.stdout`` beside their standard error (kept under ``failed/`` with
the trial's evidence).

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
from typing import TYPE_CHECKING, Any

import pandas as pd

from ...buckets import BucketTable
from .buckets import bucket_of
from .campaign_config import (
    BUCKET_MODES,
    DONOR_KILL,
    JOIN,
    JOIN_KILL,
    MASTER_KILL,
    REJOIN,
)
from .campaign_load import (
    Site,
    Trial,
    capture,
    client_capture,
    kill,
    pcap,
    record_exits,
    run_load,
    unread_lines,
)
from .cluster import join_member, revive, start_members
from .failover import HOSTNAME, FailoverFailed, first_line, wait_line
from .join import JOIN_WITHIN_S, LINK_WITHIN_S
from .netns import ADDRESSES, VIP, Topology

if TYPE_CHECKING:
    from .campaign_config import CampaignConfig

__all__ = ["MEMBERS", "JOIN_SPAN_S", "REJOIN_SPAN_S", "run_bucket_trial",
           "victim_of", "roles", "bucket_answers", "join_summary"]

#: Members of the bucket layout in a trial (the topology's nodes A, B, C).
MEMBERS = "abc"
_BUCKETS = 64
_PORT = 443
_READY_S = 30.0
#: ``join-kill``: the newcomer dies at most this long after it says ``JOINING`` (seconds,
#: uniform). Its join took 0.07-0.11 s from then to its ``ready`` under the campaign's load
#: (``joining_to_ready_s`` of 8 ``join`` trials, seed 5, nothing else running; 0.04-0.18 s in
#: 16 beside a test run; its program's start before it took 0.8-4 s), so about half the deaths
#: fall inside the join, the rest while it serves and its predecessor hands it its connections.
JOIN_SPAN_S = 0.2
#: ``rejoin``: the dead member's node starts again at most this long after its heir's
#: takeover (seconds, uniform).
REJOIN_SPAN_S = 1.0
#: ``join-kill``: how long the master may take to admit a newcomer that died (from its death);
#: one it has not admitted by then never joined.
_ADMIT_WITHIN_S = 5.0
#: The newcomer's member id (D: the fourth).
_NEWCOMER = len(MEMBERS)
#: ``master-kill``: how long the master's successor may take to report its takeover (seconds;
#: it sees the master's links fail at once).
_HEIR_WITHIN_S = 10.0
#: ``master-kill``: the second probe comes this long after the kill (seconds): every donor's
#: take-back (:data:`~sslacc_sim.aio.linux.join.JOIN_WITHIN_S`) and 2 s more.
_LATE_PROBE_S = JOIN_WITHIN_S + 2.0


def run_bucket_trial(site: Site, cfg: CampaignConfig, trial: Trial, rng: random.Random
                     ) -> Trial:  # fmt: skip
    """One trial (module docstring) in fresh namespaces, removed after."""
    work = Path(tempfile.mkdtemp(prefix=f"t{trial.index}-", dir=site.work))
    victim = victim_of(cfg.seed, trial.index)
    member_args = [*(["--no-fence"] if cfg.control == "no-fence" else []),
                   *(["--stall-ms", f"{cfg.stall_ms:g}"] if cfg.stall_ms else [])]  # fmt: skip

    # a spare fourth node, which joins at the instant
    joins = trial.mode in (JOIN, JOIN_KILL, MASTER_KILL, DONOR_KILL)
    victim = {JOIN_KILL: "d", MASTER_KILL: "a",
              DONOR_KILL: donor_of(cfg.seed, trial.index)}.get(trial.mode, victim)  # fmt: skip
    heard: dict[str, list[str]] = {}  # master-kill: the lines its driver read on the way
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
        fail: Callable[[], threading.Thread | None] = {
            JOIN: partial(_join, trial, topo, stack, procs, site, cfg, work),
            JOIN_KILL: partial(_join_kill, trial, topo, stack, procs, site, cfg, work),
            MASTER_KILL: partial(_death_in_join, trial, topo, stack, procs, site, cfg, work,
                                 heard),  # fmt: skip
            DONOR_KILL: partial(_death_in_join, trial, topo, stack, procs, site, cfg, work,
                                heard, victim),  # fmt: skip
            REJOIN: partial(_rejoin, trial, topo, stack, procs, site, cfg, victim, work),
        }.get(trial.mode, partial(_fail, trial, topo, procs, cfg, victim))  # fmt: skip
        run_load(site, cfg, trial, rng, work, topo, procs, fail)
        if trial.mode in (MASTER_KILL, DONOR_KILL):
            _after_death_in_join(trial, topo, site, procs, heard, work, victim)
        elif trial.mode in BUCKET_MODES:
            trial.columns["unserved"] = len(_unserved(topo, site))
        if trial.mode == JOIN_KILL:
            trial.columns["newcomer_phase"] = _newcomer_phase(
                trial.said.get("d", []), bool(trial.columns.get("admitted")))
        record_exits(trial, procs)
    trial.victim = ""  # one MAC for every member: no segment is told apart as the victim's
    trial.victim_node = victim
    trial.work = work
    return trial


def victim_of(seed: int, index: int) -> str:
    """The member trial ``index`` of a campaign with ``seed`` breaks (drawn from both)."""
    return MEMBERS[random.Random(f"{seed}-victim-{index}").randrange(len(MEMBERS))]


def donor_of(seed: int, index: int) -> str:
    """The donor a ``donor-kill`` trial kills: B or C (both give the newcomer a share; the
    master A is ``master-kill``'s), drawn from the seed and the trial."""
    return "bc"[random.Random(f"{seed}-donor-{index}").randrange(2)]


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
    kill(trial, procs[victim])
    trial.report = _report(procs[heir], 5.0)
    if trial.mode == "double" and trial.report is not None:
        time.sleep(max(0.0, trial.report["claimed"] + trial.second_after - time.monotonic()))
        trial.first = {"kill": trial.kill, "report": trial.report, "victim": victim}
        last = _successor(heir, {victim, heir})
        topo.cut(heir)
        trial.kill = time.monotonic()
        kill(trial, procs[heir], "second_exited_s")
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
                             logs=logs, ready=False)  # fmt: skip
    joining = _joining(procs["d"])
    wait_line(procs["d"], "ready", _READY_S)
    # from its start, and from its join frame, to its ready (what JOIN_SPAN_S is chosen on)
    trial.columns.update(joined_s=round(time.monotonic() - trial.kill, 4),
                         joining_to_ready_s=round(time.monotonic() - joining, 4))


def _join_kill(trial: Trial, topo: Topology, stack: ExitStack,
               procs: dict[str, subprocess.Popen[str]], site: Site, cfg: CampaignConfig,
               logs: Path) -> None:  # fmt: skip
    """At ``trial.kill_at``: node D starts; ``trial.second_after`` of :data:`JOIN_SPAN_S`
    after it says ``JOINING`` it is cut and killed (the trial's ``kill``). Reads the master's
    lines until it admitted D (within :data:`_ADMIT_WITHIN_S`), then its successor A's
    takeover report (A is the master)."""
    from .campaign import _report

    assert trial.kill_at is not None
    time.sleep(max(0.0, trial.start + trial.kill_at - time.monotonic()))
    procs["d"] = join_member(topo, stack, "d", docroot=site.work / "docroot", cert=site.cert,
                             key=site.key, port=_PORT, suite=cfg.suite, buckets=_BUCKETS,
                             logs=logs, ready=False)  # fmt: skip
    began = _joining(procs["d"])
    time.sleep(max(0.0, began + trial.second_after * JOIN_SPAN_S - time.monotonic()))
    topo.cut("d")
    trial.kill = time.monotonic()
    kill(trial, procs["d"])
    admitted = _admitted(procs["a"], trial.said.setdefault("a", []))
    trial.expect_takeover = admitted
    trial.columns.update(admitted=admitted, killed_after_s=round(trial.kill - began, 4))
    if admitted:
        trial.report = _report(procs["a"], LINK_WITHIN_S + 10.0)


def _death_in_join(trial: Trial, topo: Topology, stack: ExitStack,
                   procs: dict[str, subprocess.Popen[str]], site: Site, cfg: CampaignConfig,
                   logs: Path, heard: dict[str, list[str]], victim: str = "a") -> None:  # fmt: skip
    """At ``trial.kill_at``: node D starts; ``trial.second_after`` of ``cfg.death_within``
    (:data:`~.campaign_config.DEATH_SPAN_S` by default) after it says ``JOINING`` the master A
    (``donor-kill``: the donor ``victim``) is cut and killed (the trial's ``kill``), as
    :func:`_fail` kills a victim. How far the join had got
    is read from what the victim said before it died and what D had said by then
    (:func:`_master_phase`, :func:`_donor_phase`); then the takeover report of the victim's
    successor (:func:`_heir_report`). Every line read goes to ``heard``, by node."""

    assert trial.kill_at is not None
    time.sleep(max(0.0, trial.start + trial.kill_at - time.monotonic()))
    procs["d"] = join_member(topo, stack, "d", docroot=site.work / "docroot", cert=site.cert,
                             key=site.key, port=_PORT, suite=cfg.suite, buckets=_BUCKETS,
                             logs=logs, ready=False)  # fmt: skip
    newcomer, dead = heard.setdefault("d", []), heard.setdefault(victim, [])
    if not first_line(procs["d"], ("JOINING",), _READY_S, newcomer):
        raise FailoverFailed(f"the newcomer did not say JOINING within {_READY_S:g} s")
    began = time.monotonic()
    time.sleep(max(0.0, began + trial.second_after * cfg.death_within - time.monotonic()))
    topo.cut(victim)
    trial.kill = time.monotonic()
    kill(trial, procs[victim])
    newcomer += unread_lines(procs["d"])  # what D had said by the death
    # everything the victim said: no line starts with NUL, so this reads to its end of file
    first_line(procs[victim], ("\0",), 5.0, dead)
    trial.expect_takeover = True  # its successor inherits its buckets, whatever the join's state
    trial.columns["killed_after_s"] = round(trial.kill - began, 4)
    if victim == "a":
        trial.columns["master_phase"] = _master_phase(dead, newcomer)
    else:
        trial.columns["donor_phase"] = _donor_phase(dead, newcomer)
    # C's successor is D once D is in the ring, A before: whichever restores C first
    heirs = [_successor(victim, {victim}), *(["d"] if victim == "c" else [])]
    trial.report = _heir_report(procs, heirs, heard)


def _heir_report(procs: dict[str, subprocess.Popen[str]], heirs: list[str],
                 heard: dict[str, list[str]]) -> dict[str, Any] | None:  # fmt: skip
    """The takeover report of the first of ``heirs`` to say ``RESTORED`` within
    :data:`_HEIR_WITHIN_S` (``None``: none did); every line read goes to ``heard``."""
    from .campaign import _report

    deadline = time.monotonic() + _HEIR_WITHIN_S
    while time.monotonic() < deadline:
        for node in heirs:
            seen = heard.setdefault(node, [])
            if restored := first_line(procs[node], ("RESTORED",), 0.02, seen):
                return _report(procs[node], 0.0, seen, restored)
    return None


def _master_phase(master: list[str], newcomer: list[str]) -> str:
    """How far the join had got when the master died (module docstring): the newcomer's
    progress first (``serving``, ``entered``), then the master's (``admitted``, ``applied``),
    else ``asking``."""
    if any(line.startswith("ready") for line in newcomer):
        return "serving"
    if any(line.startswith("ENTERED") for line in newcomer):
        return "entered"
    if any(line.startswith(f"ADMITTED member {_NEWCOMER}") for line in master):
        return "admitted"
    if any(line.startswith(f"JOINED member {_NEWCOMER}") for line in master):
        return "applied"
    return "asking"


def _donor_phase(donor: list[str], newcomer: list[str]) -> str:
    """How far the join had got when a donor died (``donor-kill``), from what the donor said
    before it died and what D had said by then: ``serving``, ``entered`` (as
    :func:`_master_phase`), ``applied`` (the donor had applied the join, ``JOINED member 3``),
    ``given`` (it had given its share, ``GIVEN``), else ``asking`` (the master had not asked
    it yet, or it had not answered)."""
    if any(line.startswith(("ready", "ENTERED")) for line in newcomer):
        return _master_phase([], newcomer)
    if any(line.startswith(f"JOINED member {_NEWCOMER}") for line in donor):
        return "applied"
    if any(line.startswith("GIVEN ") and line.endswith(f"member {_NEWCOMER}") for line in donor):
        return "given"
    return "asking"


def _after_death_in_join(trial: Trial, topo: Topology, site: Site,
                         procs: dict[str, subprocess.Popen[str]], heard: dict[str, list[str]],
                         work: Path, victim: str = "a") -> None:  # fmt: skip
    """A ``master-kill`` or ``donor-kill`` trial after its load: the buckets probed at once and once
    :data:`_LATE_PROBE_S` has passed since the kill (module docstring), each probe's unserved
    buckets listed (``unserved_which``); then D's fate, and every line each member printed,
    in order, into ``trial.said`` and ``<node>.stdout``, and the members still on the LAN
    (``on_lan_at_end``: alive, their switch port up; a member fenced wrongly is alive but
    off the LAN; ``healthy_off_lan``: those of the members that lived, D once it said
    ``ready``, that are not, false deaths: the trial is kept as evidence), and how often the
    master gave a join up (``given_up``: a donor failed)."""
    early = _unserved(topo, site)
    if trial.kill is not None:
        time.sleep(max(0.0, trial.kill + _LATE_PROBE_S - time.monotonic()))
    late = _unserved(topo, site)
    for node, proc in procs.items():
        trial.said[node] = [*heard.get(node, []), *trial.said.get(node, []),
                            *unread_lines(proc)]  # fmt: skip
        (work / f"{node}.stdout").write_text("".join(f"{line}\n" for line in trial.said[node]))
    ready = any(line.startswith("ready") for line in trial.said.get("d", []))
    on_lan = [n for n, proc in procs.items() if proc.poll() is None and _port_up(topo, n)]
    lived = set(MEMBERS) - {victim} | ({"d"} if ready else set())  # D lived once it was ready
    trial.columns.update(
        unserved_after_load=len(early), unserved=len(late),
        unserved_after_load_which=" ".join(map(str, early)), unserved_which=" ".join(map(str, late)),
        on_lan_at_end=" ".join(on_lan), healthy_off_lan=" ".join(sorted(lived - set(on_lan))),
        newcomer_alive=procs["d"].poll() is None, newcomer_exit=procs["d"].returncode,
        newcomer_ready=ready,
        taken_back=sum(line.startswith("TAKEN BACK") for lines in trial.said.values()
                       for line in lines),
        given_up=sum(line.startswith("GAVE UP") for lines in trial.said.values()
                     for line in lines))  # fmt: skip


def _port_up(topo: Topology, node: str) -> bool:
    """Whether ``node``'s switch port is up (a fence takes it down)."""
    shown = topo.run("lan", ["ip", "-br", "link", "show", f"p{node}"], check=True).stdout.split()
    return len(shown) > 1 and shown[1] == "UP"


def _unserved(topo: Topology, site: Site) -> list[int]:
    """The buckets a new connection got no answer in (:func:`bucket_answers`)."""
    answers = bucket_answers(topo, site.cert, _BUCKETS, "/" + min(site.files, key=len).lstrip("/"))
    return [b for b, code in enumerate(answers) if code != "200"]


def _joining(newcomer: subprocess.Popen[str]) -> float:
    """When ``newcomer`` said ``JOINING`` (it sends its ``join`` next)."""
    wait_line(newcomer, "JOINING", _READY_S)
    return time.monotonic()


def _admitted(master: subprocess.Popen[str], seen: list[str]) -> bool:
    """Whether ``master`` says it admitted the newcomer within :data:`_ADMIT_WITHIN_S`; the
    lines read on the way go to ``seen``."""
    return bool(first_line(master, (f"ADMITTED member {_NEWCOMER}",), _ADMIT_WITHIN_S, seen))


def _newcomer_phase(said: list[str], admitted: bool) -> str:
    """How far the newcomer got before it died (module docstring), from what it said."""
    if any(line.startswith("ready") for line in said):
        return "serving"
    if any(line.startswith("ENTERED") for line in said):
        return "entered"
    return "admitted" if admitted else "asking"


def _rejoin(trial: Trial, topo: Topology, stack: ExitStack, procs: dict[str, subprocess.Popen[str]],
            site: Site, cfg: CampaignConfig, victim: str, logs: Path) -> None:  # fmt: skip
    """A kill of ``victim`` (:func:`_fail`), then its node revived and joined again, member 3,
    ``trial.second_after`` of :data:`REJOIN_SPAN_S` after its heir's takeover. A join that
    fails is the trial's ``rejoin_error``."""
    _fail(trial, topo, procs, cfg, victim)
    if trial.report is None:
        trial.columns["rejoin_error"] = "no takeover to rejoin after"
        return
    time.sleep(max(0.0, trial.report["claimed"] + trial.second_after * REJOIN_SPAN_S
                   - time.monotonic()))  # fmt: skip
    began = time.monotonic()
    trial.columns["rejoin_after_s"] = round(began - trial.kill, 4) if trial.kill else None
    try:
        revive(topo, victim, port=_PORT, buckets=_BUCKETS)
        procs[f"{victim}{_NEWCOMER}"] = join_member(
            topo, stack, victim, docroot=site.work / "docroot", cert=site.cert, key=site.key,
            port=_PORT, suite=cfg.suite, buckets=_BUCKETS, logs=logs, ring=[*MEMBERS, victim])
    except (FailoverFailed, subprocess.CalledProcessError, OSError) as exc:
        trial.columns["rejoin_error"] = repr(exc)[:300]
        return
    trial.columns["rejoined_s"] = round(time.monotonic() - began, 4)


def bucket_answers(topo: Topology, cert: Path, buckets: int, path: str = "/f",
                   first_port: int = 20000, at_once: int = 16) -> list[str]:  # fmt: skip
    """The HTTP status a new connection in each of ``buckets`` buckets got (``""``: none):
    which buckets some member serves. One curl per bucket from the client's namespace,
    ``at_once`` at a time, each from a source port below the kernel's ephemeral range (from
    ``first_port``) that hashes to its bucket."""
    ports: dict[int, int] = {}
    port = first_port
    while len(ports) < buckets:
        ports.setdefault(bucket_of(ADDRESSES["client"], port, buckets), port)
        port += 1
    answers: list[str] = []
    order = [ports[b] for b in range(buckets)]
    for i in range(0, buckets, at_once):
        curls = [topo.popen("client", [
            "curl", "-sS", "--cacert", str(cert), "--resolve", f"{HOSTNAME}:{_PORT}:{VIP}",
            "--local-port", str(p), "--max-time", "5", "-o", "/dev/null", "-w", "%{http_code}",
            f"https://{HOSTNAME}{path}"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            for p in order[i:i + at_once]]  # fmt: skip
        answers += [c.communicate(timeout=30)[0].strip() for c in curls]
    return answers


def join_summary(trials: pd.DataFrame) -> dict[str, Any]:
    """The join modes' part of the summary: per mode, trials, buckets no member served after
    them, and (``join-kill``) how far the newcomer got, and takeovers of an admitted newcomer;
    (``master-kill``, ``donor-kill``: :func:`_death_in_join_row`) both probes, how far the
    join got and the newcomer's fate; (``rejoin``) rejoins that failed and how long the others took."""
    out: dict[str, Any] = {}
    for mode, group in trials.groupby("mode"):
        if "unserved" not in group or group["unserved"].isna().all():
            continue
        row: dict[str, Any] = {"trials": len(group),
                               "unserved_buckets": int(group["unserved"].fillna(0).sum())}
        if "newcomer_phase" in group and group["newcomer_phase"].notna().any():
            row["newcomer_phase"] = {str(k): int(v) for k, v in
                                     group["newcomer_phase"].value_counts().items()}
            admitted = group[group["admitted"].fillna(False).astype(bool)]
            row["admitted"] = len(admitted)
            row["admitted_taken_over"] = int(admitted["took_over"].fillna(False).sum())
        for phase in ("master_phase", "donor_phase"):
            if phase in group and group[phase].notna().any():
                row.update(_death_in_join_row(group, phase))
        if mode == "rejoin":
            done = group["rejoined_s"].dropna()
            row["rejoined"] = len(done)
            row["rejoin_errors"] = int(group.get("rejoin_error", pd.Series(dtype=object))
                                       .notna().sum())  # fmt: skip
            row["rejoined_s_median"] = float(done.median()) if len(done) else None
        out[str(mode)] = row
    return out


def _death_in_join_row(group: pd.DataFrame, phase: str = "master_phase") -> dict[str, Any]:
    """A ``master-kill`` (or ``donor-kill``: ``phase`` is ``donor_phase``) group's own summary:
    the buckets unserved at each probe (summed over its trials; ``unserved_buckets``, the late
    one, must be 0), how far the join had got when the victim died, the joins the master gave
    up, the victim's takeovers by its successor, the newcomers alive and serving at the
    trials' end, and the trials that ended with a member that lived off the LAN
    (``healthy_off_lan``: the members not killed, and D once it said ``ready``), and with D
    alive but off it (``None``: a run that did not look)."""
    def count(column: str) -> int:
        return int(group[column].fillna(False).astype(bool).sum()) if column in group else 0

    def named(column: str) -> list[set[str]]:  # a column of space-separated node names
        return [set(v.split()) if isinstance(v, str) else set() for v in group[column]]

    looked = "on_lan_at_end" in group and "healthy_off_lan" in group
    return {"unserved_after_load_buckets": int(group["unserved_after_load"].fillna(0).sum()),
            phase: {str(k): int(v) for k, v in group[phase].value_counts().items()},
            "given_up": int(group["given_up"].fillna(0).sum()) if "given_up" in group else None,
            f"{phase.split('_')[0]}_taken_over": count("took_over"),
            "newcomer_alive": count("newcomer_alive"),
            "newcomer_ready": count("newcomer_ready"),
            "taken_back": int(group["taken_back"].fillna(0).sum()),
            "healthy_off_lan": sum(bool(off) for off in named("healthy_off_lan"))
            if looked else None,
            "newcomer_alive_off_lan": sum(
                bool(alive) and "d" not in on for alive, on in zip(
                    group["newcomer_alive"].fillna(False), named("on_lan_at_end"), strict=True))
            if looked else None}  # fmt: skip


def _wake(trial: Trial, topo: Topology, proc: subprocess.Popen[str], victim: str,
          cfg: CampaignConfig) -> None:  # fmt: skip
    assert trial.kill is not None
    time.sleep(max(0.0, trial.kill + cfg.wake_after - time.monotonic()))
    topo.uncut(victim)
    proc.send_signal(signal.SIGCONT)
    trial.woke = time.monotonic()
    time.sleep(1.0)  # long enough for it to find itself fenced, or for a zombie's frames

