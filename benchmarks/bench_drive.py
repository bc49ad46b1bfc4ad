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
and cache-miss fetches (:func:`sslsplit.model_driver.simulate_download`); the size-only reference
is :func:`sslsplit.model_latency.request_latency`, the flight model the figure used before.

Usage::

    python benchmarks/bench_drive.py             # 5 interleaved repeats of 40 connections per variant
    python benchmarks/bench_drive.py --quick     # 5 of 10
    python benchmarks/bench_drive.py --json results/benchmarks/drive.json
    python benchmarks/bench_drive.py --quick --pcap get.pcap --keylog get.keys  # and look at it:
    tshark -r get.pcap -o tls.keylog_file:get.keys -Y http

``--pcap FILE`` writes the packets of the untimed check run (the HTTPS GET on the driver, no CPU
time) as :mod:`netsim.pcap` captures them; ``--keylog FILE`` the key log that decrypts them.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import time
from pathlib import Path

import simpy

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import Repeated, add_repeats_option, interleaved, write_json  # noqa: E402

from netsim.cpu import DEFAULT_COSTS, ZERO_COSTS, Tls12Cpu  # noqa: E402
from netsim.drive import Driver, HttpFileServer, HttpGetClient  # noqa: E402
from netsim.link import Link  # noqa: E402
from netsim.pcap import PcapWriter  # noqa: E402
from netsim.tcp import TcpConnection  # noqa: E402
from sslsplit.model_driver import simulate_download  # noqa: E402
from sslsplit.model_latency import request_latency  # noqa: E402
from sslsplit.params import ADSL_DOWN, ADSL_UP  # noqa: E402
from testbed.cli import UsageError, add_keylog_option, keylog_arg, output_file  # noqa: E402
from tls12 import ClientConnection, ServerConnection  # noqa: E402
from tls12.certs import Credentials, generate_self_signed  # noqa: E402
from tls12.config import ClientConfig, ServerConfig  # noqa: E402
from tls12.keylog import KeyLog  # noqa: E402
from tls12.suites import CipherSuite  # noqa: E402

BENCH = "bench_drive"
SUITE = CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256


def _links(env: simpy.Environment) -> tuple[Link, Link]:
    return Link(env, ADSL_DOWN, "adsl:->s"), Link(env, ADSL_UP, "adsl:s->")


def driver_run(creds: Credentials, body: bytes, seed: int, cpu: bool = True,
               pcap: Path | None = None, keylog: KeyLog | None = None
               ) -> tuple[float, list[tuple[str, int]]]:
    """One connection with the real objects: (simulated latency, flights as (side, bytes)).

    ``pcap``: write its packets there (:class:`netsim.pcap.PcapWriter`); ``keylog``: the
    client's key-log sink."""
    env = simpy.Environment()
    down, up = _links(env)
    conn = TcpConnection(env, (down,), (up,))
    rng = random.Random(seed)
    client = ClientConnection(ClientConfig(cipher_suites=(SUITE,), rng=rng.randbytes,
                                           keylog=keylog))
    server = ServerConnection(ServerConfig(credentials=creds, cipher_suites=(SUITE,),
                                           rng=rng.randbytes))
    get = HttpGetClient("/file")
    costs = DEFAULT_COSTS if cpu else ZERO_COSTS
    with contextlib.ExitStack() as stack:
        capture = stack.enter_context(PcapWriter(pcap)) if pcap is not None else None
        d = Driver(env, conn, client, server, client_app=get, server_app=HttpFileServer(body),
                   client_cpu=Tls12Cpu(costs), server_cpu=Tls12Cpu(costs), capture=capture)
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


