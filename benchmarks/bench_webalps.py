"""WebALPS at native speed: what the guardian round trips cost, against plain HTTPS in the same run.

Starts the tls12 HTTPS host and the WebALPS host + guardian (cost model **off**: the guardian
runs at this machine's speed) from :func:`webalps_sim.experiments.testbed`, and prints, all
measured in the same run on loopback:

1. **per handshake**: mean connect time (TCP + TLS handshake, Python ``ssl`` client) of
   WebALPS and HTTPS and the difference -- the guardian's share of a handshake (one
   ``DERIVE_FINISH`` exchange when the client's flight arrives whole, which it does here);
2. **per record round trip**: on one kept-alive TLS connection, the mean time of a 2 KB
   ``GET`` (one ``OPEN`` and one ``SEAL`` exchange with the guardian per request) and the
   difference WebALPS - HTTPS, halved: the cost of one guardian round trip for a record;
3. **the slowdown** HTTPS -> WebALPS in requests/s for one closed-loop client fetching the
   2 KB file on a new connection per request (the paper's Table 1 setting). Issue 24's target
   is <= 1.2x at native speed (it was <= 1.5x): the paper's hardware-bound 5.85x must come from
   the cost model alone.  Where the remaining time goes, against the floor of any Python IPC
   design measured in the same run, is ``benchmarks/bench_webalps_host.py``'s floor part.

One closed-loop run on a shared machine is noisy (the same slowdown has read 1.44x and 1.60x
in two runs), so each figure is measured ``--repeats`` times (default 5), HTTPS and WebALPS
interleaved, and printed as ``median (min–max, n)``; each repeat's slowdown is that repeat's
HTTPS rate over its WebALPS rate, and the target counts as met only when the median meets it.

Usage: ``python benchmarks/bench_webalps.py [--quick] [--seconds S] [--repeats N] [--server-cpu N] [--json PATH]``.
``--server-cpu N`` runs every server process (the HTTPS host; the WebALPS host and its guardian)
on CPU ``N`` only (:func:`webalps_sim.experiments.testbed`); the client is not pinned (pinned
to the other CPU it ran slower here, sharing the machine with other jobs).
Without the built C extension it exits with status 1 and one line saying so.
"""

from __future__ import annotations

import argparse
import socket
import ssl
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))

from _common import Repeated, add_repeats_option, require_c_extension, rounds, write_json  # noqa: E402

from webalps_sim import experiments as ex  # noqa: E402
from webalps_sim.aio.loadgen import client_context, closed_loop  # noqa: E402

BENCH = "bench_webalps"
TARGET_SLOWDOWN = 1.2
HOSTS = ("HTTPS", "WebALPS-native")


def keepalive_request_ms(url: str, n: int) -> float:
    """Median ms of ``n`` sequential GETs of ``url`` on one kept-alive TLS connection."""
    host, port_path = url.split("://", 1)[1].split(":", 1)
    port, path = port_path.split("/", 1)
    ctx = client_context()
    times = []
    with socket.create_connection((host, int(port))) as raw:
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with ctx.wrap_socket(raw, server_hostname=host) as tls:
            request = f"GET /{path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
            for _ in range(n):
                start = time.perf_counter()
                tls.sendall(request)
                _read_one(tls)
                times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def _read_one(tls: ssl.SSLSocket) -> None:
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = tls.recv(65536)
        if not chunk:
            raise ConnectionError("closed before the response head")
        buf += chunk
    head, _, body = buf.partition(b"\r\n\r\n")
    length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        chunk = tls.recv(65536)
        if not chunk:
            raise ConnectionError("closed mid-body")
        body += chunk


