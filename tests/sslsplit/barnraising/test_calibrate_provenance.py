"""The Barnraising model says where its calibration came from, and warns when it has none.

``calibrate()`` used to fall back to typed-in defaults without a word when
``results/benchmarks/barnraising.json`` was absent (every fresh clone).  These tests pin the
contract: no file -> a :class:`CalibrationWarning` and ``inputs["barnraising calibration"]``
of the run's ``run.json`` saying ``defaults``; a file -> no warning, its values, and its path,
SHA-256 and writing command in ``run.json``.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from sslsplit.barnraising.model_site import (
    BENCH_COMMAND,
    BENCH_JSON,
    INPUT_NAME,
    SHIPPED_BENCH_JSON,
    CalibrationWarning,
    ModelParams,
    calibrate,
)
from testbed import results

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def run(tmp_path: Path) -> Iterator[results.Run]:
    """A started run in a scratch repository root; forgotten again afterwards."""
    (tmp_path / "pyproject.toml").write_text("")
    started = results.start_run("barnraising_test", {}, root=tmp_path)
    yield started
    results._active.clear()


def _inputs(run: results.Run) -> dict:
    return json.loads((run.out / "run.json").read_text())["inputs"]


def test_no_file_warns_and_records_defaults(run: results.Run, tmp_path: Path) -> None:
    with pytest.warns(CalibrationWarning, match="not calibrated"):
        p = calibrate(tmp_path / "absent.json")
    assert p == ModelParams()
    record = _inputs(run)[INPUT_NAME]
    assert record["source"] == "defaults"
    assert "absent.json" in record["looked_for"]


def test_a_file_is_read_without_warning_and_its_provenance_recorded(run: results.Run,
                                                                     tmp_path: Path) -> None:
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"joins_per_s": 250.0, "messages_per_lookup": 2.0}))
    with warnings.catch_warnings():
        warnings.simplefilter("error", CalibrationWarning)
        p = calibrate(path)
    assert p.join_s == pytest.approx(1 / 250.0) and p.messages_per_lookup == 2.0
    record = _inputs(run)[INPUT_NAME]
    assert record["source"] == "file"
    assert record["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert record["command"] == BENCH_COMMAND
    assert record["written_utc"] and "this machine" in record["machine"]


def test_repeated_figures_are_read_at_their_median(run: results.Run, tmp_path: Path) -> None:
    """``make benchmarks`` writes each figure as the median of interleaved repeats with its
    range; the model takes the median (not the first repeat, not the minimum)."""
    path = tmp_path / "bench.json"
    joins = {"median": 250.0, "min": 100.0, "max": 400.0, "n": 5,
             "repeats": [100.0, 400.0, 250.0, 300.0, 200.0]}
    rt = {"median": 300.0, "min": 200.0, "max": 900.0, "n": 5,
          "repeats": [900.0, 200.0, 300.0, 250.0, 400.0]}
    path.write_text(json.dumps({"joins_per_s": joins, "dnspython_round_trip_us_vs_broker": rt,
                                "messages_per_lookup": 1.0}))
    p = calibrate(path)
    assert p.join_s == pytest.approx(1 / 250.0)
    assert p.peer_message_s == pytest.approx(300e-6) and p.report_s == pytest.approx(300e-6)
    path.write_text(json.dumps({"joins_per_s": {"min": 1.0, "max": 2.0}}))
    with pytest.raises(ValueError, match="without a median"):
        calibrate(path)


def test_the_files_own_provenance_is_preferred(run: results.Run, tmp_path: Path) -> None:
    path = tmp_path / "bench.json"
    own = {"written_utc": "2026-01-02T03:04:05+00:00", "machine": "x86_64, 2 CPUs",
           "git_revision": "abc"}
    path.write_text(json.dumps({"joins_per_s": 100.0, "provenance": own}))
    calibrate(path)
    record = _inputs(run)[INPUT_NAME]
    assert {k: record[k] for k in own} == own


def test_without_a_path_this_checkout_reads_its_own_run_or_the_shipped_copy(
        run: results.Run) -> None:
    """A fresh clone has no ``results/``: the shipped ``docs/results`` copy is read."""
    expected = ROOT / BENCH_JSON if (ROOT / BENCH_JSON).is_file() else ROOT / SHIPPED_BENCH_JSON
    assert expected.is_file(), "docs/results/benchmarks/barnraising.json is shipped"
    data = json.loads(expected.read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("error", CalibrationWarning)
        p = calibrate()
    def median(v: object) -> float:  # a repeated figure (make benchmarks) or a plain number
        return float(v["median"] if isinstance(v, dict) else v)  # type: ignore[arg-type, index]

    assert p.join_s == pytest.approx(1 / median(data["joins_per_s"]))
    assert p.peer_message_s == pytest.approx(
        median(data["dnspython_round_trip_us_vs_broker"]) * 1e-6)
    record = _inputs(run)[INPUT_NAME]
    assert record["path"] == str(expected.relative_to(ROOT))
    assert record["sha256"] == hashlib.sha256(expected.read_bytes()).hexdigest()


def test_a_file_that_is_not_a_json_object_is_a_value_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match="JSON object"):
        calibrate(bad)
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not JSON"):
        calibrate(bad)
