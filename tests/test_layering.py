"""Every file in its room, the room read from its path, checked from the source (``ast``).

The layout (``docs/architecture.md`` has it as one table) is four floors, each importing only
from its own floor and the floors below:

====== ============ ==========================================================================
floor  package      what lives there
====== ============ ==========================================================================
0      ``tls12``    the TLS 1.2 protocol core (sans-IO) and its asyncio adapters ``aio/``
1      ``netsim``   SimPy building blocks and the generic driver of sans-IO objects
2      ``testbed``  programs, command-line plumbing, run tooling, traces, the Linux lab
3      the papers   ``sslsplit`` (with ``barnraising``), ``sine``, ``reverse_ssl``,
                    ``sslacc_sim``, ``webalps_sim``; none imports another
====== ============ ==========================================================================

Inside a paper package a module's room follows from its path:

* ``aio/**`` — adapters: sockets, threads, subprocesses, asyncio (anything goes);
* ``experiments.py`` or ``experiments/**`` — experiments: they read the clock and files and
  call ``aio/`` for sockets, threads, processes and asyncio;
* ``model*.py`` or ``models/**`` — SimPy models: simulated time only, one seeded
  ``random.Random`` allowed, no I/O, no clock;
* everything else — the sans-IO core: no I/O, no clock, no global ``random`` (an RNG is
  injected); ``state.py`` (the package's state machine, an enum and a table) is one of them.

:data:`DEFAULT_ROOM` changes the "everything else" room of a package whose core *is* a model
(SSLACC's cluster runs in simulated time throughout); :data:`ROOM_EXCEPTIONS` lists the few
modules outside ``aio/`` that may do I/O, each with the reason. In the shared floors, ``tls12``
is core except ``aio/``; ``netsim`` is models; ``testbed`` is the I/O floor. No paper
constant (a module-level constant whose comment or value names a paper) lives outside its
paper's package. A failure names the file, the line and the offending import.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

PAPERS = ("sslsplit", "sine", "reverse_ssl", "sslacc_sim", "webalps_sim")
#: Floor of each top-level package; a module may import its own floor and those below.
FLOORS: dict[str, int] = {"tls12": 0, "netsim": 1, "testbed": 2, **dict.fromkeys(PAPERS, 3)}
SHARED = ("tls12", "netsim", "testbed")
#: What a core may not import (top-level module names).
IO_AND_CLOCK = frozenset({"asyncio", "socket", "selectors", "time", "threading", "subprocess"})
CORE_FORBIDDEN = IO_AND_CLOCK | {"random"}
MODEL_FORBIDDEN = IO_AND_CLOCK  # a SimPy model owns one random.Random(seed)
#: An experiment reads the clock and files; sockets, threads, processes and asyncio are aio/'s.
EXPERIMENT_FORBIDDEN = IO_AND_CLOCK - {"time"} | {"concurrent"}

#: The room of a paper module that is neither in aio/, nor an experiment, nor a model by name.
DEFAULT_ROOM: dict[str, str] = {"sslacc_sim": "model"}

#: Modules outside ``aio/`` that may do I/O, with the reason (path from the repository root).
ROOM_EXCEPTIONS: dict[str, str] = {
    "netsim/cpu.py": "measures the per-operation CPU costs of the real tls12 code (perf_counter)",
    "netsim/drive.py": "reports the wall time a simulation took (perf_counter), for the benchmark",
    "sine/sign.py": "command line: signs a document root on disk and reports how long it took",
}

#: The netsim modules that may import tls12, each with the reason.
NETSIM_KNOWS_TLS = {
    "netsim/drive.py": "moves the bytes of tls12 connections and recognises their events",
    "netsim/cpu.py": "measures the per-operation CPU costs of the real tls12 code",
}

#: Words that make a module-level constant a paper's (in its ``#:`` comment or its value).
PAPER_WORDS = re.compile(
    r"\b(paper|papers|ssl[- ]splitting|barnraising|sine|sineb|sinex|reverse ssl|sslacc|"
    r"webalps|www\.lcs|amsterdam)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Import:
    """One import statement's target, resolved to an absolute module name."""

    path: Path
    line: int
    module: str
    type_checking: bool

    def __str__(self) -> str:
        where = " (under TYPE_CHECKING)" if self.type_checking else ""
        return f"{self.path.relative_to(ROOT)}:{self.line} imports {self.module}{where}"


