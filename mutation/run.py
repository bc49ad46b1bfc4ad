#!/usr/bin/env python3
"""Mutation testing of the safety checks, one group at a time, with mutmut 3.

A *group* (``mutation/groups/<group>.toml``) names the functions that carry a security or
correctness check (for example the record layer's MAC/padding check), the test files that
guard them, and the surviving mutants that were judged harmless, each with a reason.  For
each group this runner

1. copies the working tree (git-tracked and untracked-but-not-ignored files, plus the built
   C extension) into its own scratch directory ``build/mutation/<group>/``, so groups can run
   in parallel and the working tree is never touched;
2. writes a ``[tool.mutmut]`` section into the scratch copy's ``pyproject.toml`` that
   mutates only the group's source files and runs only the group's tests, plus a pytest
   plugin that makes Hypothesis deadline-free and derandomized (same examples every mutant);
3. runs ``mutmut run`` restricted to the mutants of the group's target functions (mutmut's
   stats run maps each function to the tests that execute it, so each mutant runs only
   those tests);
4. reads every target mutant's verdict and diff, matches survivors against the group's
   ``[[accepted]]`` list by a key that survives unrelated edits -- module, function, and the
   mutated line's text before and after -- and writes ``results/mutation/<group>.json`` and
   the combined ``results/mutation/report.csv`` and ``report.md``.

The exit status is 1 when a surviving mutant is neither killed nor accepted (an
*unexplained survivor*) or a group could not run; accepted entries that no longer match any
survivor are reported as *stale* (and fail the run with ``--strict``).

Score (true by construction from the verdict counts, not a measurement):
``(killed + timed out) / (mutants - accepted - not run)``; *not run* is 0 in a complete run.
A timed-out mutant counts as detected: the change made the tests hang instead of pass.

Examples::

    .venv/bin/python mutation/run.py tls12
    .venv/bin/python mutation/run.py --all --parallel 2
    .venv/bin/python mutation/run.py --list
    .venv/bin/python mutation/run.py --report-only      # rebuild report.md/csv from the JSON
"""

from __future__ import annotations

import argparse
import ast
import datetime as _dt
import fcntl
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # group_file, report beside this script
from group_file import (  # noqa: E402
    ROOT,
    SEP,
    Accepted,
    Group,
    GroupError,
    _norm,
    list_groups,
    load_group,
)
from report import pct, render_markdown, score, write_csv  # noqa: E402

SCRATCH_DIR = ROOT / "build" / "mutation"
RESULTS_DIR = ROOT / "results" / "mutation"
# Every package of the library is copied into mutmut's ``mutants/`` tree (only the group's
# files are mutated) so the tests never import the live working tree, which other edits
# may be changing while a run is under way.
LIBRARY_PACKAGES = ["tls12", "netsim", "sslsplit", "sine", "reverse_ssl", "sslacc_sim", "webalps_sim"]
# Data the tests read at run time, relative to the repository root.
ALSO_COPY = ["benchmarks", "notebooks", "docs", "README.md", "Makefile", "setup.py"]
PLUGIN = "mutation_pytest_plugin"
PLUGIN_SOURCE = '''"""Written by mutation/run.py into its scratch copy; loaded with -p."""
from hypothesis import HealthCheck, settings

settings.register_profile(
    "mutation", deadline=None, derandomize=True, database=None,
    suppress_health_check=list(HealthCheck),
)
settings.load_profile("mutation")
'''

# mutmut verdicts folded into the report's columns.
KILLED = {"killed", "caught by type check"}
TIMED_OUT = {"timeout", "segfault"}  # -9/-11: the CPU-time limit killed the worker
SURVIVED = {"survived", "no tests", "suspicious", "skipped"}


