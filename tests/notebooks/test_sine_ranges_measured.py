"""The "Chain vs tree, measured over the namespace testbed" section of ``notebooks/sine.ipynb``.

Its cells run headless in a ``python3`` kernel, as ``make reproduce`` runs them, after a first
cell that sets what the notebook's earlier cells set (``QUICK``, ``OUT``, the ``Agg`` backend,
the CPU calibration ``cpu_model`` and ``tree_key``) and shrinks the quick setup to a 4 MiB file
at 4 KiB with 256 KiB ranges and one round (a real testbed run, about 15 s; needs root,
iproute2 and nginx, and fails otherwise: the section would only print why it did not run).
The section must write its CSV and PNG files and print the goal with every number labelled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import pandas as pd
from nbclient import NotebookClient

from sine.aio.cache_run import nginx_binary
from testbed.linux.linktestbed import check_available

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "notebooks" / "sine.ipynb"
HEADING = "## Chain vs tree, measured over the namespace testbed"
OUTPUTS = ("chain_vs_tree_measured_raw.csv", "chain_vs_tree_measured.csv",
           "chain_vs_tree_measured_goal.csv", "chain_vs_tree_measured.png")
SETUP = """\
import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt
import pandas as pd
from pathlib import Path
from sine.algorithms import SigAlg, SigningKey
from sine.experiments import ranges as rx
from sine.experiments import ranges_link as rlx
QUICK, OUT = True, Path({out!r})
tree_key = SigningKey.generate(SigAlg.RSA_PSS_SHA256)
cpu_model = rx.calibration(rx.measure_verify_cpu(True, repeats=1, group_sizes=(4096,),
                                                 key=tree_key))
rlx.QUICK = rlx.Setup(4 * 2**20, (4096,), repeats=1, range_bytes=256 * 1024)
"""


def _section(nb: Any) -> list[Any]:
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


def test_measured_section_runs_and_writes_its_results(tmp_path: Path) -> None:
    check_available()  # fails (never skips) with the reason
    nginx_binary()
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nb.cells = [nbformat.v4.new_code_cell(SETUP.format(out=str(tmp_path))), *_section(nb)]
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    for name in OUTPUTS:
        assert (tmp_path / name).stat().st_size > 0, name
    text = "".join(_text(c) for c in nb.cells)
    assert "not run" not in text
    assert "[measured, 4 MiB]" in text and "[modelled, 4 MiB]" in text
    assert "[modelled, 1 GB]" in text and "goal <= 1.1" in text and "goal >= 90" in text
    table = pd.read_csv(tmp_path / "chain_vs_tree_measured.csv")
    assert set(table["mode"]) == {"tree-sha256", "tree-blake3", "sine-inline", "mice",
                                  "unverified"}
    assert table.kind.str.startswith("measured").all()
    assert table.kind_model.str.startswith("modelled").all()
    goal = pd.read_csv(tmp_path / "chain_vs_tree_measured_goal.csv")
    assert len(goal) == 4 and (goal.position_pct == 90).all()
