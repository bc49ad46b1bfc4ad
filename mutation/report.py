"""The combined mutation report: ``results/mutation/report.csv`` and ``report.md``.

:func:`write_csv` and :func:`render_markdown` turn the per-group JSON documents that
``mutation/run.py`` writes into the table the README quotes (CSV) and a readable report with
every accepted and unexplained survivor (Markdown).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

#: Columns of one module's row, after the group.
COLUMNS = ["group", "module", "mutants", "killed", "survived", "timed_out", "accepted",
           "unexplained", "not_run", "score"]
_COUNTS = ("mutants", "killed", "survived", "timed_out", "accepted", "unexplained", "not_run")


def score(r: dict[str, Any]) -> float | None:
    """(killed + timed out) / (mutants - accepted - not run); ``None`` when nothing counts."""
    denominator = r["mutants"] - r["accepted"] - r["not_run"]
    return None if denominator <= 0 else round((r["killed"] + r["timed_out"]) / denominator, 4)


def pct(value: float | None) -> str:
    """A score as a percentage with one decimal, ``n/a`` for none."""
    return "n/a" if value is None else f"{100 * value:.1f} %"


def write_csv(docs: list[dict[str, Any]], path: Path) -> None:
    """One row per mutated module of every group, with the run's date, revision and tool."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS + ["date", "git_revision", "tool"])
        for d in docs:
            prov = d["provenance"]
            for r in d["modules"]:
                w.writerow([d["group"]] + [r[c] for c in COLUMNS[1:]]
                           + [prov["date"], prov["git_revision"], prov["tool"]])


def render_markdown(docs: list[dict[str, Any]]) -> str:
    """The whole report: totals, provenance, then each group's survivors."""
    md = _summary(docs) + _provenance(docs)
    for d in docs:
        md += _group_section(d)
    return "\n".join(md).rstrip() + "\n"


def _summary(docs: list[dict[str, Any]]) -> list[str]:
    md = ["# Mutation testing of the safety checks", "",
          "Produced by `make mutation` (`mutation/run.py`); counts are measured by running the "
          "tests against every mutant; the score is `(killed + timed out) / (mutants - accepted "
          "- not run)`, true by construction from those counts.", "",
          "| group | module | mutants | killed | survived | timed out | accepted | unexplained "
          "| score |",
          "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    tot = dict.fromkeys(_COUNTS, 0)
    for d in docs:
        for r in d["modules"]:
            for k in tot:
                tot[k] += r[k]
            md.append(f"| {d['group']} | `{r['module']}` | {r['mutants']} | {r['killed']} | "
                      f"{r['survived']} | {r['timed_out']} | {r['accepted']} | "
                      f"{r['unexplained']} | {pct(r['score'])} |")
    md.append(f"| **all** | | {tot['mutants']} | {tot['killed']} | {tot['survived']} | "
              f"{tot['timed_out']} | {tot['accepted']} | {tot['unexplained']} | "
              f"{pct(score(tot))} |")
    return md


def _provenance(docs: list[dict[str, Any]]) -> list[str]:
    md = ["", "## Provenance", "",
          "| group | date (UTC) | git revision | tool | wall time | command |",
          "|---|---|---|---|---:|---|"]
    for d in docs:
        p = d["provenance"]
        dirty = "+dirty" if p["git_revision"].endswith("+dirty") else ""
        md.append(f"| {d['group']} | {p['date']} | `{p['git_revision'][:12]}{dirty}` "
                  f"| {p['tool']} | {p['wall_seconds']:.0f} s (measured) | `{p['command']}` |")
    return md


def _mutant_line(m: dict[str, Any], tail: str) -> str:
    return (f"- `{m['path']}:{m['line']}` {m['function']}: `{m['before']}` \u2192 "
            f"`{m['after']}` {tail}")


def _group_section(d: dict[str, Any]) -> list[str]:
    bad = [m for m in d["mutants"] if m["verdict"] in ("unexplained", "not run")]
    acc = [m for m in d["mutants"] if m["verdict"] == "accepted"]
    md = ["", f"## {d['group']}", "", d.get("description", ""), ""]
    if bad:
        md += ["Unexplained survivors (need a test or an `[[accepted]]` reason):", ""]
        md += [_mutant_line(m, f"({m['status']})") for m in bad]
        md.append("")
    if acc:
        md += ["Accepted survivors:", ""]
        md += [_mutant_line(m, f"\u2014 {m['reason']}") for m in acc]
        md.append("")
    if d.get("stale_accepted"):
        md += ["Stale accepted entries (match no survivor any more; delete them):", ""]
        md += [f"- {s['module']}:{s['function']}: `{s['before']}` \u2192 `{s['after']}`"
               for s in d["stale_accepted"]]
        md.append("")
    if not bad and not acc:
        md += ["Every mutant was killed.", ""]
    return md
