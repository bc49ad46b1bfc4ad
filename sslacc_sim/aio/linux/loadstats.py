"""What a fault campaign's captures and outcomes say: gaps, phases, zombies, bounds.

Pure functions over the client-side capture (:func:`~sslacc_sim.aio.linux.probe.record_frames`
rows: ``(time, source MAC, client port, seq, payload length, flags, window)``; the client's own
segments have :data:`CLIENT` for a MAC, their acknowledgement for ``seq`` and their scaled
window) and the clients' outcomes, so that they can be tested on hand-made rows.

* :func:`flows_at` classifies every client connection by what it had received when the node
  died (``no-syn-ack``: its SYN was out, unanswered; ``handshake``: fewer than
  :data:`EARLY_BYTES` server bytes, the flights before the first application record;
  ``transfer``; ``finished``: the server's FIN was in, or the client had reset the connection
  (a client that closes first resets it when the server's close_notify comes; it waits for
  nothing more); ``after``: its SYN left after the fault,
  so the fault did not hit it)
  and finds its *gap*: from the kill to the first segment from another node that moves the
  client on (new server bytes, or an acknowledgement of client bytes it accepts), and whether
  the client sent anything again before that (a second SYN, or data with no new byte: its
  retransmission timer fired, or duplicate acknowledgements made it resend), and, for a
  client whose receive window was closed at the fault, when it opened it again: the *wait*
  (:func:`waits`) is the gap counted from the instant the client could take a byte, the
  cluster's part of it;
* :func:`zombie_frames` counts frames from the fenced node after it woke (data, FIN or reset);
* :func:`wilson_lower` is the 95 % lower confidence bound on a success fraction;
* :func:`gaps_by`, :func:`window_at_fault`, :func:`clients_at_fault` and :func:`by_request`
  cut a campaign's tables (pandas) for its summary.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

__all__ = ["EARLY_BYTES", "HIT", "CLIENT", "FlowAtKill", "flows_at", "zombie_frames", "wilson_lower",
           "quantile", "gaps_by", "resends", "window_at_fault", "waits", "clients_at_fault",
           "by_request", "campaign_summary"]

#: Server bytes below which a connection counts as still in its handshake: the ServerHello
#: flight (about 1 KB with one 2048-bit certificate), the server's Finished and the first
#: record of the response head fit in it.
EARLY_BYTES = 4096
_FIN, _SYN, _RST, _ACK = 0x01, 0x02, 0x04, 0x10
#: The phases of a connection the fault hit: its next server byte waits for the takeover.
HIT = ("no-syn-ack", "handshake", "transfer")
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
    """Kill to the first segment from another node's MAC that moves the client on (new
    server bytes, or an accepted acknowledgement of new client bytes); ``None``: none came."""
    room: int | None = None
    """Bytes the client's receive window still allowed at the kill (its last acknowledgement
    plus its window, less the server bytes sent): under a segment, the client, not the
    server, held the next byte up. ``None``: no client segment was heard before the kill."""
    resent_s: float | None = None
    """Kill to the client's first resend after the kill and before its gap ended (a second
    SYN, or a data segment with no byte it had not sent before); ``None``: none. A next byte
    that follows it closely answered the client's own resend, not the takeover."""
    opened_s: float | None = None
    """For a client whose window was closed at the kill (:attr:`room` 0 or less): kill to its
    first segment after the kill whose acknowledgement plus window leaves room for a server
    byte it has not had (it read, and said so); ``None`` otherwise, or when no such segment
    came. No server, dead or alive, could send it a byte before then."""


