"""The sweep helper: Dask and serial runs agree, failures name their point, addresses validate."""

from __future__ import annotations

import argparse
import math
import pickle
import subprocess
import sys
from pathlib import Path

import distributed  # noqa: F401  (the test extra installs it: fail, do not skip, without it)
import pandas as pd
import pytest

from testbed.sweep import (
    SweepError,
    SweepPointError,
    add_scheduler_argument,
    grid,
    scheduler_arg,
    sweep,
)


def _point(seed: int, n: int, scale: float = 1.0) -> dict[str, float]:
    """A deterministic little computation with two result fields."""
    import random

    rng = random.Random(seed * 1000 + n)
    xs = [rng.random() * scale for _ in range(n)]
    return {"mean": sum(xs) / n, "max": max(xs)}


def _frame(seed: int, n: int) -> pd.DataFrame:
    return pd.DataFrame({"i": range(n), "x": [seed * i for i in range(n)]})


def _fails(seed: int, n: int) -> dict[str, float]:
    if seed == 2 and n == 3:
        raise ZeroDivisionError("bad point")
    return {"v": seed / n}


def _slow_first(seed: int) -> dict[str, int]:
    """Point 1 takes half a second, the others no time: left alone, the other worker would
    take them all while the first is busy."""
    import time

    if seed == 1:
        time.sleep(0.5)
    return {"v": seed}


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    return df.sort_values(list(df.columns)).reset_index(drop=True)


def test_dask_two_workers_equals_serial() -> None:
    axes = {"seed": [1, 2, 3], "n": [5, 50]}
    meta = {"seed_base": 7, "quick": True}
    dask_df = sweep(_point, axes, workers=2, progress=False, metadata=meta,
                    constants={"scale": 2.0})
    serial_df = sweep(_point, axes, serial=True, progress=False, metadata=meta,
                      constants={"scale": 2.0})
    pd.testing.assert_frame_equal(_sorted(dask_df), _sorted(serial_df))
    # tidy: one row per point and field, the metadata's scalars as columns
    assert len(serial_df) == 6 * 2
    assert set(serial_df["field"]) == {"mean", "max"}
    assert set(serial_df["seed_base"]) == {7}
    row = serial_df[(serial_df.seed == 2) & (serial_df.n == 50) & (serial_df.field == "max")]
    assert row["value"].item() == pytest.approx(_point(2, 50, 2.0)["max"])
    assert dask_df.attrs["run"]["config"] == meta
    assert dask_df.attrs["run"]["sweep"]["workers"] == 2
    # the two asked-for workers really ran points: addresses read inside the tasks
    ran = dask_df.attrs["run"]["sweep"]
    assert len(ran["ran_on"]) == 2 and all(a.startswith("tcp://") for a in ran["ran_on"])
    assert set(ran["point_workers"]) == set(ran["ran_on"]) and len(ran["point_workers"]) == 6
    assert serial_df.attrs["run"]["sweep"]["serial"] is True
    assert serial_df.attrs["run"]["sweep"]["ran_on"] == ["serial"]


def test_pinned_placement_deals_points_round_robin() -> None:
    """``placement="pinned"``: point i ran on worker i mod 2, as each task itself reported,
    even though the first point keeps its worker busy while the other is idle."""
    df = sweep(_slow_first, {"seed": range(1, 7)}, workers=2, progress=False,
               placement="pinned")
    assert df["value"].tolist() == list(range(1, 7))
    ran = df.attrs["run"]["sweep"]
    first, second = sorted(ran["ran_on"])
    assert ran["point_workers"] == [first, second] * 3
    assert ran["placement"] == "pinned"
    with pytest.raises(SweepError, match="placement"):
        sweep(_point, {"seed": [1], "n": [5]}, serial=True, placement="everywhere")


def test_frames_and_wide_results() -> None:
    pts = grid(seed=[1, 2], n=[2, 3])
    df = sweep(_frame, pts, serial=True, progress=False, tidy=False)
    assert list(df.columns[:2]) == ["seed", "n"] and len(df) == 2 + 3 + 2 + 3
    assert df[(df.seed == 2) & (df.n == 3)]["x"].tolist() == [0, 2, 4]
    wide = sweep(_point, pts, serial=True, progress=False, tidy=False)
    assert len(wide) == 4 and {"mean", "max"} <= set(wide.columns)


