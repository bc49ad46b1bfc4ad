"""``testbed.results.file_provenance`` / ``record_input``: where a model's input file came from."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from testbed import results


def _root(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "docs" / "results" / "b").mkdir(parents=True)
    return tmp_path


def test_a_shipped_file_takes_its_entry_in_provenance_json(tmp_path: Path) -> None:
    root = _root(tmp_path)
    shipped = root / "docs" / "results" / "b" / "x.json"
    shipped.write_text("{}")
    entry = {"written_utc": "2026-01-01T00:00:00+00:00", "machine": "m, 2 CPUs",
             "git_revision": "r1"}
    (root / "docs" / "results" / results.PROVENANCE_FILE).write_text(
        json.dumps({"files": {"b/x.json": {**entry, "sha256": "ignored"}}}))
    prov = results.file_provenance(shipped, "cmd", root)
    assert prov["path"] == "docs/results/b/x.json" and prov["command"] == "cmd"
    assert prov["sha256"] == hashlib.sha256(b"{}").hexdigest()
    assert {k: prov[k] for k in entry} == entry


def test_a_shipped_file_without_an_entry_says_so_rather_than_guessing(tmp_path: Path) -> None:
    root = _root(tmp_path)
    shipped = root / "docs" / "results" / "b" / "y.json"
    shipped.write_text("{}")
    prov = results.file_provenance(shipped, "cmd", root)
    assert prov["written_utc"] is None and prov["machine"] is None
    assert results.PROVENANCE_FILE in prov["note"]


def test_a_local_results_file_is_dated_by_its_write_on_this_machine(tmp_path: Path) -> None:
    root = _root(tmp_path)
    local = root / "results" / "b" / "z.json"
    local.parent.mkdir(parents=True)
    local.write_text("{}")
    prov = results.file_provenance(local, "cmd", root)
    assert prov["path"] == "results/b/z.json"
    assert prov["written_utc"].startswith("20") and "this machine" in prov["machine"]


def test_record_input_extends_the_current_runs_run_json(tmp_path: Path) -> None:
    root = _root(tmp_path)
    try:
        run = results.start_run("demo", {"seed": 1}, root=root)
        results.record_input("costs", {"source": "defaults"})
        results.record_input("trace", {"source": "file", "path": "t.csv"})
        meta = json.loads((run.out / "run.json").read_text())
        assert meta["config"] == {"seed": 1}
        assert meta["inputs"] == {"costs": {"source": "defaults"},
                                  "trace": {"source": "file", "path": "t.csv"}}
        assert results.recorded_inputs() == meta["inputs"]
    finally:
        results._active.clear()


def test_without_a_run_the_input_is_only_remembered(tmp_path: Path) -> None:
    results._active.clear()
    inputs = results.record_input("costs", {"source": "defaults"})
    assert inputs["costs"] == {"source": "defaults"}
    assert not list(tmp_path.rglob("run.json"))
