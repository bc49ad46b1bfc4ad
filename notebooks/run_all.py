"""Regenerate everything that can be reproduced: the ``make reproduce`` entry point.

Steps, in order:

1. ``python -m testbed.demo`` -- curl downloads from the TLS server, for every
   suite (quick sizes unless ``--full``), into ``results/tls12_demo/``;
2. ``python -m sslacc_sim.measure --json results/sslacc/cluster_costs.json``
   (``--full`` with ``--full``) -- the SSLACC cluster's per-message CPU costs,
   measured on this machine with their provenance; the SSLACC notebook's
   Figures 28/29 read this file (the model's inputs called *measured* are
   measured by this run, not typed in);
3. ``python -m webalps_sim.campaign --trials 40 --seed 1 --out results/webalps_campaign`` --
   the WebALPS fault campaign (guardian killed, frozen, fed garbage, a reply corrupted, at
   seeded random instants while 16 clients download), whose summary the README quotes;
4. every ``notebooks/*.ipynb`` executed headless with nbclient, working
   directory ``notebooks/``, environment ``REPRODUCE_QUICK=1`` (``0`` with
   ``--full``); executed copies go to ``results/notebooks/``;
5. ``results/RUN.json`` records the run: git revision, Python and package
   versions (from :mod:`testbed.results`, the helper every notebook's first cell
   uses to write its own ``run.json``), configuration, and each step's status
   and duration.

Exits non-zero if any step failed, after running all of them.  Notebooks are
found by glob, so having none yet is fine.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from testbed import results

REPO = results.find_root(Path(__file__).resolve().parent)
NOTEBOOKS = REPO / "notebooks"
RESULTS = REPO / "results"
#: Where step 2 writes the SSLACC cluster costs (read by notebooks/sslacc.ipynb).
SSLACC_COSTS = RESULTS / "sslacc" / "cluster_costs.json"
FAULT_CAMPAIGN = RESULTS / "webalps_campaign" / "fault_campaign.json"
STEP_FILES = {SSLACC_COSTS: "run_measure_costs", FAULT_CAMPAIGN: "run_fault_campaign"}
"""The files the steps before the notebooks write (the README quotes them), and the step."""
QUICK_DEMO_SIZES = "1K,1M"
FULL_DEMO_SIZES = "0,1,4000,16K,1M,16M,64M"
PACKAGES = (
    "websec-testbed", "cryptography", "h11", "simpy", "numpy", "pandas", "matplotlib",
    "tqdm", "nbclient", "nbformat", "ipykernel", "pyOpenSSL",
)  # fmt: skip
NOTEBOOK_TIMEOUT = 3600  # seconds per cell
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")  # colours in kernel tracebacks


def package_versions() -> dict[str, str | None]:
    """Installed versions of the packages the results depend on, and the OpenSSL command line."""
    out = results.package_versions(PACKAGES)
    try:
        out["openssl (cli)"] = subprocess.run(
            ["openssl", "version"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        out["openssl (cli)"] = None
    return out


def run_demo(full: bool) -> dict[str, Any]:
    """Step 1: the TLS download demo as a subprocess."""
    sizes = FULL_DEMO_SIZES if full else QUICK_DEMO_SIZES
    cmd = [sys.executable, "-m", "testbed.demo", "--sizes", sizes, "--out", str((RESULTS / "tls12_demo").relative_to(REPO))]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, timeout=3600)
    return {
        "step": "testbed.demo",
        "command": " ".join(cmd[1:]),
        "ok": proc.returncode == 0,
        "seconds": round(time.monotonic() - start, 2),
    }


def _relative(path: Path) -> Path:
    return path.relative_to(REPO) if path.is_relative_to(REPO) else path


def _run_module(module: str, args: list[str], out: Path) -> dict[str, Any]:
    """``python -m module args`` in a subprocess; ok only if it succeeded and wrote ``out``
    (removed first: a stale file must not pass for this run's)."""
    cmd = [sys.executable, "-m", module, *args]
    out.unlink(missing_ok=True)
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, timeout=3600)
    return {
        "step": module,
        "command": "python " + " ".join(cmd[1:]),
        "ok": proc.returncode == 0 and out.is_file(),
        "seconds": round(time.monotonic() - start, 2),
    }