def flows_at(rows: Iterable[Sequence[str | float]], kill: float, victim_mac: str
             ) -> dict[int, FlowAtKill]:  # fmt: skip
    """Every connection seen, by client port, classified at ``kill`` (module docstring).

    The gap ends at the first segment from another node that moves the client on: one that
    carries server bytes the client has not acknowledged yet, or (rows with an ``ack`` column)
    one the client accepts -- its sequence number not below the client's last
    acknowledgement -- whose acknowledgement covers client bytes no server segment had
    acknowledged before (an uploading client waits for that, not for data). A window probe
    (its sequence number one below) or a retransmission of what the client holds is not it.
    Segments from the victim after the kill do not end a gap either: they were on their way
    when the link went down, or they are a zombie's (:func:`zombie_frames`)."""
    by_port: dict[int, list[tuple[float, str, int, int, int, int | None]]] = {}
    side = _ClientSide()
    for row in rows:
        t, mac, port, seq, n, flags = (float(row[0]), str(row[1]), int(row[2]), int(row[3]),
                                       int(row[4]), int(row[5]))  # fmt: skip
        if mac == CLIENT:
            side.take(row, kill)
            continue
        ack = int(row[7]) if len(row) > 7 and flags & _ACK else None
        by_port.setdefault(port, []).append((t, mac, seq, n, flags, ack))
    out = {}
    for port in side.first_syn.keys() - by_port.keys():
        by_port[port] = []  # a SYN never answered at all
    for port, segs in by_port.items():
        segs.sort(key=lambda s: s[0])
        synack = [s for s in segs if s[4] & _SYN]
        base = (synack[0][2] + 1) if synack else None
        before = [s for s in segs if s[0] < kill]
        had = 0
        if base is not None:
            had = max((((s[2] - base) & 0xFFFFFFFF) + s[3] for s in before if s[3]), default=0)
        if port in side.first_syn and side.first_syn[port] >= kill:
            phase = "after"
        elif not any(s[4] & _SYN for s in before):
            phase = "no-syn-ack"
        elif any(s[4] & _FIN for s in before) or port in side.reset:
            phase = "finished"
        elif had < EARLY_BYTES:
            phase = "handshake"
        else:
            phase = "transfer"
        gap = _gap(segs, sorted(side.acks.get(port, [])), kill, victim_mac)
        room = None
        if base is not None and port in side.last:
            ack, window = side.last[port]
            room = ((ack - base) & 0xFFFFFFFF) + window - had
        until = math.inf if gap is None else kill + gap
        opened = None
        if room is not None and room <= 0 and base is not None:
            opened = _opened(side.acks.get(port, []), kill, base, had)
        out[port] = FlowAtKill(port, phase, had, gap, room,
                               _resent(side.sends.get(port, []), kill, until), opened)  # fmt: skip
    return out


@dataclass
class _ClientSide:
    """What the clients' own segments (rows with :data:`CLIENT` for a MAC) say, by port."""

    last: dict[int, tuple[int, int]] = field(default_factory=dict)
    """The acknowledgement and scaled window last heard before the kill."""
    acks: dict[int, list[tuple[float, int, int]]] = field(default_factory=dict)
    """The client's acknowledgements with their scaled windows, ``(time, ack, window)``."""
    first_syn: dict[int, float] = field(default_factory=dict)
    """When the client first sent its SYN."""
    reset: set[int] = field(default_factory=set)
    """The client reset the connection before the kill."""
    sends: dict[int, list[tuple[float, int, int, bool]]] = field(default_factory=dict)
    """Its SYNs and data segments, ``(time, own sequence number, length, SYN)``: from rows
    with the ``ack`` column only, which holds a client's own sequence number."""

    def take(self, row: Sequence[str | float], kill: float) -> None:
        """One client row."""
        t, port, seq, n, flags = (float(row[0]), int(row[2]), int(row[3]), int(row[4]),
                                  int(row[5]))  # fmt: skip
        if flags & _RST and t < kill:
            self.reset.add(port)
        if flags & _SYN:
            self.first_syn[port] = min(t, self.first_syn.get(port, t))
        elif flags & _ACK:
            self.acks.setdefault(port, []).append((t, seq, int(row[6])))
            if t < kill:
                self.last[port] = (seq, int(row[6]))
        if len(row) > 7 and (flags & _SYN or n):
            self.sends.setdefault(port, []).append((t, int(row[7]), n, bool(flags & _SYN)))


def _opened(acks: Sequence[tuple[float, int, int]], kill: float, base: int, had: int
            ) -> float | None:  # fmt: skip
    """Kill to the client's first segment at or after it whose acknowledgement (relative to
    ``base``) plus window passes ``had``, the server bytes it held (:attr:`FlowAtKill.opened_s`)."""
    for t, ack, window in sorted(acks):
        if t >= kill and ((ack - base) & 0xFFFFFFFF) + window - had > 0:
            return t - kill
    return None


def _resent(sends: Sequence[tuple[float, int, int, bool]], kill: float, until: float
            ) -> float | None:  # fmt: skip
    """Kill to the client's first resend in ``[kill, until)``: a SYN after its first, or a
    data segment none of whose bytes are new (:attr:`FlowAtKill.resent_s`)."""
    high: int | None = None  # the sequence number after the highest byte sent so far
    syn = False
    for t, seq, n, is_syn in sorted(sends):
        old = syn if is_syn else high is not None and not _after((seq + n) & 0xFFFFFFFF, high)
        if old and kill <= t < until:
            return t - kill
        if is_syn:
            syn = True
        elif not old:
            high = (seq + n) & 0xFFFFFFFF
    return None


