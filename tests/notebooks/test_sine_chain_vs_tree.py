"""The "Chain vs tree" section of ``notebooks/sine.ipynb`` runs headless and writes its results.

Only that section runs here (the notebook's other sections time real servers and Squid, for
minutes): its cells, after a first cell that sets what the notebook's first cell sets
(``QUICK``, ``OUT``, the ``Agg`` backend), in a ``python3`` kernel as ``make reproduce`` runs
them. The section must write its CSV and PNG files, and print the issue's goal beside the
modelled result, each number labelled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import pandas as pd
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "notebooks" / "sine.ipynb"
HEADING = "## Chain vs tree"
OUTPUTS = ("chain_vs_tree_cpu.csv", "chain_vs_tree_overhead.csv", "chain_vs_tree_ranges.csv",
           "chain_vs_tree_goal.csv", "chain_vs_tree_breakdown.csv", "chain_vs_tree_ranges.png",
           "chain_vs_tree_first_byte.png")


def _section(nb: Any) -> list[Any]:
    """The cells from the section's heading to the next level-2 heading (or the end)."""
    cells = nb.cells
    start = next(i for i, c in enumerate(cells)
                 if c.cell_type == "markdown" and c.source.startswith(HEADING))
    end = next((i for i, c in enumerate(cells[start + 1:], start + 1)
                if c.cell_type == "markdown" and c.source.startswith("## ")), len(cells))
    return list(cells[start:end])


def _text(cell: Any) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out["output_type"] == "stream":
            parts.append(out["text"])
        elif out["output_type"] in ("execute_result", "display_data"):
            parts.append(out["data"].get("text/plain", ""))
    return "".join(parts)


def test_chain_vs_tree_section_runs_and_writes_its_results(tmp_path: Path) -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    setup = nbformat.v4.new_code_cell(
        "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
        "import pandas as pd\nfrom pathlib import Path\n"
        f"QUICK, OUT = True, Path({str(tmp_path)!r})\n")
    nb.cells = [setup, *_section(nb)]
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    for name in OUTPUTS:
        assert (tmp_path / name).stat().st_size > 0, name
    text = "".join(_text(c) for c in nb.cells)
    assert "goal <= 1.1" in text and "goal >= 90" in text and "[modelled]" in text
    assert "(measured" in text and "(true by construction)" in text
    goal = pd.read_csv(tmp_path / "chain_vs_tree_goal.csv")
    ranges = pd.read_csv(tmp_path / "chain_vs_tree_ranges.csv")
    assert len(goal) == ranges.client_kbps.nunique() == 3
    assert ranges.kind.str.contains("measured in this run").all()  # the calibration is named