def run_measure_costs(full: bool, out: Path = SSLACC_COSTS) -> dict[str, Any]:
    """Step 2: measure the SSLACC cluster costs into ``out`` (default :data:`SSLACC_COSTS`)
    with ``python -m sslacc_sim.measure --json``."""
    return _run_module("sslacc_sim.measure",
                       [*(["--full"] if full else []), "--json", str(_relative(out))], out)


def run_fault_campaign(out: Path = FAULT_CAMPAIGN) -> dict[str, Any]:
    """Step 3: the WebALPS fault campaign into ``out``'s folder (40 trials, seed 1, the same
    with or without ``--full``: 2.5 minutes); ok only if it passed and wrote its summary."""
    return _run_module("webalps_sim.campaign", ["--trials", "40", "--seed", "1", "--out",
                                                 str(_relative(out.parent))], out)


def run_notebook(path: Path, full: bool) -> dict[str, Any]:
    """Step 4: execute one notebook headless and save the executed copy."""
    import nbformat
    from nbclient import NotebookClient

    out_dir = RESULTS / "notebooks"
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    record: dict[str, Any] = {"step": f"notebook {path.name}", "ok": False}
    old_env = os.environ.get(results.QUICK_ENV)
    os.environ[results.QUICK_ENV] = "0" if full else "1"  # inherited by the kernel process
    try:
        nb = nbformat.read(path, as_version=4)
        client = NotebookClient(
            nb,
            timeout=NOTEBOOK_TIMEOUT,
            kernel_name="python3",
            resources={"metadata": {"path": str(NOTEBOOKS)}},
        )
        try:
            client.execute()
            record["ok"] = True
        except Exception as exc:  # CellExecutionError, DeadKernelError, timeouts
            text = ANSI_ESCAPE.sub("", str(exc))
            record["error"] = f"{type(exc).__name__}: {text[-2000:]}"
        nbformat.write(nb, out_dir / path.name)
    except Exception as exc:
        record["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        if old_env is None:
            os.environ.pop(results.QUICK_ENV, None)
        else:
            os.environ[results.QUICK_ENV] = old_env
    record["seconds"] = round(time.monotonic() - start, 2)
    return record


def main(argv: list[str] | None = None) -> int:
    """Run every step, write ``results/RUN.json``, print a summary."""
    parser = argparse.ArgumentParser(
        description="Regenerate the demo and execute every notebook headless into results/."
    )
    parser.add_argument("--full", action="store_true", help="paper-sized runs instead of quick ones")
    parser.add_argument("--skip-demo", action="store_true", help="only execute the notebooks")
    args = parser.parse_args(argv)

    RESULTS.mkdir(exist_ok=True)
    started = datetime.datetime.now(datetime.UTC)
    steps: list[dict[str, Any]] = []
    if not args.skip_demo:
        steps.append(run_demo(args.full))
    steps.append(run_measure_costs(args.full))
    steps.append(run_fault_campaign())
    notebooks = sorted(NOTEBOOKS.glob("*.ipynb"))
    for nb in notebooks:
        print(f"executing {nb.relative_to(REPO)} ...", flush=True)
        steps.append(run_notebook(nb, args.full))

    run = {
        "started_utc": started.isoformat(timespec="seconds"),
        "git_revision": results.git_revision(REPO),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": package_versions(),
        "config": {
            "full": args.full,
            results.QUICK_ENV: "0" if args.full else "1",
            "demo_sizes": None if args.skip_demo else (FULL_DEMO_SIZES if args.full else QUICK_DEMO_SIZES),
            "notebooks": [nb.name for nb in notebooks],
        },
        "steps": steps,
    }
    (RESULTS / "RUN.json").write_text(json.dumps(run, indent=2) + "\n")

    print("\nsummary")
    for step in steps:
        status = "ok  " if step["ok"] else "FAIL"
        print(f"  {status} {step['step']:<40} {step['seconds']:>8.1f} s")
        if not step["ok"] and "error" in step:
            print("       " + step["error"].splitlines()[-1][:200])
    if not notebooks:
        print("  (no notebooks yet)")
    print(f"wrote {RESULTS / 'RUN.json'}")
    return 0 if all(step["ok"] for step in steps) else 1


if __name__ == "__main__":
    sys.exit(main())
