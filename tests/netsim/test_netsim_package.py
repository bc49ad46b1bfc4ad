"""Package hygiene: sans-IO workload/model modules, explicit exports, py.typed."""

from __future__ import annotations

import ast
from pathlib import Path

import netsim

PKG = Path(netsim.__file__).parent
ROOT = PKG.parent
#: Pure modules (no I/O, no clock, no global randomness), by path from the repository root.
PURE = ("netsim/logparse.py", "testbed/traces/workload.py", "testbed/traces/stats.py",
        "netsim/cache.py", "sslsplit/synth.py")


def _imports(module: str) -> set[str]:
    tree = ast.parse((ROOT / module).read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def test_pure_modules_do_no_io_timing_or_global_randomness() -> None:
    for module in PURE:
        bad = _imports(module) & {"socket", "asyncio", "time", "random", "simpy", "urllib"}
        assert not bad, f"{module} imports {bad}"


def test_exports_and_marker() -> None:
    assert (PKG / "py.typed").exists()
    for name in netsim.__all__:
        assert hasattr(netsim, name), name
    for path in PKG.glob("*.py"):
        assert len(path.read_text().splitlines()) < 700, path.name


def test_docstring_examples() -> None:
    import doctest

    from netsim import cache, host
    from testbed.traces import workload

    for module in (cache, host, workload):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__


def test_notebook_is_committed_without_outputs() -> None:
    import json

    nb_path = PKG.parent / "notebooks" / "sslsplit_traces.ipynb"
    nb = json.loads(nb_path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(not c.get("outputs") and c.get("execution_count") is None for c in code)
    source = "".join("".join(c["source"]) for c in code)
    assert "start_run(" in source  # results/ and the REPRODUCE_QUICK switch via testbed.results
