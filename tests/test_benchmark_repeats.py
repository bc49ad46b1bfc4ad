"""Every benchmark ratio is the median of interleaved repeats, and the README refuses single runs.

Two halves:

* the shared helper in ``benchmarks/_common.py``: :func:`rounds` runs its steps A B A B ...
  (so that a burst of background load lands on both sides of a ratio), :class:`Repeated`
  summarises repeats as median, min, max and n, :func:`interleaved` pairs a candidate with its
  reference and takes the ratio pair by pair, and none of them accepts fewer than one repeat;
* the README's performance rows (``notebooks/summarize_parts/performance.py``): a benchmark
  file without repeats, or with fewer than five, is a clear error, and a target is "met" only
  when the *median* meets it -- a lucky best repeat does not count.

All in-process and quick: the benchmarks themselves are not run here.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent


def _module(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


common = _module("bench_common_under_test", REPO / "benchmarks" / "_common.py")
if str(REPO / "notebooks") not in sys.path:
    sys.path.insert(0, str(REPO / "notebooks"))
from summarize_parts import performance, performance_papers  # noqa: E402
from summarize_parts.base import MissingResult, Source  # noqa: E402

# --- the interleaving helper ---------------------------------------------------------------


def test_rounds_interleave_the_steps_a_b_a_b() -> None:
    log: list[str] = []

    def step(name: str, value: int) -> Any:
        return lambda: log.append(name) or value

    got = common.rounds({"a": step("a", 1), "b": step("b", 2), "c": step("c", 3)}, 3)
    assert log == ["a", "b", "c"] * 3
    assert got == {"a": [1, 1, 1], "b": [2, 2, 2], "c": [3, 3, 3]}


def test_interleaved_pairs_candidate_and_reference_and_divides_pair_by_pair() -> None:
    log: list[str] = []
    cand = iter([10.0, 30.0, 20.0, 50.0, 40.0])
    ref = iter([10.0, 10.0, 40.0, 25.0, 10.0])
    result = common.interleaved(lambda: log.append("A") or next(cand), lambda: log.append("B") or next(ref), 5)
    assert log == ["A", "B"] * 5
    assert result.candidate.repeats == (10.0, 30.0, 20.0, 50.0, 40.0)
    assert result.reference.repeats == (10.0, 10.0, 40.0, 25.0, 10.0)
    # pair by pair: 1, 3, 0.5, 2, 4 -- not median(cand) / median(ref) = 30 / 10 = 3
    assert result.ratio.repeats == (1.0, 3.0, 0.5, 2.0, 4.0)
    assert (result.ratio.median, result.ratio.min, result.ratio.max, result.ratio.n) == (2.0, 0.5, 4.0, 5)


def test_median_min_max_of_an_odd_number_of_repeats() -> None:
    r = common.Repeated.of([5.0, 1.0, 4.0, 2.0, 3.0])
    assert (r.median, r.min, r.max, r.n) == (3.0, 1.0, 5.0, 5)
    assert r.repeats == (5.0, 1.0, 4.0, 2.0, 3.0)  # run order kept
    assert r.to_json() == {"median": 3.0, "min": 1.0, "max": 5.0, "n": 5, "repeats": [5.0, 1.0, 4.0, 2.0, 3.0]}
    assert r.text(".1f") == "3.0 (1.0–5.0, n=5)"


def test_median_of_an_even_number_of_repeats_is_the_mean_of_the_middle_two() -> None:
    r = common.Repeated.of([4.0, 1.0, 10.0, 2.0])
    assert (r.median, r.min, r.max, r.n) == (3.0, 1.0, 10.0, 4)


def test_one_repeat_is_its_own_median_min_and_max() -> None:
    r = common.Repeated.of([7.5])
    assert (r.median, r.min, r.max, r.n) == (7.5, 7.5, 7.5, 1)


def test_ratio_over_a_zero_reference_is_infinite_not_a_crash() -> None:
    r = common.Repeated.of([1.0, 2.0]).over(common.Repeated.of([0.0, 1.0]))
    assert r.repeats == (math.inf, 2.0)


@pytest.mark.parametrize("repeats", [0, -1, 2.5, True, "5"])
def test_rounds_and_interleaved_reject_fewer_than_one_repeat(repeats: Any) -> None:
    with pytest.raises(ValueError, match="repeats must be an integer >= 1"):
        common.rounds({"a": lambda: 1.0}, repeats)
    with pytest.raises(ValueError, match="repeats must be an integer >= 1"):
        common.interleaved(lambda: 1.0, lambda: 1.0, repeats)


def test_a_figure_needs_a_repeat_and_no_nan() -> None:
    with pytest.raises(ValueError, match="at least one repeat"):
        common.Repeated.of([])
    with pytest.raises(ValueError, match="NaN"):
        common.Repeated.of([1.0, math.nan])
    with pytest.raises(ValueError, match="cannot pair 2 repeats with 3"):
        common.Repeated.of([1.0, 2.0]).over(common.Repeated.of([1.0, 2.0, 3.0]))


@pytest.mark.parametrize("text", ["0", "-3", "abc", "2.5"])
def test_the_repeats_option_refuses_a_non_positive_or_non_integer_count(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench_x")
    common.add_repeats_option(parser)
    assert parser.parse_args([]).repeats == 5
    assert parser.parse_args(["--repeats", "7"]).repeats == 7
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["--repeats", text])
    assert exc.value.code == 2
    assert "--repeats" in capsys.readouterr().err


def test_write_json_records_the_repeats_and_the_wall_time(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "x.json"
    common.write_json(path, {"ratio": common.Repeated.of([1.0, 2.0, 3.0]).to_json()}, repeats=3, wall_s=1.5)
    data = json.loads(path.read_text())
    assert data["repeats"] == 3 and data["wall_s"] == 1.5 and data["ratio"]["median"] == 2.0


# --- the README refuses single runs and judges targets by the median --------------------------


def _webalps(slowdowns: list[float], repeats: int | None = None) -> dict[str, Any]:
    """A webalps.json in the shape bench_webalps.py writes, with the given per-repeat slowdowns."""
    n = len(slowdowns)

    def figure(value: float) -> dict[str, Any]:
        return common.Repeated.of([value] * n).to_json()

    data: dict[str, Any] = {
        "HTTPS": {"rps": figure(600.0)}, "WebALPS-native": {"rps": figure(400.0)},
        "guardian_ms_per_handshake": figure(0.4), "guardian_ms_per_record_round_trip": figure(0.18),
        "slowdown_https_to_webalps": common.Repeated.of(slowdowns).to_json(),
        "target": 1.5, "target_met": True, "seconds_per_point": 3.0, "server_cpu": -1,
        "repeats": n if repeats is None else repeats, "wall_s": 30.0,
    }
    return data


def _source(tmp_path: Path, data: dict[str, Any]) -> Source:
    (tmp_path / "benchmarks").mkdir(exist_ok=True)
    (tmp_path / "benchmarks" / "webalps.json").write_text(json.dumps(data))
    return Source(tmp_path)


def test_a_single_run_result_file_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    """The shape every benchmark wrote before repeats: one number per figure, no "repeats"."""
    single = {"HTTPS": {"rps": 600.0}, "WebALPS-native": {"rps": 416.0}, "guardian_ms_per_handshake": 0.4,
              "guardian_ms_per_record_round_trip": 0.18, "slowdown_https_to_webalps": 1.44,
              "target": 1.5, "target_met": True}
    with pytest.raises(performance.NotRepeated, match=r"webalps.json has no \"repeats\" field: it is a single run"):
        performance_papers._webalps(_source(tmp_path, single))
    assert issubclass(performance.NotRepeated, MissingResult)  # summarize.py's CLI prints it as one line


def test_fewer_than_five_repeats_are_refused(tmp_path: Path) -> None:
    with pytest.raises(performance.NotRepeated, match="--repeats 3; the README needs >= 5"):
        performance_papers._webalps(_source(tmp_path, _webalps([1.4, 1.45, 1.5])))


def test_a_figure_that_is_a_single_number_is_refused_even_if_the_file_says_repeats(tmp_path: Path) -> None:
    data = _webalps([1.4] * 5)
    data["slowdown_https_to_webalps"] = 1.4
    with pytest.raises(performance.NotRepeated, match="single number"):
        performance_papers._webalps(_source(tmp_path, data))


def test_the_row_shows_median_and_range_and_n(tmp_path: Path) -> None:
    cells = performance_papers._webalps(_source(tmp_path, _webalps([1.44, 1.60, 1.38, 1.47, 1.41])))
    assert "n = 5" in cells[0]
    assert "docs/results/benchmarks/webalps.json" in cells[1]
    assert cells[4] == "slowdown 1.44 (1.38–1.60)×"
    assert cells[5] == "≤ 1.5× (met by the median)"


def test_a_target_is_met_only_when_the_median_meets_it(tmp_path: Path) -> None:
    """Three of five repeats miss 1.5x; the best one (1.30) and the JSON's own flag do not count."""
    cells = performance_papers._webalps(_source(tmp_path, _webalps([1.30, 1.60, 1.55, 1.45, 1.70])))
    assert cells[4] == "slowdown 1.55 (1.30–1.70)×"
    assert cells[5] == "≤ 1.5× (not met)"


# --- Dask speedups are reported only when the workers really ran points ---------------------


def test_a_speedup_on_two_workers_needs_two_workers_that_ran_points() -> None:
    """``workers_that_ran`` reads the workers recorded inside the tasks by the sweep itself."""
    import pandas as pd

    from testbed.sweep import sweep
    from tests.testbed.test_sweep import _point  # importable by the workers

    axes = {"seed": [1, 2, 3], "n": [5]}
    two = sweep(_point, axes, workers=2, progress=False, constants={"scale": 1.0})
    assert common.workers_that_ran("bench_x", two, 2) == 2
    serial = sweep(_point, axes, serial=True, progress=False, constants={"scale": 1.0})
    with pytest.raises(SystemExit, match="expected points on 2 Dask worker"):
        common.workers_that_ran("bench_x", serial, 2)
    with pytest.raises(SystemExit, match="ran on none"):
        common.workers_that_ran("bench_x", pd.DataFrame(), 2)
