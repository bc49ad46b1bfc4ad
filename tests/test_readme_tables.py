"""The README's result tables are rendered from the result files in ``docs/results/``.

``make readme`` copies the files that ``make reproduce`` and ``make benchmarks`` wrote into
``docs/results/`` and rewrites the README's generated blocks; this test fails if anyone edits a
number by hand or updates one side without the other.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _summarize() -> ModuleType:
    spec = importlib.util.spec_from_file_location("summarize", ROOT / "notebooks" / "summarize.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("summarize", module)
    spec.loader.exec_module(module)
    return module


def test_readme_tables_match_the_result_files() -> None:
    summarize = _summarize()
    problems = summarize.check((ROOT / "README.md").read_text(), ROOT / "docs" / "results")
    assert problems == [], "README is out of date with docs/results/: run `make readme`\n" + "\n".join(problems)


def test_every_quoted_file_is_used_and_every_row_says_its_kind() -> None:
    summarize = _summarize()
    src = summarize.Source(ROOT / "docs" / "results")
    blocks = summarize.render_all(src)
    on_disk = {str(p.relative_to(src.root)) for p in src.root.rglob("*") if p.is_file()}
    assert on_disk == src.used, "docs/results/ holds files no README row reads (or misses some)"
    kinds = ("measured", "modelled", "true by construction")
    for name, table in blocks.items():
        for line in table.splitlines()[2:]:
            assert any(k in line for k in kinds), f"{name}: row does not say what it is: {line}"


def test_a_changed_result_changes_the_readme(tmp_path: Path) -> None:
    """Edit one number in a copy of the snapshot: the check must notice (the test can fail)."""
    summarize = _summarize()
    snap = tmp_path / "results"
    shutil.copytree(ROOT / "docs" / "results", snap)
    path = snap / "benchmarks" / "sine.json"
    data = json.loads(path.read_text())
    data["verify"][0]["verify_MBps"] *= 2
    path.write_text(json.dumps(data))
    assert summarize.check((ROOT / "README.md").read_text(), snap) != []


def test_missing_result_file_is_a_clear_error(tmp_path: Path) -> None:
    summarize = _summarize()
    with pytest.raises(summarize.MissingResult, match="not found"):
        summarize.render_all(summarize.Source(tmp_path))
