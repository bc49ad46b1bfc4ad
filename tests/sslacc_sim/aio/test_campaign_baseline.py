"""The campaign's baseline trials: the gap the load alone makes, read beside the faults'.

Pure (no namespaces): the plan of trials with and without baselines, and the summary of
hand-made tables -- a baseline trial's flows are measured from its instant as a fault trial's
are, but kept out of every fault statistic and reported under ``baseline``; a fault that came
while some client had not yet sent its SYN is counted as ``starting``.
"""

from __future__ import annotations

import random
from typing import Any

import pandas as pd

from sslacc_sim.aio.linux.campaign import CampaignConfig, _plan
from sslacc_sim.aio.linux.loadstats import campaign_summary, clients_at_fault


def _flow(trial: int, mode: str, port: int, phase: str, gap: float | None) -> dict[str, Any]:
    return {"trial": trial, "mode": mode, "port": port, "phase": phase, "had": 5000,
            "gap_s": gap, "room": 1000.0, "resumed_s": None}


def test_without_baselines_the_plan_is_the_old_one() -> None:
    cfg = CampaignConfig(trials=7, seed=9, modes=("kill", "hang"))
    rng = random.Random(cfg.seed)
    old = [("none", None)] + [(cfg.modes[i % 2], rng.random()) for i in range(7)]
    assert _plan(cfg, random.Random(cfg.seed)) == old


def test_baselines_are_spread_and_leave_the_faults_draws_alone() -> None:
    cfg = CampaignConfig(trials=20, seed=2, baselines=4)
    plan = _plan(cfg, random.Random(cfg.seed))
    assert plan[0] == ("none", None) and len(plan) == 1 + 20 + 4
    faults = [p for p in plan[1:] if p[0] != "none"]
    assert faults == _plan(CampaignConfig(trials=20, seed=2), random.Random(2))[1:]
    where = [i for i, p in enumerate(plan) if p[0] == "none" and i]
    assert len(where) == 4 and all(plan[i][1] is not None for i in where)
    # about one baseline every five fault trials, none at the very end
    gaps = [b - a for a, b in zip([0, *where], where, strict=False)]
    assert all(4 <= g <= 7 for g in gaps), where
    assert len({plan[i][1] for i in where}) == 4  # each its own instant


def test_the_summary_keeps_baseline_flows_out_of_the_faults() -> None:
    flows = pd.DataFrame([
        _flow(1, "kill", 1, "transfer", 0.02), _flow(1, "kill", 2, "transfer", 0.04),
        _flow(2, "none", 3, "transfer", 0.9), _flow(2, "none", 4, "handshake", 0.5),
        _flow(2, "none", 5, "after", 0.3), _flow(3, "kill", 6, "handshake", 0.08),
        _flow(3, "kill", 7, "after", 0.2),
    ])  # fmt: skip
    trials = pd.DataFrame([{"trial": t, "mode": m, "failed": 0, "took_over": m != "none",
                            "zombie_frames": 0, "detect_s": 0.01 if m != "none" else None}
                           for t, m in ((0, "none"), (1, "kill"), (2, "none"), (3, "kill"))])
    conns = pd.DataFrame([{"trial": 1, "mode": "kill", "ok": True, "silently_wrong": False,
                           "upload": False, "repeat": 1, "resume": False, "resumed": None}])
    s = campaign_summary({"modes": ["kill"]}, trials, conns, flows)
    assert s["kills"] == 2
    assert s["gap_max_s"] == 0.08 and set(s["gap_by_mode"]) == {"kill"}
    base = s["baseline"]
    assert base["trials"] == 1 and base["n"] == 2 and base["gap_max_s"] == 0.9
    assert base["gap_by_clients"]["starting"]["n"] == 2  # trial 2 had a client yet to start
    by_clients = s["gap_by_clients_after_kills"]
    assert by_clients["started"]["max_s"] == 0.04 and by_clients["starting"]["max_s"] == 0.08


def test_clients_at_fault_marks_the_trials_with_a_client_yet_to_start() -> None:
    flows = pd.DataFrame([_flow(1, "kill", 1, "transfer", 0.1), _flow(1, "kill", 2, "after", 0.2),
                          _flow(4, "kill", 3, "finished", None)])  # fmt: skip
    assert clients_at_fault(flows).tolist() == ["starting", "starting", "started"]
    assert clients_at_fault(flows.iloc[:0]).tolist() == []