def _after(a: int, b: int) -> bool:
    """``a`` is after ``b`` in 32-bit sequence space."""
    return 0 < (a - b) & 0xFFFFFFFF < 1 << 31


def _gap(segs: Sequence[tuple[float, str, int, int, int, int | None]],
         client_acks: Sequence[tuple[float, int, int]], kill: float, victim_mac: str
         ) -> float | None:  # fmt: skip
    """Kill to the first server segment that moves the client on (:func:`flows_at`)."""
    acked: int | None = None  # the client's last acknowledgement so far
    server_ack: int | None = None  # the highest acknowledgement a server segment carried
    i = 0
    for t, mac, seq, n, flags, ack in segs:
        while i < len(client_acks) and client_acks[i][0] <= t:
            acked = client_acks[i][1]
            i += 1
        if flags & _SYN:
            server_ack = ack
            continue
        accepted = acked is None or not _after(acked, seq)
        if t >= kill and mac != victim_mac:
            news = n > 0 and (acked is None or _after((seq + n) & 0xFFFFFFFF, acked))
            moves = (ack is not None and accepted
                     and (server_ack is None or _after(ack, server_ack)))  # fmt: skip
            if news or moves:
                return t - kill
        if ack is not None and accepted and (server_ack is None or _after(ack, server_ack)):
            server_ack = ack
    return None


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


def resends(flows: pd.DataFrame) -> dict[str, float | int | None]:
    """Of the connections the fault hit (:data:`HIT`), how many clients sent something again
    between the fault and their next byte (:attr:`FlowAtKill.resent_s`), when (median,
    largest), and after how many of those resends the next byte came within 20 ms: the
    client's own resend, not the takeover, then moved it on. The 150 ms target is there so
    that no client waits for its own retransmission timer (200 ms or more)."""
    if not len(flows) or "resent_s" not in flows:
        return {"n": 0, "resent": 0, "p50_s": None, "max_s": None, "answered_within_20ms": 0}
    hit = flows[flows["phase"].isin(HIT)]
    resent = hit[hit["resent_s"].notna()]
    answered = resent["gap_s"].notna() & (resent["gap_s"] - resent["resent_s"]).lt(0.02)
    return {"n": len(hit), "resent": len(resent),
            "p50_s": quantile(resent["resent_s"].tolist(), 0.5),
            "max_s": max(resent["resent_s"].tolist(), default=None),
            "answered_within_20ms": int(answered.sum())}  # fmt: skip


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


def waits(flows: pd.DataFrame) -> pd.Series:
    """Each flow's gap counted from when the client could take a byte (``wait_s``): for a
    client whose window was closed at the fault and opened after it (``opened_s``), the gap
    less that opening, the part of the wait that was the cluster's; else the gap itself (also
    when the next byte came before the window opened: an acknowledgement of an upload)."""
    gap = pd.to_numeric(flows["gap_s"], errors="coerce")  # all None: an object column
    if "opened_s" not in flows:
        return gap
    opened = pd.to_numeric(flows["opened_s"], errors="coerce")
    later = opened.notna() & gap.notna() & opened.le(gap)
    return gap.where(~later, gap - opened)


def gaps_by(flows: pd.DataFrame, column: str, value: str = "gap_s"
            ) -> dict[str, dict[str, float | int | None]]:  # fmt: skip
    """Fault-to-next-byte gaps of the affected connections (:data:`HIT`: a SYN out and
    unanswered, in the handshake or in the transfer at the fault), per value of ``column``:
    count, median, p99, largest (of column ``value``: ``wait_s`` for :func:`waits`)."""
    if not len(flows):
        return {}
    hit = flows[flows["phase"].isin(HIT)]
    out = {}
    for key, group in hit.groupby(column):
        gaps = group[value].dropna().tolist()
        out[str(key)] = {"n": len(gaps), "without_gap": int(group[value].isna().sum()),
                         "p50_s": quantile(gaps, 0.5), "p99_s": quantile(gaps, 0.99),
                         "max_s": max(gaps, default=None)}  # fmt: skip
    return out


def clients_at_fault(flows: pd.DataFrame) -> pd.Series:
    """``starting`` or ``started``: whether some client of the flow's trial had not sent its
    SYN yet at the fault (a flow of that trial in the ``after`` phase). While the load's
    clients start, their processes share the machine's two cores with the cluster: the
    gaps then are the load's as much as the fault's (compare the baseline trials')."""
    if "trial" not in flows:
        return pd.Series("unknown", index=flows.index, dtype=object)
    starting = set(flows.loc[flows["phase"] == "after", "trial"])
    return flows["trial"].isin(starting).map({True: "starting", False: "started"})


