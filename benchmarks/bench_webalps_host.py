"""WebALPS against HTTPS on the same host program, and plain HTTP beside a frozen guardian.

Issue 21 asks two questions of the WebALPS host (``python -m webalps_sim.host``), both answered
here with every figure measured in the same run on loopback:

1. **The slowdown HTTPS -> WebALPS** in requests/s, for 1 and for 8 concurrent closed-loop
   clients fetching a 2 KB file, in two settings: a **new connection per request** (handshake
   included: the paper's Table 1 setting) and **keep-alive** requests on a handshaken
   connection (Table 2-like).  Both hosts are the same program, ``--mode https`` against
   ``--mode webalps`` with the guardian's cost model off (the guardian runs at this machine's
   speed).  Each measurement starts a fresh host with ``--stats-json``, warms it up, runs the
   load, stops it with SIGTERM and reads its counters: so beside the rate it reports the
   **guardian round trips** the host made, per connection (new-connection setting) and per
   request (keep-alive), overall and by question.  It also reads the CPU seconds the host and
   the guardian spent, per request: where the time goes.  The target is <= 1.2x, judged on the
   median of the interleaved repeats (HTTPS, WebALPS, HTTPS, WebALPS, ...).
   Beside them, for the new-connection setting, the same HTTPS host program serving a
   certificate chain of the guardian's shape (a leaf with the measurement extension and the
   WebALPS CA certificate, ``https-chain``): what the longer chain alone costs the client.
2. **The floor** of any Python IPC design: a minimal Python ping-pong over a Unix socket between
   two processes (a blocking ``recv_into`` / ``sendall`` loop each side, no codec, no event
   loop), with the bytes per round trip the WebALPS host actually exchanged with its guardian,
   back to back and paced like the run (the sender busy for the HTTPS time per request between
   round trips, so the echo side goes idle as the guardian does).  With 1 client it prints how
   much of WebALPS's extra time per request its round trips at that floor explain, and the
   slowdown that would remain if every round trip cost only the floor; with 8 clients (CPU
   bound), the same for the extra CPU time per request.
3. **Plain HTTP beside a frozen guardian**: one WebALPS host also serving plain HTTP
   (``--http-port``) is loaded over HTTP with its guardian running, then with the guardian
   stopped (SIGSTOP for the measurement window, SIGCONT after), interleaved; the ratio
   frozen/running should be ~1.0 (the host's event loop never waits for the guardian).  During
   each frozen window a probe keeps asking for the file over HTTPS: the HTTPS requests that
   complete inside the window are reported (0 shows the freeze was real), and one HTTPS fetch
   after SIGCONT shows the host recovered.

Every figure prints as ``median (min–max, n=N)``.  ``--json PATH`` writes them all with the
command line and the machine (Python, OpenSSL, CPUs, commit); ``--csv PATH`` the same figures
as a table (one row per figure: median, min, max, n).

Usage: ``python benchmarks/bench_webalps_host.py [--quick] [--seconds S] [--repeats N] [--json PATH]
[--csv PATH] [--part all|slowdown|freeze] [--freeze-clients N]`` (the floor runs with the
slowdown part).
Without the built C extension it exits with status 1 and one line saying so.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import random
import signal
import socket
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))

from _common import Repeated, add_repeats_option, require_c_extension, rounds, write_json  # noqa: E402

from webalps_sim.aio import testbed as tb  # noqa: E402
from webalps_sim.aio.loadgen import (  # noqa: E402
    FetchError,
    LoadResult,
    client_context,
    closed_loop,
    fetch_once,
    keepalive_loop,
)

BENCH = "bench_webalps_host"
TARGET_SLOWDOWN = 1.2
CLIENTS = (1, 8)
SETTINGS = ("new-connection", "keep-alive")
MODES = ("https", "webalps")
CHAIN_MODE = "https-chain"
"""HTTPS with a chain of the guardian's shape (new-connection points only)."""


