"""A mutation group's file, ``mutation/groups/<group>.toml``, read and checked.

A group names the functions under mutation (:class:`Target`: ``pkg.module:function`` or
``pkg.module:Class.method``, ``*`` allowed in the name part), the tests that run against their
mutants, and the surviving mutants judged harmless (:class:`Accepted`: keyed by module,
function and the mutated line's text before and after, each with a one-line reason).
:func:`load_group` refuses a file that names a module, function or test that does not exist,
so a typo fails before any mutant runs.  ``mutation/run.py`` runs the groups.
"""

from __future__ import annotations

import ast
import fnmatch
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GROUPS_DIR = ROOT / "mutation" / "groups"
SEP = "\u01c1"  # mutmut's class/method separator in mangled names ("x\u01c1Class\u01c1method")


class GroupError(Exception):
    """A group file is malformed or names something that does not exist."""


# --- group files ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """One function or method under mutation: ``module:qualname`` (qualname may hold ``*``)."""

    module: str
    qualname: str

    @property
    def path(self) -> str:
        """The module's file, relative to the repository root."""
        base = self.module.replace(".", "/")
        if (ROOT / f"{base}.py").is_file():
            return f"{base}.py"
        return f"{base}/__init__.py"

    def mutmut_glob(self) -> str:
        """The pattern mutmut's ``run`` filter takes for this target's mutants."""
        if "." in self.qualname:
            cls, _, fn = self.qualname.partition(".")
            mangled = f"x{SEP}{cls}{SEP}{fn}"
        else:
            mangled = f"x_{self.qualname}"
        return f"{self.module}.{mangled}__mutmut_*"

    def matches(self, module: str, function: str) -> bool:
        return module == self.module and fnmatch.fnmatchcase(function, self.qualname)


@dataclass
class Accepted:
    """A surviving mutant judged harmless; matched by module, function, before and after."""

    module: str
    function: str
    before: str
    after: str
    reason: str
    used: int = 0

    def key(self) -> tuple[str, str, str, str]:
        return (self.module, self.function, _norm(self.before), _norm(self.after))


@dataclass
class Group:
    name: str
    description: str
    targets: list[Target]
    tests: list[str]
    pytest_args: list[str]
    env: dict[str, str]
    accepted: list[Accepted]
    path: Path

    @property
    def files(self) -> list[str]:
        return sorted({t.path for t in self.targets})


def _norm(text: str) -> str:
    """Collapse whitespace so re-indenting a line does not break an accepted entry."""
    return " ".join(text.split())


def _defined_functions(path: Path) -> set[str]:
    """Top-level functions and methods (``Class.method``) that mutmut can mutate in a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(f"{node.name}.{item.name}")
    return names


def load_group(name: str) -> Group:
    """Read and validate ``mutation/groups/<name>.toml``; raise :class:`GroupError` if bad."""
    path = GROUPS_DIR / f"{name}.toml"
    if not path.is_file():
        known = ", ".join(list_groups()) or "none"
        raise GroupError(f"no group file {path.relative_to(ROOT)} (known groups: {known})")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise GroupError(f"{path.relative_to(ROOT)}: not valid TOML: {exc}") from None
    where = path.relative_to(ROOT)
    targets: list[Target] = []
    for spec in data.get("targets", {}).get("functions", []):
        module, sep, qualname = str(spec).partition(":")
        if not sep or not module or not qualname or qualname.count(".") > 1:
            raise GroupError(f"{where}: target {spec!r} is not 'package.module:function' or ':Class.method'")
        targets.append(Target(module, qualname))
    if not targets:
        raise GroupError(f"{where}: [targets] functions is empty")
    for t in targets:
        file = ROOT / t.path
        if not file.is_file():
            raise GroupError(f"{where}: module {t.module} has no file {t.path}")
        defined = _defined_functions(file)
        if not any(fnmatch.fnmatchcase(d, t.qualname) for d in defined):
            raise GroupError(f"{where}: {t.module}:{t.qualname} matches no function in {t.path}")
    tests = [str(p) for p in data.get("tests", {}).get("paths", [])]
    if not tests:
        raise GroupError(f"{where}: [tests] paths is empty")
    for p in tests:
        if not (ROOT / p.split("::")[0]).exists():
            raise GroupError(f"{where}: test path {p} does not exist")
    accepted = []
    for i, entry in enumerate(data.get("accepted", []), 1):
        missing = [k for k in ("module", "function", "before", "after", "reason") if not entry.get(k)]
        if missing:
            raise GroupError(f"{where}: [[accepted]] entry {i} lacks {', '.join(missing)}")
        accepted.append(Accepted(**{k: str(entry[k]) for k in ("module", "function", "before", "after", "reason")}))
    return Group(
        name=name,
        description=str(data.get("description", "")),
        targets=targets,
        tests=tests,
        pytest_args=[str(a) for a in data.get("tests", {}).get("pytest_args", [])]
        + [a for d in data.get("tests", {}).get("deselect", []) for a in ("--deselect", str(d))],
        env={str(k): str(v) for k, v in data.get("tests", {}).get("env", {}).items()},
        accepted=accepted,
        path=path,
    )


def list_groups() -> list[str]:
    return sorted(p.stem for p in GROUPS_DIR.glob("*.toml"))


# --- scratch copy ----------------------------------------------------------------------------
