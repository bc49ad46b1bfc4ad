"""The fault campaign's bookkeeping: what a download counts as, which fault strikes when, totals.

Sans-IO: no sockets, no clock, no global ``random`` -- the campaign
(:mod:`webalps_sim.aio.campaign`) runs the processes and clients and hands their observations
here.

**A download's outcome** (:func:`classify`) joins two views of one download:

* the *client's own verdict* -- ``accepted`` when the client reported success: status 200 and
  a body as long as the ``Content-Length`` it was announced, with no error on the way (Python's
  ``http.client`` raises ``IncompleteRead`` on a short body; ``curl`` exits 18);
* the *truth* -- the SHA-256 of the file in the docroot, which the campaign knows.

====================  ========================================================================
outcome               meaning
====================  ========================================================================
``complete``          accepted, and the body is the file, byte for byte
``failed-closed``     not accepted: the client saw an error, a short body or a wrong status
                      and reported the download as failed
``accepted-partial``  accepted, but the bytes differ from the file or are short: the one
                      outcome a fault must never cause
====================  ========================================================================

**A trial** (:func:`plan_trials`) is one fault at a random instant while the clients download,
drawn from an injected ``random.Random``:

* ``kill`` -- SIGKILL the guardian; restart it (same state directory) after ``duration`` s;
* ``freeze`` -- SIGSTOP the guardian for ``duration`` s, then SIGCONT;
* ``garbage`` -- a rogue host connects to the guardian's socket and sends random bytes, a
  malformed frame, or a header announcing a huge frame (``variant``);
* ``garbage-reply`` -- a relay between host and guardian corrupts one reply (its payload or its
  header, ``variant``): the host must fail the connection that asked, closed.

:func:`summarize` turns the per-trial rows into totals per fault kind and the success fraction
(complete / attempted) the README quotes.
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from . import codec

__all__ = [
    "OUTCOMES", "FAULTS", "Rng", "GARBAGE_VARIANTS", "REPLY_VARIANTS", "Timing", "TrialPlan",
    "COLUMNS", "CONTROL_EXPECTED", "classify", "plan_trials", "garbage", "cut_frames",
    "corrupt_frame", "describe_reply", "broken_response", "control_summary", "summarize",
    "describe",
]

_T = TypeVar("_T")


class Rng(Protocol):
    """What this module draws from: a ``random.Random(seed)`` the caller owns (injected, so a
    campaign is repeated by its seed alone)."""

    def uniform(self, a: float, b: float) -> float: ...
    def choice(self, seq: Sequence[_T]) -> _T: ...
    def shuffle(self, x: list[Any]) -> None: ...
    def getrandbits(self, k: int) -> int: ...
    def randrange(self, start: int, stop: int = ...) -> int: ...
    def randbytes(self, n: int) -> bytes: ...


OUTCOMES = ("complete", "failed-closed", "accepted-partial")
"""Every download is exactly one of these (see the module docstring)."""

FAULTS = ("kill", "freeze", "garbage", "garbage-reply")
"""The fault kinds, in the order a campaign covers them first."""

COLUMNS = ("trial", "seed", "fault", "variant", "instant_s", "duration_s", "downloads",
           *OUTCOMES, "slowest_download_s", "host_alive", "resumed", "time_to_resume_s",
           "detail")
"""The columns of the per-trial CSV file."""

CONTROL_EXPECTED = {"good": "complete", "short": "failed-closed", "lying": "accepted-partial",
                    "tls-cut": "failed-closed"}
"""The negative control's broken servers and the one outcome each must give: an honest plain
HTTP server; one that closes after half the body it announced; one that announces half the
body as the whole; and a relay that cuts a WebALPS (TLS) response halfway, without
close_notify."""

GARBAGE_VARIANTS = ("random-bytes", "malformed-frame", "huge-frame")
"""What a rogue host sends the guardian."""

REPLY_VARIANTS = ("payload", "header")
"""Which part of one guardian reply the relay corrupts."""


def classify(accepted: bool, body: bytes, sha256: str) -> str:
    """The outcome of one download: the client's verdict ``accepted`` against the truth.

    >>> digest = hashlib.sha256(b"abc").hexdigest()
    >>> classify(True, b"abc", digest), classify(False, b"ab", digest), classify(True, b"ab", digest)
    ('complete', 'failed-closed', 'accepted-partial')
    """
    if not accepted:
        return "failed-closed"
    return "complete" if hashlib.sha256(body).hexdigest() == sha256 else "accepted-partial"


@dataclass(frozen=True)
class Timing:
    """The random ranges of a campaign, in seconds."""

    instant: tuple[float, float] = (0.5, 2.5)
    """When the fault strikes, after the clients start."""
    restart: tuple[float, float] = (0.2, 2.0)
    """How long a killed guardian stays down."""
    freeze: tuple[float, float] = (0.5, 5.0)
    """How long a frozen guardian stays stopped."""
    garbage: tuple[float, float] = (0.2, 1.0)
    """How long a rogue host keeps its connection open."""

    def __post_init__(self) -> None:
        for name in ("instant", "restart", "freeze", "garbage"):
            low, high = getattr(self, name)
            if not 0 <= low <= high:
                raise ValueError(f"{name} must be a range 0 <= low <= high, not {(low, high)}")


@dataclass(frozen=True)
class TrialPlan:
    """One trial: which fault, when (s after the clients start), how long, which variant."""

    index: int
    fault: str
    instant: float
    duration: float
    variant: str
    seed: int
    """Seed of the trial's own randomness (garbage bytes, client file choices)."""


