"""Repository conventions that CI keeps: notebooks committed without outputs, no machine paths."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ["tls12", "netsim", "testbed", "sslsplit", "sine", "reverse_ssl", "sslacc_sim",
            "webalps_sim", "mutation", "docs"]


def test_notebooks_are_committed_without_outputs() -> None:
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert notebooks, "no notebooks found"
    for nb_path in notebooks:
        nb = json.loads(nb_path.read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                assert not cell.get("outputs") and cell.get("execution_count") is None, nb_path.name


def test_no_machine_paths_in_sources() -> None:
    pattern = re.compile(r"/(?:root|home/[a-z]+|work/main|tmp/scratch)/")
    offenders = []
    for pkg in PACKAGES + ["tests", "benchmarks", "notebooks"]:
        for path in (ROOT / pkg).rglob("*"):
            if path.suffix in {".py", ".md", ".ipynb", ".c"} and path.is_file() and path.name != "test_repository.py":
                if pattern.search(path.read_text(errors="replace")):
                    offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def _layout_table(text: str) -> str:
    start = text.index("## Layout")
    table = text[text.index("| floor | where |", start):]
    return table[:table.index("\n\n")]


def test_readme_and_architecture_notes_show_one_layout_table() -> None:
    """The README's layout table is the architecture notes' table, and it names every paper
    package and every room the layering test reads from paths."""
    readme = _layout_table((ROOT / "README.md").read_text())
    notes = _layout_table((ROOT / "docs" / "architecture.md").read_text())
    assert readme == notes
    for room in ("`tls12/`", "`netsim/`", "`testbed/`", "`<paper>/state.py`", "`<paper>/aio/`",
                 "`<paper>/model_*.py`", "`<paper>/experiments.py` or `experiments/`",
                 "`<paper>/params.py`", "`<paper>/errors.py`"):
        assert room in readme, room
    arch = (ROOT / "docs" / "architecture.md").read_text()
    for package in ("sslsplit/", "sslsplit/barnraising/", "sine/", "reverse_ssl/", "sslacc_sim/",
                    "webalps_sim/"):
        assert f"`{package}`" in arch and (ROOT / package).is_dir(), package
