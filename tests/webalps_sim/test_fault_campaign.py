"""The fault campaign (issue 21, "Must show" #3): faults at random instants under load.

``test_small_campaign`` runs :func:`webalps_sim.aio.campaign.run_campaign` for real (CA,
guardian and host processes on loopback, 16 client threads, two of them ``curl``): six seeded
trials cover each fault kind at least once.  No download may be accepted partial, the host
process must survive every trial, a fresh client must download byte-exact after every fault
(no host restart), and the kill trials must have failed some downloads closed -- the faults
really bit; in a freeze trial the waiting clients are answered once the guardian resumes.  The negative control of the same run must classify the partial bodies of a broken
server as not complete.  The classifier, the trial plan and the frame corruption have unit
tests of their own.
"""

from __future__ import annotations

import csv
import hashlib
import json
import random
from pathlib import Path

import pytest

from webalps_sim import codec, faults
from webalps_sim.aio.campaign import (
    QUICK_SIZES,
    QUICK_TIMING,
    CampaignConfig,
    run_campaign,
    write_results,
)


def test_classify_joins_the_clients_verdict_and_the_truth() -> None:
    data = random.Random(0).randbytes(1000)
    digest = hashlib.sha256(data).hexdigest()
    assert faults.classify(True, data, digest) == "complete"
    assert faults.classify(False, data[:500], digest) == "failed-closed"
    assert faults.classify(False, data, digest) == "failed-closed"  # the client said no
    assert faults.classify(True, data[:999], digest) == "accepted-partial"  # short
    flipped = bytes([data[0] ^ 1]) + data[1:]
    assert faults.classify(True, flipped, digest) == "accepted-partial"  # same length, wrong


def test_plan_is_seeded_and_covers_every_fault_first() -> None:
    one = faults.plan_trials(random.Random(7), 9, QUICK_TIMING)
    two = faults.plan_trials(random.Random(7), 9, QUICK_TIMING)
    assert one == two
    assert {p.fault for p in one[:4]} == set(faults.FAULTS)
    for plan in one:
        assert QUICK_TIMING.instant[0] <= plan.instant <= QUICK_TIMING.instant[1]
        if plan.fault == "freeze":
            assert QUICK_TIMING.freeze[0] <= plan.duration <= QUICK_TIMING.freeze[1]
    assert faults.plan_trials(random.Random(8), 9, QUICK_TIMING) != one
    with pytest.raises(ValueError, match="subset"):
        faults.plan_trials(random.Random(0), 3, faults=("melt",))


def test_frames_are_cut_and_corrupted_as_announced() -> None:
    frames = [codec.encode_frame(codec.FrameType.OK, 1, b""),
              codec.encode_frame(codec.FrameType.DATA, 2, b"x" * 40)]
    buffer = bytearray(b"".join(frames) + frames[1][:7])
    assert faults.cut_frames(buffer) == frames
    assert buffer == frames[1][:7]  # the incomplete frame stays
    rng = random.Random(3)
    bad = faults.corrupt_frame(frames[1], "payload", rng)
    diff = [a ^ b for a, b in zip(bad, frames[1], strict=True) if a != b]
    assert len(diff) == 1 and bin(diff[0]).count("1") == 1
    assert bad[: codec.HEADER.size] == frames[1][: codec.HEADER.size]
    with pytest.raises(codec.ProtocolError):
        codec.FrameDecoder().feed(faults.corrupt_frame(frames[1], "header", rng))
    assert faults.garbage("huge-frame", rng)[:4] == (codec.MAX_FRAME - 1).to_bytes(4, "big")


def test_control_summary_fails_unless_every_broken_server_gave_its_outcome() -> None:
    good = {"good": {"complete": 2}, "short": {"failed-closed": 2},
            "lying": {"accepted-partial": 2}, "tls-cut": {"failed-closed": 2}}
    assert faults.control_summary(good)["ok"]
    assert not faults.control_summary({**good, "short": {"failed-closed": 1, "complete": 1}})["ok"]
    assert not faults.control_summary({**good, "lying": {"complete": 2}})["ok"]
    assert not faults.control_summary({k: v for k, v in good.items() if k != "tls-cut"})["ok"]


def test_summarize_counts_per_fault_and_overall() -> None:
    def row(fault: str, complete: int, failed: int, resume: float | None) -> dict[str, object]:
        return {"fault": fault, "complete": complete, "failed-closed": failed,
                "accepted-partial": 0, "host_alive": True, "resumed": resume is not None,
                "time_to_resume_s": resume}

    summary = faults.summarize([row("freeze", 10, 0, 0.1), row("kill", 6, 4, 0.3),
                                row("kill", 5, 5, None)])
    assert list(summary["per_fault"]) == ["kill", "freeze"]  # in FAULTS order
    kill = summary["per_fault"]["kill"]
    assert (kill["complete"], kill["failed-closed"], kill["attempted"]) == (11, 9, 20)
    assert kill["success_fraction"] == 0.55 and kill["resumed_fraction"] == 0.5
    total = summary["total"]
    assert (total["attempted"], total["resumed"], total["time_to_resume_max_s"]) == (30, 2, 0.3)


@pytest.mark.interop
def test_small_campaign(tmp_path: Path) -> None:
    cfg = CampaignConfig(trials=6, seed=21, clients=16, curl_clients=2, sizes=QUICK_SIZES,
                         timing=QUICK_TIMING, settle=0.5)
    result = run_campaign(cfg, workdir=tmp_path / "run")
    rows, summary = result["rows"], result["summary"]
    assert len(rows) == 6
    assert {r["fault"] for r in rows} == set(faults.FAULTS)
    assert summary["accepted_partial_total"] == 0
    assert all(r["accepted-partial"] == 0 for r in rows)
    assert all(r["host_alive"] for r in rows)
    assert summary["host_pid_unchanged_and_alive"]
    assert all(r["resumed"] for r in rows), [r for r in rows if not r["resumed"]]
    # at once: a fresh client is served as soon as the guardian is back, never after a
    # question's time limit (the host notices a closed channel; the limit is 10 s here)
    slow = [r for r in rows if r["time_to_resume_s"] > 3.0]
    assert not slow, slow
    assert all(r["complete"] > 0 for r in rows)  # the service ran in every trial
    kills = [r for r in rows if r["fault"] == "kill"]
    assert all(r["failed-closed"] > 0 for r in kills), kills  # the faults really bit
    assert summary["guardian_runs"] == 1 + len(kills)
    for freeze in (r for r in rows if r["fault"] == "freeze"):  # waited through it, then served
        assert freeze["failed-closed"] == 0 and freeze["slowest_download_s"] >= freeze["duration_s"]

    control = summary["negative_control"]
    assert control["ok"], control
    assert control["short"]["failed-closed"] > 0 and control["lying"]["accepted-partial"] > 0
    assert control["tls-cut"]["failed-closed"] > 0  # a WebALPS response cut short, seen
    for broken in ("short", "lying", "tls-cut"):
        assert "complete" not in control[broken]
    assert control["good"]["complete"] > 0

    config = {"quick": True, "clients": 16, "seed": 21, "command": "test"}
    csv_path, json_path, png_path = write_results(tmp_path / "out", result, config)
    with open(csv_path, newline="") as f:
        assert [int(r["trial"]) for r in csv.DictReader(f)] == list(range(6))
    written = json.loads(json_path.read_text())
    assert written["total"]["attempted"] == sum(r["downloads"] for r in rows)
    assert written["config"]["seed"] == 21
    assert png_path.stat().st_size > 0
