"""The teaching notebook ``notebooks/tls12_inside.ipynb`` runs headless and shows what it teaches.

Executed as ``make reproduce`` executes it (``notebooks/run_all.py``): nbclient, the
``python3`` kernel of this interpreter's environment, working directory ``notebooks/``,
``REPRODUCE_QUICK=1``. Every cell must run without error -- the notebook asserts its own
hand computations (master secret, key block, a record sealed by hand, the tampering outcomes,
the exercises' hidden solutions) -- and the outputs must show the key results, among them
tshark's decryption of the simulated download. Needs tshark (CI installs it); never skipped.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "notebooks" / "tls12_inside.ipynb"
CELL_TIMEOUT = 120  # seconds per cell; the whole notebook takes a few seconds


def _output_text(cell: Any) -> str:
    """Everything a code cell printed or displayed as text."""
    parts = []
    for out in cell.get("outputs", []):
        if out["output_type"] == "stream":
            parts.append(out["text"])
        elif out["output_type"] in ("execute_result", "display_data"):
            data = out["data"]
            parts.append(data.get("text/markdown", "") + data.get("text/plain", ""))
        elif out["output_type"] == "error":
            parts.append(f"{out['ename']}: {out['evalue']}")
    return "".join(parts)


def _execute() -> tuple[nbformat.NotebookNode, float]:
    """The notebook after a headless run, and how long the run took (seconds)."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    start = time.monotonic()
    client.execute()
    return nb, time.monotonic() - start


def _check_sections(text: str) -> None:
    """What sections 1-5 and 7 must show (each also asserts its own computations)."""
    # section 1: the four flights, each side ending established
    for flight in ("flight 1: client → server", "flight 2: server → client",
                   "flight 3: client → server", "flight 4: server → client"):
        assert flight in text
    assert "expect_client_key_exchange → established" in text
    # section 2: the tables, and the refused input with its alert
    assert "ServerConnection.TRANSITIONS" in text and "ClientConnection.TRANSITIONS" in text
    assert "all listed in the tables" in text
    assert "UnexpectedMessage" in text and "15 03 03 00 02 02 0a" in text
    # sections 3 and 4
    assert "= the key log's = tls12.prf's" in text
    assert "sealed by hand == the record client.send_data() produced, byte for byte" in text
    # section 5: bad_record_mac for flipped bits; the countermeasure fails only at Finished
    assert "AlertReceived(FATAL, BAD_RECORD_MAC)" in text
    assert text.count("15 03 03 00 02 02 14") >= 3
    # section 7: every hidden solution passed its checker
    for n in range(1, 5):
        assert f"solution {n} checked" in text


def _check_tshark(text: str) -> None:
    """Section 6: tshark dissected the handshake and decrypted the HTTP exchange."""
    assert "Client Hello" in text and "Server Hello, Certificate" in text
    assert "GET /page.txt HTTP/1.0" in text                      # the decrypted request
    assert "line 000 of the page that tshark decrypts" in text   # and the response body
    assert "HTTP seen by tshark: ['GET', '/page.txt', '200']" in text
    assert "HTTP packets without the key log: 0" in text


def test_the_notebook_runs_headless_and_shows_what_it_teaches(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One test, one run: the notebook writes results/tls12_inside/, so two xdist workers
    must not execute it at the same time."""
    monkeypatch.setenv("REPRODUCE_QUICK", "1")   # as run_all.py sets it for a quick run
    nb, seconds = _execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert len(code) > 20
    assert all(c.execution_count is not None for c in code)
    assert not [c for c in code for o in c.outputs if o["output_type"] == "error"]
    assert seconds < 60, f"the notebook took {seconds:.0f} s; keep it well under a minute"
    text = "\n".join(_output_text(c) for c in code)
    _check_sections(text)
    _check_tshark(text)
    solutions = [c for c in nb.cells if "solution" in c.metadata.get("tags", [])]
    assert len(solutions) == 4
    assert all(c.metadata["jupyter"]["source_hidden"] for c in solutions)
    outputs = json.dumps([c.get("outputs", []) for c in code])
    assert str(REPO) not in outputs                              # no machine paths shown
