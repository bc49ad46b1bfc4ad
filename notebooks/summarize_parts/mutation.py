"""The README's mutation-testing table, from ``make mutation``'s ``results/mutation/report.csv``.

One row per group of safety checks (``mutation/groups/<group>.toml``): how many mutants the
run made in the group's target functions, how many a test killed (a mutant that hangs a test
until its timeout counts as killed), how many survived and were accepted with a written
reason (equivalent, timing-only or unreachable mutants; the reasons are in the group file),
and how many survived unexplained -- which ``make mutation`` refuses, so a published table
shows 0 there.  The score is ``(killed + timed out) / (mutants - accepted - not run)``, as
``mutation/run.py`` computes it; the raw kill fraction ``killed / mutants`` stands beside it
so that accepting mutants cannot hide behind the score.
"""

from __future__ import annotations

import tomllib

from .base import REPO, MissingResult, Row, Source, registrar

ROWS: list[Row] = []
row = registrar(ROWS)

REPORT = "mutation/report.csv"


def _description(group: str) -> str:
    path = REPO / "mutation" / "groups" / f"{group}.toml"
    if not path.is_file():
        raise MissingResult(f"mutation/groups/{group}.toml not found")
    return str(tomllib.loads(path.read_text()).get("description", group))


@row("mutation")
def _groups(src: Source) -> list[list[str]]:  # type: ignore[override]
    rows = src.csv(REPORT)
    if not rows:
        raise MissingResult(f"{REPORT} has no rows")
    groups: dict[str, dict[str, int]] = {}
    when: dict[str, str] = {}
    for r in rows:
        g = groups.setdefault(r["group"], dict.fromkeys(
            ("mutants", "killed", "timed_out", "accepted", "unexplained", "not_run"), 0))
        for k in g:
            g[k] += int(r[k])
        when[r["group"]] = f"{r['tool']}, {r['date'][:10]}, git `{r['git_revision'][:12]}`"
    out = []
    total = dict.fromkeys(("mutants", "killed", "timed_out", "accepted", "unexplained", "not_run"), 0)
    for name, g in sorted(groups.items()):
        out.append([f"`{name}`", _description(name), *_cells(g),
                    f"measured ({when[name]})"])
        for k in total:
            total[k] += g[k]
        src.path(REPORT)  # every row names the report it was read from
        src.end_row()
    out.append(["**all**", f"{len(groups)} groups", *_cells(total), "measured (the rows above)"])
    src.path(REPORT)
    src.end_row()
    return out


def _cells(g: dict[str, int]) -> list[str]:
    killed = g["killed"] + g["timed_out"]
    scored = g["mutants"] - g["accepted"] - g["not_run"]
    score = f"{killed / scored:.1%}" if scored else "—"
    raw = f"{killed / g['mutants']:.1%}" if g["mutants"] else "—"
    return [f"{g['mutants']:,}", f"{killed:,}", f"{g['accepted']:,}", f"{g['unexplained']:,}",
            score, raw]
