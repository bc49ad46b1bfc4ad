"""Rooms stay small: no module over 600 lines, no function over 60 lines outside the tests.

Read from the source (``ast``). A long module is a sign of two subjects in one room and a long
function of several steps without names; both limits come from the reorganising step that split
the code by meaning. Tests are exempt from the function limit (a scenario may read as one
story) but not from the module limit.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Folders of the project's Python code (the tests are checked for module length only).
CODE = ("tls12", "netsim", "testbed", "sslsplit", "sine", "reverse_ssl", "sslacc_sim",
        "webalps_sim", "benchmarks", "notebooks", "mutation")
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60


def _files(folders: tuple[str, ...]) -> list[Path]:
    return sorted(p for f in folders for p in (ROOT / f).rglob("*.py"))


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int, int]]:
    """``(name, first line, length)`` of every function or method longer than ``limit`` lines
    (decorators excluded, the docstring included)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = node.end_lineno - node.lineno + 1  # type: ignore[operator]
            if length > limit:
                found.append((node.name, node.lineno, length))
    return found


def test_the_scanner_measures_functions_and_methods() -> None:
    body = "\n".join(f"        x{i} = {i}" for i in range(60))
    source = f"def short():\n    pass\n\nclass C:\n    async def long(self):\n{body}\n"
    assert long_functions(source) == [("long", 5, 61)]
    assert long_functions(source, limit=61) == []


def test_no_module_over_600_lines() -> None:
    files = _files((*CODE, "tests"))
    assert len(files) > 200  # the scan saw the project
    over = {str(p.relative_to(ROOT)): n for p in files
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert over == {}, f"split these modules by subject (lines): {over}"


def test_no_function_over_60_lines_outside_tests() -> None:
    over = [f"{p.relative_to(ROOT)}:{line} {name} ({n} lines)" for p in _files(CODE)
            for name, line, n in long_functions(p.read_text(encoding="utf-8"))]
    assert over == [], "split these functions into named steps:\n" + "\n".join(over)