def _tree_files() -> list[str]:
    """Files of the working tree as a fresh clone plus local edits would have them."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT, check=True, capture_output=True,
        ).stdout
        files = [f for f in out.decode().split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "build", "results", "__pycache__", ".hypothesis", ".pytest_cache"}
        files = [
            str(p.relative_to(ROOT)) for p in ROOT.rglob("*")
            if p.is_file() and not skip.intersection(p.relative_to(ROOT).parts)
        ]
    # The built C extensions are ignored by git but the tests import them.
    files += [str(p.relative_to(ROOT)) for p in (ROOT / "tls12").glob("_recordcrypto*.so")]
    files += [str(p.relative_to(ROOT)) for p in (ROOT / "sine").glob("_chaincrypto*.so")]
    return files


def make_scratch(group: Group) -> Path:
    """Copy the tree into ``build/mutation/<group>/`` and configure mutmut there."""
    scratch = SCRATCH_DIR / group.name
    if scratch.exists():
        shutil.rmtree(scratch)
    scratch.mkdir(parents=True)
    for rel in _tree_files():
        src = ROOT / rel
        if not src.is_file():
            continue  # deleted in the working tree but still tracked
        dst = scratch / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
    # A pytest plugin for the scratch copy only: Hypothesis without deadlines (mutmut's
    # trampolines and a busy machine slow every call down; a deadline would fail the clean
    # run) and derandomized, so every mutant meets the same examples and reruns agree.
    (scratch / f"{PLUGIN}.py").write_text(PLUGIN_SOURCE, encoding="utf-8")
    # pytest-timeout turns a mutant that makes a test wait forever (on a socket, a queue)
    # into a failure; mutmut's own limit only counts CPU time.
    pytest_args = ["-p", "no:cacheprovider", "-p", PLUGIN, "--timeout=120", *group.pytest_args]
    config = {
        "source_paths": LIBRARY_PACKAGES,
        "only_mutate": group.files,
        "also_copy": [*ALSO_COPY, f"{PLUGIN}.py"],
        "pytest_add_cli_args": pytest_args,
        "pytest_add_cli_args_test_selection": group.tests,
        # The scratch copy lives inside the repository's build/: git would answer for the
        # working tree, not for this copy.
        "use_git_change_detection": False,
        "use_setproctitle": False,
    }
    lines = ["", "[tool.mutmut]"] + [f"{k} = {json.dumps(v)}" for k, v in config.items()]
    with open(scratch / "pyproject.toml", "a", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return scratch


# --- running mutmut --------------------------------------------------------------------------


def _mutmut_bin() -> list[str]:
    exe = Path(sys.executable).parent / "mutmut"
    if not exe.exists():
        raise GroupError(
            "mutmut is not installed in this interpreter's environment: "
            "pip install -e '.[test]' (or make venv)"
        )
    return [str(exe)]


def run_mutmut(group: Group, scratch: Path, max_children: int, log: Path) -> int:
    """Run mutmut in the scratch copy; stream a progress line now and then; return its status."""
    cmd = [*_mutmut_bin(), "run", "--max-children", str(max_children)]
    cmd += [t.mutmut_glob() for t in group.targets]
    env = dict(os.environ)
    env.update(group.env)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("PYTHONPATH", None)
    last = 0.0
    with open(log, "w", encoding="utf-8") as out:
        out.write("$ " + shlex.join(cmd) + "\n")
        out.flush()
        proc = subprocess.Popen(
            cmd, cwd=scratch, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, errors="replace", bufsize=1,
        )
        assert proc.stdout is not None
        for chunk in proc.stdout:
            out.write(chunk)
            # mutmut redraws one status line with \r: print its latest state every 20 s.
            status = chunk.rstrip("\n").split("\r")[-1].strip()
            now = time.monotonic()
            if status and now - last > 20:
                print(f"[{group.name}] {status[:150]}", flush=True)
                last = now
        return proc.wait()


def collect(group: Group, scratch: Path) -> list[dict[str, Any]]:
    """Read verdicts and diffs of the target mutants from the scratch copy's ``mutants/``."""
    code = r"""
import json, sys
from mutmut.mutation.data import SourceFileMutationData
from mutmut.mutation.diff_apply import get_diff_for_mutant
from mutmut.stats import status_by_exit_code
out = []
for path in json.loads(sys.argv[1]):
    m = SourceFileMutationData(path=path)
    m.load()
    for key, code in m.exit_code_by_key.items():
        try:
            diff = get_diff_for_mutant(key, path=path)
        except Exception as exc:  # a mutant whose function cannot be read back
            diff = f"<no diff: {exc}>"
        out.append({"path": path, "name": key, "exit_code": code,
                    "status": status_by_exit_code[code], "diff": diff})
print(json.dumps(out))
"""
    proc = subprocess.run(
        [sys.executable, "-c", code, json.dumps(group.files)],
        cwd=scratch, capture_output=True, text=True,
    )
    if proc.returncode != 0:
        raise GroupError(f"could not read mutmut's results: {proc.stderr.strip()[-2000:]}")
    mutants = []
    sources = {f: (ROOT / f).read_text(encoding="utf-8").splitlines() for f in group.files}
    spans = {f: _function_spans(ROOT / f) for f in group.files}
    for m in json.loads(proc.stdout):
        module, function = _split_name(m["name"])
        if not any(t.matches(module, function) for t in group.targets):
            continue
        before, after = _diff_lines(m["diff"])
        line = _locate(sources[m["path"]], spans[m["path"]].get(function), before, m["diff"])
        mutants.append({
            "module": module, "function": function, "path": m["path"], "line": line,
            "before": before, "after": after, "status": m["status"],
            "mutmut_name": m["name"], "diff": _readable(m["diff"]),
        })
    mutants.sort(key=lambda m: (m["module"], m["line"] or 0, m["function"], m["mutmut_name"]))
    return mutants


