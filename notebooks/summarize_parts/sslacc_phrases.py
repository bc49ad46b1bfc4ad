"""Phrases the SSLACC campaign rows share (README ``systems`` table, :mod:`.systems`).

Each takes a campaign's ``summary.json`` (``sslacc_sim.aio.linux.campaign``) and returns a
clause of the row, or nothing when the run did not measure it: a summary from an older run
renders as it did then.
"""

from __future__ import annotations

from typing import Any

__all__ = ["exact_by", "campaign_resends", "campaign_slow", "campaign_crashed",
           "campaign_baseline", "campaign_waits"]


def exact_by(groups: dict[str, dict[str, int]], sep: str) -> str:
    """``kill 960 of 960 / hang ...``: a campaign's byte-exact connections per group."""
    return sep.join(f"{k} {v['completed_exact']:,} of {v['connections']:,}" for k, v in groups.items())


def campaign_resends(d: dict[str, Any]) -> str:
    """How many clients the kills hit sent something again before their next byte (their own
    retransmission timer fired), and how many frames the clients' capture had no room for,
    when the run measured them."""
    drops = (f"; frames the client-side capture had no room for {d['capture_drops']:,}"
             if "capture_drops" in d else "")
    r = d.get("resends_after_kills")
    if not r or not r.get("n"):
        return drops
    when = (f", {r['p50_s']:.3f} s median, {r['max_s']:.3f} s at most after the kill"
            if r["resent"] else "")
    return (f"; clients that sent again between a kill and their next byte (their own timer "
            f"fired): {r['resent']} of {r['n']}{when}, the next byte within 20 ms of the resend "
            f"for {r['answered_within_20ms']}" + drops)


def campaign_slow(d: dict[str, Any]) -> str:
    """The kills the heir noticed late (more than 0.05 s after), beside when the killed process
    had exited, when the run measured it."""
    slow = d.get("slow_detections")
    if slow is None:
        return ""
    if not slow:
        return "; kills noticed more than 0.05 s after the kill: none"
    exits = sorted(s["exited_s"] for s in slow if s["exited_s"] is not None)
    detects = sorted(s["detect_s"] for s in slow)
    sizes = sorted(s["rss_mb"] for s in slow if s.get("rss_mb") is not None)
    size = f", holding a median {sizes[len(sizes) // 2]:.0f} MB at the kill" if sizes else ""
    return (f"; kills noticed more than 0.05 s after the kill: {len(slow)} (median "
            f"{detects[len(detects) // 2]:.3f} s; the killed process had exited after a median "
            + (f"{exits[len(exits) // 2]:.3f} s{size})" if exits else "that was not measured)"))


def campaign_crashed(d: dict[str, Any]) -> str:
    """The nodes that died of a signal the campaign never sends (a segmentation fault, an
    abort), when the run recorded how each node ended."""
    crashed = d.get("crashed")
    if crashed is None:
        return ""
    return ("; nodes that died of a signal the campaign never sends: "
            + (", ".join(f"trial {c['trial']} {c['crashed']}" for c in crashed) or "none"))


def campaign_baseline(d: dict[str, Any]) -> str:
    """The campaign's gaps after kills split by whether every client had started, beside the
    same gaps in its baseline trials (no fault), when the run measured them."""
    base, split = d.get("baseline"), d.get("gap_by_clients_after_kills", {})
    if not base or not base.get("n"):
        return ""

    def pair(g: dict[str, Any] | None) -> str:
        return f"{g['p50_s']:.3f} / {g['p99_s']:.3f} s" if g and g.get("n") else "none"

    by = base.get("gap_by_clients", {})
    out = (f"; the load alone ({base['trials']} trials without a fault, the gap measured from "
           f"an instant drawn as a fault's): "
           f"{pair({'n': base['n'], 'p50_s': base['gap_p50_s'], 'p99_s': base['gap_p99_s']})}, {pair(by.get('starting'))} while "
           f"clients were still starting, {pair(by.get('started'))} once all had; after kills "
           f"{pair(split.get('starting'))} while clients were starting, "
           f"{pair(split.get('started'))} once all had")
    window, base_window = d.get("gap_by_window_after_kills", {}), base.get("gap_by_window", {})
    if window and base_window:
        def n(g: dict[str, Any] | None) -> str:
            return f" (n = {g['n']})" if g and g.get("n") else ""

        out += (f"; by the client's receive window at the instant: open, after kills "
                f"{pair(window.get('open'))}{n(window.get('open'))} and with no fault "
                f"{pair(base_window.get('open'))}{n(base_window.get('open'))}; closed (the next "
                f"byte waits for the client to read), after kills {pair(window.get('closed'))}"
                f"{n(window.get('closed'))} and with no fault {pair(base_window.get('closed'))}"
                f"{n(base_window.get('closed'))}")
    return out


def campaign_waits(d: dict[str, Any], by_role: bool = False) -> str:
    """The gaps after kills counted from when each client could take a byte (a window closed
    at the kill counts from its opening: the cluster's part of the wait), by the window at the
    kill and, for the bucket layout (``by_role``), by whose buckets the connection was in;
    when the run measured them."""
    every, window = d.get("wait_after_kills"), d.get("wait_by_window_after_kills", {})
    if not every or not every.get("n"):
        return ""

    def pair(g: dict[str, Any] | None) -> str:
        return (f"{g['p50_s']:.3f} / {g['p99_s']:.3f} s (n = {g['n']})" if g and g.get("n")
                else "none")

    roles = d.get("wait_by_role_after_kills", {}) if by_role else {}
    return (f"; counted from when the client could take a byte (a window closed at the kill "
            f"from its opening), after kills {pair(every)}: window open {pair(window.get('open'))}, "
            f"closed {pair(window.get('closed'))}"
            + "".join(f", the {role}'s {pair(g)}" for role, g in roles.items() if g["n"])
            + " (target 0.030 / 0.150 s)")