def plan_trials(rng: Rng, trials: int, timing: Timing = Timing(),
                faults: Sequence[str] = FAULTS) -> list[TrialPlan]:
    """``trials`` trials drawn from ``rng``: the first ``len(faults)`` cover every kind once
    (shuffled), the rest pick a kind at random."""
    if trials < 1:
        raise ValueError("trials must be at least 1")
    unknown = sorted(set(faults) - set(FAULTS))
    if unknown or not faults:
        raise ValueError(f"faults must be a non-empty subset of {FAULTS}, not {unknown}")
    first = list(faults)
    rng.shuffle(first)
    kinds = [first[i] if i < len(first) else rng.choice(list(faults)) for i in range(trials)]
    plans = []
    for index, fault in enumerate(kinds):
        instant = rng.uniform(*timing.instant)
        span = {"kill": timing.restart, "freeze": timing.freeze}.get(fault, timing.garbage)
        duration = 0.0 if fault == "garbage-reply" else rng.uniform(*span)
        variant = {"garbage": GARBAGE_VARIANTS, "garbage-reply": REPLY_VARIANTS}.get(fault, ("",))
        plans.append(TrialPlan(index, fault, round(instant, 3), round(duration, 3),
                               rng.choice(variant), rng.getrandbits(32)))
    return plans


def garbage(variant: str, rng: Rng) -> bytes:
    """What a rogue host sends the guardian (:data:`GARBAGE_VARIANTS`): random bytes; a frame
    whose framing is intact but whose payload does not parse; or a header announcing a frame
    beyond the guardian's limit (below the protocol's maximum), with a little of its body."""
    if variant == "random-bytes":
        return rng.randbytes(rng.randrange(1, 4096))
    if variant == "malformed-frame":
        return codec.encode_frame(codec.FrameType.DERIVE, 1, rng.randbytes(rng.randrange(0, 64)))
    if variant == "huge-frame":
        return codec.HEADER.pack(codec.MAX_FRAME - 1, codec.FrameType.SEAL, 1) + bytes(1024)
    raise ValueError(f"unknown garbage variant {variant!r}")


def cut_frames(buffer: bytearray) -> list[bytes]:
    """Remove every complete frame (by its length field alone) from the front of ``buffer``."""
    frames = []
    while len(buffer) >= 4 and len(buffer) >= (end := 4 + int.from_bytes(buffer[:4], "big")):
        frames.append(bytes(buffer[:end]))
        del buffer[:end]
    return frames