def _split_name(name: str) -> tuple[str, str]:
    """``pkg.mod.x\u01c1Cls\u01c1meth__mutmut_3`` -> (``pkg.mod``, ``Cls.meth``)."""
    mangled = name.partition("__mutmut_")[0]
    module, _, fn = mangled.rpartition(".")
    if fn.startswith(f"x{SEP}"):
        cls, _, meth = fn[2:].partition(SEP)
        return module, f"{cls}.{meth}"
    return module, fn[2:]


#: mutmut's mutant of an empty string literal: ``""`` becomes a four-letter marker string.
#: Group files, results and printouts spell that marker :data:`EMPTY_STRING_MUTANT` instead, so
#: that an accepted entry reads as what it is (a mutated empty string), not as a placeholder.
_MUTMUT_EMPTY_MARKER = "X" * 4
EMPTY_STRING_MUTANT = "<mutmut: empty string>"


def _readable(line: str) -> str:
    """A mutated line as group files spell it (:data:`EMPTY_STRING_MUTANT` for mutmut's marker)."""
    return line.replace(_MUTMUT_EMPTY_MARKER, EMPTY_STRING_MUTANT)


def _diff_lines(diff: str) -> tuple[str, str]:
    """The changed lines of a unified diff, stripped and joined: (before, after)."""
    minus, plus = [], []
    for line in diff.splitlines():
        if line.startswith(("---", "+++", "@@")):
            continue
        if line.startswith("-"):
            minus.append(line[1:].strip())
        elif line.startswith("+"):
            plus.append(line[1:].strip())
    return " \u23ce ".join(minus), _readable(" \u23ce ".join(plus))


