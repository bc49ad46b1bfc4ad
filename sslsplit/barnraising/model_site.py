"""SimPy model of a Barnraising site: one ADSL origin, 10 to 10^4 volunteers, a real trace.

Scenario (SSL splitting §5 and §8). A site sits behind a 160 kbit/s ADSL uplink. Clients replay
an access log (one request per log line, at the logged second). With Barnraising every request
first reaches ``trusted.`` on the origin, which answers with a small redirect to a ``mirror.``
name; the DNS responder names one live volunteer (uniformly at random, as the responder's round
robin does on average); the volunteer fetches the stubs from the origin (the splitting server
sends a stub per TLS record, never the payload it can name) and the payload from the cache
shared over the consistent-hashing ring: one peer message per lookup to the object's owner. A
miss is fetched from the origin in full and stored at the owner. Without Barnraising ("origin
alone") every response crosses the uplink in full.

Volunteers churn: each leaves after an exponential session (a clean leave), or crashes (it stays
in DNS until its lease ends or the feedback loop reports it); a fraction is malicious and black
holes the clients it is given. The origin's feedback loop reports a volunteer whose redirected
client has not arrived within ``deadline`` seconds; one broker round trip later it is out of DNS.
A client given a dead or malicious volunteer retries after ``client_timeout`` through ``trusted.``.

Aggregation, so that 10^4 volunteers and a trace day run in seconds:

* the volunteer population is a fixed number of *slots*; a departure (leave, eviction after a
  crash or a report) is immediately refilled by a newcomer with an empty cache, so the volunteer
  count stays ``n`` (the steady state of joins = leaves) and an object's ring owner is the slot
  ``hash(object) mod n`` — consistent hashing's property that a departure moves only its own keys;
* links are FIFO fluid queues (a virtual finish time per uplink) rather than per-packet
  transmitters: the origin's and every volunteer's uplink serialise their bytes in arrival order;
* one SimPy process replays the trace and one drives the churn of all slots.

Units: seconds, bytes, bit/s. Parameters and their calibration sources are in
:class:`ModelParams`; the metrics come back as pandas DataFrames from :func:`simulate`.
"""

from __future__ import annotations

import json
import random
import warnings
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import simpy
from simpy.events import ProcessGenerator

__all__ = ["ModelParams", "ModelResult", "calibrate", "calibration_input", "simulate",
           "BENCH_JSON", "SHIPPED_BENCH_JSON", "BENCH_COMMAND", "CalibrationWarning"]

#: The loopback benchmark's output, read by :func:`calibrate` (this checkout's own run).
BENCH_JSON = Path("results") / "benchmarks" / "barnraising.json"
#: The copy of it that ``make readme`` ships, read when this checkout has not run the benchmark.
SHIPPED_BENCH_JSON = Path("docs") / "results" / "benchmarks" / "barnraising.json"
#: The command that writes :data:`BENCH_JSON` (one line of ``make benchmarks``).
BENCH_COMMAND = "python benchmarks/bench_barnraising.py --json results/benchmarks/barnraising.json"
#: The name under which :func:`calibrate` records its input in the run's ``run.json``.
INPUT_NAME = "barnraising calibration"


class CalibrationWarning(UserWarning):
    """:func:`calibrate` found no benchmark file and used the typed-in defaults."""

_HONEST, _MALICIOUS, _CRASHED = 0, 1, 2


