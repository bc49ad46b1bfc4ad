"""Benchmark the SimPy driver: simulated connections per wall second, real objects vs sizes only.

Two ways to simulate the same HTTPS request (TLS 1.2 full handshake + one HTTP/1.0 GET of
``--size`` bytes) over the paper's ADSL line, measured in the same run:

* **driver** -- :class:`netsim.drive.Driver` runs the real ``tls12`` client and server objects
  (every handshake message built, parsed and MAC'd; records really encrypted) over the
  byte-accurate TCP, with :class:`netsim.cpu.Tls12Cpu` charging host CPU per operation;
* **size-only** (the reference) -- the pre-driver style of ``netsim/latency.py``: the same
  flights replayed as byte counts (``conn.a.send(nbytes)``, phantom payloads) on the same
  TCP model, the sizes taken from one driver run so both simulate the same bytes.

* **ceiling** -- the same ``tls12`` client and server objects, seeded and configured alike,
  with the same HTTP applications, driving one handshake + GET + close purely in memory (each
  side's output handed straight to the other's ``receive_data``: no SimPy, no TCP, no CPU model).
  The driver runs this very protocol work and more, so it cannot beat this rate: driver /
  ceiling is the share of a driven connection's wall time that is the protocol itself, and
  ceiling / size-only bounds what any driver could reach against the byte-count replay.

Prints connections per wall second for the three and the ratios driver / size-only,
driver / ceiling and ceiling / size-only, and checks that driver and size-only give the same
simulated latency when CPU costs are zero (the byte model under the size-only API is the same
TCP). The driver also needs real key material per connection: the server credentials are made
once, outside the timed loop.

**Stable repeats.** The three variants run interleaved after one untimed warm-up round, each
repeat cut into :data:`SLICES` rounds of driver, ceiling, size-only blocks of a few milliseconds
(a repeat's rate: its calls over the sum of its blocks); before every timed block the garbage
collector runs, and the set-up's objects (credentials, imported modules) are frozen out of
later collections (:func:`gc.freeze`), so a full collection scanning them cannot land in one
variant's block -- a gen-2 collection of this process takes about 45 ms, more than a whole
40-connection size-only repeat used to. The faster variants run more connections (ceiling 2x,
size-only 8x the driver's ``n``), so each variant's blocks last about as long (some 15 ms each
by default) and a scheduling hiccup on a shared machine weighs alike on each.

A second case, **split_cold**, does the same for a cold SSL-splitting download (Figure 12):
the driver runs the real client, splitting server, proxy :class:`~sslsplit.splicer.Splicer`
and cache-miss fetches (:func:`sslsplit.model_driver.simulate_download`); the size-only reference
is :func:`sslsplit.model_latency.request_latency`, the flight model the figure used before.

Usage::

    python benchmarks/bench_drive.py             # 5 interleaved repeats of 40 driver connections
    python benchmarks/bench_drive.py --quick     # 5 of 10 (ceiling 2x, size-only 8x as many)
    python benchmarks/bench_drive.py --json results/benchmarks/drive.json
    python benchmarks/bench_drive.py --quick --pcap get.pcap --keylog get.keys  # and look at it:
    tshark -r get.pcap -o tls.keylog_file:get.keys -Y http

``--pcap FILE`` writes the packets of the untimed check run (the HTTPS GET on the driver, no CPU
time) as :mod:`netsim.pcap` captures them; ``--keylog FILE`` the key log that decrypts them.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import random
import sys
import time
from pathlib import Path

import simpy

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import Repeated, add_repeats_option, write_json  # noqa: E402

from netsim.cpu import DEFAULT_COSTS, ZERO_COSTS, Tls12Cpu  # noqa: E402
from netsim.drive import Driver, HttpFileServer, HttpGetClient, Started  # noqa: E402
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
CEILING_FACTOR = 2    #: ceiling connections per repeat, per driver connection
SIZE_ONLY_FACTOR = 8  #: size-only connections per repeat, per driver connection


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


class _InMemory:
    """What the HTTP applications use of a driver's side: the object, and a shutdown flag."""

    def __init__(self, obj: object) -> None:
        self.obj = obj
        self.down = False

    def shutdown(self) -> None:
        self.down = True


def ceiling_run(creds: Credentials, body: bytes, seed: int) -> int:
    """The driver's protocol work alone: the same objects and applications, bytes handed over in
    memory until neither side has anything to send. Returns the number of flights."""
    rng = random.Random(seed)
    client = ClientConnection(ClientConfig(cipher_suites=(SUITE,), rng=rng.randbytes))
    server = ServerConnection(ServerConfig(credentials=creds, cipher_suites=(SUITE,),
                                           rng=rng.randbytes))
    get = HttpGetClient("/file")
    sides = [(_InMemory(client), get), (_InMemory(server), HttpFileServer(body))]
    for side, app in sides:
        app(side, Started())  # type: ignore[arg-type]  # the applications need .obj and .shutdown()
    out, flights, turn = client.data_to_send(), 0, 1
    while out:
        flights += 1
        side, app = sides[turn]
        for event in side.obj.receive_data(out):  # type: ignore[attr-defined]
            app(side, event)  # type: ignore[arg-type]
        out, turn = side.obj.data_to_send(), 1 - turn  # type: ignore[attr-defined]
    if get.body != body:
        raise SystemExit(f"{BENCH}: the in-memory client did not receive the file")
    return flights


