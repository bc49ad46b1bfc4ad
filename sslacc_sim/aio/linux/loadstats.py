"""What a fault campaign's captures and outcomes say: gaps, phases, zombies, bounds.

Pure functions over the client-side capture (:func:`~sslacc_sim.aio.linux.sniff.record_frames`
rows: ``(time, source MAC, client port, seq, payload length, flags, window)``; the client's own
segments have :data:`CLIENT` for a MAC, their acknowledgement for ``seq`` and their scaled
window) and the clients' outcomes, so that they can be tested on hand-made rows.

* :func:`flows_at` classifies every client connection by what it had received when the node
  died (``no-syn-ack``, ``handshake``: fewer than :data:`EARLY_BYTES` server bytes, the flights
  before the first application record; ``transfer``; ``finished``: the server's FIN was in)
  and finds its *gap*: from the kill to the first data segment from another node;
* :func:`zombie_frames` counts frames from the fenced node after it woke (data, FIN or reset);
* :func:`wilson_lower` is the 95 % lower confidence bound on a success fraction;
* :func:`gaps_by`, :func:`window_at_fault` and :func:`by_request` cut a campaign's tables
  (pandas) for its summary.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pandas as pd

__all__ = ["EARLY_BYTES", "CLIENT", "FlowAtKill", "flows_at", "zombie_frames", "wilson_lower",
           "quantile", "gaps_by", "window_at_fault", "by_request"]

#: Server bytes below which a connection counts as still in its handshake: the ServerHello
#: flight (about 1 KB with one 2048-bit certificate), the server's Finished and the first
#: record of the response head fit in it.
EARLY_BYTES = 4096
_FIN, _SYN, _RST, _ACK = 0x01, 0x02, 0x04, 0x10
#: The source of the client's own segments in a capture row (``mac`` column).
CLIENT = "client"


@dataclass(frozen=True)
class FlowAtKill:
    """One client connection as the capture shows it around the kill."""

    port: int
    phase: str
    had: int
    """Server bytes received before the kill."""
    gap_s: float | None
    """Kill to the first data segment from another node's MAC; ``None``: none came."""
    room: int | None = None
    """Bytes the client's receive window still allowed at the kill (its last acknowledgement
    plus its window, less the server bytes sent): under a segment, the client, not the
    server, held the next byte up. ``None``: no client segment was heard before the kill."""


def flows_at(rows: Iterable[Sequence[str | float]], kill: float, victim_mac: str
             ) -> dict[int, FlowAtKill]:  # fmt: skip
    """Every connection seen, by client port, classified at ``kill`` (module docstring).

    Segments from the victim after the kill do not end a gap: they were on their way when the
    link went down, or they are a zombie's (:func:`zombie_frames`)."""
    by_port: dict[int, list[tuple[float, str, int, int, int]]] = {}
    client: dict[int, tuple[int, int]] = {}  # port -> (ack, scaled window) last heard before the kill
    for row in rows:
        t, mac, port, seq, n, flags = (float(row[0]), str(row[1]), int(row[2]), int(row[3]),
                                       int(row[4]), int(row[5]))  # fmt: skip
        if mac == CLIENT:
            if t < kill and flags & _ACK:
                client[port] = (seq, int(row[6]))
            continue
        by_port.setdefault(port, []).append((t, mac, seq, n, flags))
    out = {}
    for port, segs in by_port.items():
        synack = [s for s in segs if s[4] & _SYN]
        base = (synack[0][2] + 1) if synack else None
        before = [s for s in segs if s[0] < kill]
        had = 0
        if base is not None:
            had = max((((s[2] - base) & 0xFFFFFFFF) + s[3] for s in before if s[3]), default=0)
        if not any(s[4] & _SYN for s in before):
            phase = "no-syn-ack"
        elif any(s[4] & _FIN for s in before):
            phase = "finished"
        elif had < EARLY_BYTES:
            phase = "handshake"
        else:
            phase = "transfer"
        gap = next((s[0] - kill for s in segs
                    if s[0] >= kill and s[3] and s[1] != victim_mac), None)  # fmt: skip
        room = None
        if base is not None and port in client:
            ack, window = client[port]
            room = ((ack - base) & 0xFFFFFFFF) + window - had
        out[port] = FlowAtKill(port, phase, had, gap, room)
    return out


def zombie_frames(rows: Iterable[Sequence[str | float]], victim_mac: str, woke: float) -> int:
    """Frames from ``victim_mac`` after ``woke`` carrying data, a FIN or a reset: anything
    of the fenced node's that could change what a client holds (a bare ACK cannot)."""
    return sum(1 for t, mac, _, _, n, flags, *_ in rows
               if float(t) >= woke and mac == victim_mac
               and (int(n) or int(flags) & (_RST | _FIN)))


def wilson_lower(successes: int, n: int, z: float = 1.959964) -> float:
    """The Wilson score interval's lower end for ``successes`` of ``n`` (95 % by default)."""
    if n <= 0:
        return float("nan")
    p = successes / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - spread) / (1 + z * z / n)


def quantile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile (linear interpolation), ``None`` for no values."""
    if not values:
        return None
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def by_request(conns: pd.DataFrame) -> dict[str, dict[str, int]]:
    """Connections and those byte-exact, by what they asked: a download, an upload, several
    requests on one connection (keep-alive), a resumed session."""
    upload, repeat = conns["upload"].astype(bool), conns["repeat"]
    kinds = {"download": ~upload & repeat.eq(1), "upload": upload, "keep-alive": repeat.gt(1),
             "resumed": conns["resume"].astype(bool)}  # fmt: skip
    return {k: {"connections": int(m.sum()), "completed_exact": int(conns[m]["ok"].sum())}
            for k, m in kinds.items()}


def window_at_fault(flows: pd.DataFrame) -> pd.Series:
    """``open``, ``closed`` or ``unknown``: whether each client's receive window had room at
    the fault (:attr:`~sslacc_sim.aio.linux.loadstats.FlowAtKill.room`)."""
    if "room" not in flows:
        return pd.Series("unknown", index=flows.index)
    room = flows["room"]
    return room.gt(0).map({True: "open", False: "closed"}).where(room.notna(), "unknown")


def gaps_by(flows: pd.DataFrame, column: str) -> dict[str, dict[str, float | int | None]]:
    """Fault-to-next-byte gaps of the affected connections (in the handshake or the transfer
    at the fault), per value of ``column``: count, median, p99, largest."""
    if not len(flows):
        return {}
    hit = flows[flows["phase"].isin(["handshake", "transfer"])]
    out = {}
    for key, group in hit.groupby(column):
        gaps = group["gap_s"].dropna().tolist()
        out[str(key)] = {"n": len(gaps), "without_gap": int(group["gap_s"].isna().sum()),
                         "p50_s": quantile(gaps, 0.5), "p99_s": quantile(gaps, 0.99),
                         "max_s": max(gaps, default=None)}  # fmt: skip
    return out
