"""Repository conventions that CI keeps: notebooks committed without outputs, no machine paths."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ["tls12", "netsim", "sslsplit", "sine", "reverse_ssl"]


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
