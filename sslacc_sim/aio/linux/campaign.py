"""The random-instant fault campaign: ``python -m sslacc_sim.aio.linux.campaign --trials N --seed S``.

SSLACC's one promise is that no connection is lost when a node fails, *whenever* it fails. A
trial tests it once under load, on the real pair (:mod:`~sslacc_sim.aio.linux.netns`): the owner
(:mod:`~sslacc_sim.aio.linux.primary`) and its buddy (:mod:`~sslacc_sim.aio.linux.backup`)
start, ``--connections`` unmodified clients (curl, Python ``ssl``, gnutls-cli, ``openssl
s_client`` in turn, :mod:`~sslacc_sim.aio.linux.clients`) fetch files of 1 KiB to 16 MiB at
once -- a quarter of the Python and s_client ones resuming a session, a fifth of all
uploading a file instead (``POST``, answered by a receipt of its length and CRC-32), a fifth
of the other downloads asking two or three times on one connection (keep-alive) -- and at an
instant drawn uniformly over the load the owner fails:

``kill``
    its link is cut, then it gets SIGKILL;
``hang``
    it gets SIGSTOP, then its link is cut; :data:`wake-after` seconds later its link comes back
    and it gets SIGCONT: it must find itself fenced (no byte and no reset of it reaches a
    client, checked on the client's capture);
``double``
    a third node C is B's buddy (A -> B -> C: B hands every connection it takes over to C
    before it writes a byte); A is killed, and B, the new owner, is killed too at an instant
    uniform over the second after its takeover (its claim of the address).

The load's length is measured first, by a trial without a fault (trial 0, which also shows
that the load alone passes); each fault trial draws its instant uniformly over that length.
Every response is compared byte for byte with its file. Per trial the campaign reports the
connections, those completed byte-exact, those failed (with the client's error), those
*silently wrong* (the client reported success over wrong bytes), what phase each connection
was in at the kill (:func:`~sslacc_sim.aio.linux.loadstats.flows_at`), and the time from the
kill to each affected client's next byte, and whether the client sent anything again before
that byte came (``resent_s``: its own timer fired), and how each node ended (``exits``; a
death by a signal the campaign never sends is listed as ``crashed``); it writes ``trials.csv``,
``connections.csv``, ``flows.csv`` and ``summary.json`` into ``--out``.

``--control`` turns one mechanism off (a negative control): the campaign must then lose
connections or let a zombie through, which the tests check.

``--layout buckets`` runs the same trials on three members that each serve their own buckets
(:mod:`~sslacc_sim.aio.linux.campaign_buckets`): the victim is drawn among them.
Resuming clients resume from the nodes' shared session table (:mod:`.sessions`), on the owner
and after a takeover alike; ``summary.json`` counts the resumptions asked and got.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm import tqdm

from testbed import cli

from .campaign_config import (
    BUCKET_MODES,
    CONTROLS,
    DEATH_SPAN_S,
    DONOR_KILL,
    JOIN,
    JOIN_KILL,
    MASTER_KILL,
    MODES,
    SIZES,
    CampaignConfig,
)
from .campaign_load import (
    BASELINE,
    READY_S,
    Site,
    Trial,
    client_capture,
    kill,
    make_site,
    pcap,
    record_exits,
    run_load,
)
from .failover import first_line, node_env, wait_line
from .loadstats import (
    HIT,
    campaign_summary,
    flows_at,
    gaps_by,
    quantile,
    waits,
    zombie_frames,
)
from .netns import (
    MIRROR_ADDRESSES,
    NEXT_MIRROR_ADDRESSES,
    PREFIX,
    SHARED_MAC,
    Topology,
    sweep_leftovers,
)

__all__ = ["MODES", "CONTROLS", "SIZES", "CampaignConfig", "run_campaign", "main"]

@contextmanager
def _nodes(topo: Topology, site: Site, cfg: CampaignConfig, logs: Path, mode: str
           ) -> Iterator[dict[str, subprocess.Popen[str]]]:  # fmt: skip
    """The nodes, each started once the one before said ``ready``: for ``double``, C (B's
    buddy) first, then B (A's buddy, with C as its own), then the owner A."""
    a_flags, b_flags = CONTROLS[cfg.control]
    node = [sys.executable, "-m", "sslacc_sim.aio.linux.node"]
    common = site.node_args(cfg.suite)
    procs: dict[str, subprocess.Popen[str]] = {}
    with ExitStack() as stack:
        def start(name: str, argv: list[str]) -> None:
            err = stack.enter_context(open(logs / f"{name}.stderr", "w"))
            procs[name] = topo.popen(name, [*node, *argv], stdout=subprocess.PIPE, stderr=err,
                                     env=node_env())  # fmt: skip
            wait_line(procs[name], "ready", READY_S)

        next_mirror: list[str] = []
        if mode == "double":
            c_args = [a if a != MIRROR_ADDRESSES["b"] else NEXT_MIRROR_ADDRESSES["c"]
                      for a in common]  # fmt: skip
            start("c", ["backup", *c_args, *topo.fence_args("b"), *b_flags])
            next_mirror = ["--next-mirror", NEXT_MIRROR_ADDRESSES["c"]]
        start("b", ["backup", *common, *topo.fence_args("a"), *next_mirror, *b_flags])
        stall = ["--stall-ms", str(cfg.stall_ms)] if cfg.stall_ms else []
        start("a", ["primary", *common, *stall, *a_flags])
        yield procs


def _report(proc: subprocess.Popen[str], timeout: float, seen: list[str] | None = None,
            restored: str = "") -> dict[str, Any] | None:  # fmt: skip
    """A buddy's ``RESTORED`` report with its ``RESUMED`` connections, or ``None``; with
    ``seen``, every line read on the way is kept there (what the heir said before it);
    ``restored``: its ``RESTORED`` line, read already."""
    def line(prefix: str, within: float) -> str:
        if seen is None:
            return wait_line(proc, prefix, within)
        found = first_line(proc, (prefix,), within, seen)
        if not found:
            raise RuntimeError(f"no {prefix} within {within:g} s")
        return found

    try:
        report = json.loads((restored or line("RESTORED", timeout)).split(" ", 1)[1])
        resumed = json.loads(line("RESUMED", 5.0).split(" ", 1)[1])
        return {**report, "resumed": resumed["connections"]}
    except RuntimeError:
        return None
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        # a garbled report line costs this trial its takeover timings, never the campaign
        print(f"warning: unreadable takeover report: {exc!r}"[:300], file=sys.stderr, flush=True)
        return None


def _fail(trial: Trial, topo: Topology, procs: dict[str, subprocess.Popen[str]],
          cfg: CampaignConfig) -> threading.Thread | None:  # fmt: skip
    """At ``trial.kill_at`` after the load started: kill or hang the owner (for ``double``,
    then the new owner ``trial.second_after`` s after its takeover). Reads the last takeover's
    report; returns the thread that wakes a hung owner."""
    assert trial.kill_at is not None
    time.sleep(max(0.0, trial.start + trial.kill_at - time.monotonic()))
    a = procs["a"]
    if trial.mode == "hang":
        a.send_signal(signal.SIGSTOP)
        topo.cut("a")
        trial.kill = time.monotonic()
        waker = threading.Thread(target=_wake, args=(trial, topo, a, cfg))
        waker.start()
        trial.report = _report(procs["b"], max(5.0, cfg.wake_after))
        return waker
    topo.cut("a")
    trial.kill = time.monotonic()
    kill(trial, a)
    trial.report = _report(procs["b"], 5.0)
    if trial.mode == "double" and trial.report is not None:
        time.sleep(max(0.0, trial.report["claimed"] + trial.second_after - time.monotonic()))
        trial.first = {"kill": trial.kill, "report": trial.report}
        topo.cut("b")
        trial.kill = time.monotonic()
        kill(trial, procs["b"], "second_exited_s")
        trial.victim_node = "b"
        trial.report = _report(procs["c"], 5.0)
    return None


def _wake(trial: Trial, topo: Topology, primary: subprocess.Popen[str], cfg: CampaignConfig
          ) -> None:  # fmt: skip
    assert trial.kill is not None
    time.sleep(max(0.0, trial.kill + cfg.wake_after - time.monotonic()))
    topo.uncut("a")
    primary.send_signal(signal.SIGCONT)
    trial.woke = time.monotonic()
    time.sleep(1.0)  # long enough for a retransmission timer, a reset, a write to show


def run_trial(site: Site, cfg: CampaignConfig, trial: Trial, rng: random.Random) -> Trial:
    """One trial (module docstring) in fresh namespaces, removed after."""
    work = Path(tempfile.mkdtemp(prefix=f"t{trial.index}-", dir=site.work))
    with Topology(tag=f"{cfg.tag_prefix}{trial.index % 100000}") as topo, \
            client_capture(topo, work, trial):
        with pcap(topo, cfg.pcap, trial), ExitStack() as stack:
            procs = stack.enter_context(_nodes(topo, site, cfg, work, trial.mode))
            macs = {n: topo.mac(n) for n in procs}
            run_load(site, cfg, trial, rng, work, topo, procs,
                     lambda: _fail(trial, topo, procs, cfg))  # fmt: skip
            record_exits(trial, procs)
    trial.victim = macs[trial.victim_node]
    trial.work = work
    return trial


def _keep_evidence(t: Trial, out: Path) -> None:
    """A failed trial's logs and capture (not the bodies) go to ``out/failed/t<N>`` (also a
    fault that no takeover answered, a takeover that came before its fault: a false death,
    buckets left unserved at either probe, a ``master-kill`` that ended with a healthy member off the LAN, and
    a node that crashed); the rest of its folder is removed."""
    work = t.work
    early = t.report is not None and t.kill is not None and t.report["detected"] < t.kill
    lost = t.kill is not None and t.report is None and t.mode not in (BASELINE, JOIN) \
        and t.expect_takeover  # fmt: skip
    if any(not r["ok"] for r in t.rows) or lost or early or _taken_over_in_join(t) \
            or t.columns.get("unserved") or t.columns.get("unserved_after_load") \
            or t.columns.get("healthy_off_lan") \
            or t.columns.get("crashed"):  # fmt: skip
        keep = out / "failed" / f"t{t.index}"
        keep.mkdir(parents=True, exist_ok=True)
        for f in work.iterdir():
            if f.suffix in (".stderr", ".log", ".json") or f.name.endswith(".stdout"):
                shutil.copy2(f, keep / f.name)
        (keep / "report.json").write_text(json.dumps({"kill": t.kill, "woke": t.woke,
                                                      "start": t.start, "victim": t.victim, "first": t.first, "said": t.said,
                                                      "restored": t.report, "rows": t.rows},
                                                     default=str, indent=1))  # fmt: skip
    shutil.rmtree(work, ignore_errors=True)


def _trial_row(t: Trial) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The trial's summary row and one row per connection seen in the capture."""
    rows = t.rows
    flows: list[dict[str, Any]] = []
    gaps: list[float] = []
    zombies = None
    if t.kill is not None:  # a fault's instant, or a baseline trial's (no victim)
        at = flows_at(t.capture, t.kill, "" if t.mode == BASELINE else t.victim)
        # when the last takeover had the connection running again (s after the fault)
        resumed_at = {c["client"][1]: c["at"] - t.kill
                      for c in (t.report or {}).get("resumed", [])}  # fmt: skip
        flows = [{"trial": t.index, "mode": t.mode, **asdict(f),
                  "resumed_s": resumed_at.get(f.port)} for f in at.values()]  # fmt: skip
        gaps = [f.gap_s for f in at.values() if f.phase in HIT and f.gap_s is not None]
        if t.woke is not None and t.zombie_capture is not None:  # the victim's switch port
            zombies = zombie_frames(t.zombie_capture, SHARED_MAC.replace(":", ""), t.woke)
        elif t.woke is not None:
            zombies = zombie_frames(t.capture, t.victim, t.woke)
    report = t.report or {}
    phases = {p: sum(1 for f in flows if f["phase"] == p)
              for p in ("no-syn-ack", "handshake", "transfer", "finished")}  # fmt: skip
    row = {
        "trial": t.index, "mode": t.mode,
        "kill_at_s": t.kill_at, "load_s": round(t.load_s, 3), "connections": len(rows),
        "completed_exact": sum(r["ok"] for r in rows),
        "failed": sum(not r["ok"] for r in rows),
        "silently_wrong": sum(r["silently_wrong"] for r in rows),
        # after a join nothing may be taken over: whether a member said it took one over
        "took_over": (_taken_over_in_join(t) if t.mode == JOIN
                      else t.report is not None if t.kill is not None and t.mode != BASELINE
                      else None),  # fmt: skip
        "detect_s": (report["detected"] - t.kill) if report and t.kill else None,
        # a member's watch heard the death here; up to detect_s it chose who fences (a tie-break)
        "woke_s": (report["woke"] - t.kill) if report and t.kill and "woke" in report else None,
        "claim_s": (report["claimed"] - t.kill) if report and t.kill else None,
        # the takeover's steps, each from the step before (s): fence the old port, drain
        # the LAN record, restore the sockets, claim the address
        **{f"{step}_s": (report[step] - report[before]) if report and step in report else None
           for before, step in (("detected", "fenced"), ("fenced", "drained"),
                                ("drained", "restored"), ("restored", "claimed"))},
        "resumed_s": (max(c["at"] for c in report["resumed"]) - t.kill
                      if report and report.get("resumed") and t.kill else None),
        "resumes": "; ".join(f"{how} {n}" for how, n in sorted(Counter(
            c["resume"] for c in report.get("resumed", [])).items())) if report else None,
        "reason": report.get("reason"), "caught_up_bytes": report.get("caught_up_bytes"),
        # a buddy that took over before the fault (a false death) is a finding of its own
        "takeover_before_fault": (report["detected"] < t.kill) if report and t.kill else None,
        "restored": report.get("connections"), "from_sniff": report.get("from_sniff"),
        "restore_failed": len(report.get("failed", [])) if report else None,
        "gap_p50_s": quantile(gaps, 0.5), "gap_max_s": max(gaps, default=None),
        "zombie_frames": zombies, **{f"at_{p}": n for p, n in phases.items()},
        # frames the client's capture had no room for: its phases and gaps miss them
        "capture_drops": sum(t.capture_drops) if t.capture_drops else None,
        "verdict_wait_s": _verdict_wait(t.said),
        "errors": "; ".join(f"{r['client']} {r['path']}: {r['error']}"
                            for r in rows if not r["ok"])[:2000],
        **t.columns,  # the join modes' own (campaign_buckets)
    }  # fmt: skip
    return row, flows


def _taken_over_in_join(t: Trial) -> bool:
    """Whether a member said it took another over in a ``join`` trial (none died: a false
    death)."""
    return t.mode == JOIN and any(line.startswith("RESTORED") for lines in t.said.values()
                                  for line in lines)  # fmt: skip


def _verdict_wait(said: dict[str, list[str]]) -> float | None:
    """How long the bucket layout's predecessor waited before it judged its mirror dead (its
    ``MIRROR DEAD ... (judged after X s)`` line, the first node's that said one; ``None``:
    none)."""
    for lines in said.values():
        for line in lines:
            if line.startswith("MIRROR DEAD") and "(judged after " in line:
                try:
                    return float(line.rsplit("(judged after ", 1)[1].split(" ", 1)[0])
                except ValueError:
                    return None
    return None


def _summary(cfg: CampaignConfig, trials: pd.DataFrame, conns: pd.DataFrame,
             flows: pd.DataFrame) -> dict[str, Any]:  # fmt: skip
    config = {**asdict(cfg), "modes": list(cfg.modes), "sizes": list(cfg.sizes),
              "pcap": None if cfg.pcap is None else str(cfg.pcap)}
    summary = campaign_summary(config, trials, conns, flows)
    if cfg.layout == "buckets" and len(flows):
        from .campaign_buckets import join_summary, roles  # it imports this module

        # whose connections the tail is: the victim's, its successor's, its predecessor's
        # deaths of the member drawn among A to C (a master-kill's victim is always A)
        faulted = flows[~flows["mode"].isin([BASELINE, JOIN, JOIN_KILL, MASTER_KILL, DONOR_KILL])]
        by_role = faulted.assign(role=roles(faulted, cfg.seed))
        summary["gap_by_role"] = gaps_by(by_role, "role")
        summary["gap_by_role_after_kills"] = gaps_by(by_role[by_role["mode"] != "hang"], "role")
        killed = by_role[by_role["mode"] != "hang"]
        summary["wait_by_role_after_kills"] = gaps_by(killed.assign(wait_s=waits(killed)),
                                                      "role", "wait_s")  # fmt: skip
        if trials["mode"].isin(BUCKET_MODES).any():
            summary["joins"] = join_summary(trials)
    if "verdict_wait_s" in trials:
        # the predecessor's wait before its verdict, by mode and length: 0 (its mirror's
        # listener refused), 0.1 (a silent mirror), 0.3 (it may have been stopped itself)
        summary["verdict_waits"] = {
            mode: {f"{w:g}": int(n) for w, n in group["verdict_wait_s"].value_counts().items()}
            for mode, group in trials.groupby("mode") if group["verdict_wait_s"].notna().any()}
    return summary


def summarize(cfg: CampaignConfig, out: Path) -> dict[str, Any]:
    """The summary of a campaign's CSVs in ``out`` (what :func:`run_campaign` writes last)."""
    return _summary(cfg, pd.read_csv(out / "trials.csv"), pd.read_csv(out / "connections.csv"),
                    pd.read_csv(out / "flows.csv"))


def run_campaign(cfg: CampaignConfig, out: Path, *, progress: bool = True
                 ) -> dict[str, Any]:  # fmt: skip
    """Trial 0 without a fault (it measures the load's length), then ``cfg.trials`` fault
    trials; writes the CSVs and ``summary.json`` into ``out`` and returns the summary."""
    from .campaign_buckets import run_bucket_trial

    trial_runner = run_bucket_trial if cfg.layout == "buckets" else run_trial
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(cfg.seed)
    trial_rows, conn_rows, flow_rows = [], [], []
    with tempfile.TemporaryDirectory(prefix="sacc-campaign-") as tmp:
        site = make_site(Path(tmp), cfg.sizes)
        plan = _plan(cfg, rng)
        length = 0.0
        bar = tqdm(total=len(plan), desc="trials", unit="trial", disable=not progress)
        for index, (mode, u) in enumerate(plan):
            lo, hi = cfg.window
            kill_at = None if u is None else (lo + (hi - lo) * u) * length
            # one load for every trial (its requests drawn from the seed), so that trial 0's
            # length is the length each kill instant is drawn over
            draw = random.Random(f"{cfg.seed}-{index}").random()  # a fraction (join modes)
            trial = Trial(index, mode, kill_at, second_after=draw * (
                cfg.second_within if mode == "double" else 1.0))
            t = trial_runner(site, cfg, trial, random.Random(cfg.seed))
            if index == 0:
                length = t.load_s
            row, flows = _trial_row(t)
            _keep_evidence(t, out)
            trial_rows.append(row)
            conn_rows += t.rows
            flow_rows += flows
            bar.update(1)
            bar.set_postfix(failed=sum(r["failed"] for r in trial_rows))
            if index % 10 == 9:  # a run cut short keeps what it measured
                _write_tables(out, trial_rows, conn_rows, flow_rows)
        bar.close()
    trials, conns, flows_df = _write_tables(out, trial_rows, conn_rows, flow_rows)
    summary = _summary(cfg, trials, conns, flows_df)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=float) + "\n")
    return summary