@pytest.mark.parametrize("serial", [True, False])
def test_failing_point_names_its_parameters(serial: bool) -> None:
    with pytest.raises(SweepPointError) as info:
        sweep(_fails, {"seed": [1, 2], "n": [1, 3]}, serial=serial, workers=2,
              progress=False)
    assert info.value.point == {"seed": 2, "n": 3}
    assert "'seed': 2" in str(info.value) and "ZeroDivisionError" in str(info.value)
    assert isinstance(info.value.error, ZeroDivisionError)


def test_point_error_pickles() -> None:
    err = pickle.loads(pickle.dumps(SweepPointError({"a": 1}, ValueError("x"))))
    assert err.point == {"a": 1} and isinstance(err.error, ValueError)


def test_bad_grids() -> None:
    with pytest.raises(SweepError, match="empty"):
        sweep(_point, [], serial=True)
    with pytest.raises(SweepError, match="same parameters"):
        sweep(_point, [{"seed": 1, "n": 2}, {"seed": 1}], serial=True)
    with pytest.raises(SweepError, match="constants"):
        sweep(_point, [{"seed": 1, "n": 2}], constants={"n": 3}, serial=True)
    assert grid(a=[1, 2], b="xy")[-1] == {"a": 2, "b": "y"}
    assert math.prod([2, 2]) == len(grid(a=[1, 2], b="xy"))


@pytest.mark.parametrize("good,expected", [
    ("tcp://127.0.0.1:8786", "tcp://127.0.0.1:8786"),
    ("tcp://scheduler.example.org", "tcp://scheduler.example.org"),
    ("tls://10.0.0.1:8786/", "tls://10.0.0.1:8786"),
    (" Local ", "local"),
    ("serial", "serial"),
])
def test_scheduler_arg_accepts(good: str, expected: str) -> None:
    assert scheduler_arg(good) == expected


@pytest.mark.parametrize("bad", ["", "127.0.0.1:8786", "http://host:8786", "tcp://",
                                 "tcp://host:99999", "tcp://host:port", "tcp://a b:1"])
def test_scheduler_arg_rejects(bad: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="scheduler must be"):
        scheduler_arg(bad)


def test_scheduler_argument_in_a_parser(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    add_scheduler_argument(parser)
    assert parser.parse_args([]).scheduler == "local"
    assert parser.parse_args(["--scheduler", "tcp://h:1"]).scheduler == "tcp://h:1"
    with pytest.raises(SystemExit):
        parser.parse_args(["--scheduler", "h:1"])
    assert "scheduler must be" in capsys.readouterr().err


def test_jupyter_lab_in_the_venv() -> None:
    """``make notebook`` runs ``jupyter lab`` from the interpreter's own environment."""
    jupyter = Path(sys.executable).parent / "jupyter"
    assert jupyter.exists(), "jupyterlab is not installed in this venv (the notebooks extra)"
    out = subprocess.run([str(jupyter), "lab", "--version"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip()[0].isdigit()


def test_trace_warmth_by_day_on_dask_equals_serial() -> None:
    """The month-long replay split by day over two workers gives the in-process table."""
    from dataclasses import replace

    from sslsplit.experiments import traces as ex
    from sslsplit.synth import LCS_LIKE, generate, scaled

    works = {ex.SYNTHETIC: generate(replace(scaled(LCS_LIKE, 0.03), days=40.0))}
    serial = ex.two_weeks_warmth(quick=True, workloads=works)
    on_dask = ex.two_weeks_warmth(quick=True, workloads=works, scheduler="local", workers=2)
    assert len(serial) > 10 and serial["chunk_start"].is_monotonic_increasing
    pd.testing.assert_frame_equal(serial, on_dask)
    assert len(on_dask.attrs["run"]["sweep"]["ran_on"]) == 2  # both workers ran days
    assert (serial["history_days"] <= 14.0).all()