@dataclass(frozen=True)
class ModelParams:
    """Every parameter of the model with its calibration source (``source_of(name)``).

    The defaults of the benchmark-calibrated fields (``messages_per_lookup``,
    ``peer_message_s``, ``dns_answer_s``, ``join_s`` and ``report_s``) were typed in from one
    earlier run of ``bench_barnraising`` on the development machine; no results file holds
    that run.  :func:`calibrate` replaces them by a benchmark file's values and says which file
    it read, or warns (:class:`CalibrationWarning`) that it kept these."""

    volunteers: int = 100
    malicious_fraction: float = 0.0
    barnraising: bool = True
    origin_bps: float = 160_000.0
    volunteer_bps: float = 1_000_000.0
    rtt: float = 0.05
    redirect_bytes: int = 350
    request_overhead_bytes: int = 600
    record_bytes: int = 16_384
    stub_bytes: int = 50
    messages_per_lookup: float = 1.0
    peer_message_s: float = 315.5e-6
    dns_answer_s: float = 1 / 4455.0
    join_s: float = 1 / 3207.0
    deadline: float = 2.0
    report_s: float = 315.5e-6
    lease: float = 30.0
    client_timeout: float = 2.0
    mean_session_s: float = 7200.0
    crash_fraction: float = 0.2
    seed: int = 1

    def __post_init__(self) -> None:
        if self.volunteers < 1 and self.barnraising:
            raise ValueError(f"volunteers must be >= 1 with Barnraising, got {self.volunteers}")
        if not 0.0 <= self.malicious_fraction < 1.0:
            raise ValueError(f"malicious_fraction must be in [0, 1), got {self.malicious_fraction}")
        if not 0.0 <= self.crash_fraction <= 1.0:
            raise ValueError(f"crash_fraction must be in [0, 1], got {self.crash_fraction}")
        for name in ("origin_bps", "volunteer_bps", "deadline", "lease", "client_timeout",
                     "mean_session_s", "record_bytes"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")

    @staticmethod
    def source_of(name: str) -> str:
        """Where the value of parameter ``name`` comes from."""
        return SOURCES[name]

    def table(self) -> pd.DataFrame:
        """One row per parameter: name, value, calibration source."""
        return pd.DataFrame([{"parameter": f.name, "value": getattr(self, f.name),
                              "source": SOURCES[f.name]} for f in fields(self)])


#: Calibration source of every :class:`ModelParams` field.
SOURCES: dict[str, str] = {
    "volunteers": "experiment variable (10 to 10^4, issue's range)",
    "malicious_fraction": "experiment variable",
    "barnraising": "experiment variable (False = origin alone)",
    "origin_bps": "paper §5/§6: 160 kbit/s ADSL uplink (sslsplit.params.ADSL_UP)",
    "volunteer_bps": "assumption: a volunteer on 1 Mbit/s broadband upstream",
    "rtt": "assumption: 50 ms client/origin/volunteer round trip (wide area)",
    "redirect_bytes": "assumption: size of a 302 from trusted. to mirror. over TLS",
    "request_overhead_bytes": "assumption: response headers and TLS framing per response",
    "record_bytes": "TLS 1.2 maximum plaintext record (RFC 5246), as tls12 writes",
    "stub_bytes": "sslsplit/wire.py stub: record header + payload id + MAC, about 50 bytes",
    "messages_per_lookup": "bench_barnraising JSON: messages_per_lookup (ring, loopback)",
    "peer_message_s": "bench_barnraising JSON: dnspython_round_trip_us_vs_broker (loopback)",
    "dns_answer_s": "bench_barnraising JSON: 1 / dns_answers_per_s_uncached",
    "join_s": "bench_barnraising JSON: 1 / joins_per_s",
    "deadline": "sslsplit.barnraising.feedback.Feedback default deadline (2 s)",
    "report_s": "bench_barnraising JSON: one broker round trip (test_feedback measures "
                "removal within deadline + one round trip)",
    "lease": "sslsplit.barnraising.registry.Registry default lease_seconds (30 s)",
    "client_timeout": "assumption: a client gives up on a silent volunteer after the deadline",
    "mean_session_s": "assumption: volunteers stay two hours on average (exponential)",
    "crash_fraction": "assumption: one departure in five is a crash, not a clean leave",
    "seed": "experiment variable (one random.Random per run)",
}


def calibration_input(path: str | Path | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The benchmark file :func:`calibrate` reads, and where it came from.

    With ``path``: that file.  Without: ``results/benchmarks/barnraising.json`` (this
    checkout's ``make benchmarks``), else the shipped ``docs/results/benchmarks/barnraising.json``
    (``make readme``'s copy), both under the repository root.  Returns ``(data, provenance)``:
    the JSON and :func:`testbed.results.file_provenance` of the file read, or ``({},
    {"source": "defaults", ...})`` if there is none (the caller warns).  A file that is not a
    JSON object is a ``ValueError`` naming it."""
    from testbed.results import file_provenance

    root = Path(__file__).resolve().parents[2]
    candidates = [Path(path)] if path is not None else [root / BENCH_JSON,
                                                        root / SHIPPED_BENCH_JSON]
    for candidate in candidates:
        if candidate.is_file():
            try:
                data = json.loads(candidate.read_text())
            except json.JSONDecodeError as exc:
                raise ValueError(f"{candidate}: not JSON ({exc})") from exc
            if not isinstance(data, dict):
                raise ValueError(f"{candidate}: expected a JSON object of benchmark numbers")
            return data, file_provenance(candidate, BENCH_COMMAND, root,
                                         data.get("provenance"))
    looked = " or ".join(str(c) for c in candidates)
    return {}, {"source": "defaults", "looked_for": looked,
                "values": "ModelParams defaults, typed in from an earlier bench_barnraising run "
                          "on the development machine (no results file holds it)"}


def _figure(value: Any) -> float:
    """A benchmark figure: a plain number, or a repeated one (``{"median": ..., "min": ...,
    "max": ..., "n": ..., "repeats": [...]}``, as ``make benchmarks`` writes it) -- its median."""
    if isinstance(value, dict):
        if "median" not in value:
            raise ValueError(f"benchmark figure without a median: {sorted(value)}")
        value = value["median"]
    return float(value)


def calibrate(path: str | Path | None = None, **overrides: Any) -> ModelParams:
    """Parameters with the loopback measurements of ``bench_barnraising`` (its JSON).

    The file is found by :func:`calibration_input` (``path``, else ``results/benchmarks/``,
    else the shipped ``docs/results/benchmarks/`` copy).  Which one was read -- or that none
    was -- is recorded under ``inputs["barnraising calibration"]`` in the current run's
    ``run.json`` (:func:`testbed.results.record_input`).  Without a file the typed-in
    defaults of :class:`ModelParams` stay, and a :class:`CalibrationWarning` says so: the
    model is then *not* calibrated from this machine's benchmark."""
    from testbed.results import record_input

    data, provenance = calibration_input(path)
    record_input(INPUT_NAME, provenance)
    if provenance["source"] == "defaults":
        warnings.warn(f"Barnraising model not calibrated: no benchmark file ({provenance['looked_for']});"
                      f" using the typed-in ModelParams defaults. Run `{BENCH_COMMAND}`"
                      " (make benchmarks) to calibrate it.", CalibrationWarning, stacklevel=2)
    values: dict[str, Any] = {}
    if "messages_per_lookup" in data:
        values["messages_per_lookup"] = _figure(data["messages_per_lookup"])
    if "dnspython_round_trip_us_vs_broker" in data:
        rt = _figure(data["dnspython_round_trip_us_vs_broker"]) * 1e-6
        values["peer_message_s"] = rt
        values["report_s"] = rt
    if data.get("dns_answers_per_s_uncached"):
        values["dns_answer_s"] = 1.0 / _figure(data["dns_answers_per_s_uncached"])
    if data.get("joins_per_s"):
        values["join_s"] = 1.0 / _figure(data["joins_per_s"])
    values.update(overrides)
    return replace(ModelParams(), **values)


@dataclass
class ModelResult:
    """The run's outputs: per-request rows, evictions, totals, parameters."""

    requests: pd.DataFrame
    evictions: pd.DataFrame
    params: ModelParams
    origin_bytes: int
    origin_busy_s: float
    span_s: float

    def summary(self) -> dict[str, Any]:
        """One row of headline numbers (bytes, latency in s, fractions, eviction times)."""
        req, ev = self.requests, self.evictions
        src = req["source"].value_counts(normalize=True) if len(req) else pd.Series(dtype=float)
        bad = ev[ev["kind"] == "malicious"] if len(ev) else ev
        return {
            "volunteers": self.params.volunteers if self.params.barnraising else 0,
            "barnraising": self.params.barnraising,
            "malicious_fraction": self.params.malicious_fraction,
            "requests": len(req),
            "origin_bytes": self.origin_bytes,
            "origin_utilisation": self.origin_busy_s / self.span_s if self.span_s else 0.0,
            "latency_mean_s": float(req["latency"].mean()) if len(req) else float("nan"),
            "latency_p95_s": float(req["latency"].quantile(0.95)) if len(req) else float("nan"),
            "frac_sharing": float(src.get("sharing", 0.0)),
            "frac_origin": float(src.get("origin", 0.0)),
            "evictions": len(ev),
            "evicted_malicious": int((ev["kind"] == "malicious").sum()) if len(ev) else 0,
            "evict_malicious_max_s": float(bad["seconds"].max()) if len(bad) else float("nan"),
            "evict_max_s": float(ev["seconds"].max()) if len(ev) else float("nan"),
        }


class _Site:
    """The origin uplink, the volunteer slots, the shared cache, and the metric lists."""

    def __init__(self, env: simpy.Environment, p: ModelParams) -> None:
        self.env, self.p = env, p
        self.rng = random.Random(p.seed)
        self.n = p.volunteers if p.barnraising else 0
        self.origin_free = 0.0
        self.origin_bytes = 0
        self.origin_busy = 0.0
        self.state = [self._newcomer() for _ in range(self.n)]
        self.epoch = [0] * self.n
        self.vol_free = [0.0] * self.n
        self.crashed_at = [0.0] * self.n
        self.reported = [False] * self.n
        self.first_bad = [float("nan")] * self.n
        self.cache: dict[int, tuple[int, int]] = {}  # object -> (slot, epoch) holding it
        self.rows: list[tuple[float, float, str, int]] = []
        self.evictions: list[tuple[float, float, str, str]] = []
        if self.n:
            env.process(self._churn())

    # -- volunteers -----------------------------------------------------------------------
    def _newcomer(self) -> int:
        return _MALICIOUS if self.rng.random() < self.p.malicious_fraction else _HONEST

    def _replace(self, slot: int) -> None:
        """A departure refilled by a newcomer: new epoch (the cache entries it owned are gone)."""
        self.state[slot] = self._newcomer()
        self.epoch[slot] += 1
        self.vol_free[slot] = self.env.now + self.p.join_s
        self.reported[slot] = False
        self.first_bad[slot] = float("nan")

    def _churn(self) -> ProcessGenerator:
        """All slots' departures as one Poisson stream of rate n / mean session."""
        rate = self.n / self.p.mean_session_s
        while True:
            yield self.env.timeout(self.rng.expovariate(rate))
            slot = self.rng.randrange(self.n)
            if self.state[slot] == _CRASHED:
                continue
            if self.rng.random() < self.p.crash_fraction:
                self.state[slot] = _CRASHED
                self.crashed_at[slot] = self.env.now
                self.first_bad[slot] = self.env.now
                self.env.process(self._lease_expiry(slot, self.epoch[slot]))
            else:
                self._replace(slot)

    def _lease_expiry(self, slot: int, epoch: int) -> ProcessGenerator:
        # the last renewal was uniformly within the lease before the crash
        yield self.env.timeout(self.rng.uniform(0.0, self.p.lease))
        if self.epoch[slot] == epoch:
            self._evict(slot, "crash-lease")

    def _evict(self, slot: int, reason: str) -> None:
        kind = "malicious" if self.state[slot] == _MALICIOUS else "crashed"
        self.evictions.append((self.env.now, self.env.now - self.first_bad[slot], kind, reason))
        self._replace(slot)

    def _report(self, slot: int, epoch: int) -> ProcessGenerator:
        """The origin's feedback loop: no-show after the deadline, one broker round trip."""
        yield self.env.timeout(self.p.deadline + self.p.report_s)
        if self.epoch[slot] == epoch:
            self._evict(slot, "feedback")

    # -- links ----------------------------------------------------------------------------
    def _origin_send(self, nbytes: int, now: float) -> float:
        start = max(now, self.origin_free)
        dur = nbytes * 8.0 / self.p.origin_bps
        self.origin_free = start + dur
        self.origin_bytes += nbytes
        self.origin_busy += dur
        return self.origin_free

    def _volunteer_send(self, slot: int, nbytes: int, now: float) -> float:
        start = max(now, self.vol_free[slot])
        self.vol_free[slot] = start + nbytes * 8.0 / self.p.volunteer_bps
        return self.vol_free[slot]

    # -- requests -------------------------------------------------------------------------
    def serve(self, obj: int, size: int) -> None:
        p, now = self.p, self.env.now
        body = size + p.request_overhead_bytes
        if not self.n:
            done = self._origin_send(body, now) + p.rtt
            self.rows.append((now, done - now, "origin", size))
            return
        t = now
        for _ in range(8):  # retries through trusted. after a silent volunteer
            t = self._origin_send(p.redirect_bytes, t) + p.rtt  # trusted. -> redirect
            t += p.dns_answer_s + p.rtt  # mirror. name resolved
            slot = self.rng.randrange(self.n)
            if self.state[slot] != _HONEST:
                if self.state[slot] == _MALICIOUS and self.first_bad[slot] != self.first_bad[slot]:
                    self.first_bad[slot] = now
                if not self.reported[slot]:
                    self.reported[slot] = True
                    self.env.process(self._report(slot, self.epoch[slot]))
                t += p.client_timeout
                continue
            records = max(1, -(-size // p.record_bytes))
            t_stub = self._origin_send(records * p.stub_bytes, t) + p.rtt / 2
            owner = obj % self.n
            held = self.cache.get(obj)
            if held == (owner, self.epoch[owner]) and self.state[owner] == _HONEST:
                t_pay = t + p.messages_per_lookup * (p.peer_message_s + p.rtt)
                source = "sharing"
            else:  # miss, dead owner, or a poisoned entry discarded by its stub id
                t_pay = self._origin_send(size, t) + p.rtt / 2
                if self.state[owner] == _HONEST:
                    self.cache[obj] = (owner, self.epoch[owner])
                source = "origin"
            done = self._volunteer_send(slot, body, max(t_stub, t_pay)) + p.rtt / 2
            self.rows.append((now, done - now, source, size))
            return
        done = self._origin_send(body, t) + p.rtt  # gave up on mirrors: origin serves
        self.rows.append((now, done - now, "origin", size))


def _replay(env: simpy.Environment, site: _Site, times: np.ndarray, objs: np.ndarray,
            sizes: np.ndarray) -> ProcessGenerator:
    for t, o, s in zip(times.tolist(), objs.tolist(), sizes.tolist(), strict=True):
        if t > env.now:
            yield env.timeout(t - env.now)
        site.serve(o, s)


def simulate(trace: pd.DataFrame, params: ModelParams) -> ModelResult:
    """Replay ``trace`` (columns ``time`` in s, ``obj`` int id, ``size`` in bytes; the
    preprocessed workload of :func:`testbed.traces.catalogue.load_workload`) against the site.

    Time starts at the first request; the run ends when the last request has been issued."""
    if not {"time", "obj", "size"} <= set(trace.columns):
        raise ValueError("trace needs columns time, obj and size")
    env = simpy.Environment()
    site = _Site(env, params)
    times = trace["time"].to_numpy(dtype=float)
    t0 = float(times[0]) if len(times) else 0.0
    times = times - t0
    env.process(_replay(env, site, times, trace["obj"].to_numpy(dtype=np.int64),
                        trace["size"].to_numpy(dtype=np.int64)))
    span = float(times[-1]) if len(times) else 0.0
    env.run(until=span + 1e-9)
    req = pd.DataFrame(site.rows, columns=["time", "latency", "source", "size"])
    ev = pd.DataFrame(site.evictions, columns=["time", "seconds", "kind", "reason"])
    return ModelResult(req, ev, params, site.origin_bytes, site.origin_busy, max(span, 1.0))