def _baseline(flows: pd.DataFrame) -> dict[str, Any]:
    """The baseline trials' gaps (no fault, from an instant drawn as a fault's): overall, by
    phase, by window and while the clients start."""
    gaps = flows[flows["phase"].isin(HIT)]["gap_s"].dropna().tolist() if len(flows) else []
    return {"trials": int(flows["trial"].nunique()) if len(flows) else 0,
            "gap_p50_s": quantile(gaps, 0.5), "gap_p99_s": quantile(gaps, 0.99),
            "gap_max_s": max(gaps, default=None), "n": len(gaps),
            "gap_by_phase": gaps_by(flows, "phase"),
            "gap_by_window": gaps_by(flows.assign(window=window_at_fault(flows)), "window")
            if len(flows) else {},
            "wait_by_window": gaps_by(flows.assign(window=window_at_fault(flows),
                                                   wait_s=waits(flows)), "window", "wait_s")
            if len(flows) else {},
            "gap_by_clients": gaps_by(flows.assign(clients=clients_at_fault(flows)), "clients")
            if len(flows) else {}, "resends": resends(flows)}  # fmt: skip


def _windows(flows: pd.DataFrame, kills: pd.DataFrame) -> dict[str, Any]:
    """The fault trials' gaps by the client's window at the fault and by whether every client
    had started, and the waits counted from a closed window's opening (:func:`waits`)."""
    if not len(flows):
        return {"gap_by_window": {}, "gap_by_window_after_kills": {},
                "gap_by_clients_after_kills": {}, "wait_by_window_after_kills": {},
                "wait_after_kills": None}  # fmt: skip
    return {
        # the client's receive window at the fault: "closed" (no room for a byte) means the
        # client's own reading, not the takeover, paced its next byte
        "gap_by_window": gaps_by(flows.assign(window=window_at_fault(flows)), "window"),
        # the same after kills only (kill and double): the 30 / 150 ms targets are for them; a
        # hang's gap cannot be shorter than the keepalive timeout that detects it (0.2 s)
        "gap_by_window_after_kills": gaps_by(
            kills.assign(window=window_at_fault(kills)), "window"),
        "gap_by_clients_after_kills": gaps_by(
            kills.assign(clients=clients_at_fault(kills)), "clients"),
        # the same gaps counted from when each client could take a byte (a closed window's
        # opening), by the window at the fault: the 30 / 150 ms targets for every client
        "wait_by_window_after_kills": gaps_by(
            kills.assign(window=window_at_fault(kills), wait_s=waits(kills)), "window",
            "wait_s"),
        "wait_after_kills": gaps_by(kills.assign(every="all", wait_s=waits(kills)), "every",
                                    "wait_s").get("all"),
    }  # fmt: skip


