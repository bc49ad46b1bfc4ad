"""Console scripts and optional extras, checked in this interpreter (no build, no venv).

* every program of the project (a module run as ``python -m X``) has exactly one console script
  in ``[project.scripts]``, named by the rule written above that table, whose entry point is
  the same ``main`` function;
* :func:`testbed.cli.program_name` names a program by its console script when started as one
  and ``python -m MODULE`` otherwise, so errors read ``sine-sign: error: ...`` or
  ``python -m sine.sign: error: ...``;
* a sweep on a Dask cluster without ``dask.distributed`` fails with an ``ImportError`` that
  names the ``sweep`` extra.

``test_wheel.py`` runs the installed scripts themselves.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testbed import cli
from testbed.sweep import grid, sweep
from tests.test_cli_errors import _programs

REPO = Path(__file__).resolve().parents[2]
SCRIPTS: dict[str, str] = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
#: The first part of a console script's name, by top-level package (see pyproject.toml).
PREFIX = {"tls12": "tls12", "testbed": "websec", "sslsplit": "sslsplit", "sine": "sine",
          "reverse_ssl": "reverse-ssl", "sslacc_sim": "sslacc", "webalps_sim": "webalps"}


def _script_for(module: str) -> str:
    """The naming rule: package prefix, then the module's last part with ``-`` for ``_``."""
    return f"{PREFIX[module.split('.')[0]]}-{module.rsplit('.', 1)[-1].replace('_', '-')}"


def _entry(value: str) -> Callable[..., Any]:
    module, _, attr = value.partition(":")
    func: Callable[..., Any] = getattr(importlib.import_module(module), attr)
    return func


def _user_facing_programs() -> dict[str, Callable[..., Any]]:
    """``python -m`` name -> main, without the bodies of shims (``testbed.apps.https_cli``
    is run as ``testbed.https_server``, whose ``main`` is the same function)."""
    mains: dict[str, Callable[..., Any]] = {}
    for name in _programs():
        spec = importlib.util.find_spec(name)
        package = spec is not None and spec.submodule_search_locations is not None
        mains[name] = importlib.import_module(f"{name}.__main__" if package else name).main
    shared = {id(m) for m in mains.values() if sum(n is m for n in mains.values()) > 1}
    return {name: main for name, main in mains.items()
            if id(main) not in shared or main.__module__ != name}


def test_every_program_has_one_console_script_named_by_the_rule() -> None:
    programs = _user_facing_programs()
    assert "testbed.https_server" in programs and "testbed.apps.https_cli" not in programs
    expected = {_script_for(name): name for name in programs}
    assert len(expected) == len(programs), "two programs would get the same script name"
    assert sorted(SCRIPTS) == sorted(expected)
    for script, module in expected.items():
        assert _entry(SCRIPTS[script]) is programs[module], (script, SCRIPTS[script], module)


class _Distribution:
    """What :func:`importlib.metadata.distribution` returns, reduced to ``entry_points``."""

    def __init__(self) -> None:
        self.entry_points = importlib.metadata.EntryPoints(
            importlib.metadata.EntryPoint(name, value, "console_scripts")
            for name, value in SCRIPTS.items())


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretend the distribution is installed with its ``[project.scripts]``."""
    def distribution(name: str) -> _Distribution:
        assert name == cli.DISTRIBUTION
        return _Distribution()

    monkeypatch.setattr(importlib.metadata, "distribution", distribution)


@pytest.mark.parametrize(("argv0", "module", "prog"), [
    ("/opt/venv/bin/sine-sign", "sine.sign", "sine-sign"),
    ("sine-sign.exe", "sine.sign", "sine-sign"),
    ("/opt/venv/bin/websec-https-server", "testbed.https_server", "websec-https-server"),
    ("/opt/venv/bin/sine-aio", "sine.aio", "sine-aio"),  # entry point sine.aio.runner:main
    ("/src/sine/sign.py", "sine.sign", "python -m sine.sign"),  # what python -m sets
    ("/opt/venv/bin/sine-fetch", "sine.sign", "python -m sine.sign"),  # another program's
    ("/opt/venv/bin/pytest", "sine.sign", "python -m sine.sign"),  # main() called from Python
    ("", "sine.sign", "python -m sine.sign"),
])
def test_program_name_follows_how_the_program_was_started(
        installed: None, monkeypatch: pytest.MonkeyPatch, argv0: str, module: str,
        prog: str) -> None:
    monkeypatch.setattr(sys, "argv", [argv0, "--help"])
    assert cli.program_name(module) == prog


def test_program_name_without_the_distribution_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> None:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    monkeypatch.setattr(sys, "argv", ["/opt/venv/bin/sine-sign"])
    assert cli.program_name("sine.sign") == "python -m sine.sign"


@pytest.mark.parametrize(("module", "script"), [
    ("webalps_sim.aio.guardian", "webalps-guardian"),  # names itself: imports no testbed
    ("tls12.handshake_docs", "tls12-handshake-docs"),  # names itself: tls12 imports no testbed
    ("webalps_sim.ca", "webalps-ca"),
    ("sine.fetch", "sine-fetch"),
])
def test_usage_and_errors_name_the_console_script(
        installed: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        module: str, script: str) -> None:
    monkeypatch.setattr(sys, "argv", [f"/opt/venv/bin/{script}"])
    with pytest.raises(SystemExit) as exc:
        importlib.import_module(module).main(["--no-such-option"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith(f"{script}: error: ")


def _square(x: int) -> int:
    return x * x


def test_a_dask_sweep_without_dask_names_the_sweep_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    with pytest.raises(ImportError, match=r"pip install 'websec-testbed\[sweep\]'"):
        sweep(_square, grid(x=[1, 2]), scheduler="local", progress=False)
    df = sweep(_square, grid(x=[1, 2]), serial=True, progress=False)  # needs no dask
    assert list(df["value"]) == [1, 4]