def measure_host(url: str, seconds: float, n_keepalive: int) -> dict[str, float]:
    """One repeat for one host: a closed-loop point (new connection per request) and keep-alive requests."""
    result = closed_loop(url, seconds=seconds)
    return {"rps": result.rps, "connect_ms": result.mean_ms("connect_s"),
            "request_ms": result.mean_ms("request_s"), "requests": result.requests,
            "errors": len(result.errors), "keepalive_request_ms": keepalive_request_ms(url, n_keepalive)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 s per point instead of 3 s")
    parser.add_argument("--seconds", type=float, help="seconds per closed-loop point and repeat")
    parser.add_argument("--server-cpu", type=int, metavar="N",
                        help="run the server processes (hosts, guardian) on CPU N only")
    add_repeats_option(parser)
    parser.add_argument("--json", type=Path, help="write the numbers here")
    args = parser.parse_args(argv)
    if args.seconds is not None and not args.seconds > 0:
        parser.error("--seconds must be positive")
    require_c_extension(BENCH)
    began = time.perf_counter()
    seconds = args.seconds or (1.0 if args.quick else 3.0)
    n_keepalive = 100 if args.quick else 300
    with ex.testbed(HOSTS, server_cpu=args.server_cpu) as bed:
        for host in HOSTS:
            closed_loop(bed.urls[host], seconds=min(seconds, 0.5))  # warm-up
        runs = rounds({host: (lambda url=bed.urls[host]: measure_host(url, seconds, n_keepalive))
                       for host in HOSTS}, args.repeats)  # HTTPS, WebALPS, HTTPS, WebALPS, ...
    figures = {host: {k: Repeated.of(r[k] for r in runs[host]) for k in runs[host][0]} for host in HOSTS}
    https, webalps = figures["HTTPS"], figures["WebALPS-native"]
    pairs = list(zip(runs["HTTPS"], runs["WebALPS-native"], strict=True))
    handshake_ms = Repeated.of(w["connect_ms"] - h["connect_ms"] for h, w in pairs)
    record_ms = Repeated.of((w["keepalive_request_ms"] - h["keepalive_request_ms"]) / 2 for h, w in pairs)
    slowdown = https["rps"].over(webalps["rps"])
    met = slowdown.median <= TARGET_SLOWDOWN
    out = {host: {k: v.to_json() for k, v in figures[host].items()} for host in HOSTS}
    out.update({"guardian_ms_per_handshake": handshake_ms.to_json(),
                "guardian_ms_per_record_round_trip": record_ms.to_json(),
                "slowdown_https_to_webalps": slowdown.to_json(), "target": TARGET_SLOWDOWN,
                "target_met": met, "seconds_per_point": seconds,
                "server_cpu": -1 if args.server_cpu is None else args.server_cpu})
    where = "" if args.server_cpu is None else f", servers on CPU {args.server_cpu}"
    print(f"{BENCH}: 2 KB file, one client, loopback, cost model off{where} (all measured); "
          f"median (min–max, n) of {args.repeats} interleaved repeats of {seconds:g} s")
    for host in HOSTS:
        r = figures[host]
        print(f"  {host:15s} {r['rps'].text('.1f')} req/s  connect {r['connect_ms'].text('.2f')} ms  "
              f"keep-alive request {r['keepalive_request_ms'].text('.3f')} ms  "
              f"({sum(r['requests'].repeats):.0f} fetches, {sum(r['errors'].repeats):.0f} errors)")
    print(f"  guardian per handshake:          {handshake_ms.text('.3f')} ms (WebALPS - HTTPS connect)")
    print(f"  guardian per record round trip:  {record_ms.text('.3f')} ms ((WebALPS - HTTPS) / 2)")
    verdict = "meets" if met else "MISSES"
    print(f"  slowdown HTTPS -> WebALPS:       {slowdown.text('.2f')}x (median {verdict} the <= "
          f"{TARGET_SLOWDOWN}x target)")
    wall = time.perf_counter() - began
    print(f"  wall time {wall:.0f} s")
    if args.json:
        write_json(args.json, out, repeats=args.repeats, wall_s=wall)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
