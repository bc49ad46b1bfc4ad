"""Benchmark the SimPy driver: simulated connections per wall second, real objects vs sizes only.

Two ways to simulate the same HTTPS request (TLS 1.2 full handshake + one HTTP/1.0 GET of
``--size`` bytes) over the paper's ADSL line, measured in the same run:

* **driver** -- :class:`netsim.drive.Driver` runs the real ``tls12`` client and server objects
  (every handshake message built, parsed and MAC'd; records really encrypted) over the
  byte-accurate TCP, with :class:`netsim.cpu.Tls12Cpu` charging host CPU per operation;
* **size-only** (the reference) -- the pre-driver style of ``netsim/latency.py``: the same
  flights replayed as byte counts (``conn.a.send(nbytes)``, phantom payloads) on the same
  TCP model, the sizes taken from one driver run so both simulate the same bytes.

Prints connections per wall second for both and their ratio (driver / size-only), and checks
that both give the same simulated latency when CPU costs are zero (the byte model under the
size-only API is the same TCP). The driver also needs real key material per connection: the
server credentials are made once, outside the timed loop.

A second case, **split_cold**, does the same for a cold SSL-splitting download (Figure 12):
the driver runs the real client, splitting server, proxy :class:`~sslsplit.splicer.Splicer`
and cache-miss fetches (:func:`sslsplit.simulate.simulate_download`); the size-only reference
is :func:`sslsplit.latency.request_latency`, the flight model the figure used before.

Usage::

    python benchmarks/bench_drive.py             # 200 connections per variant
    python benchmarks/bench_drive.py --quick     # 30
    python benchmarks/bench_drive.py --json results/benchmarks/drive.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import simpy

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from netsim.cpu import DEFAULT_COSTS, ZERO_COSTS, Tls12Cpu  # noqa: E402
from netsim.drive import Driver, HttpFileServer, HttpGetClient  # noqa: E402
from netsim.link import ADSL_DOWN, ADSL_UP, Link  # noqa: E402
from netsim.tcp import TcpConnection  # noqa: E402
from sslsplit.latency import request_latency  # noqa: E402
from sslsplit.simulate import simulate_download  # noqa: E402
from tls12 import ClientConnection, ServerConnection  # noqa: E402
from tls12.certs import Credentials, generate_self_signed  # noqa: E402
from tls12.config import ClientConfig, ServerConfig  # noqa: E402
from tls12.suites import CipherSuite  # noqa: E402

BENCH = "bench_drive"
SUITE = CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256


def _links(env: simpy.Environment) -> tuple[Link, Link]:
    return Link(env, ADSL_DOWN, "adsl:->s"), Link(env, ADSL_UP, "adsl:s->")


def driver_run(creds: Credentials, body: bytes, seed: int, cpu: bool = True
               ) -> tuple[float, list[tuple[str, int]]]:
    """One connection with the real objects: (simulated latency, flights as (side, bytes))."""
    env = simpy.Environment()
    down, up = _links(env)
    conn = TcpConnection(env, (down,), (up,))
    rng = random.Random(seed)
    client = ClientConnection(ClientConfig(cipher_suites=(SUITE,), rng=rng.randbytes))
    server = ServerConnection(ServerConfig(credentials=creds, cipher_suites=(SUITE,),
                                           rng=rng.randbytes))
    get = HttpGetClient("/file")
    costs = DEFAULT_COSTS if cpu else ZERO_COSTS
    d = Driver(env, conn, client, server, client_app=get, server_app=HttpFileServer(body),
               client_cpu=Tls12Cpu(costs), server_cpu=Tls12Cpu(costs))
    env.run()
    if get.body != body:
        raise SystemExit(f"{BENCH}: the driven client did not receive the file")
    last = max(x.time for x in d.events if x.side == "client")
    return last, [(f.side, f.nbytes) for f in d.flights]


def size_only_run(flights: list[tuple[str, int]]) -> float:
    """The same flights as byte counts, one after the other (the pre-driver style)."""
    env = simpy.Environment()
    down, up = _links(env)
    conn = TcpConnection(env, (down,), (up,))
    out: dict[str, float] = {}

    def request():  # type: ignore[no-untyped-def]
        yield conn.open()
        for side, nbytes in flights:
            yield (conn.a if side == "client" else conn.b).send(nbytes)
            out[side] = env.now

    env.process(request())
    env.run()
    return out["server"]


def per_second(fn, n: int) -> float:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    for i in range(n):
        fn(i)
    return n / (time.perf_counter() - t0)


def split_cold_rates(body: bytes, n: int) -> dict[str, float]:
    """Cold splitting downloads per wall second: real objects on the driver vs the flight model."""
    creds = generate_self_signed(key_size=1024)   # once, outside the timed loop

    def driven(i: int) -> None:
        d = simulate_download("split_cold", body, credentials=creds, cache={}, seed=i)
        if not d.body_ok:
            raise SystemExit(f"{BENCH}: the split client did not receive the file")

    driver_rate = per_second(driven, n)
    sizes_rate = per_second(lambda i: request_latency("split_cold", len(body)), n)
    return {"driver_per_s": driver_rate, "size_only_per_s": sizes_rate,
            "ratio": driver_rate / sizes_rate}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="30 connections per variant")
    ap.add_argument("--size", type=int, default=4096, help="file size in bytes (default 4096)")
    ap.add_argument("--json", type=Path, help="also write the results as JSON here")
    args = ap.parse_args(argv)
    n = 30 if args.quick else 200
    creds = generate_self_signed(key_size=2048)
    body = bytes(range(256)) * (args.size // 256) + bytes(args.size % 256)

    # same bytes, same TCP: with no CPU time both styles give the same latency
    t_driver, flights = driver_run(creds, body, seed=0, cpu=False)
    t_sizes = size_only_run(flights)
    # the driver's last client event is the response (and close_notify) arriving: the
    # size-only replay ends when the server's last flight has arrived too
    agree = abs(t_driver - t_sizes) < 1e-9

    driver_rate = per_second(lambda i: driver_run(creds, body, seed=i), n)
    sizes_rate = per_second(lambda i: size_only_run(flights), n)
    ratio = driver_rate / sizes_rate
    print(f"{BENCH}: HTTPS GET of {args.size} B over ADSL ({SUITE.name}), {n} connections each")
    print(f"  driver (real tls12 objects, CPU model) {driver_rate:10.1f} connections/s")
    print(f"  size-only replay (reference)           {sizes_rate:10.1f} connections/s")
    print(f"  ratio driver / size-only               {ratio:10.3f}")
    print(f"  simulated latency without CPU: driver {t_driver:.6f} s, size-only {t_sizes:.6f} s"
          f" ({'same' if agree else 'DIFFERENT'})")
    split = split_cold_rates(body, n)
    print(f"{BENCH}: cold SSL-splitting GET of {args.size} B over the Figure 12 testbed, "
          f"{n} connections each")
    print(f"  driver (real splitting objects)        {split['driver_per_s']:10.1f} connections/s")
    print(f"  size-only flight model (reference)     {split['size_only_per_s']:10.1f} connections/s")
    print(f"  ratio driver / size-only               {split['ratio']:10.3f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "size": args.size, "connections": n, "driver_per_s": driver_rate,
            "size_only_per_s": sizes_rate, "ratio": ratio, "latency_driver": t_driver,
            "latency_size_only": t_sizes, "latency_agrees": agree,
            "split_cold": split}, indent=2) + "\n")
    return 0 if agree else 1


if __name__ == "__main__":
    raise SystemExit(main())