def _plan(cfg: CampaignConfig, rng: random.Random) -> list[tuple[str, float | None]]:
    """Each trial's mode and where its instant falls in the window (0 to 1): trial 0 without
    one, then the fault trials, the modes in turn, with ``cfg.baselines`` no-fault trials spread
    evenly among them. The fault trials draw from ``rng`` alone, as without baselines; each
    baseline draws its instant from the seed and its own number."""
    faults: list[tuple[str, float | None]] = [(cfg.modes[i % len(cfg.modes)], rng.random())
                                              for i in range(cfg.trials)]  # fmt: skip
    plan: list[tuple[str, float | None]] = [(BASELINE, None)]
    every = (cfg.trials + 1) / (cfg.baselines + 1) if cfg.baselines else 0.0
    done = 0
    for i, fault in enumerate(faults):
        while done < cfg.baselines and i + 1 >= every * (done + 1):
            plan.append((BASELINE, random.Random(f"{cfg.seed}-baseline-{done}").random()))
            done += 1
        plan.append(fault)
    plan += [(BASELINE, random.Random(f"{cfg.seed}-baseline-{k}").random())
             for k in range(done, cfg.baselines)]  # fmt: skip
    return plan


def _write_tables(out: Path, *rows: list[dict[str, Any]]
                  ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:  # fmt: skip
    """``trials.csv``, ``connections.csv`` and ``flows.csv`` from the rows so far."""
    frames = tuple(pd.DataFrame(r) for r in rows)
    for frame, name in zip(frames, ("trials", "connections", "flows"), strict=True):
        frame.to_csv(out / f"{name}.csv", index=False)
    return frames  # type: ignore[return-value]  # three rows lists, so three frames


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=cli.program_name("sslacc_sim.aio.linux.campaign"),
                                description=__doc__.split("\n\n")[1],
                                epilog="Needs root, iproute2 and the four clients (curl, python, "
                                "gnutls-cli, openssl). Results: trials.csv, connections.csv, "
                                "flows.csv, summary.json in --out.")  # fmt: skip
    p.add_argument("--trials", type=cli.positive_int, default=4, help="fault trials (default 4)")
    p.add_argument("--seed", type=int, default=1, help="the campaign's seed (default 1)")
    p.add_argument("--connections", type=cli.positive_int, default=32,
                   help="concurrent connections per trial (default 32)")
    p.add_argument("--modes", default=",".join(MODES),
                   help=f"fault modes, comma-separated, taken in turn (default {','.join(MODES)}; "
                   "the bucket layout also knows join: a fourth member joins at the instant; "
                   "join-kill: and is killed during its join; master-kill: the master is "
                   "killed during that join; donor-kill: another donor is; rejoin: a killed "
                   "member's node joins again)")
    p.add_argument("--wake-after", type=cli.positive_float, default=10.0,
                   help="seconds a hung owner stays stopped (default 10)")
    p.add_argument("--client-timeout", type=cli.positive_float, default=60.0,
                   help="each client's time limit in seconds (default 60)")
    p.add_argument("--stall-ms", type=cli.non_negative_float, default=0.0,
                   help="the owner waits this long before each accept and each read (default 0)")
    p.add_argument("--baselines", type=cli.non_negative_int, default=0,
                   help="trials without a fault among the fault trials, measuring the gaps the "
                   "load alone makes from an instant drawn as a fault's (default 0)")
    p.add_argument("--second-within", type=cli.positive_float, default=1.0, help="a double's "
                   "second kill is drawn within this many seconds of the takeover (default 1)")
    p.add_argument("--death-within", type=cli.positive_float, default=DEATH_SPAN_S,
                   help="master-kill, donor-kill: the member dies within this many seconds of "
                   f"the newcomer's JOINING (default {DEATH_SPAN_S:g})")
    p.add_argument("--window", default="0,1",
                   help="kill instants are drawn over this fraction of the load (default 0,1)")
    p.add_argument("--control", choices=sorted(CONTROLS), default="none",
                   help="a negative control: turn one mechanism off (no-ring: the bucket "
                   "layout's only; no-fence: both layouts'; the others the chain's)")
    p.add_argument("--layout", choices=("chain", "buckets"), default="chain",
                   help="chain: owner, buddy (and the buddy's buddy); buckets: three members "
                   "each serving its buckets, a random one failing (default chain)")
    p.add_argument("--out", default="results/sslacc_campaign", help="results folder")
    p.add_argument("--json", help="also write the summary here")
    p.add_argument("--pcap", metavar="DIR",
                   help="write each trial's client-side packet capture (headers only) to "
                   "DIR/t<N>.pcap (needs tcpdump)")
    p.add_argument("--tag-prefix",
                   help="namespaces are sacc-<prefix><trial>-* (default cp)")
    p.add_argument("--cleanup", action="store_true",
                   help="remove the sacc- namespaces (and their processes) a killed run left, "
                   "those of --tag-prefix only if it is given, then exit; a run still going "
                   "keeps its own")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point; see the module docstring."""
    parser = _parser()

    def body(args: argparse.Namespace) -> int:
        if args.cleanup:
            removed = sweep_leftovers(PREFIX + (args.tag_prefix or ""), spare_live_runs=True)
            print(f"removed {len(removed)} namespaces" + (f": {' '.join(removed)}" if removed
                                                           else ""))  # fmt: skip
            return 0
        # SIGTERM unwinds like Ctrl-C: every trial's namespaces and processes are removed
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
        try:
            lo, hi = (float(x) for x in args.window.split(","))
        except ValueError:
            raise cli.UsageError(f"--window: two numbers 'start,end', got {args.window!r}") from None
        try:
            cfg = CampaignConfig(trials=args.trials, seed=args.seed, connections=args.connections,
                                 modes=modes, wake_after=args.wake_after,
                                 client_timeout=args.client_timeout, control=args.control,
                                 stall_ms=args.stall_ms, window=(lo, hi),
                                 second_within=args.second_within,
                                 death_within=args.death_within,
                                 baselines=args.baselines,
                                 tag_prefix=args.tag_prefix or "cp", layout=args.layout,
                                 pcap=Path(args.pcap) if args.pcap else None)  # fmt: skip
        except ValueError as exc:
            raise cli.UsageError(str(exc)) from None
        if Path(args.out).exists() and not Path(args.out).is_dir():
            raise cli.UsageError(f"--out {args.out}: not a directory")
        summary = run_campaign(cfg, Path(args.out), progress=not args.no_progress)
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(summary, indent=2, default=float) + "\n")
        print(json.dumps({k: summary[k] for k in ("kills", "connections", "completed_exact",
                                                  "success_fraction", "success_lower95",
                                                  "silently_wrong", "zombie_frames")}))  # fmt: skip
        return 0

    return cli.run_main(parser, body, argv)


if __name__ == "__main__":
    sys.exit(main())
