"""Zero-window spells: how long the load's clients keep their receive window closed.

A campaign measures the gap from a fault to each client's next byte. When the client's window
is closed at that instant the next byte waits for the client to read, whatever the cluster
does, so the gap is the rest of the client's *zero-window spell*: from its segment that
advertises a window of 0 to its next segment that opens it. This module measures those spells
on the client's own segments in a campaign's captures (``campaign --pcap DIR``), split by when
a spell began: long before the fault (the load's own pace), or around it (from 50 ms before
to 300 ms after: what a takeover could lengthen, e.g. by taking the cores the clients need).
If the spells around a kill are as long as the others, a closed-window connection's wait after
a kill is the client's.

``python -m sslacc_sim.aio.linux.spells DIR [--csv OUT]`` reads every ``t<N>.pcap`` with its
``t<N>.json`` (the fault's instant on the capture's clock) in ``DIR``, prints the spells'
quantiles as JSON (fault trials and baseline trials apart) and writes every spell to ``OUT``.
Needs ``tshark`` (Debian package ``tshark``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from testbed import cli

__all__ = ["AROUND", "client_segments", "zero_window_spells", "spell_summary", "main"]

#: Spells that begin in this span (seconds from the fault) count as "around" it.
AROUND = (-0.05, 0.3)
_FIELDS = ("frame.time_epoch", "tcp.srcport", "tcp.window_size")


def client_segments(pcap: Path, fault_epoch: float, port: int = 443) -> pd.DataFrame:
    """The clients' own segments without payload or SYN in ``pcap`` (``tshark``): ``t``
    (seconds from the fault), ``port`` (the client's) and ``window`` (scaled, as ``tshark``
    reads it from the SYN's window scale option), in capture order (the kernel's; two
    timestamps may be a few microseconds out of order)."""
    out = subprocess.run(
        ["tshark", "-r", str(pcap), "-Y", f"tcp.dstport=={port} && tcp.len==0 && tcp.flags.syn==0",
         "-T", "fields", *(a for f in _FIELDS for a in ("-e", f))],
        capture_output=True, text=True, check=True).stdout  # fmt: skip
    rows = [line.split("\t") for line in out.splitlines() if line.count("\t") == 2]
    return pd.DataFrame({"t": [float(r[0]) - fault_epoch for r in rows],
                         "port": [int(r[1]) for r in rows],
                         "window": [int(r[2]) if r[2] else -1 for r in rows]})  # fmt: skip


def zero_window_spells(segments: pd.DataFrame) -> pd.DataFrame:
    """Every spell in ``segments`` (columns ``t``, ``port``, ``window``, in capture order): a
    client's segment with window 0 opens one, its next segment with a window above 0 ends it.
    Returns ``port``, ``start`` and ``length`` (seconds); a spell the capture never saw end is
    left out. A window of -1 (unknown) neither opens nor ends a spell."""
    opened: dict[int, float] = {}
    spells: list[tuple[int, float, float]] = []
    for t, port, window in zip(segments["t"], segments["port"], segments["window"], strict=True):
        if window == 0:
            opened.setdefault(int(port), float(t))
        elif window > 0 and int(port) in opened:
            start = opened.pop(int(port))
            spells.append((int(port), start, float(t) - start))
    return pd.DataFrame(spells, columns=["port", "start", "length"])


def spell_summary(spells: pd.DataFrame, around: tuple[float, float] = AROUND) -> dict[str, Any]:
    """``n``, median, p90, p99 and max of the spells' lengths, for those that began before
    ``around`` (``before``) and those that began in it (``around``)."""
    def stats(lengths: pd.Series) -> dict[str, Any]:
        if lengths.empty:
            return {"n": 0}
        q = np.quantile(lengths, [0.5, 0.9, 0.99])
        return {"n": len(lengths), "p50_s": float(q[0]), "p90_s": float(q[1]),
                "p99_s": float(q[2]), "max_s": float(lengths.max())}  # fmt: skip

    lo, hi = around
    return {"before": stats(spells.loc[spells["start"] < lo, "length"]),
            "around": stats(spells.loc[(spells["start"] >= lo) & (spells["start"] < hi), "length"])}


def _read_dir(folder: Path) -> pd.DataFrame:
    """Every spell of every trial in ``folder`` with its trial and mode."""
    frames = []
    for meta_path in sorted(folder.glob("t*.json")):
        pcap = meta_path.with_suffix(".pcap")
        try:
            meta = json.loads(meta_path.read_text())
            trial, fault, mode = int(meta_path.stem[1:]), meta.get("kill_epoch"), str(meta["mode"])
        except (ValueError, KeyError, TypeError, AttributeError):
            raise cli.CLIError(f"{meta_path}: not a campaign's fault record") from None
        if fault is None or not pcap.exists():
            continue  # the first baseline trial draws no instant
        try:
            segments = client_segments(pcap, float(fault))
        except FileNotFoundError:
            raise cli.CLIError("needs tshark (Debian package tshark)") from None
        except subprocess.CalledProcessError as exc:
            said = [line for line in exc.stderr.splitlines() if line.startswith("tshark:")]
            why = " ".join(said[-1].split()) if said else f"exit status {exc.returncode}"
            raise cli.CLIError(f"cannot read {pcap} ({why[:200]})") from None
        frames.append(zero_window_spells(segments).assign(trial=trial, mode=mode))
    if not frames:
        raise cli.CLIError(f"{folder}: no t<N>.pcap with its t<N>.json and a fault instant")
    return pd.concat(frames, ignore_index=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point; see the module docstring."""
    p = argparse.ArgumentParser(prog=cli.program_name("sslacc_sim.aio.linux.spells"),
                                description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", type=cli.existing_directory, help="a campaign's --pcap folder")
    p.add_argument("--csv", help="write every spell (trial, mode, port, start, length) here")

    def body(args: argparse.Namespace) -> int:
        spells = _read_dir(Path(args.folder))
        if args.csv:
            Path(args.csv).parent.mkdir(parents=True, exist_ok=True)
            spells.to_csv(args.csv, index=False)
        faults = spells["mode"] != "none"
        print(json.dumps({"faults": spell_summary(spells[faults]),
                          "baselines": spell_summary(spells[~faults])}, indent=2))  # fmt: skip
        return 0

    return cli.run_main(p, body, argv)


if __name__ == "__main__":
    sys.exit(main())