def _function_spans(path: Path) -> dict[str, tuple[int, int]]:
    """First line (decorators included) and last line of every function and method."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    spans: dict[str, tuple[int, int]] = {}

    def span(node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[int, int]:
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        return first, node.end_lineno or node.lineno

    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            spans[node.name] = span(node)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    spans[f"{node.name}.{item.name}"] = span(item)
    return spans


def _locate(lines: list[str], span: tuple[int, int] | None, before: str, diff: str) -> int | None:
    """Line number (1-based) of the mutated line in the source, for display only.

    The diff is of the function alone, so its first removed line's offset plus the
    function's first line is about the file line; the nearest line with the same text wins.
    """
    if span is None:
        return None
    first = _norm(before.split(" \u23ce ")[0])
    offset = None
    for line in diff.splitlines():
        m = re.match(r"@@ -(\d+)", line)
        if m:
            offset = int(m.group(1)) - 1
            continue
        if offset is None or line.startswith(("---", "+++")):
            continue
        if line.startswith("-"):
            break
        if not line.startswith("+"):
            offset += 1
    guess = span[0] + (offset or 0)
    matches = [n for n in range(span[0], min(span[1], len(lines)) + 1) if _norm(lines[n - 1]) == first]
    return min(matches, key=lambda n: abs(n - guess)) if matches else span[0]


# --- classification and reports --------------------------------------------------------------


def classify(group: Group, mutants: list[dict[str, Any]]) -> None:
    """Mark each survivor accepted (with its reason) or unexplained, in place."""
    by_key: dict[tuple[str, str, str, str], Accepted] = {}
    for a in group.accepted:
        by_key.setdefault(a.key(), a)
    for m in mutants:
        status = m["status"]
        if status in KILLED:
            m["verdict"] = "killed"
        elif status in TIMED_OUT:
            m["verdict"] = "timed out"
        elif status in SURVIVED:
            key = (m["module"], m["function"], _norm(m["before"]), _norm(m["after"]))
            entry = by_key.get(key)
            if entry is not None:
                entry.used += 1
                m["verdict"] = "accepted"
                m["reason"] = entry.reason
            else:
                m["verdict"] = "unexplained"
        else:  # "not checked", "check was interrupted by user"
            m["verdict"] = "not run"


def summarize(mutants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for m in mutants:
        r = rows.setdefault(m["module"], {
            "module": m["module"], "mutants": 0, "killed": 0, "survived": 0, "timed_out": 0,
            "accepted": 0, "unexplained": 0, "not_run": 0,
        })
        r["mutants"] += 1
        v = m["verdict"]
        if v == "killed":
            r["killed"] += 1
        elif v == "timed out":
            r["timed_out"] += 1
        elif v == "not run":
            r["not_run"] += 1
        else:
            r["survived"] += 1
            r["accepted" if v == "accepted" else "unexplained"] += 1
    for r in rows.values():
        r["score"] = score(r)
    return list(rows.values())


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def provenance(command: list[str]) -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        tool = f"mutmut {version('mutmut')}"
    except PackageNotFoundError:
        tool = "mutmut (not installed)"
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    return {
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "git_revision": _git("rev-parse", "HEAD") + ("+dirty" if dirty and dirty != "unknown" else ""),
        "tool": tool,
        "python": sys.version.split()[0],
        "command": shlex.join(command),
    }


def write_group_json(group: Group, mutants: list[dict[str, Any]], seconds: float, prov: dict[str, Any]) -> Path:
    stale = [
        {"module": a.module, "function": a.function, "before": a.before, "after": a.after, "reason": a.reason}
        for a in group.accepted if a.used == 0
    ]
    doc = {
        "group": group.name,
        "description": group.description,
        "group_file": str(group.path.relative_to(ROOT)),
        "targets": [f"{t.module}:{t.qualname}" for t in group.targets],
        "tests": group.tests,
        "env": group.env,
        "provenance": {**prov, "wall_seconds": round(seconds, 1)},
        "score_definition": "(killed + timed out) / (mutants - accepted - not run); true by construction",
        "modules": summarize(mutants),
        "stale_accepted": stale,
        "mutants": [{k: v for k, v in m.items() if k != "diff"} | {"diff": m["diff"]} for m in mutants],
    }
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    out = RESULTS_DIR / f"{group.name}.json"
    out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return out


def write_combined_report() -> tuple[Path, Path]:
    """``report.csv`` and ``report.md`` from every ``results/mutation/<group>.json`` present."""
    docs = []
    for p in sorted(RESULTS_DIR.glob("*.json")):
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            continue
        if isinstance(doc, dict) and "group" in doc and "modules" in doc:
            docs.append(doc)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = RESULTS_DIR / "report.csv", RESULTS_DIR / "report.md"
    write_csv(docs, csv_path)
    md_path.write_text(render_markdown(docs), encoding="utf-8")
    return csv_path, md_path


# --- driver ----------------------------------------------------------------------------------


@dataclass
class Outcome:
    group: str
    ok: bool
    message: str
    unexplained: int = 0
    stale: int = 0
    lines: list[str] = field(default_factory=list)


def run_group(name: str, max_children: int, command: list[str], keep: bool) -> Outcome:
    """Run one group under an exclusive lock on ``build/mutation/<group>.lock``."""
    SCRATCH_DIR.mkdir(parents=True, exist_ok=True)
    with open(SCRATCH_DIR / f"{name}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return Outcome(name, False, f"group {name} is already running (build/mutation/{name}.lock is held)")
        return _run_group(name, max_children, command, keep)


def _run_group(name: str, max_children: int, command: list[str], keep: bool) -> Outcome:
    start = time.monotonic()
    try:
        group = load_group(name)
        print(f"[{name}] copying the tree to build/mutation/{name}/", flush=True)
        scratch = make_scratch(group)
        log = SCRATCH_DIR / f"{name}.log"
        print(f"[{name}] mutmut run over {len(group.targets)} target(s), tests: {' '.join(group.tests)} "
              f"(log: {log.relative_to(ROOT)})", flush=True)
        status = run_mutmut(group, scratch, max_children, log)
        if status != 0:
            tail = "".join(log.read_text(encoding="utf-8", errors="replace").splitlines(True)[-25:])
            return Outcome(name, False, f"mutmut exited with {status}; last lines of {log.relative_to(ROOT)}:\n{tail}")
        mutants = collect(group, scratch)
        if not mutants:
            return Outcome(name, False, "mutmut produced no mutants for the group's targets")
        classify(group, mutants)
        seconds = time.monotonic() - start
        out = write_group_json(group, mutants, seconds, provenance(command))
        if not keep:
            shutil.rmtree(scratch, ignore_errors=True)
        rows = summarize(mutants)
        unexplained = [m for m in mutants if m["verdict"] in ("unexplained", "not run")]
        stale = [a for a in group.accepted if a.used == 0]
        lines = [f"  {r['module']}: {r['mutants']} mutants, {r['killed']} killed, {r['timed_out']} timed out, "
                 f"{r['accepted']} accepted, {r['unexplained']} unexplained, score {pct(r['score'])}" for r in rows]
        lines += [f"  UNEXPLAINED {m['path']}:{m['line']} {m['function']}: {m['before']!r} -> {m['after']!r} "
                  f"[{m['mutmut_name']}]" for m in unexplained]
        lines += [f"  STALE accepted entry {a.module}:{a.function}: {a.before!r} -> {a.after!r}" for a in stale]
        return Outcome(name, not unexplained, f"{out.relative_to(ROOT)} in {seconds:.0f} s",
                       len(unexplained), len(stale), lines)
    except GroupError as exc:
        return Outcome(name, False, str(exc))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Mutation testing of the safety checks (mutmut 3), one scratch copy per group.",
        epilog="Group files: mutation/groups/<group>.toml. Results: results/mutation/.",
    )
    parser.add_argument("groups", nargs="*", metavar="GROUP", help="groups to run (default: all)")
    parser.add_argument("--all", action="store_true", help="run every group (the default with no GROUP)")
    parser.add_argument("--list", action="store_true", help="list the groups and their targets, then exit")
    parser.add_argument("--parallel", type=int, default=1, metavar="N", help="groups run at once (default 1)")
    parser.add_argument("--max-children", type=int, default=2, metavar="N",
                        help="mutmut worker processes per group (default 2)")
    parser.add_argument("--keep-scratch", action="store_true", help="keep build/mutation/<group>/ afterwards")
    parser.add_argument("--strict", action="store_true", help="also fail on stale accepted entries")
    parser.add_argument("--report-only", action="store_true",
                        help="rebuild report.csv/report.md from results/mutation/*.json and exit")
    args = parser.parse_args(argv)
    if args.parallel < 1 or args.max_children < 1:
        parser.error("--parallel and --max-children must be at least 1")

    known = list_groups()
    if args.report_only:
        csv_path, md_path = write_combined_report()
        print(f"wrote {csv_path.relative_to(ROOT)} and {md_path.relative_to(ROOT)}")
        return 0
    if args.list:
        for name in known:
            try:
                g = load_group(name)
                print(f"{name}: {g.description}")
                for t in g.targets:
                    print(f"    {t.module}:{t.qualname}")
            except GroupError as exc:
                print(f"{name}: INVALID: {exc}")
        return 0
    names = args.groups or known
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(f"unknown group(s) {', '.join(unknown)}; known: {', '.join(known)}")

    command = ["mutation/run.py", *(argv if argv is not None else sys.argv[1:])]
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.parallel) as pool:
        outcomes = list(pool.map(lambda n: run_group(n, args.max_children, command, args.keep_scratch), names))
    csv_path, md_path = write_combined_report()
    failed = False
    for o in outcomes:
        ok = o.ok and not (args.strict and o.stale)
        failed |= not ok
        print(f"{'ok  ' if ok else 'FAIL'} {o.group}: {o.message}")
        for line in o.lines:
            print(line)
    print(f"wrote {csv_path.relative_to(ROOT)} and {md_path.relative_to(ROOT)} "
          f"({time.monotonic() - start:.0f} s wall, measured)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