def split_cold_rates(body: bytes, n: int, repeats: int) -> dict[str, object]:
    """Cold splitting downloads per wall second: real objects on the driver vs the flight model."""
    creds = generate_self_signed(key_size=1024)   # once, outside the timed loop

    def driven(i: int) -> None:
        d = simulate_download("split_cold", body, credentials=creds, cache={}, seed=i)
        if not d.body_ok:
            raise SystemExit(f"{BENCH}: the split client did not receive the file")

    pair = interleaved(lambda: per_second(driven, n),
                       lambda: per_second(lambda i: request_latency("split_cold", len(body)), n), repeats)
    return {"driver_per_s": pair.candidate.to_json(), "size_only_per_s": pair.reference.to_json(),
            "ratio": pair.ratio.to_json()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="10 connections per variant and repeat")
    ap.add_argument("--size", type=int, default=4096, help="file size in bytes (default 4096)")
    ap.add_argument("--json", type=Path, help="also write the results as JSON here")
    ap.add_argument("--pcap", type=output_file, metavar="FILE",
                    help="write the packets of the untimed check run to FILE (pcap)")
    add_keylog_option(ap, "the check run's client key log; ")
    add_repeats_option(ap)
    args = ap.parse_args(argv)
    if args.size < 1:
        ap.error("--size must be positive")
    try:
        keylog = keylog_arg(args.keylog) if args.pcap or args.keylog else None
    except UsageError as exc:
        ap.error(str(exc))
    began = time.perf_counter()
    n = 10 if args.quick else 40
    creds = generate_self_signed(key_size=2048)
    body = bytes(range(256)) * (args.size // 256) + bytes(args.size % 256)

    # same bytes, same TCP: with no CPU time both styles give the same latency
    t_driver, flights = driver_run(creds, body, seed=0, cpu=False, pcap=args.pcap, keylog=keylog)
    t_sizes = size_only_run(flights)
    # the driver's last client event is the response (and close_notify) arriving: the
    # size-only replay ends when the server's last flight has arrived too
    agree = abs(t_driver - t_sizes) < 1e-9

    pair = interleaved(lambda: per_second(lambda i: driver_run(creds, body, seed=i), n),
                       lambda: per_second(lambda i: size_only_run(flights), n), args.repeats)
    print(f"{BENCH}: HTTPS GET of {args.size} B over ADSL ({SUITE.name}), {n} connections per repeat; "
          f"median (min–max, n) of {args.repeats} interleaved repeats (measured)")
    print(f"  driver (real tls12 objects, CPU model) {pair.candidate.text('.1f')} connections/s")
    print(f"  size-only replay (reference)           {pair.reference.text('.1f')} connections/s")
    print(f"  ratio driver / size-only               {pair.ratio.text('.3f')}")
    print(f"  simulated latency without CPU: driver {t_driver:.6f} s, size-only {t_sizes:.6f} s"
          f" ({'same' if agree else 'DIFFERENT'})")
    split = split_cold_rates(body, n, args.repeats)
    print(f"{BENCH}: cold SSL-splitting GET of {args.size} B over the Figure 12 testbed, "
          f"{n} connections per repeat")
    for label, key in (("driver (real splitting objects)   ", "driver_per_s"),
                       ("size-only flight model (reference)", "size_only_per_s"), ("ratio driver / size-only          ", "ratio")):
        fig = split[key]
        assert isinstance(fig, dict)
        unit = "" if key == "ratio" else " connections/s"
        print(f"  {label}     {Repeated.of(fig['repeats']).text('.3f' if key == 'ratio' else '.1f')}{unit}")
    wall = time.perf_counter() - began
    print(f"  wall time {wall:.0f} s")
    if args.json:
        write_json(args.json, {
            "size": args.size, "connections_per_repeat": n, "driver_per_s": pair.candidate.to_json(),
            "size_only_per_s": pair.reference.to_json(), "ratio": pair.ratio.to_json(),
            "latency_driver": t_driver, "latency_size_only": t_sizes, "latency_agrees": agree,
            "split_cold": split}, repeats=args.repeats, wall_s=wall)
    return 0 if agree else 1


if __name__ == "__main__":
    raise SystemExit(main())
