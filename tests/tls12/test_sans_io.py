"""The protocol core never does I/O: no sockets, event loops or clocks in its modules."""

from __future__ import annotations

import ast
from pathlib import Path

import tls12

ADAPTERS: set[str] = set()
"""Modules of the core's own folder that may do I/O: none. The asyncio adapters live in the
``aio/`` package beside it, and the applications in ``testbed/apps/``; neither is scanned
(``*.py`` is not recursive)."""
FORBIDDEN = {"asyncio", "socket", "selectors", "time", "random", "threading"}


def test_core_modules_import_no_io() -> None:
    root = Path(tls12.__file__).parent
    offenders = []
    for path in sorted(root.glob("*.py")):
        if path.name in ADAPTERS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module.split(".")[0]]
            offenders += [(path.name, n) for n in names if n in FORBIDDEN]
    assert offenders == []