@dataclass
class Servers:
    """What stays up for the whole run: the docroot, the guardian (cost model off) and its socket."""

    stack: ExitStack
    workdir: Path
    docroot: Path
    guardian: subprocess.Popen[bytes]
    sock: Path
    chain: tuple[Path, Path]
    """PEM chain and key of the ``https-chain`` host (a second leaf of the same WebALPS CA)."""
    count: int = 0

    @contextmanager
    def host(self, mode: str, *, http: bool = False) -> Iterator[dict[str, Any]]:
        """A fresh host of ``mode`` (with ``--http-port`` if ``http``); yields its URLs and pids,
        then stops it with SIGTERM and fills in ``"stats"`` from its ``--stats-json`` file."""
        self.count += 1
        name = f"{mode}-{self.count}"
        stats, log = self.workdir / f"stats-{name}.json", self.workdir / f"host-{name}.log"
        port, extra = tb._free_port(), ["--stats-json", str(stats)]
        if mode == CHAIN_MODE:
            mode, extra = "https", [*extra, "--cert", str(self.chain[0]), "--key", str(self.chain[1])]
        if mode == "webalps":
            extra += ["--guardian", str(self.sock)]
        if http:
            http_port = tb._free_port()
            extra += ["--http-port", str(http_port)]
        with ExitStack() as own:
            proc = tb._start(own, tb._host_cmd(mode, port, self.docroot, *extra), log)
            tb._wait(lambda: tb._port_open(port) and (not http or tb._port_open(http_port)),
                     proc, f"host ({name})", log)
            info: dict[str, Any] = {"https": f"https://127.0.0.1:{port}/{tb.FILE_NAME}",
                                    "pids": {"host": proc.pid, "guardian": self.guardian.pid}}
            if http:
                info["http"] = f"http://127.0.0.1:{http_port}/{tb.FILE_NAME}"
            yield info
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
        info["stats"] = json.loads(stats.read_text())


@contextmanager
def servers() -> Iterator[Servers]:
    """Certify and start one guardian (cost model off) and make the docroot; stop all on exit."""
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-webalps-")))
        docroot = workdir / "docroot"
        docroot.mkdir()
        (docroot / tb.FILE_NAME).write_bytes(random.Random(0).randbytes(tb.FILE_SIZE))
        state, twin = workdir / "guardian", workdir / "https-chain"
        tb.certify_guardian(state, workdir / "ca")
        tb.certify_guardian(twin, workdir / "ca")  # the https-chain host's key and chain
        sock, log = state / "guardian.sock", workdir / "guardian.log"
        guardian = tb._start(stack, [sys.executable, "-m", "webalps_sim.guardian", "--state-dir",
                                     str(state), "--listen", str(sock), "--app", "null",
                                     "--cost-model", "off"], log)
        tb._wait(sock.exists, guardian, "guardian", log)
        yield Servers(stack, workdir, docroot, guardian, sock,
                      (twin / "guardian-chain.pem", twin / "guardian.key"))


def _load(setting: str, url: str, seconds: float, clients: int) -> LoadResult:
    if setting == "keep-alive":
        return keepalive_loop(url, seconds=seconds, clients=clients)
    return closed_loop(url, seconds=seconds, clients=clients)


def measure_point(bed: Servers, mode: str, setting: str, clients: int, seconds: float) -> dict[str, Any]:
    """One repeat of one point on a fresh host: requests/s, and from the host's counters the
    guardian round trips and questions per connection and per request, and CPU s per request."""
    with bed.host(mode) as info:
        _load(setting, info["https"], min(seconds, 0.5), clients)  # warm-up, same pattern
        pids = info["pids"] if mode == "webalps" else {"host": info["pids"]["host"]}
        before = {role: tb.cpu_seconds(pid) for role, pid in pids.items()}
        result = _load(setting, info["https"], seconds, clients)
        cpu = {role: tb.cpu_seconds(pid) - before[role] for role, pid in pids.items()}
    stats = info["stats"]
    # per connection means per handshake: the host's readiness probe connects and never handshakes
    served, conns = stats["https"]["requests"], max(stats["https"]["handshakes"], 1)
    out = {"rps": result.rps, "requests": result.requests, "errors": len(result.errors),
           "served": served, "connections": conns, "accepted": stats["https"]["connections"]}
    per = max(result.requests, 1)
    out.update({f"{role}_cpu_ms_per_request": 1e3 * s / per for role, s in cpu.items()})
    if mode == "webalps":
        guardian = stats.get("guardian", {})
        out["round_trips_per_request"] = guardian.get("round_trips", 0) / max(served, 1)
        out["round_trips_per_connection"] = guardian.get("round_trips", 0) / conns
        out["reconnects"] = guardian.get("reconnects", 0)
        trips = max(guardian.get("round_trips", 0), 1)
        out["bytes_out_per_round_trip"] = guardian.get("bytes_out", 0) / trips
        out["bytes_in_per_round_trip"] = guardian.get("bytes_in", 0) / trips
        out["questions_per_request"] = {op: n / max(served, 1)
                                        for op, n in guardian.get("questions", {}).items()}
        out["questions_per_connection"] = {op: n / conns
                                           for op, n in guardian.get("questions", {}).items()}
    return out


