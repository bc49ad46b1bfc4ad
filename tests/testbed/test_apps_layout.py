"""The TLS library does not depend on its applications; the commands are thin entry points."""

from __future__ import annotations

import ast
from pathlib import Path

import testbed
import tls12

ROOT = Path(tls12.__file__).parent
PROGRAMS = Path(testbed.__file__).parent
ENTRY_POINTS = {"https_server.py": "testbed.apps.https_cli", "demo.py": "testbed.apps.demo"}


def _imported_modules(path: Path) -> set[str]:
    """Absolute names of the modules ``path`` imports (relative imports resolved inside tls12)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = "tls12" if node.level == 1 else "" if node.level == 0 else "<outside>"
            module = ".".join(p for p in (base, node.module or "") if p)
            names.add(module)
            names |= {f"{module}.{a.name}" for a in node.names}
    return names


def test_library_modules_never_import_the_applications() -> None:
    offenders = {
        path.name: sorted(m for m in _imported_modules(path) if m.startswith("testbed.apps"))
        for path in sorted(ROOT.glob("*.py"))
        if path.name not in ENTRY_POINTS
    }
    assert {k: v for k, v in offenders.items() if v} == {}
    assert len(offenders) > 10  # the scan saw the library's modules


def test_entry_points_only_call_the_application_main() -> None:
    for name, target in ENTRY_POINTS.items():
        tree = ast.parse((PROGRAMS / name).read_text())
        doc = ast.get_docstring(tree)
        assert doc and target in doc  # says where the code lives
        kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        defined = [n for n in tree.body if isinstance(n, kinds)]
        assert defined == [], f"{name} defines {[d.name for d in defined]}"
        assert f"{target}.main" in _imported_modules(PROGRAMS / name)
