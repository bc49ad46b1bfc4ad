"""Every README number says where it comes from, and no row drops points without saying so.

* The ``sslsplit``, ``others``, ``systems`` and ``driver`` tables end in a ``source`` cell:
  each file the row read, as ``docs/results/<file>``, and the command that wrote it.  The
  tests check the cells against the files the rows really read, and each command against
  what really writes the file (the Makefile's benchmark line, ``run_all.py``'s step, the
  notebook of that results folder).
* The measured link-testbed rows: the held-out error with the relay-limited points left out
  must name every point left out and give the all-points figure beside it -- recomputed here
  from the CSV, independently of the summary code.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import re
import statistics
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / "docs" / "results"
PATH_IN_CELL = re.compile(r"`docs/results/([^`]+)`")


def _summarize() -> ModuleType:
    spec = importlib.util.spec_from_file_location("summarize", ROOT / "notebooks" / "summarize.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("summarize", module)
    spec.loader.exec_module(module)
    return module


def _rows_of(summarize: ModuleType, maker_name: str) -> tuple[list[list[str]], list[list[str]]]:
    """The table rows one row maker makes from docs/results, and the files of each."""
    src = summarize.Source(SNAPSHOT)
    maker = next(r for r in summarize.ROWS if r.cells.__name__ == maker_name)
    src.begin_row()
    made = maker.cells(src)
    rows = made if made and isinstance(made[0], list) else [made]
    return rows, src.sources(len(rows))


# --- the source cells --------------------------------------------------------------------------


@pytest.mark.parametrize("maker, first_cell, files", [
    ("_measured_links", "SINE, Fig. 4", {"sine/figure4_measured.csv"}),
    ("_measured_links", "SINE, Fig. 6", {"sine/figure6_measured.csv"}),
    ("_driver_sine", "SINE Fig. 5 (latency vs client bandwidth)", {"sine/figure5_driver.csv"}),
    ("_failover", "SSLACC, failover",
     {"sslacc/failover_latency.csv", "benchmarks/sslacc_failover.json"}),
    ("_sslacc_campaign", "SSLACC, random-instant faults", {"benchmarks/sslacc_campaign.json"}),
    ("_held_out", "§6.3", {"sslsplit/agreement.csv", "sslsplit/held_out_agreement.csv",
                           "sslsplit/sweep_fit.csv"}),
])
def test_each_row_is_credited_with_exactly_the_files_it_read(maker: str, first_cell: str,
                                                             files: set[str]) -> None:
    summarize = _summarize()
    rows, sources = _rows_of(summarize, maker)
    (found,) = [set(s) for r, s in zip(rows, sources, strict=True) if r[0] == first_cell]
    assert found == files
    cell = summarize.source_cell(sorted(found))
    assert set(PATH_IN_CELL.findall(cell)) == files


def test_every_sourced_row_names_existing_files_and_their_commands() -> None:
    summarize = _summarize()
    rows_seen = 0
    for maker in summarize.ROWS:
        if maker.table not in summarize.SOURCED_TABLES:
            continue
        src = summarize.Source(SNAPSHOT)
        src.begin_row()
        try:
            made = maker.cells(src)
        except summarize.MissingResult:
            continue     # a row whose inputs this snapshot lacks: the README check reports it
        rows = made if made and isinstance(made[0], list) else [made]
        for files in src.sources(len(rows)):
            cell = summarize.source_cell(files)
            named = PATH_IN_CELL.findall(cell)
            assert named and set(named) == set(files), cell
            assert all((SNAPSHOT / rel).is_file() for rel in named)
            assert all(summarize.writer_of(rel) in cell for rel in named)
            rows_seen += 1
    assert rows_seen >= 20


def _makefile_lines() -> list[str]:
    return [line.strip().replace("$(PY) ", "python ", 1)
            for line in (ROOT / "Makefile").read_text().splitlines()]


def _run_all() -> ModuleType:
    spec = importlib.util.spec_from_file_location("run_all", ROOT / "notebooks" / "run_all.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_named_command_is_what_writes_the_file() -> None:
    summarize = _summarize()
    files = sorted(str(p.relative_to(SNAPSHOT)) for p in SNAPSHOT.rglob("*")
                   if p.is_file() and p.name != summarize.PROVENANCE_FILE)
    assert files
    for rel in files:
        writer = summarize.writer_of(rel)
        command = re.match(r"`([^`]+)`", writer)
        assert command, writer
        if rel.startswith("benchmarks/"):
            # the very line of `make benchmarks`, and it names this output file
            assert command.group(1) in _makefile_lines() and f"results/{rel}" in command.group(1)
            argv = command.group(1).split()  # python SCRIPT ... or python -m MODULE ...
            target = argv[2].replace(".", "/") + ".py" if argv[1] == "-m" else argv[1]
            assert (ROOT / target).is_file(), target
        elif rel.startswith("mutation/"):
            # make mutation's report, written by the mutation runner under results/mutation/
            assert "make mutation" in writer and "mutation/run.py" in command.group(1)
            assert rel == "mutation/report.csv"  # the only file of the run the README quotes
            runner = (ROOT / "mutation" / "run.py").read_text()
            assert 'RESULTS_DIR / "report.csv"' in runner and '"results" / "mutation"' in runner
            assert any(line.startswith("python mutation/run.py") for line in _makefile_lines())
        elif rel in summarize.REPRODUCE_STEPS:
            run_all = _run_all()
            assert rel in {str(f.relative_to(run_all.RESULTS)) for f in run_all.STEP_FILES}
            # the command names the file, or the folder it writes the file into
            assert (f"results/{rel}" in command.group(1)
                    or command.group(1).endswith(f"--out results/{rel.rsplit('/', 1)[0]}"))
        else:
            folder, name = rel.split("/", 1)
            notebook = ROOT / "notebooks" / f"{folder}.ipynb"
            assert f"notebooks/{folder}.ipynb" in writer and notebook.is_file()
            text = notebook.read_text()
            assert f'start_run(\\"{folder}\\"' in text       # its results folder
            stem_suffix = name[name.index("_"):] if "_" in name else name
            assert name in text or "}" + stem_suffix in text, f"{notebook.name} never writes {name}"


def test_a_file_nothing_writes_is_an_error() -> None:
    summarize = _summarize()
    with pytest.raises(summarize.MissingResult, match="no command"):
        summarize.writer_of("nowhere/made_up.csv")
    with pytest.raises(summarize.MissingResult, match="no command"):
        summarize.writer_of("benchmarks/made_up.json")


# --- rows that leave points out ----------------------------------------------------------------


def _independent(rel: str) -> tuple[int, int, float, float, float, float, list[dict[str, str]]]:
    """Held-out rows of a measured figure: (held-out, kept, before, after over the kept ones,
    before, after over all of them, the relay-limited ones), straight from the CSV."""
    with (SNAPSHOT / rel).open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["half"] == "held-out"]
    limited = [r for r in rows if r["relay_limited"] == "True"]
    kept = [r for r in rows if r["relay_limited"] != "True"]

    def err(rs: list[dict[str, str]], col: str) -> float:
        return 100 * statistics.mean(abs(float(r[col]) - 1) for r in rs)

    return (len(rows), len(kept), err(kept, "model_over_measured"), err(kept, "fit_over_measured"),
            err(rows, "model_over_measured"), err(rows, "fit_over_measured"), limited)


@pytest.mark.parametrize("rel, label, x", [
    ("sine/figure4_measured.csv", "SINE, Fig. 4", lambda r: f" at {float(r['size_bytes']):,.0f} B"),
    ("sine/figure6_measured.csv", "SINE, Fig. 6", lambda r: f", {r['cache']} cache"),
])
def test_a_row_that_leaves_points_out_names_them_and_gives_all_points(rel: str, label: str,
                                                                       x: object) -> None:
    held, kept, before, after, before_all, after_all, limited = _independent(rel)
    assert limited, "the snapshot has relay-limited held-out points (the case under test)"
    rows, _ = _rows_of(_summarize(), "_measured_links")
    (row,) = [r for r in rows if r[0] == label]
    what, ours = row[1], row[2]
    assert f"{before:.1f} % → {after:.1f} % ({kept} of {held} held-out points)" in ours
    assert f"all {held}: {before_all:.1f} % → {after_all:.1f} %" in ours
    assert f"{len(limited)} of the {held} held-out points left out (relay-limited" in what
    for r in limited:
        assert r["protocol"] + x(r) in what              # type: ignore[operator]


def test_a_row_that_keeps_every_point_says_so() -> None:
    with (SNAPSHOT / "sine" / "figure5_measured.csv").open(newline="") as fh:
        held = [r for r in csv.DictReader(fh) if r["half"] == "held-out"]
    assert all(r["relay_limited"] != "True" for r in held)
    rows, _ = _rows_of(_summarize(), "_measured_links")
    (row,) = [r for r in rows if r[0] == "SINE, Fig. 5"]
    assert f"(all {len(held)} held-out points)" in row[2] and "left out" not in row[1]


@pytest.mark.parametrize("rel, label", [
    ("sslsplit/figure12_measured.csv", "SSL splitting, Fig. 12"),
    ("sine/figure4_measured.csv", "SINE, Fig. 4"),
    ("sine/figure5_measured.csv", "SINE, Fig. 5"),
    ("sine/figure6_measured.csv", "SINE, Fig. 6"),
])
def test_the_readme_quotes_no_partial_figure_alone(rel: str, label: str) -> None:
    """The README as committed (after ``make readme``): a link-testbed row whose held-out
    error leaves points out carries the all-points figure, computed here from the CSV."""
    with (SNAPSHOT / rel).open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["half"] == "held-out"]
    limited = [r for r in rows if r.get("relay_limited") == "True"]
    (line,) = [x for x in (ROOT / "README.md").read_text().splitlines()
               if x.startswith(f"| {label} |") and "namespace link testbed" in x]
    if limited:
        before = 100 * statistics.mean(abs(float(r["model_over_measured"]) - 1) for r in rows)
        after = 100 * statistics.mean(abs(float(r["fit_over_measured"]) - 1) for r in rows)
        assert f"all {len(rows)}: {before:.1f} % → {after:.1f} %" in line, line
        assert f"{len(limited)} of the {len(rows)} held-out points left out" in line, line
    else:
        assert f"(all {len(rows)} held-out points)" in line, line


def test_provenance_of_the_snapshot_when_present_matches_its_files() -> None:
    """``docs/results/PROVENANCE.json`` (written by ``make readme``) names every shipped file
    with the hash of the copy beside it."""
    import hashlib

    summarize = _summarize()
    path = SNAPSHOT / summarize.PROVENANCE_FILE
    files = {str(p.relative_to(SNAPSHOT)) for p in SNAPSHOT.rglob("*")
             if p.is_file() and p != path}
    if not path.is_file():
        pytest.fail(f"docs/results/{summarize.PROVENANCE_FILE} missing: run `make readme`")
    record = json.loads(path.read_text())["files"]
    assert set(record) == files
    for rel, entry in record.items():
        assert entry["sha256"] == hashlib.sha256((SNAPSHOT / rel).read_bytes()).hexdigest()


def test_every_reproduce_step_file_is_written_by_run_all() -> None:
    """A file credited to a step of ``make reproduce`` is the one ``run_all.py`` writes, and
    its ``main`` runs that step before the notebooks."""
    import ast

    summarize = _summarize()
    run_all = _run_all()
    assert summarize.REPRODUCE_STEPS
    steps = {str(f.relative_to(run_all.RESULTS)): step for f, step in run_all.STEP_FILES.items()}
    main = next(n for n in ast.walk(ast.parse((ROOT / "notebooks" / "run_all.py").read_text()))
                if isinstance(n, ast.FunctionDef) and n.name == "main")
    calls = [n.func.id for n in ast.walk(main)
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    for rel, command in summarize.REPRODUCE_STEPS.items():
        assert rel in steps, rel
        assert (command.endswith(f"--json results/{rel}")
                or command.endswith(f"--out results/{rel.rsplit('/', 1)[0]}"))
        assert steps[rel] in calls
        assert calls.index(steps[rel]) < calls.index("run_notebook")


def _fig28_snapshot(tmp_path: Path, costs_source: str | None) -> tuple[Path, dict]:
    """docs/results with a measured costs file and the Figures 28/29 CSV labelled with
    ``costs_source`` (``None``: the costs file's own)."""
    import shutil

    from sslacc_sim.aio.measure import write_costs

    snap = tmp_path / "results"
    shutil.copytree(SNAPSHOT, snap)
    doc = write_costs(snap / "sslacc" / "cluster_costs.json", quick=True)
    path = snap / "sslacc" / "fig28_29_paper_era.csv"
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, [*rows[0], "costs_source"])
        writer.writeheader()
        for r in rows:
            writer.writerow({**r, "costs_source": costs_source or doc["costs"]["source"]})
    return snap, doc