def slowdown_part(bed: Servers, seconds: float, repeats: int,
                  progress: Callable[[str], None]) -> dict[str, Any]:
    """Part 1: every (setting, clients) point, HTTPS and WebALPS interleaved, ``repeats`` rounds."""
    steps: dict[str, Callable[[], dict[str, Any]]] = {}
    for setting in SETTINGS:
        for clients in CLIENTS:
            for mode in (*MODES, CHAIN_MODE) if setting == "new-connection" else MODES:
                key = f"{setting}/{clients}/{mode}"

                def step(key: str = key, mode: str = mode, setting: str = setting,
                         clients: int = clients) -> dict[str, Any]:
                    got = measure_point(bed, mode, setting, clients, seconds)
                    progress(f"{key}: {got['rps']:.1f} req/s")
                    return got

                steps[key] = step
    return rounds(steps, repeats)


# -- the floor: a minimal Python ping-pong over a Unix socket ---------------------------------

ECHO = """
import socket, struct, sys
sock = socket.socket(fileno=int(sys.argv[1]))
buf, pending, replies = bytearray(1 << 18), bytearray(), {}
view = memoryview(buf)
while n := sock.recv_into(buf):
    pending += view[:n]
    while len(pending) >= 8:
        length, size = struct.unpack_from(">II", pending)
        if len(pending) < 8 + length:
            break
        del pending[:8 + length]
        sock.sendall(replies.get(size) or replies.setdefault(size, bytes(size)))
"""
"""The echo side: reads frames (length, reply size, body) and answers each with that many bytes."""

FLOOR_ROUND_TRIPS = 2000


def _spin(seconds: float) -> float:
    """Stay busy ``seconds``; the seconds it took."""
    start = now = time.perf_counter()
    while now < start + seconds:
        now = time.perf_counter()
    return now - start


