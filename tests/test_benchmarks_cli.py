"""The benchmarks refuse to run without their reference or the C extension, with one clear line.

Each case starts a benchmark with the reference tool removed from ``PATH``
(the other tools it needs stay reachable through symlinks in a private
directory) or with ``TLS12_PURE_PYTHON=1``, which makes :mod:`tls12` ignore its
C extension.  The benchmark must exit non-zero before measuring anything --
each case takes the time of an interpreter start and the benchmark's imports.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BENCHMARKS = REPO / "benchmarks"


def _path_with(tmp_path: Path, *tools: str) -> str:
    """A ``PATH`` holding only symlinks to ``tools`` (each must be installed)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in tools:
        found = shutil.which(tool)
        if found is None:
            pytest.fail(f"{tool} is required by this test (apt-get install {tool})")
        (bin_dir / tool).symlink_to(found)
    return str(bin_dir)


def _run(bench: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "TLS12_PURE_PYTHON"}
    base["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / f"{bench}.py"), *args],
        capture_output=True, text=True, timeout=60, env={**base, **env}, cwd=REPO,
    )  # fmt: skip


def _assert_refused(proc: subprocess.CompletedProcess[str], line: str) -> None:
    assert proc.returncode != 0, proc.stdout
    assert proc.stderr.strip().splitlines() == [line], proc.stderr
    assert proc.stdout == "", "the benchmark started measuring"


NO_C = "TLS12_PURE_PYTHON is set, so tls12 would not use its C extension; unset it"

MISSING_TOOL_CASES = [
    ("bench_record", (), "openssl not found on PATH; install openssl (apt-get install openssl)"),
    ("bench_handshake", (), "openssl not found on PATH; install openssl (apt-get install openssl)"),
    ("bench_reverse_ssl", (), "openssl not found on PATH; install openssl (apt-get install openssl)"),
    ("bench_https", ("curl",), "nginx not found on PATH; install nginx-light (apt-get install nginx-light)"),
    ("bench_https", ("nginx",), "curl not found on PATH; install curl (apt-get install curl)"),
    ("bench_https", (), "curl, nginx not found on PATH; install curl nginx-light (apt-get install curl nginx-light)"),
    ("bench_splice", ("curl",), "openssl not found on PATH; install openssl (apt-get install openssl)"),
    ("bench_splice", ("openssl",), "curl not found on PATH; install curl (apt-get install curl)"),
]


@pytest.mark.parametrize(("bench", "present", "message"), MISSING_TOOL_CASES)
def test_missing_reference_tool_stops_the_benchmark(tmp_path: Path, bench: str, present: tuple[str, ...], message: str) -> None:
    proc = _run(bench, {"PATH": _path_with(tmp_path, *present)})
    _assert_refused(proc, f"{bench}: {message}")


@pytest.mark.parametrize("bench", ["bench_record", "bench_handshake", "bench_reverse_ssl", "bench_https", "bench_splice", "bench_webalps"])
def test_c_extension_not_in_use_stops_the_benchmark(bench: str) -> None:
    proc = _run(bench, {"TLS12_PURE_PYTHON": "1"})
    _assert_refused(proc, f"{bench}: {NO_C}")


def test_bench_https_small_mode_checks_its_references_too(tmp_path: Path) -> None:
    proc = _run("bench_https", {"PATH": _path_with(tmp_path, "curl")}, "--small")
    _assert_refused(proc, "bench_https: nginx not found on PATH; install nginx-light (apt-get install nginx-light)")


def test_bench_traces_without_a_real_trace_stops(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """No trace file can be hidden from the bundled manifest, so the finder is replaced by one that finds none."""
    spec = importlib.util.spec_from_file_location("bench_traces_under_test", BENCHMARKS / "bench_traces.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "available_traces", lambda: [])
    with pytest.raises(SystemExit) as exc:
        module.main([])
    assert str(exc.value).startswith("bench_traces: no usable access-log trace found")
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("bench", ["bench_drive", "bench_handshake", "bench_https", "bench_record", "bench_splice", "bench_webalps"])
def test_help_names_the_json_option(bench: str) -> None:
    proc = _run(bench, {}, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "--json" in proc.stdout


ALL_BENCHMARKS = sorted(p.stem for p in BENCHMARKS.glob("bench_*.py"))


def test_every_benchmark_is_in_the_repeats_sweep() -> None:
    """17 scripts (``make benchmarks`` runs 18 of them as commands: ``bench_https.py`` twice,
    with and without ``--small``; and the SSLACC fault campaign, a module, besides)."""
    assert len(ALL_BENCHMARKS) == 17, ALL_BENCHMARKS


@pytest.mark.parametrize("bench", ALL_BENCHMARKS)
@pytest.mark.parametrize("count", ["0", "-2", "x"])
def test_a_bad_repeat_count_is_refused_before_measuring(bench: str, count: str) -> None:
    """``--repeats`` (interleaved repeats per figure; the README needs >= 5) must be a positive integer."""
    proc = _run(bench, {}, "--repeats", count)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "--repeats" in proc.stderr.strip().splitlines()[-1], proc.stderr
    assert proc.stdout == "", "the benchmark started measuring"


@pytest.mark.parametrize("bench", ALL_BENCHMARKS)
def test_help_names_the_repeats_option(bench: str) -> None:
    proc = _run(bench, {}, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "--repeats" in proc.stdout