def corrupt_frame(frame: bytes, variant: str, rng: Rng) -> bytes:
    """``frame`` with one fault (:data:`REPLY_VARIANTS`): ``payload`` flips one random bit
    after the header (the header instead if there is no payload); ``header`` sets an unknown
    frame type, so the reader loses the stream."""
    out = bytearray(frame)
    if variant == "payload" and len(out) > codec.HEADER.size:
        out[rng.randrange(codec.HEADER.size, len(out))] ^= 1 << rng.randrange(8)
    else:
        out[4] = 0xEE  # no such frame type
    return bytes(out)


def describe_reply(reply: bytes | None, closed: bool) -> str:
    """What the guardian did to a rogue host: its first reply (None: nothing in time) and
    whether it closed the connection."""
    if not reply:
        answer = "no reply"
    elif len(reply) > 4 and reply[4] == codec.FrameType.ERROR:
        answer = "an ERROR frame"
    else:
        answer = f"frame type {reply[4] if len(reply) > 4 else None}"
    return f"guardian answered {answer}, {'closed' if closed else 'kept'} the connection"


def broken_response(mode: str, data: bytes) -> bytes:
    """The HTTP response of the plain broken server for a file ``data`` (``good``, ``short`` or
    ``lying``: see :data:`CONTROL_EXPECTED`)."""
    body = data if mode == "good" else data[: len(data) // 2]
    length = len(data) if mode in ("good", "short") else len(body)
    return (f"HTTP/1.1 200 OK\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n"
            .encode() + body)


def control_summary(counts: dict[str, dict[str, int]]) -> dict[str, Any]:
    """The negative control's outcome counts per mode, and ``ok``: every mode gave only its
    expected outcome (so a partial body is never counted complete, and the classifier does see
    one a client accepted)."""
    ok = all(counts.get(m) and set(counts[m]) == {CONTROL_EXPECTED[m]} for m in CONTROL_EXPECTED)
    return {"ok": bool(ok), "expected": CONTROL_EXPECTED, **counts}


def describe(row: dict[str, Any]) -> str:
    """One line about one trial's row, for progress output."""
    kind = f"{row['fault']} {row['variant']}".strip()
    return (f"{kind} at {row['instant_s']:.2f} s for {row['duration_s']:.2f} s: "
            + ", ".join(f"{row[o]} {o}" for o in OUTCOMES)
            + f"; resumed in {row['time_to_resume_s']} s; {row['detail']}")


def _fraction(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def summarize(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Totals of the per-trial rows (keys as :data:`OUTCOMES` plus ``fault``, ``host_alive``,
    ``resumed``): per fault kind and overall, with the success fraction complete / attempted."""
    rows = list(rows)
    per_fault: dict[str, dict[str, Any]] = {}
    for fault in sorted({r["fault"] for r in rows}, key=FAULTS.index):
        mine = [r for r in rows if r["fault"] == fault]
        per_fault[fault] = _totals(mine)
    return {"per_fault": per_fault, "total": _totals(rows)}


def _totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    counts = {o: sum(int(r[o]) for r in rows) for o in OUTCOMES}
    attempted = sum(counts.values())
    resumed = sum(bool(r["resumed"]) for r in rows)
    waits = [r["time_to_resume_s"] for r in rows if r["time_to_resume_s"] is not None]
    return {
        "trials": len(rows), **counts, "attempted": attempted,
        "success_fraction": _fraction(counts["complete"], attempted),
        "host_alive_after_every_trial": all(bool(r["host_alive"]) for r in rows),
        "resumed": resumed, "resumed_fraction": _fraction(resumed, len(rows)),
        "time_to_resume_median_s": statistics.median(waits) if waits else None,
        "time_to_resume_max_s": max(waits, default=None),
        "slowest_download_max_s": max((r.get("slowest_download_s", 0.0) for r in rows),
                                      default=None),
    }