def ping_pong(request: int, reply: int, gap: float, n: int = FLOOR_ROUND_TRIPS) -> dict[str, float]:
    """``n`` round trips of ``request`` bytes out and ``reply`` bytes back with a child Python
    process over a Unix socket pair, this side busy ``gap`` s before each: the median round trip
    (µs) and the CPU µs per round trip of both processes together."""
    here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    child = subprocess.Popen([sys.executable, "-c", ECHO, str(there.fileno())],
                             pass_fds=[there.fileno()])
    there.close()
    body = max(request - 8, 0)
    frame = struct.pack(">II", body, reply) + bytes(body)
    buf, times, spun = bytearray(1 << 18), [], 0.0
    try:
        for i in range(n + n // 10):  # the first tenth warms up
            if i == n // 10:
                cpu, spun = (time.process_time(), tb.cpu_seconds(child.pid)), 0.0
            spun += _spin(gap) if gap else 0.0
            start = time.perf_counter()
            here.sendall(frame)
            got = 0
            while got < reply:
                got += here.recv_into(buf)
            times.append(time.perf_counter() - start)
        used = time.process_time() - cpu[0] + tb.cpu_seconds(child.pid) - cpu[1] - spun
    finally:
        here.close()
        child.wait(10)
    return {"round_trip_us": 1e6 * statistics.median(times[n // 10:]),
            "cpu_us_per_round_trip": 1e6 * max(used, 0.0) / n}


def floor_part(slow: dict[str, list[dict[str, Any]]], repeats: int,
               progress: Callable[[str], None]) -> dict[str, list[dict[str, float]]]:
    """The ping-pong of each setting: the bytes per round trip its WebALPS host exchanged, back
    to back and paced (busy for the HTTPS time per request, 1 client, between round trips)."""
    steps: dict[str, Callable[[], dict[str, float]]] = {}
    for setting in SETTINGS:
        w = _summarise(slow[f"{setting}/1/webalps"])
        https_s = 1 / max(statistics.median(r["rps"] for r in slow[f"{setting}/1/https"]), 1e-9)
        trips = max(w[f"round_trips_per_{_unit(setting)}"].median, 1.0)
        size = (round(w["bytes_out_per_round_trip"].median), round(w["bytes_in_per_round_trip"].median))
        for pace, gap in (("back-to-back", 0.0), ("paced", https_s / trips)):
            def step(size: tuple[int, int] = size, gap: float = gap, key: str = f"{setting}/{pace}"
                     ) -> dict[str, float]:
                got = {"request_bytes": size[0], "reply_bytes": size[1], "gap_us": 1e6 * gap,
                       **ping_pong(*size, gap)}
                progress(f"floor {key}: {got['round_trip_us']:.1f} µs per round trip")
                return got
            steps[f"{setting}/{pace}"] = step
    return rounds(steps, repeats)


def _unit(setting: str) -> str:
    return "connection" if setting == "new-connection" else "request"


def _chain_us(slow: dict[str, list[dict[str, Any]]], setting: str, clients: int, https_us: float,
              what: str) -> float:
    """What the chain of the guardian's shape costs per request over HTTPS's own (time with 1
    client, host CPU with 8; 0 where it was not measured)."""
    runs = slow.get(f"{setting}/{clients}/{CHAIN_MODE}")
    if not runs:
        return 0.0
    chain = _summarise(runs)
    if what == "time":
        return 1e6 / chain["rps"].median - https_us
    return 1e3 * chain["host_cpu_ms_per_request"].median - https_us


def report_floor(slow: dict[str, list[dict[str, Any]]], floor: dict[str, list[dict[str, float]]]
                 ) -> dict[str, Any]:
    """Print the floor and how much of the remaining slowdown it explains; its JSON."""
    out: dict[str, Any] = {}
    for setting in SETTINGS:
        f = {pace: _summarise(floor[f"{setting}/{pace}"]) for pace in ("back-to-back", "paced")}
        rt = f["paced"]["round_trip_us"].median
        print(f"  floor, {setting}: Python ping-pong over a Unix socket, "
              f"{f['paced']['request_bytes'].median:.0f} B out / {f['paced']['reply_bytes'].median:.0f} B "
              f"back per round trip: {f['back-to-back']['round_trip_us'].text('.1f')} µs back to back, "
              f"{f['paced']['round_trip_us'].text('.1f')} µs paced like the run; CPU "
              f"{f['back-to-back']['cpu_us_per_round_trip'].text('.1f')} µs per round trip")
        out[setting] = {pace: _to_json(fig) for pace, fig in f.items()}
        for clients in CLIENTS:
            h, w = (_summarise(slow[f"{setting}/{clients}/{m}"]) for m in MODES)
            trips = w[f"round_trips_per_{_unit(setting)}"].median
            if clients == 1:  # latency bound: time per request
                https_us, extra = 1e6 / h["rps"].median, 1e6 / w["rps"].median - 1e6 / h["rps"].median
                at_floor, what = trips * rt, "time"
            else:  # CPU bound: CPU per request
                https_us = 1e3 * h["host_cpu_ms_per_request"].median
                extra = 1e3 * (w["host_cpu_ms_per_request"].median
                               + w["guardian_cpu_ms_per_request"].median) - https_us
                at_floor, what = trips * f["back-to-back"]["cpu_us_per_round_trip"].median, "CPU"
            chain = _chain_us(slow, setting, clients, https_us, what)
            share = at_floor / extra if extra > 0 else math.inf
            best = (https_us + at_floor) / https_us
            rest = extra - at_floor - chain
            print(f"      {clients} client(s): WebALPS {what} per request {extra:+.0f} µs over HTTPS "
                  f"({https_us:.0f} µs); its {trips:.2f} round trips at the floor explain "
                  f"{at_floor:.0f} µs ({100 * share:.0f} %)"
                  + (f", the longer certificate chain {chain:.0f} µs" if chain else "")
                  + f"; the rest, {rest:.0f} µs, is Python work around the round trips (host "
                  f"channel and event loop, guardian service); at the floor the slowdown would be "
                  f"{best:.2f}x")
            out[setting][f"{clients}"] = {
                "basis": what.lower(), "https_us_per_request": https_us, "extra_us_per_request": extra,
                "round_trips": trips, "floor_us": at_floor, "floor_share": share,
                "chain_us": chain, "rest_us": rest, "slowdown_at_floor": best}
    return out


def _summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each numeric field as a :class:`Repeated`; nested per-question dicts likewise."""
    out: dict[str, Any] = {}
    for name, first in runs[0].items():
        if isinstance(first, dict):
            ops = sorted({op for r in runs for op in r[name]})
            out[name] = {op: Repeated.of(r[name].get(op, 0.0) for r in runs) for op in ops}
        else:
            out[name] = Repeated.of(r[name] for r in runs)
    return out


def _https_probe(url: str, deadline: float, tally: dict[str, int]) -> None:
    """Ask for ``url`` over HTTPS until ``deadline``; count those that completed before it."""
    ctx = client_context()
    while (left := deadline - time.perf_counter()) > 0.05:
        tally["started"] += 1
        try:
            fetch_once(url, ctx, timeout=left)
        except (OSError, FetchError):
            continue
        if time.perf_counter() <= deadline:
            tally["completed"] += 1


def frozen_window(info: dict[str, Any], guardian_pid: int, seconds: float,
                  clients: int) -> dict[str, float]:
    """Plain-HTTP load for ``seconds`` with the guardian stopped, an HTTPS probe beside it."""
    tally = {"started": 0, "completed": 0}
    os.killpg(guardian_pid, signal.SIGSTOP)
    try:
        probe = threading.Thread(target=_https_probe, daemon=True,
                                 args=(info["https"], time.perf_counter() + seconds, tally))
        probe.start()
        result = closed_loop(info["http"], seconds=seconds, clients=clients)
        probe.join(seconds + 5)
    finally:
        os.killpg(guardian_pid, signal.SIGCONT)
    try:
        fetch_once(info["https"], client_context(), timeout=30)
        recovered = 1.0
    except (OSError, FetchError, ssl.SSLError):
        recovered = 0.0
    return {"rps": result.rps, "errors": len(result.errors), "https_started": tally["started"],
            "https_completed": tally["completed"], "https_after_sigcont": recovered}


def freeze_part(bed: Servers, seconds: float, repeats: int, clients: int,
                progress: Callable[[str], None]) -> dict[str, Any]:
    """Part 2: plain HTTP of one WebALPS host, guardian running vs frozen, interleaved."""
    with bed.host("webalps", http=True) as info:
        closed_loop(info["http"], seconds=min(seconds, 0.5), clients=clients)  # warm-up
        fetch_once(info["https"], client_context(), timeout=30)  # the guardian answers

        def running() -> dict[str, float]:
            result = closed_loop(info["http"], seconds=seconds, clients=clients)
            progress(f"http, guardian running: {result.rps:.1f} req/s")
            return {"rps": result.rps, "errors": len(result.errors)}

        def frozen() -> dict[str, float]:
            got = frozen_window(info, bed.guardian.pid, seconds, clients)
            progress(f"http, guardian frozen: {got['rps']:.1f} req/s, "
                     f"{got['https_completed']} of {got['https_started']} HTTPS completed")
            return got

        runs = rounds({"running": running, "frozen": frozen}, repeats)
    return {"runs": runs, "reconnects": info["stats"].get("guardian", {}).get("reconnects", 0)}


def provenance(argv: list[str] | None) -> dict[str, Any]:
    """The command line and the machine, as the other benchmarks record them."""
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                            text=True, check=False).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain"], capture_output=True,
                           text=True, check=False).stdout.strip() != ""
    return {"command": " ".join(["python", "benchmarks/bench_webalps_host.py",
                                 *(sys.argv[1:] if argv is None else argv)]),
            "python": platform.python_version(), "machine": platform.machine(),
            "processor": platform.processor(), "cpus": os.cpu_count(),
            "openssl": ssl.OPENSSL_VERSION, "commit": commit, "dirty": dirty}


def report_slowdown(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Print part 1 and return its JSON: per point both hosts, the ratio and the round trips."""
    out: dict[str, Any] = {}
    for setting in SETTINGS:
        unit = "connection" if setting == "new-connection" else "request"
        for clients in CLIENTS:
            got = {mode: _summarise(runs[f"{setting}/{clients}/{mode}"]) for mode in MODES}
            ratio = got["https"]["rps"].over(got["webalps"]["rps"])
            w, h = got["webalps"], got["https"]
            print(f"  {setting:14s} {clients} client(s): HTTPS {h['rps'].text('.1f')} req/s, "
                  f"WebALPS {w['rps'].text('.1f')} req/s, slowdown {ratio.text('.2f')}x "
                  f"({'meets' if ratio.median <= TARGET_SLOWDOWN else 'MISSES'} <= {TARGET_SLOWDOWN}x)")
            questions = ", ".join(f"{op} {r.median:.2f}" for op, r in
                                  w[f"questions_per_{unit}"].items())
            print(f"      guardian round trips per {unit}: {w[f'round_trips_per_{unit}'].text('.2f')} "
                  f"({questions}); reconnects {sum(w['reconnects'].repeats):.0f}")
            print(f"      CPU ms per request: HTTPS host {h['host_cpu_ms_per_request'].text('.2f')}; "
                  f"WebALPS host {w['host_cpu_ms_per_request'].text('.2f')}, guardian "
                  f"{w['guardian_cpu_ms_per_request'].text('.2f')}; errors HTTPS "
                  f"{sum(h['errors'].repeats):.0f}, WebALPS {sum(w['errors'].repeats):.0f}")
            out[f"{setting}/{clients}"] = point = {
                "slowdown": ratio.to_json(), "target_met": ratio.median <= TARGET_SLOWDOWN,
                **{mode: _to_json(got[mode]) for mode in MODES}}
            chain_runs = runs.get(f"{setting}/{clients}/{CHAIN_MODE}")
            if chain_runs:
                chain = _summarise(chain_runs)
                same = chain["rps"].over(w["rps"])
                print(f"      HTTPS with a chain of the guardian's shape {chain['rps'].text('.1f')} req/s "
                      f"(vs HTTPS {h['rps'].over(chain['rps']).text('.2f')}x); WebALPS vs it "
                      f"{same.text('.2f')}x")
                point.update({CHAIN_MODE: _to_json(chain), "slowdown_same_chain": same.to_json()})
    return out


def _to_json(fig: dict[str, Any]) -> dict[str, Any]:
    return {k: ({op: r.to_json() for op, r in v.items()} if isinstance(v, dict) else v.to_json())
            for k, v in fig.items()}


def report_freeze(part: dict[str, Any]) -> dict[str, Any]:
    """Print part 2 and return its JSON."""
    running, frozen = _summarise(part["runs"]["running"]), _summarise(part["runs"]["frozen"])
    ratio = frozen["rps"].over(running["rps"])
    print(f"  plain HTTP, guardian running {running['rps'].text('.1f')} req/s, frozen "
          f"{frozen['rps'].text('.1f')} req/s: frozen/running {ratio.text('.3f')}")
    print(f"      HTTPS while frozen: {sum(frozen['https_completed'].repeats):.0f} of "
          f"{sum(frozen['https_started'].repeats):.0f} started completed; an HTTPS fetch after "
          f"SIGCONT succeeded in {sum(frozen['https_after_sigcont'].repeats):.0f} of "
          f"{frozen['rps'].n}; HTTP errors {sum(running['errors'].repeats) + sum(frozen['errors'].repeats):.0f}")
    return {"running": _to_json(running), "frozen": _to_json(frozen), "ratio_frozen_over_running":
            ratio.to_json(), "guardian_reconnects": part["reconnects"]}


CSV_FIGURES = ("rps", "round_trips_per_request", "round_trips_per_connection",
               "host_cpu_ms_per_request", "guardian_cpu_ms_per_request")


def write_csv(path: Path, out: dict[str, Any]) -> None:
    """One row per measured figure: part, setting, clients, host, figure (with its unit),
    median, min, max, n -- the JSON's numbers in a table."""
    rows = []
    for point, got in out.get("slowdown", {}).items():
        setting, clients = point.split("/")
        for mode in MODES:
            rows += [("slowdown", setting, clients, mode, fig, got[mode][fig])
                     for fig in CSV_FIGURES if fig in got[mode]]
        rows.append(("slowdown", setting, clients, "https/webalps", "slowdown", got["slowdown"]))
    freeze = out.get("freeze")
    if freeze:
        rows += [("freeze", "plain-http", "", f"guardian {state}", "rps", freeze[state]["rps"])
                 for state in ("running", "frozen")]
        rows += [("freeze", "plain-http", "", "frozen/running", "ratio", freeze["ratio_frozen_over_running"]),
                 ("freeze", "https-while-frozen", "", "webalps", "https_completed",
                  freeze["frozen"]["https_completed"])]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["part", "setting", "clients", "host", "figure", "median", "min", "max", "n"])
        for *key, fig in rows:
            writer.writerow([*key, fig["median"], fig["min"], fig["max"], fig["n"]])


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """``--quick``, ``--seconds``, ``--repeats``, ``--freeze-clients``, ``--part``, ``--json``, ``--csv``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="0.5 s per point instead of 2 s")
    parser.add_argument("--seconds", type=float, help="seconds per point and repeat")
    parser.add_argument("--freeze-clients", type=int, default=4,
                        help="closed-loop plain-HTTP clients in part 2 (default 4)")
    parser.add_argument("--part", choices=("all", "slowdown", "freeze"), default="all",
                        help="run one part only (default all)")
    add_repeats_option(parser)
    parser.add_argument("--json", type=Path, help="write every figure and the provenance here")
    parser.add_argument("--csv", type=Path, help="write the figures as a CSV table here "
                        "(req/s, round trips, CPU ms per request; median, min, max, n)")
    args = parser.parse_args(argv)
    if args.seconds is not None and not args.seconds > 0:
        parser.error("--seconds must be positive")
    if args.freeze_clients < 1:
        parser.error("--freeze-clients must be at least 1")
    args.seconds = args.seconds or (0.5 if args.quick else 2.0)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    require_c_extension(BENCH)
    began = time.perf_counter()

    def progress(line: str) -> None:
        print(f"  [{time.perf_counter() - began:5.0f} s] {line}", file=sys.stderr, flush=True)

    out: dict[str, Any] = {"provenance": provenance(argv), "seconds_per_point": args.seconds,
                           "clients": list(CLIENTS), "target": TARGET_SLOWDOWN}
    with servers() as bed:
        slow = slowdown_part(bed, args.seconds, args.repeats, progress) if args.part != "freeze" else None
        frozen = (freeze_part(bed, args.seconds, args.repeats, args.freeze_clients, progress)
                  if args.part != "slowdown" else None)
    floor = floor_part(slow, args.repeats, progress) if slow is not None else None
    print(f"{BENCH}: 2 KB file, loopback, guardian cost model off (all measured); median "
          f"(min–max, n) of {args.repeats} interleaved repeats of {args.seconds:g} s")
    if slow is not None and floor is not None:
        out["slowdown"] = report_slowdown(slow)
        out["floor"] = report_floor(slow, floor)
    if frozen is not None:
        out["freeze"] = report_freeze(frozen)
    wall = time.perf_counter() - began
    print(f"  wall time {wall:.0f} s")
    if args.json:
        write_json(args.json, out, repeats=args.repeats, wall_s=wall)
    if args.csv:
        write_csv(args.csv, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
