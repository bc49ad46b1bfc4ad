"""Where results go and what every run records: the one helper behind notebooks and experiments.

A figure is only as good as the record of how it was made. Every notebook's first cell, the
``make reproduce`` driver (``notebooks/run_all.py``) and the experiment modules use this module
for three things that used to be copied four times:

* **the results directory** -- :func:`results_dir` returns ``<repository>/results/<name>``
  whatever the working directory (a notebook runs in ``notebooks/``, pytest at the root, a
  script anywhere): the repository is the nearest folder with a ``pyproject.toml`` above this
  file, else above the working directory (:func:`find_root`);
* **the quick/full switch** -- :func:`quick_from_env` reads ``REPRODUCE_QUICK`` (``1``, the
  default, for CI-sized runs; ``0`` for paper-sized ones), which ``run_all.py`` sets for the
  notebook kernels. Any other value is an error rather than a silent guess;
* **run metadata** -- :func:`run_metadata` (git revision, Python, platform, CPU count, package
  versions, the quick flag and the experiment's own configuration), written next to the
  results as ``run.json`` by :func:`write_run`;
* **where a model's inputs came from** -- :func:`file_provenance` describes one input file
  (path, SHA-256, the command that writes it, when and where it was written) and
  :func:`record_input` adds such a record, or the word that defaults were used, to the
  ``inputs`` of the current run's ``run.json``: a model that calibrates itself from a file
  says which file, or says that it had none.

A notebook starts with::

    from testbed.results import start_run
    run = start_run("sine", {"seed": 1})     # results/sine/, run.json written
    QUICK, OUT = run.quick, run.out

This module only reads the environment, the file system and ``git``; it has no simulation or
protocol logic, and nothing in :mod:`netsim`'s models depends on it.
"""

from __future__ import annotations

import datetime
import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_PACKAGES",
    "QUICK_ENV",
    "PROVENANCE_FILE",
    "Run",
    "file_provenance",
    "find_root",
    "git_revision",
    "package_versions",
    "quick_from_env",
    "record_input",
    "recorded_inputs",
    "results_dir",
    "run_metadata",
    "start_run",
    "write_run",
]

#: Environment variable holding the quick/full switch (``1`` quick, ``0`` full).
QUICK_ENV = "REPRODUCE_QUICK"
#: Distributions whose versions every ``run.json`` records.
DEFAULT_PACKAGES: tuple[str, ...] = (
    "websec-testbed", "cryptography", "numpy", "pandas", "simpy", "matplotlib", "tqdm",
)  # fmt: skip

#: In ``docs/results/``: when, where and by which command each shipped file was written
#: (``make readme`` writes it while it copies the files from ``results/``).
PROVENANCE_FILE = "PROVENANCE.json"

_TRUE = ("1", "true", "yes")
_FALSE = ("0", "false", "no")


def find_root(start: Path | None = None) -> Path:
    """The repository root: the nearest folder holding ``pyproject.toml`` at or above ``start``.

    Without ``start``, this file's folder is tried first (a checkout or an editable install),
    then the working directory; if neither lies in a repository the working directory is the
    root, so results land in ``./results``.
    """
    starts = [start] if start is not None else [Path(__file__).resolve().parent, Path.cwd()]
    for first in starts:
        for folder in (first.resolve(), *first.resolve().parents):
            if (folder / "pyproject.toml").is_file():
                return folder
    return Path.cwd()


def results_dir(name: str, root: Path | None = None, create: bool = True) -> Path:
    """``<root>/results/<name>`` (root from :func:`find_root`), created unless ``create=False``.

    ``name`` is one folder name such as ``"sslsplit"``; a path with separators or ``..`` is a
    ``ValueError``, so a typo cannot write outside ``results/``.
    """
    if not name or name in (".", "..") or "/" in name or "\\" in name:
        raise ValueError(f"results name must be one folder name, got {name!r}")
    out = (root or find_root()) / "results" / name
    if create:
        out.mkdir(parents=True, exist_ok=True)
    return out


def quick_from_env(environ: Mapping[str, str] | None = None) -> bool:
    """The quick/full switch: ``REPRODUCE_QUICK`` unset or ``1`` is quick, ``0`` is full.

    ``true``/``yes`` and ``false``/``no`` (any case) are accepted too; anything else raises
    ``ValueError`` naming the variable.

    >>> quick_from_env({}), quick_from_env({"REPRODUCE_QUICK": "0"})
    (True, False)
    """
    env = os.environ if environ is None else environ
    value = env.get(QUICK_ENV, "1").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"{QUICK_ENV} must be 1 (quick) or 0 (full), got {env[QUICK_ENV]!r}")


def git_revision(root: Path | None = None) -> str:
    """The checked-out commit, with ``+dirty`` if there are local changes; ``unknown`` without
    git or outside a repository."""
    cwd = root or find_root()
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True,
                             text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=cwd, capture_output=True,
                               text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if not rev:
        return "unknown"
    return rev + ("+dirty" if dirty else "")