def _package_of(path: Path) -> list[str]:
    """Dotted package of a module file, e.g. ``testbed/apps/x.py`` -> ``["testbed", "apps"]``."""
    return list(path.relative_to(ROOT).parent.parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(path: Path, source: str | None = None) -> list[Import]:
    """Every import in ``path`` (top level, in functions, in ``if`` blocks), relative ones
    resolved against the file's package; ``source`` stands in for the file's text."""
    text = path.read_text() if source is None else source
    tree = ast.parse(text, filename=str(path))
    found: list[Import] = []

    def visit(node: ast.AST, type_checking: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, type_checking)
            return
        if isinstance(node, ast.Import):
            found.extend(Import(path, node.lineno, a.name, type_checking) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = _package_of(path)
                base = package[: len(package) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.append(Import(path, node.lineno, module, type_checking))
        for child in ast.iter_child_nodes(node):
            visit(child, type_checking)

    visit(tree, False)
    return found


def _top(module: str) -> str:
    return module.split(".")[0]


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def room(path: Path) -> str:
    """``core``, ``model``, ``adapter``, ``experiment`` or ``io`` (the testbed floor), from the
    path alone (plus :data:`ROOM_EXCEPTIONS`)."""
    rel = path.relative_to(ROOT)
    parts = rel.parts
    if rel.as_posix() in ROOM_EXCEPTIONS:
        return "exception"
    package, inner = parts[0], parts[1:]
    if package == "testbed":
        return "io"
    if package == "tls12":
        return "adapter" if inner[0] == "aio" else "core"
    if package == "netsim":
        return "model"
    if "aio" in inner[:-1]:
        return "adapter"
    name = inner[-1]
    if name == "experiments.py" or "experiments" in inner[:-1]:
        return "experiment"
    if name.startswith("model") or "models" in inner[:-1]:
        return "model"
    return DEFAULT_ROOM.get(package, "core")


def test_rooms_are_read_from_paths() -> None:
    assert room(ROOT / "tls12" / "record.py") == "core"
    assert room(ROOT / "tls12" / "aio" / "protocol.py") == "adapter"
    assert room(ROOT / "sine" / "aio" / "server.py") == "adapter"
    assert room(ROOT / "sslsplit" / "barnraising" / "aio" / "dns.py") == "adapter"
    assert room(ROOT / "sine" / "verifier.py") == "core"
    assert room(ROOT / "sine" / "experiments.py") == "experiment"
    assert room(ROOT / "reverse_ssl" / "model_dos.py") == "model"
    assert room(ROOT / "sslacc_sim" / "cluster.py") == "model"
    assert room(ROOT / "testbed" / "linux" / "netns.py") == "io"


@pytest.mark.parametrize("package", sorted(FLOORS))
def test_cores_and_models_do_no_io_and_read_no_clock(package: str) -> None:
    offenders = []
    for path in _modules(package):
        forbidden = {"core": CORE_FORBIDDEN, "model": MODEL_FORBIDDEN,
                     "experiment": EXPERIMENT_FORBIDDEN}.get(room(path))
        if forbidden:
            offenders += [f"{i} [{room(path)}]" for i in imports(path)
                          if _top(i.module) in forbidden]
    assert not offenders, (
        "a sans-IO core, a model or an experiment does I/O it may not (move it into aio/, or "
        "list it in ROOM_EXCEPTIONS with the reason):\n" + "\n".join(offenders))


def test_room_exceptions_exist() -> None:
    missing = [p for p in ROOM_EXCEPTIONS if not (ROOT / p).is_file()]
    assert not missing, f"ROOM_EXCEPTIONS names files that are gone: {missing}"


@pytest.mark.parametrize("package", PAPERS)
def test_every_paper_package_has_the_same_rooms(package: str) -> None:
    base = ROOT / package
    shape = {"state.py": (base / "state.py").is_file(),
             "aio/": (base / "aio" / "__init__.py").is_file(),
             "experiments": (base / "experiments.py").is_file()
             or (base / "experiments" / "__init__.py").is_file()}
    assert all(shape.values()), f"{package} lacks {[k for k, v in shape.items() if not v]}"


def test_no_import_runs_upward_and_no_paper_imports_another() -> None:
    offenders = []
    for package, floor in FLOORS.items():
        for path in _modules(package):
            for i in imports(path):
                target = _top(i.module)
                if target not in FLOORS or target == package:
                    continue
                if FLOORS[target] > floor or (FLOORS[target] == floor == 3):
                    offenders.append(f"{i} (floor {floor} -> {FLOORS[target]})")
    assert not offenders, "an import runs upward or across papers:\n" + "\n".join(offenders)


def test_netsim_knows_no_paper_and_nothing_of_the_linux_lab() -> None:
    offenders = [str(i) for path in _modules("netsim") for i in imports(path)
                 if _top(i.module) in PAPERS or i.module.startswith("testbed")]
    assert not offenders, "\n".join(offenders)


def test_only_the_driver_and_cpu_costs_in_netsim_import_tls12() -> None:
    offenders = []
    for path in _modules("netsim"):
        if path.relative_to(ROOT).as_posix() in NETSIM_KNOWS_TLS:
            continue
        offenders += [str(i) for i in imports(path) if _top(i.module) == "tls12"]
    assert not offenders, (
        "only " + ", ".join(NETSIM_KNOWS_TLS) + " may import tls12:\n" + "\n".join(offenders))


def paper_constants(path: Path, source: str | None = None) -> list[str]:
    """Module-level UPPER_CASE constants of ``path`` whose ``#:`` comment or value names a
    paper, as ``file:line NAME``."""
    text = path.read_text() if source is None else source
    lines = text.splitlines()
    found = []
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        else:
            continue
        names = [n for n in names if n.lstrip("_").isupper()]
        comment, i = [], node.lineno - 2
        while i >= 0 and lines[i].lstrip().startswith("#"):
            comment.append(lines[i])
            i -= 1
        value = "\n".join(lines[node.lineno - 1:node.end_lineno])
        if names and PAPER_WORDS.search("\n".join(comment) + "\n" + value):
            found += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names]
    return found


def test_paper_constants_live_in_their_paper() -> None:
    offenders = [c for package in SHARED for path in _modules(package)
                 for c in paper_constants(path)]
    assert not offenders, (
        "a paper's constant in a shared floor (move it to the paper's params.py):\n"
        + "\n".join(offenders))


def test_the_constant_rule_sees_comments_and_values() -> None:
    source = ('#: The paper\'s server line.\nADSL_UP = 160e3\n'
              'LAN = 100e6\nNAME = "sslacc cluster"\n_private = 1\n')
    found = paper_constants(ROOT / "netsim" / "sample.py", source)
    assert found == ["netsim/sample.py:2 ADSL_UP", "netsim/sample.py:4 NAME"]


def test_the_scanner_sees_relative_type_checking_and_function_imports() -> None:
    """The checks above are only as good as :func:`imports`: exercise it on known source."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "from .tcp import TcpConnection\n"
        "from . import link\n"
        "if TYPE_CHECKING:\n"
        "    from tls12 import ClientConnection\n"
        "else:\n"
        "    import socket\n"
        "def f():\n"
        "    import time\n"
    )
    found = imports(ROOT / "netsim" / "sample.py", source)
    assert [(i.module, i.line, i.type_checking) for i in found] == [
        ("typing", 1, False), ("netsim.tcp", 2, False), ("netsim", 3, False),
        ("tls12", 5, True), ("socket", 7, False), ("time", 9, False),
    ]
    assert str(found[3]) == "netsim/sample.py:5 imports tls12 (under TYPE_CHECKING)"