def campaign_summary(config: dict[str, Any], trials: pd.DataFrame, conns: pd.DataFrame,
                     flows: pd.DataFrame) -> dict[str, Any]:  # fmt: skip
    """The campaign's ``summary.json`` from its three tables (``config``: its settings, with
    ``modes``): success fraction and its 95 % lower bound, faults answered, zombies, the gaps
    of the connections the faults hit (:data:`HIT`) by phase, mode, window and whether the
    clients were still starting, resumptions; and the same gaps in the baseline trials
    (``mode`` ``none`` with an instant: ``baseline``), where nothing failed."""
    base = flows[flows["mode"] == "none"] if len(flows) else flows
    flows = flows[flows["mode"] != "none"] if len(flows) else flows
    faults = trials[trials["mode"] != "none"]
    fconns = conns[conns["mode"] != "none"] if len(conns) else conns
    n, ok = len(fconns), int(fconns["ok"].sum()) if len(fconns) else 0
    gaps = (flows[flows["phase"].isin(HIT)]["gap_s"].dropna().tolist()
            if len(flows) else [])  # fmt: skip
    kills = flows[flows["mode"] != "hang"] if len(flows) else flows
    return {
        "config": config,
        "kills": len(faults), "connections": n, "completed_exact": ok,
        "success_fraction": ok / n if n else None,
        "success_lower95": wilson_lower(ok, n) if n else None,
        "silently_wrong": int(conns["silently_wrong"].sum()) if len(conns) else 0,
        "control_trial_ok": bool(trials[trials["mode"] == "none"]["failed"].sum() == 0),
        "took_over": int(faults["took_over"].fillna(False).sum()),
        "takeovers_before_fault": int(faults.get("takeover_before_fault", pd.Series(dtype=bool))
                                      .fillna(False).astype(bool).sum()),
        "zombie_frames": int(faults["zombie_frames"].fillna(0).sum()),
        # frames the clients' captures had no room for (their phases and gaps miss them)
        "capture_drops": int(trials.get("capture_drops", pd.Series(dtype=float)).fillna(0).sum()),
        "gap_p50_s": quantile(gaps, 0.5), "gap_p99_s": quantile(gaps, 0.99),
        "gap_max_s": max(gaps, default=None),
        "gap_by_phase": gaps_by(flows, "phase"), "gap_by_mode": gaps_by(flows, "mode"),
        **_windows(flows, kills),
        # clients that sent again between a kill and their next byte: their own timer fired
        "resends_after_kills": resends(kills),
        **({"baseline": _baseline(base)} if len(base) else {}),
        "phase_at_fault": (flows["phase"].value_counts().to_dict() if len(flows) else {}),
        "detect_p50_s": {m: quantile(faults[faults["mode"] == m]["detect_s"].dropna().tolist(),
                                     0.5) for m in config["modes"]},
        # a kill noticed late: the dying process's exit (its links close in it) or the heir
        "slow_detections": _slow_detections(faults),
        "crashed": _crashed(trials),
        "by_mode": {m: {"connections": int((fconns["mode"] == m).sum()),
                        "completed_exact": int(fconns[fconns["mode"] == m]["ok"].sum())}
                    for m in config["modes"]} if n else {},
        "by_request": by_request(fconns) if n else {},
        # resumptions the clients asked for and the abbreviated handshakes they got (the
        # shared session table: a session made on the dead owner resumes on the new one)
        "resumptions": {"asked": int(fconns["resume"].astype(bool).sum()) if n else 0,
                        "reused": int(fconns["resumed"].fillna(False).astype(bool).sum())
                        if n else 0},
    }  # fmt: skip


def _crashed(trials: pd.DataFrame) -> list[dict[str, Any]] | None:
    """The trials with a node that died of a signal the campaign never sends (a segmentation
    fault, an abort: ``crashed``, recorded by :func:`~.campaign_load.record_exits`); ``None``
    for a run that did not record how its nodes ended."""
    if "crashed" not in trials:
        return None
    return [{"trial": int(r["trial"]), "crashed": str(r["crashed"])}
            for _, r in trials.iterrows() if isinstance(r["crashed"], str)]  # fmt: skip


#: A kill noticed later than this (seconds) is listed in the summary with its exit time.
SLOW_DETECTION_S = 0.05


def _slow_detections(faults: pd.DataFrame) -> list[dict[str, Any]]:
    """The kills (not hangs: a hang is noticed by the keepalive timeout) that the heir noticed
    more than :data:`SLOW_DETECTION_S` after the kill, each with when the killed process had
    exited (``exited_s``, both from the kill): an exit as late as the detection means the
    dying process's teardown, not the heir, was slow; with the victim's resident memory (MB)
    and threads at the kill (``rss_mb``, ``threads``; ``None`` in runs without them), what
    that teardown had to free; and when the heir's watch heard the death (``woke_s``): a
    detection well after it is the heir's own choice of who fences (a tie-break wait), not
    the death's news arriving late."""
    if "detect_s" not in faults or "exited_s" not in faults:
        return []
    slow = faults[(faults["mode"] != "hang") & (faults["detect_s"] > SLOW_DETECTION_S)]
    def heard(r: pd.Series) -> float | None:  # when the heir's watch woke (None: not recorded)
        x = r.get("woke_s")
        return None if x is None or pd.isna(x) else round(float(x), 4)

    def victim(r: pd.Series, column: str) -> float | None:  # a double's detection: its second
        x = r.get("second_" + column) if r["mode"] == "double" else r.get(column)
        return None if x is None or pd.isna(x) else float(x)

    return [{"trial": int(r["trial"]), "mode": str(r["mode"]),
             "kill_at_s": round(float(r["kill_at_s"]), 3), "detect_s": round(float(r["detect_s"]), 4),
             "exited_s": victim(r, "exited_s"), "rss_mb": victim(r, "rss_mb"),
             "threads": victim(r, "threads"), "woke_s": heard(r)}
            for _, r in slow.iterrows()]  # fmt: skip