def package_versions(names: Iterable[str] = DEFAULT_PACKAGES) -> dict[str, str | None]:
    """Installed version of each distribution (``None`` if absent), read from its metadata
    without importing it."""
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def run_metadata(config: Mapping[str, Any] | None = None, *, quick: bool | None = None,
                 packages: Iterable[str] = DEFAULT_PACKAGES, root: Path | None = None
                 ) -> dict[str, Any]:
    """What a results folder records about the run that wrote it.

    Keys: ``quick`` (``quick``, default :func:`quick_from_env`), ``config`` (the experiment's
    own settings: seed, model name, ...), ``git_revision``, ``python``, ``platform``,
    ``machine``, ``cpus`` and ``packages`` (:func:`package_versions`).
    """
    return {
        "quick": quick_from_env() if quick is None else quick,
        "config": dict(config or {}),
        "git_revision": git_revision(root),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "packages": package_versions(packages),
    }


def write_run(out: Path, config: Mapping[str, Any] | None = None, *, quick: bool | None = None,
              packages: Iterable[str] = DEFAULT_PACKAGES, root: Path | None = None
              ) -> dict[str, Any]:
    """Write :func:`run_metadata` to ``out / "run.json"`` and return it."""
    meta = run_metadata(config, quick=quick, packages=packages, root=root)
    Path(out, "run.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
    return meta


@dataclass(frozen=True)
class Run:
    """A started run: where its results go, whether it is quick, what was recorded."""

    name: str
    out: Path
    quick: bool
    metadata: dict[str, Any]


_active: list[Run] = []          # the run start_run began in this process (at most one)
_inputs: dict[str, dict[str, Any]] = {}


def start_run(name: str, config: Mapping[str, Any] | None = None, *,
              packages: Iterable[str] = DEFAULT_PACKAGES, root: Path | None = None) -> Run:
    """The first cell of a notebook: resolve ``results/<name>``, read the quick/full switch and
    write ``run.json`` there before anything else runs.  The run becomes this process's
    current run, whose ``run.json`` :func:`record_input` extends."""
    out = results_dir(name, root)
    quick = quick_from_env()
    meta = write_run(out, config, quick=quick, packages=packages, root=root)
    run = Run(name, out, quick, meta)
    _active[:] = [run]
    _inputs.clear()
    return run


def file_provenance(path: Path, command: str, root: Path | None = None,
                    recorded: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Where one input file came from: ``source`` ("file"), ``path`` (relative to the
    repository), ``sha256``, ``command`` (what writes it) and ``written_utc`` / ``machine`` /
    ``git_revision``.

    Those last three come, in order of preference, from ``recorded`` (the file's own record
    of its run, if it keeps one), from ``docs/results/PROVENANCE.json`` for a shipped copy
    (written by ``make readme`` when it copied the file), or -- for a file under
    ``results/``, which only a run on this checkout writes -- from the file's modification
    time and this machine.  A shipped file without an entry says so (``None`` values and a
    ``note``) rather than guessing.
    """
    root = root or find_root()
    path = Path(path).resolve()
    try:
        rel = str(path.relative_to(root.resolve()))
    except ValueError:
        rel = str(path)
    out: dict[str, Any] = {"source": "file", "path": rel,
                           "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                           "command": command}
    shipped = root.resolve() / "docs" / "results"
    if recorded:
        out.update({k: recorded.get(k) for k in ("written_utc", "machine", "git_revision")})
    elif path.is_relative_to(shipped):
        entries: dict[str, Any] = {}
        table = shipped / PROVENANCE_FILE
        if table.is_file():
            entries = json.loads(table.read_text()).get("files", {})
        entry = entries.get(str(path.relative_to(shipped)))
        if entry is None:
            out.update({"written_utc": None, "machine": None, "git_revision": None,
                        "note": f"shipped copy with no entry in docs/results/{PROVENANCE_FILE}"})
        else:
            out.update({k: entry.get(k) for k in ("written_utc", "machine", "git_revision")})
    else:
        mtime = datetime.datetime.fromtimestamp(path.stat().st_mtime, datetime.UTC)
        out.update({"written_utc": mtime.isoformat(timespec="seconds"),
                    "machine": f"{platform.platform()}, {os.cpu_count()} CPUs (this machine)",
                    "git_revision": None})
    return out


def record_input(name: str, provenance: Mapping[str, Any], out: Path | None = None
                 ) -> dict[str, Any]:
    """Record where the model input ``name`` came from under ``inputs`` in ``out/run.json``
    (default: the run :func:`start_run` began in this process; without one, or if its folder
    is gone, only in :func:`recorded_inputs`).  ``provenance`` is :func:`file_provenance` or, for defaults, a
    mapping with ``source: "defaults"`` and what they are.  Returns the run's inputs."""
    _inputs[name] = dict(provenance)
    if out is None and _active:
        out = _active[0].out
    if out is None or not Path(out).is_dir():
        return dict(_inputs)
    path = Path(out, "run.json")
    meta = json.loads(path.read_text()) if path.is_file() else {}
    meta.setdefault("inputs", {})[name] = dict(provenance)
    path.write_text(json.dumps(meta, indent=2, default=str) + "\n")
    return dict(meta["inputs"])


def recorded_inputs() -> dict[str, dict[str, Any]]:
    """Every input :func:`record_input` recorded in this process since the last
    :func:`start_run`."""
    return {k: dict(v) for k, v in _inputs.items()}
