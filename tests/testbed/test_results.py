"""The results helper: results directory from any cwd, the quick/full switch, run metadata."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pandas as pd
import pytest

import netsim
from testbed import results

REPO = Path(netsim.__file__).resolve().parent.parent


def test_find_root_walks_up_to_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert results.find_root(deep) == tmp_path.resolve()


def test_results_dir_is_the_same_from_any_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    from_elsewhere = results.results_dir("sslsplit", create=False)
    monkeypatch.chdir(REPO / "notebooks")
    from_notebooks = results.results_dir("sslsplit", create=False)
    assert from_elsewhere == from_notebooks == REPO / "results" / "sslsplit"


def test_results_dir_creates_one_folder_and_rejects_paths(tmp_path: Path) -> None:
    out = results.results_dir("sine", root=tmp_path)
    assert out == tmp_path / "results" / "sine" and out.is_dir()
    for bad in ("", "..", "../etc", "a/b", "a\\b"):
        with pytest.raises(ValueError, match="one folder name"):
            results.results_dir(bad, root=tmp_path)


@pytest.mark.parametrize(
    ("value", "quick"),
    [(None, True), ("1", True), ("0", False), (" TRUE ", True), ("no", False)],
)
def test_quick_switch(value: str | None, quick: bool) -> None:
    env = {} if value is None else {results.QUICK_ENV: value}
    assert results.quick_from_env(env) is quick


def test_quick_switch_rejects_other_values() -> None:
    with pytest.raises(ValueError, match="REPRODUCE_QUICK.*'2'"):
        results.quick_from_env({"REPRODUCE_QUICK": "2"})


def test_run_metadata_records_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPRODUCE_QUICK", "0")
    meta = results.run_metadata({"seed": 3})
    assert meta["quick"] is False and meta["config"] == {"seed": 3}
    assert meta["cpus"] == os.cpu_count()
    assert meta["packages"]["pandas"] == pd.__version__
    assert re.fullmatch(r"[0-9a-f]{40}(\+dirty)?|unknown", meta["git_revision"])
    assert results.package_versions(["no-such-distribution-xyz"]) == {
        "no-such-distribution-xyz": None
    }


def test_git_revision_outside_a_repository_is_unknown(tmp_path: Path) -> None:
    assert results.git_revision(tmp_path) == "unknown"


def test_start_run_writes_run_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPRODUCE_QUICK", "1")
    run = results.start_run("demo", {"model": "paper"}, root=tmp_path)
    assert run.quick and run.out == tmp_path / "results" / "demo"
    written = json.loads((run.out / "run.json").read_text())
    assert written == json.loads(json.dumps(run.metadata))
    assert written["config"] == {"model": "paper"} and written["quick"] is True


def test_docstring_example() -> None:
    import doctest

    result = doctest.testmod(results)
    assert result.attempted > 0 and result.failed == 0


def test_every_notebook_starts_with_the_helper() -> None:
    notebooks = sorted((REPO / "notebooks").glob("*.ipynb"))
    assert notebooks
    for path in notebooks:
        cells = json.loads(path.read_text())["cells"]
        first = "".join(next(c for c in cells if c["cell_type"] == "code")["source"])
        code = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        assert "start_run(" in first, f"{path.name}: first code cell does not call start_run"
        for copy in ("REPRODUCE_QUICK", "pyproject.toml", "rev-parse", '"run.json"', "metadata("):
            assert copy not in code, f"{path.name} handles {copy!r} itself instead of testbed.results"
