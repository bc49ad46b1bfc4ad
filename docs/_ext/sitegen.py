"""Stage the documentation sources and generate the pages that come from the code.

``make docs`` runs Sphinx with its configuration in ``docs/`` and its source directory in the
build tree (``build/docs/src``). When the configuration is read, :func:`stage` fills that
directory: the hand-written pages of ``docs/`` (copied, so they stay where they are), and three
generated parts that never enter the repository:

* ``api/``: one page per public module of the library packages (autodoc reads the docstrings;
  a module whose dotted name has a part starting with ``_`` is private and left out);
* ``cli/``: one page per program, from its argparse parser (sphinx-argparse where the module
  has a ``build_parser()`` or ``_parser()`` function, else the text of ``python -m PROG --help``
  captured in a subprocess);
* ``notebooks/``: the executed copies that ``make reproduce`` writes to ``results/notebooks/``,
  or, before that, the source notebooks with a note saying where the outputs come from.

Files are written only when their content changes, so Sphinx rebuilds only what changed.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

PACKAGES = ("tls12", "netsim", "testbed", "sslsplit", "sine", "reverse_ssl", "sslacc_sim",
            "webalps_sim")
#: Folders of ``docs/`` that are not pages (result files the README quotes, this extension).
NOT_PAGES = ("results", "_ext")
PARSER_FUNCTIONS = ("build_parser", "_parser")
NOTEBOOK_NOTE = (
    "```{note}\n"
    "This is the notebook as committed, without outputs. `make reproduce` executes every "
    "notebook into `results/notebooks/`; the next `make docs` shows those executed copies, "
    "figures and tables included.\n"
    "```\n"
)


def stage(docs: Path, repo: Path, out: Path) -> None:
    """Fill ``out`` with every page of the site (see the module docstring)."""
    wanted: dict[Path, bytes] = {}
    for path in sorted(docs.rglob("*.md")):
        rel = path.relative_to(docs)
        if rel.parts[0] not in NOT_PAGES:
            wanted[rel] = path.read_bytes()
    wanted.update(_api_pages(repo))
    wanted.update(_cli_pages(repo))
    wanted.update(_notebook_pages(repo))
    _sync(out, wanted)


def _sync(out: Path, wanted: dict[Path, bytes]) -> None:
    """Make ``out`` hold exactly ``wanted``, touching only files whose bytes differ."""
    out.mkdir(parents=True, exist_ok=True)
    for rel, data in wanted.items():
        target = out / rel
        if target.is_file() and target.read_bytes() == data:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    for path in sorted(out.rglob("*"), reverse=True):
        rel = path.relative_to(out)
        if path.is_file() and rel not in wanted:
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()


# -- API reference ---------------------------------------------------------------------------

def public_modules(repo: Path) -> list[str]:
    """Dotted names of every public module of the library packages, packages first."""
    names = []
    for package in PACKAGES:
        for path in sorted((repo / package).rglob("*.py")):
            parts = path.relative_to(repo).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if not any(part.startswith("_") for part in parts):
                names.append(".".join(parts))
    return sorted(names, key=lambda name: name.split("."))


def _heading(text: str, char: str = "=") -> str:
    return f"{text}\n{char * len(text)}\n"


def _api_pages(repo: Path) -> dict[Path, bytes]:
    modules = public_modules(repo)
    pages: dict[Path, bytes] = {}
    for name in modules:
        pages[Path("api") / f"{name}.rst"] = (
            _heading(f"``{name}``") + "\n"
            f".. automodule:: {name}\n"
            "   :members:\n"
            "   :ignore-module-all:\n"
            "   :show-inheritance:\n"
        ).encode()
    index = [
        _heading("API reference"),
        "Generated from the docstrings of every public module of the eight library packages "
        "(modules whose name starts with ``_`` are private and re-exported by their package). "
        "The floors and rooms these modules sit in are described in :doc:`/architecture`.\n",
    ]
    for package in PACKAGES:
        index += [
            "", _heading(f"``{package}``", "-"),
            ".. toctree::", "   :maxdepth: 1", "",
            *(f"   {name} <{name}>" for name in modules
              if name == package or name.startswith(package + ".")),
        ]
    pages[Path("api") / "index.rst"] = ("\n".join(index) + "\n").encode()
    return pages


# -- command-line reference ------------------------------------------------------------------

def programs(repo: Path) -> dict[str, tuple[str, str]]:
    """``{program: (module, python -m name)}`` for every program: the scripts of
    ``[project.scripts]`` in ``pyproject.toml`` (``name = "module:function"``), each with the
    module that runs it as ``python -m`` (the one with a ``__main__`` block whose ``main`` is the
    script's function); without that table, every module with a ``__main__`` block, as
    ``tests/test_cli_errors.py`` finds them, named ``python -m MODULE``."""
    project = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    runnable = _runnable_modules(repo)
    scripts = project.get("scripts", {})
    if not scripts:
        return {f"python -m {name}": (module, name) for name, module in runnable.items()}
    found = {}
    for name, target in sorted(scripts.items()):
        module, function = target.split(":")
        entry = getattr(importlib.import_module(module), function)
        runs = [m for m, code in runnable.items()
                if getattr(importlib.import_module(code), "main", None) is entry]
        found[name] = (module, module if module in runs or not runs else runs[0])
    return found


def _runnable_modules(repo: Path) -> dict[str, str]:
    """``{python -m name: module holding the __main__ block}`` (``sine.aio``: ``sine.aio.__main__``)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((repo / package).rglob("*.py")):
            if _has_main_block(path.read_text(encoding="utf-8")):
                parts = path.relative_to(repo).with_suffix("").parts
                name = ".".join(parts[:-1] if parts[-1] == "__main__" else parts)
                found[name] = ".".join(parts)
    return found


def _has_main_block(source: str) -> bool:
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            names = [node.test.left, *node.test.comparators]
            texts = {n.id if isinstance(n, ast.Name) else getattr(n, "value", None) for n in names}
            if texts == {"__name__", "__main__"}:
                return True
    return False


def _parser_function(module: str) -> tuple[str, str] | None:
    """(module, function) building the program's parser: in the module itself or, for an entry
    point that only imports ``main``, in the module that defines ``main``."""
    mod = importlib.import_module(module)
    main = getattr(mod, "main", None)
    for candidate in (mod, sys.modules.get(getattr(main, "__module__", "") or "")):
        for function in PARSER_FUNCTIONS:
            if candidate is not None and callable(getattr(candidate, function, None)):
                return candidate.__name__, function
    return None


def _help_text(repo: Path, module: str) -> str:
    env = {**os.environ, "COLUMNS": "100", "PYTHONPATH": str(repo)}
    done = subprocess.run([sys.executable, "-m", module, "--help"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=60, check=True)
    if not done.stdout.startswith("usage:"):
        raise RuntimeError(f"python -m {module} --help printed no usage: {done.stdout!r}")
    return done.stdout


def _cli_pages(repo: Path) -> dict[Path, bytes]:
    progs = programs(repo)
    sources = {name: _parser_function(module) for name, (module, _) in progs.items()}
    captured = [name for name, source in sources.items() if source is None]
    with ThreadPoolExecutor(max_workers=4) as pool:
        helps = dict(zip(captured, pool.map(lambda n: _help_text(repo, progs[n][1]), captured),
                         strict=True))
    pages: dict[Path, bytes] = {}
    for name, (module, runner) in progs.items():
        invocation = f"python -m {runner}"
        lines = [_heading(f"``{name}``"), ""]
        if name != invocation:
            lines += [f"Installed as ``{name}``; the same program is ``{invocation}``.", ""]
        lines += [f"Code: :mod:`{module}`.", ""]
        source = sources[name]
        if source is not None:
            lines += [".. argparse::", f"   :module: {source[0]}", f"   :func: {source[1]}",
                      f"   :prog: {invocation}", ""]
        else:
            body = "\n".join(f"   {line}".rstrip() for line in helps[name].splitlines())
            lines += ["Output of ``--help``:", "", ".. code-block:: text", "", body, ""]
        pages[Path("cli") / f"{name}.rst"] = "\n".join(lines).encode()
    index = [
        _heading("Command-line reference"),
        "Every program answers ``--help``; bad input is one line on stderr and exit status 2, a "
        "failure at run time exits 1 (``TESTBED_TRACEBACK=1`` shows the traceback of an "
        "unexpected error). Each runs as ``python -m MODULE`` from the project's virtual "
        "environment, or by the script name ``pip install`` gives it. The pages below are "
        "generated from the programs' own argument parsers.",
        "", ".. toctree::", "   :maxdepth: 1", "",
        *(f"   {name} <{name}>" for name in progs),
    ]
    pages[Path("cli") / "index.rst"] = ("\n".join(index) + "\n").encode()
    return pages


# -- notebooks -------------------------------------------------------------------------------

def notebook_sources(repo: Path) -> list[tuple[Path, bool]]:
    """(notebook, executed?) for every notebook: the executed copy when there is one."""
    found = []
    for source in sorted((repo / "notebooks").glob("*.ipynb")):
        executed = repo / "results" / "notebooks" / source.name
        found.append((executed, True) if executed.is_file() else (source, False))
    return found


def _notebook_pages(repo: Path) -> dict[Path, bytes]:
    pages: dict[Path, bytes] = {}
    names = []
    for path, executed in notebook_sources(repo):
        notebook = json.loads(path.read_text(encoding="utf-8"))
        if (notebook["nbformat"], notebook["nbformat_minor"]) < (4, 5):  # cells get ids from 4.5
            notebook["nbformat_minor"] = 5
        if not executed:
            note = {"cell_type": "markdown", "metadata": {}, "source": NOTEBOOK_NOTE}
            notebook["cells"].insert(1, note)
        for number, cell in enumerate(notebook["cells"]):
            cell.setdefault("id", f"cell-{number}")
        pages[Path("notebooks") / path.name] = json.dumps(notebook, indent=1).encode()
        names.append(path.stem)
    index = [
        "# Notebooks", "",
        "Each paper's notebook calls the experiment functions of its package and plots what "
        "they return, next to the paper's own numbers; `tls12_inside` is the teaching notebook "
        "(a TLS 1.2 handshake, key schedule and record taken apart by hand, then read by "
        "tshark). `make reproduce` runs them all at quick sizes "
        "(`make reproduce FULL=1` at paper sizes) and writes the executed copies, with their "
        "figures and tables, to `results/notebooks/`; these pages show those copies when they "
        "exist. `make notebook` opens them in JupyterLab.", "",
        "```{toctree}", ":maxdepth: 1", "", *names, "```",
    ]
    pages[Path("notebooks") / "index.md"] = ("\n".join(index) + "\n").encode()
    return pages
