"""Figures 28/29's "measured" cluster costs are measured by the run and read from its file.

``make reproduce`` runs ``python -m sslacc_sim.measure --json results/sslacc/cluster_costs.json``
(a step of ``notebooks/run_all.py``); :func:`sslacc_sim.params.cluster_costs` reads that file,
records its provenance in the run's ``run.json`` and warns when it has to fall back to the
typed-in ``DEFAULT_CLUSTER_COSTS``; :func:`sslacc_sim.experiments.fig28_29` uses the table it is
given and names it in its ``costs_source`` column.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from sslacc_sim import experiments as ex
from sslacc_sim.aio.measure import write_costs
from sslacc_sim.measure import main as measure_main
from sslacc_sim.params import (
    COSTS_INPUT,
    DEFAULT_CLUSTER_COSTS,
    CostsWarning,
    cluster_costs,
    read_cluster_costs,
)
from testbed import results

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def run(tmp_path: Path) -> Iterator[results.Run]:
    (tmp_path / "pyproject.toml").write_text("")
    started = results.start_run("sslacc_test", {}, root=tmp_path)
    yield started
    results._active.clear()


@pytest.fixture(scope="module")
def costs_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("costs") / "cluster_costs.json"
    write_costs(path, quick=True)
    return path


def _inputs(run: results.Run) -> dict:
    return json.loads((run.out / "run.json").read_text())["inputs"]


def test_the_written_file_holds_the_table_and_its_provenance(costs_file: Path) -> None:
    costs, prov = read_cluster_costs(costs_file)
    assert costs.source.startswith("measured (quick")
    assert costs != DEFAULT_CLUSTER_COSTS
    assert prov["command"].startswith("python -m sslacc_sim.measure") and prov["quick"] is True
    assert prov["written_utc"] and "CPUs" in prov["machine"] and prov["git_revision"]


def test_the_model_reads_the_measured_file_and_says_so(run: results.Run, costs_file: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", CostsWarning)
        costs = cluster_costs(costs_file)
    assert costs == read_cluster_costs(costs_file)[0]
    record = _inputs(run)[COSTS_INPUT]
    assert record["source"] == "file" and record["costs_source"] == costs.source
    assert record["sha256"] == hashlib.sha256(costs_file.read_bytes()).hexdigest()
    assert record["command"].startswith("python -m sslacc_sim.measure")


def test_without_a_file_the_fallback_is_loud(run: results.Run, tmp_path: Path) -> None:
    with pytest.warns(CostsWarning, match="typed-in"):
        costs = cluster_costs(tmp_path / "absent.json")
    assert costs is DEFAULT_CLUSTER_COSTS
    assert _inputs(run)[COSTS_INPUT]["source"] == "defaults"


def test_fig28_29_uses_the_costs_it_is_given_and_names_them() -> None:
    slow = dataclasses.replace(DEFAULT_CLUSTER_COSTS, interrupt=DEFAULT_CLUSTER_COSTS.interrupt * 50,
                               source="measured (test, slow interrupts)")
    point = {"nodes": (4,), "cards": (600.0,), "variants": ("norm",)}
    typed = ex.fig28_29(quick=True, **point)
    given = ex.fig28_29(quick=True, costs=slow, **point)
    assert list(typed["costs_source"]) == ["default"]
    assert list(given["costs_source"]) == ["measured (test, slow interrupts)"]
    # every member takes an interrupt per update: 50x dearer interrupts cost handshakes
    assert given["handshakes_per_s"].iloc[0] < 0.9 * typed["handshakes_per_s"].iloc[0]


def test_bad_costs_files_are_value_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    for text, match in (("{oops", "not JSON"), ("[]", "'costs' object"),
                        ('{"costs": {"gpu": 1}}', "unknown cost entries"),
                        (json.dumps({"costs": {**DEFAULT_CLUSTER_COSTS.to_dict(),
                                               "interrupt": -1.0}}), "interrupt")):
        bad.write_text(text)
        with pytest.raises(ValueError, match=match):
            read_cluster_costs(bad)


def test_the_command_line_writes_the_file(tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    assert measure_main(["--json", str(out)]) == 0
    costs, prov = read_cluster_costs(out)
    assert prov["command"] == f"python -m sslacc_sim.measure --json {out}"
    assert costs.interrupt > 0


def _run_all() -> ModuleType:
    spec = importlib.util.spec_from_file_location("run_all", ROOT / "notebooks" / "run_all.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_make_reproduce_measures_the_costs_the_notebook_reads(tmp_path: Path) -> None:
    run_all = _run_all()
    assert run_all.SSLACC_COSTS == ROOT / "results" / "sslacc" / "cluster_costs.json"
    out = tmp_path / "cluster_costs.json"
    out.write_text("stale")
    step = run_all.run_measure_costs(False, out)
    assert step["ok"], step
    assert read_cluster_costs(out)[0].source.startswith("measured (quick")
    # the notebook reads that file (same name in its results folder) and passes it on
    cells = ["".join(c["source"]) for c in
             json.loads((ROOT / "notebooks" / "sslacc.ipynb").read_text())["cells"]
             if c["cell_type"] == "code"]
    assert any(f'OUT / "{run_all.SSLACC_COSTS.name}"' in c and "cluster_costs(" in c
               for c in cells)
    calls = [c for c in cells if "ex.fig28_29(" in c]
    assert calls and all(c.count("ex.fig28_29(") == c.count("costs=COSTS") for c in calls)
