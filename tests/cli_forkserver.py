"""Run many command-line invocations quickly: import the programs once, fork one child per run.

``python tests/cli_forkserver.py`` reads a JSON list of runs on stdin, each
``{"key": ..., "target": "sine.fetch" or "benchmarks/bench_x.py", "argv": [...]}``, and
prints a JSON list of ``{"key", "status", "stdout", "stderr", "seconds"}``.

Each run is a real process: a child forked from this (single-threaded) one, with its own
stdin (``/dev/null``), stdout and stderr (files), which executes the program exactly as
``python -m TARGET ARGV`` (or ``python SCRIPT ARGV``) would -- ``runpy`` runs the module as
``__main__``, an uncaught exception prints its traceback and exits 1, ``SystemExit`` sets the
status.  What the fork saves is the interpreter start and the imports (cryptography, pandas,
asyncio, ...), which are most of the cost of a run that fails on its arguments; a sweep of a
hundred bad command lines then takes seconds instead of a minute on two cores.  The programs'
own modules are imported to load their dependencies and then dropped from ``sys.modules``, so
each child executes the module afresh, as ``python -m`` does.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import runpy
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PARALLEL = 4
TIMEOUT = 20.0


def _preload(targets: set[str]) -> None:
    """Import every target's dependencies; leave the targets themselves unimported."""
    modules = sorted(t for t in targets if not t.endswith(".py"))
    for target in sorted(targets - set(modules)):  # a script: only what its top level imports
        path = REPO / target
        sys.path.insert(0, str(path.parent))
        for node in ast.parse(path.read_text()).body:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level
                else [])
            for name in names:
                try:
                    importlib.import_module(name)
                except Exception:  # noqa: BLE001 -- the child will report it, as python would
                    pass
        del sys.path[0]
    for target in modules:
        importlib.import_module(target)
    for target in modules:  # second pass: one target may import another
        package, _, name = target.rpartition(".")
        sys.modules.pop(target, None)
        if package and hasattr(sys.modules[package], name):
            delattr(sys.modules[package], name)


def _child(target: str, argv: list[str], out: str, err: str) -> None:
    """In the forked child: become ``python -m target argv`` and never return."""
    code = 1
    try:
        for fd, path, flags in ((0, os.devnull, os.O_RDONLY),
                                (1, out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                (2, err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
            os.dup2(os.open(path, flags, 0o600), fd)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            if target.endswith(".py"):
                path = REPO / target
                sys.argv = [str(path), *argv]
                sys.path[0] = str(path.parent)
                runpy.run_path(str(path), run_name="__main__")
            else:
                sys.argv = [target, *argv]
                sys.path[0] = str(REPO)
                runpy.run_module(target, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def main() -> int:
    runs = json.load(sys.stdin)
    os.chdir(REPO)
    sys.path.insert(0, str(REPO))
    _preload({r["target"] for r in runs})
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        pending = list(enumerate(runs))
        running: dict[int, tuple[int, float]] = {}  # pid -> (index, start)
        killed: set[int] = set()
        while pending or running:
            while pending and len(running) < PARALLEL:
                index, run = pending.pop(0)
                out, err = f"{tmp}/{index}.out", f"{tmp}/{index}.err"
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    _child(run["target"], run["argv"], out, err)
                running[pid] = (index, time.monotonic())
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                now = time.monotonic()
                for other, (_, start) in running.items():
                    if now - start > TIMEOUT and other not in killed:
                        os.kill(other, signal.SIGKILL)
                        killed.add(other)
                time.sleep(0.005)
                continue
            index, start = running.pop(pid)
            run = runs[index]
            stderr = Path(f"{tmp}/{index}.err").read_text(errors="replace")
            if pid in killed:
                stderr += f"\n(still running after {TIMEOUT:.0f} s: killed)"
            results.append({
                "key": run["key"],
                "status": os.waitstatus_to_exitcode(status),
                "stdout": Path(f"{tmp}/{index}.out").read_text(errors="replace"),
                "stderr": stderr,
                "seconds": time.monotonic() - start,
            })
    json.dump(results, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