SLICES = 4
"""Each timed repeat is cut into this many slices, interleaved across the variants."""


def measured(steps: dict[str, tuple[object, int]], repeats: int) -> dict[str, Repeated]:
    """Rates (calls per wall second) of ``{name: (fn, n)}``, ``repeats`` times.

    One untimed warm-up round first. A repeat runs :data:`SLICES` rounds; in each, every
    variant makes ``n / SLICES`` calls ``fn(i)`` in one timed block, after a collection (no
    garbage of the block before). A variant's rate for the repeat is its calls over the sum
    of its blocks: the variants' blocks alternate every few milliseconds, so a burst of load
    on a shared machine weighs on each alike.
    """
    gc.collect()
    gc.freeze()         # the set-up's objects: out of every later collection (module docstring)
    for fn, _ in steps.values():
        fn(0)  # type: ignore[operator]
    out: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(repeats):
        spent = dict.fromkeys(steps, 0.0)
        calls = dict.fromkeys(steps, 0)
        for k in range(SLICES):
            for name, (fn, n) in steps.items():
                part = range(k * n // SLICES, (k + 1) * n // SLICES)
                gc.collect()
                t0 = time.perf_counter()
                for i in part:
                    fn(i)  # type: ignore[operator]
                spent[name] += time.perf_counter() - t0
                calls[name] += len(part)
        for name in steps:
            out[name].append(calls[name] / spent[name])
    return {name: Repeated.of(v) for name, v in out.items()}


def get_rates(creds: Credentials, body: bytes, flights: list[tuple[str, int]], n: int,
              repeats: int) -> dict[str, Repeated]:
    """Connections per wall second of the driver, the in-memory ceiling and the size-only replay."""
    return measured({"driver": (lambda i: driver_run(creds, body, seed=i), n),
                     "ceiling": (lambda i: ceiling_run(creds, body, seed=i), n * CEILING_FACTOR),
                     "size_only": (lambda i: size_only_run(flights), n * SIZE_ONLY_FACTOR)}, repeats)


def print_get_rates(got: dict[str, Repeated], size: int, n: int, repeats: int) -> None:
    """The HTTPS GET case: the three rates and their ratios."""
    print(f"{BENCH}: HTTPS GET of {size} B over ADSL ({SUITE.name}), {n} driver connections per "
          f"repeat (ceiling {n * CEILING_FACTOR}, size-only {n * SIZE_ONLY_FACTOR}); "
          f"median (min–max, n) of {repeats} interleaved repeats (measured)")
    print(f"  driver (real tls12 objects, CPU model) {got['driver'].text('.1f')} connections/s")
    print(f"  ceiling (same objects, in memory)      {got['ceiling'].text('.1f')} connections/s")
    print(f"  size-only replay (reference)           {got['size_only'].text('.1f')} connections/s")
    for label, num, den in (("driver / size-only ", "driver", "size_only"),
                            ("driver / ceiling   ", "driver", "ceiling"),
                            ("ceiling / size-only", "ceiling", "size_only")):
        print(f"  ratio {label}              {got[num].over(got[den]).text('.3f')}")


def split_cold_rates(body: bytes, n: int, repeats: int) -> dict[str, object]:
    """Cold splitting downloads per wall second: real objects on the driver vs the flight model."""
    creds = generate_self_signed(key_size=1024)   # once, outside the timed loop

    def driven(i: int) -> None:
        d = simulate_download("split_cold", body, credentials=creds, cache={}, seed=i)
        if not d.body_ok:
            raise SystemExit(f"{BENCH}: the split client did not receive the file")

    got = measured({"driver": (driven, n),
                    "size_only": (lambda i: request_latency("split_cold", len(body)), n * SIZE_ONLY_FACTOR)},
                   repeats)
    return {"driver_per_s": got["driver"].to_json(), "size_only_per_s": got["size_only"].to_json(),
            "ratio": got["driver"].over(got["size_only"]).to_json()}


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

    got = get_rates(creds, body, flights, n, args.repeats)
    print_get_rates(got, args.size, n, args.repeats)
    print(f"  simulated latency without CPU: driver {t_driver:.6f} s, size-only {t_sizes:.6f} s"
          f" ({'same' if agree else 'DIFFERENT'})")
    split = split_cold_rates(body, n, args.repeats)
    print(f"{BENCH}: cold SSL-splitting GET of {args.size} B over the Figure 12 testbed, "
          f"{n} driver connections per repeat (size-only {n * SIZE_ONLY_FACTOR})")
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
            "size": args.size, "connections_per_repeat": n,
            "ceiling_connections_per_repeat": n * CEILING_FACTOR,
            "size_only_connections_per_repeat": n * SIZE_ONLY_FACTOR,
            "driver_per_s": got["driver"].to_json(), "ceiling_per_s": got["ceiling"].to_json(),
            "size_only_per_s": got["size_only"].to_json(),
            "ratio": got["driver"].over(got["size_only"]).to_json(),
            "driver_vs_ceiling": got["driver"].over(got["ceiling"]).to_json(),
            "ceiling_vs_size_only": got["ceiling"].over(got["size_only"]).to_json(),
            "latency_driver": t_driver, "latency_size_only": t_sizes, "latency_agrees": agree,
            "split_cold": split}, repeats=args.repeats, wall_s=wall)
    return 0 if agree else 1


if __name__ == "__main__":
    raise SystemExit(main())
