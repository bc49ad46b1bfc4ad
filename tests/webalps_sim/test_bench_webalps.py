"""The WebALPS host benchmark (``benchmarks/bench_webalps_host.py``) runs its code paths.

The benchmark is run for real as a user runs it -- a guardian, fresh HTTPS and WebALPS hosts,
closed-loop and keep-alive clients, SIGTERM to read each host's ``--stats-json``, SIGSTOP and
SIGCONT of the guardian -- with tiny windows and one repeat, and its JSON is checked for every
field with sane values.  No speed is asserted: only that requests were served, that the round
trips the host counted match the protocol (a keep-alive request costs one ``open`` and one
``seal`` question), and that while the guardian was stopped no HTTPS request completed yet plain
HTTP was served, and HTTPS worked again after SIGCONT.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "benchmarks" / "bench_webalps_host.py"


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str]:
    out = tmp_path_factory.mktemp("bench") / "webalps_host.json"
    done = _run("--quick", "--seconds", "0.2", "--repeats", "1", "--json", str(out),
                "--csv", str(out.with_suffix(".csv")))
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(out.read_text())
    data["csv_path"] = str(out.with_suffix(".csv"))
    return data, done.stdout


def test_every_point_served_requests_on_both_hosts(smoke: tuple[dict, str]) -> None:
    data, stdout = smoke
    assert data["repeats"] == 1 and data["wall_s"] > 0
    assert data["provenance"]["command"].startswith("python benchmarks/bench_webalps_host.py --quick")
    assert data["provenance"]["python"] and data["provenance"]["cpus"] >= 1
    for setting in ("new-connection", "keep-alive"):
        for clients in (1, 8):
            point = data["slowdown"][f"{setting}/{clients}"]
            for mode in ("https", "webalps"):
                assert point[mode]["requests"]["median"] > 0
                assert point[mode]["served"]["median"] >= point[mode]["requests"]["median"]
                assert point[mode]["host_cpu_ms_per_request"]["median"] > 0
            assert point["slowdown"]["median"] > 0 and point["slowdown"]["n"] == 1
            assert point["webalps"]["guardian_cpu_ms_per_request"]["median"] > 0
            assert f"{setting:14s} {clients} client(s)" in stdout


def test_the_round_trips_per_request_follow_the_protocol(smoke: tuple[dict, str]) -> None:
    data, stdout = smoke
    keep = data["slowdown"]["keep-alive/1"]["webalps"]
    # one handshake, then every request is one OPEN (the request record) and one SEAL (the response)
    assert keep["questions_per_request"]["open"]["median"] == pytest.approx(1.0, abs=0.1)
    assert keep["questions_per_request"]["seal"]["median"] == pytest.approx(1.0, abs=0.1)
    assert keep["round_trips_per_request"]["median"] == pytest.approx(2.0, abs=0.2)
    new = data["slowdown"]["new-connection/1"]["webalps"]
    assert new["questions_per_connection"]["derive_finish"]["median"] == pytest.approx(1.0, abs=0.1)
    # DERIVE_FINISH, OPEN, SEAL go to the guardian; the Finished was sealed ahead (no round trip)
    # and RELEASE is sent without waiting for a reply
    assert new["questions_per_connection"]["seal"]["median"] == pytest.approx(2.0, abs=0.1)
    assert new["round_trips_per_connection"]["median"] == pytest.approx(3.0, abs=0.2)
    assert "guardian round trips per request" in stdout
    assert "guardian round trips per connection" in stdout


def test_plain_http_is_served_while_the_guardian_is_frozen_and_https_is_not(smoke: tuple[dict, str]) -> None:
    data, _ = smoke
    freeze = data["freeze"]
    assert freeze["running"]["rps"]["median"] > 0
    assert freeze["frozen"]["rps"]["median"] > 0
    assert freeze["frozen"]["https_started"]["median"] >= 1
    assert freeze["frozen"]["https_completed"]["median"] == 0
    assert freeze["frozen"]["https_after_sigcont"]["median"] == 1
    assert freeze["ratio_frozen_over_running"]["median"] > 0


def test_the_csv_has_one_row_per_figure(smoke: tuple[dict, str]) -> None:
    data, _ = smoke
    rows = list(csv.DictReader(Path(data["csv_path"]).open()))
    slowdowns = [r for r in rows if r["figure"] == "slowdown"]
    assert len(slowdowns) == 4 and all(float(r["median"]) > 0 and r["n"] == "1" for r in slowdowns)
    assert any(r["host"] == "frozen/running" for r in rows)


def test_help_and_a_bad_option_give_one_line(tmp_path: Path) -> None:
    helped = _run("--help", timeout=30)
    assert helped.returncode == 0 and "--json" in helped.stdout and "--quick" in helped.stdout
    bad = _run("--seconds", "0", timeout=30)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1].endswith("--seconds must be positive")