def test_fig28_29_rows_quote_the_measured_costs_they_used(tmp_path: Path) -> None:
    summarize = _summarize()
    snap, doc = _fig28_snapshot(tmp_path, None)
    src = summarize.Source(snap)
    maker = next(r for r in summarize.ROWS if r.cells.__name__ == "_fig28_29")
    src.begin_row()
    rows = maker.cells(src)
    kind = rows[0][-1]
    assert f"interrupt {doc['costs']['interrupt'] * 1e6:.1f} µs" in kind
    assert doc["costs"]["source"] in kind and doc["provenance"]["command"] in kind
    assert "an assumption" in kind and "typed in" not in kind
    assert "sslacc/cluster_costs.json" in src.reads


def test_fig28_29_rows_refuse_costs_from_another_run(tmp_path: Path) -> None:
    summarize = _summarize()
    snap, _ = _fig28_snapshot(tmp_path, "measured (quick, 1999-01-01)")
    maker = next(r for r in summarize.ROWS if r.cells.__name__ == "_fig28_29")
    with pytest.raises(summarize.MissingResult, match="not cluster_costs.json"):
        maker.cells(summarize.Source(snap))


def test_fig28_29_rows_made_with_the_typed_in_table_say_so(tmp_path: Path) -> None:
    summarize = _summarize()
    snap, _ = _fig28_snapshot(tmp_path, "default")
    (snap / "sslacc" / "cluster_costs.json").unlink()
    src = summarize.Source(snap)
    maker = next(r for r in summarize.ROWS if r.cells.__name__ == "_fig28_29")
    src.begin_row()
    rows = maker.cells(src)
    assert "typed in" in rows[0][-1] and "not measured by this run" in rows[0][-1]
    assert src.reads == ["sslacc/fig28_29_paper_era.csv"]
