"""The README's result tables are rendered from the result files in ``docs/results/``.

``make readme`` copies the files that ``make reproduce`` and ``make benchmarks`` wrote into
``docs/results/`` and rewrites the README's generated blocks; this test fails if anyone edits a
number by hand or updates one side without the other.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _summarize() -> ModuleType:
    spec = importlib.util.spec_from_file_location("summarize", ROOT / "notebooks" / "summarize.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("summarize", module)
    spec.loader.exec_module(module)
    return module


def test_readme_tables_match_the_result_files() -> None:
    summarize = _summarize()
    problems = summarize.check((ROOT / "README.md").read_text(), ROOT / "docs" / "results")
    assert problems == [], "README is out of date with docs/results/: run `make readme`\n" + "\n".join(problems)


def test_every_quoted_file_is_used_and_every_row_says_its_kind() -> None:
    summarize = _summarize()
    src = summarize.Source(ROOT / "docs" / "results")
    blocks = summarize.render_all(src)
    on_disk = {str(p.relative_to(src.root)) for p in src.root.rglob("*") if p.is_file()}
    on_disk.discard(summarize.PROVENANCE_FILE)   # the record of the others, not a result
    assert on_disk == src.used, "docs/results/ holds files no README row reads (or misses some)"
    kinds = ("measured", "modelled", "true by construction")
    for name, table in blocks.items():
        for line in table.splitlines()[2:]:
            assert any(k in line for k in kinds), f"{name}: row does not say what it is: {line}"


def test_a_changed_result_changes_the_readme(tmp_path: Path) -> None:
    """Edit one number in a copy of the snapshot: the check must notice (the test can fail)."""
    summarize = _summarize()
    snap = tmp_path / "results"
    shutil.copytree(ROOT / "docs" / "results", snap)
    path = snap / "benchmarks" / "sine.json"
    data = json.loads(path.read_text())
    data["verify"][0]["verify_MBps"]["median"] *= 2
    path.write_text(json.dumps(data))
    assert summarize.check((ROOT / "README.md").read_text(), snap) != []


def test_missing_result_file_is_a_clear_error(tmp_path: Path) -> None:
    summarize = _summarize()
    with pytest.raises(summarize.MissingResult, match="not found"):
        summarize.render_all(summarize.Source(tmp_path))


def test_make_readme_records_each_copied_files_provenance(tmp_path: Path) -> None:
    """``--update``'s copy step writes ``PROVENANCE.json``: every copied file with its hash
    (of the copy), the command that wrote it and when and where it was written."""
    summarize = _summarize()
    results = tmp_path / "results"
    shutil.copytree(ROOT / "docs" / "results", results)
    (results / summarize.PROVENANCE_FILE).unlink(missing_ok=True)
    used = {"sine/table2.csv", "benchmarks/sine.json"}
    snap = tmp_path / "snapshot"
    summarize.write_snapshot(used, results, snap)
    record = json.loads((snap / summarize.PROVENANCE_FILE).read_text())
    assert set(record["files"]) == used
    assert {str(p.relative_to(snap)) for p in snap.rglob("*") if p.is_file()} == used | {
        summarize.PROVENANCE_FILE}
    for rel, entry in record["files"].items():
        assert entry["sha256"] == hashlib.sha256((snap / rel).read_bytes()).hexdigest()
        assert entry["written_utc"] and entry["machine"] and entry["git_revision"]
    assert record["files"]["benchmarks/sine.json"]["command"].startswith(
        "python benchmarks/bench_sine.py --json results/benchmarks/sine.json")
    assert "notebooks/sine.ipynb" in record["files"]["sine/table2.csv"]["command"]


def test_the_campaign_rows_say_how_many_clients_resent_when_the_run_measured_it(tmp_path: Path) -> None:
    """A campaign summary with ``resends_after_kills`` (clients that sent again before their
    next byte after a kill) puts it into its README row; one from before has no such clause."""
    summarize = _summarize()
    snap, path, data = _snapshot_of(tmp_path, "sslacc_campaign_buckets.json")

    def row() -> str:  # the bucket layout's row (the other campaigns' rows have their own)
        systems = summarize.render_all(summarize.Source(snap))["systems"]
        return next(line for line in systems.splitlines()
                    if line.startswith("| SSLACC, random-instant faults, bucket layout |"))  # fmt: skip

    data.pop("resends_after_kills", None)
    path.write_text(json.dumps(data))
    assert "sent again between a kill" not in row()
    data["resends_after_kills"] = {"n": 40, "resent": 3, "p50_s": 0.21, "max_s": 0.42,
                                   "answered_within_20ms": 2}
    path.write_text(json.dumps(data))
    assert ("their own timer fired): 3 of 40, 0.210 s median, 0.420 s at most after the kill, "
            "the next byte within 20 ms of the resend for 2") in row()


def test_the_campaign_rows_say_which_kills_were_noticed_late_when_the_run_measured_it(
        tmp_path: Path) -> None:  # fmt: skip
    """A campaign summary with ``slow_detections`` (kills noticed more than 0.05 s after, with
    when the killed process had exited) puts them into its README row; one from before has no
    such clause."""
    summarize = _summarize()
    snap, path, data = _snapshot_of(tmp_path, "sslacc_campaign.json")
    data.pop("slow_detections", None)
    path.write_text(json.dumps(data))

    def row() -> str:  # the chain campaign's row (the join campaigns' rows have their own)
        systems = summarize.render_all(summarize.Source(snap))["systems"]
        return next(line for line in systems.splitlines()
                    if line.startswith("| SSLACC, random-instant faults |"))  # fmt: skip

    assert "noticed more than 0.05 s" not in row()
    data["slow_detections"] = [
        {"trial": 7, "mode": "kill", "kill_at_s": 0.1, "detect_s": 0.145, "exited_s": 0.14},
        {"trial": 9, "mode": "kill", "kill_at_s": 0.2, "detect_s": 0.06, "exited_s": 0.01},
        {"trial": 11, "mode": "double", "kill_at_s": 0.3, "detect_s": 0.08, "exited_s": 0.07}]
    path.write_text(json.dumps(data))
    assert ("kills noticed more than 0.05 s after the kill: 3 (median 0.080 s; the killed "
            "process had exited after a median 0.070 s)") in row()


def test_the_join_death_rows_name_the_nodes_that_crashed(tmp_path: Path) -> None:
    """A campaign that recorded how its nodes ended says in its row which died of a signal it
    never sends (a segmentation fault); one from before says nothing about it."""
    summarize = _summarize()
    snap, path, data = _snapshot_of(tmp_path, "sslacc_campaign_donorkill.json")

    def row() -> str:
        systems = summarize.render_all(summarize.Source(snap))["systems"]
        return next(line for line in systems.splitlines()
                    if line.startswith("| SSLACC, the donor's death during a join"))  # fmt: skip

    assert "a signal the campaign never sends: none" in row()
    data["crashed"] = [{"trial": 13, "crashed": "b:SIGSEGV"}]
    path.write_text(json.dumps(data))
    assert "a signal the campaign never sends: trial 13 b:SIGSEGV" in row()
    data.pop("crashed")
    path.write_text(json.dumps(data))
    assert "never sends" not in row()


@pytest.mark.parametrize(("benchmark", "start", "roles"), [
    ("sslacc_campaign.json", "| SSLACC, random-instant faults |", False),
    ("sslacc_campaign_buckets.json", "| SSLACC, random-instant faults, bucket layout |", True)])
def test_the_campaign_rows_give_the_wait_from_the_window_s_opening_when_measured(
        tmp_path: Path, benchmark: str, start: str, roles: bool) -> None:  # fmt: skip
    """A campaign summary with ``wait_after_kills`` (the gaps counted from when each client
    could take a byte) puts it into its row, by window and, for the bucket layout, by role;
    one from before has no such clause."""
    summarize = _summarize()
    snap, path, data = _snapshot_of(tmp_path, benchmark)

    def row() -> str:
        systems = summarize.render_all(summarize.Source(snap))["systems"]
        return next(line for line in systems.splitlines() if line.startswith(start))

    for key in ("wait_after_kills", "wait_by_window_after_kills", "wait_by_role_after_kills"):
        data.pop(key, None)
    path.write_text(json.dumps(data))
    assert "could take a byte" not in row()
    g = {"n": 5, "without_gap": 0, "p50_s": 0.021, "p99_s": 0.12, "max_s": 0.13}
    data.update(wait_after_kills=g, wait_by_window_after_kills={"open": g, "closed": g},
                wait_by_role_after_kills={"victim": g})
    path.write_text(json.dumps(data))
    assert ("after kills 0.021 / 0.120 s (n = 5): window open 0.021 / 0.120 s (n = 5), closed "
            "0.021 / 0.120 s (n = 5)") in row()
    assert ("the victim's 0.021 / 0.120 s (n = 5)" in row()) is roles


def _snapshot_of(tmp_path: Path, benchmark: str) -> tuple[Path, Path, dict[str, Any]]:
    """A copy of the README's results snapshot, the path of one benchmark's JSON in it, and
    that JSON (for a test to edit, write back and render)."""
    snap = tmp_path / "results"
    shutil.copytree(ROOT / "docs" / "results", snap)
    path = snap / "benchmarks" / benchmark
    return snap, path, json.loads(path.read_text())
