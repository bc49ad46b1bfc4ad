"""Barnraising broker: joins per second and DNS answers per second over loopback.

Prints, all measured in the same run on this machine:

1. **joins/s** of a real broker process (``python -m sslsplit.barnraising.broker``, SQLite in
   WAL mode, every join committed before its reply) driven by ``--clients`` keep-alive
   :class:`~sslsplit.barnraising.aio.client.BrokerClient` connections; the ratio to the target
   (1,000 joins/s) and to a **reference**: a trivial h11 server in its own process that
   answers every POST with a constant (valid) join reply, driven by the same clients -- the cost of
   HTTP framing and the client alone, so the ratio shows what parsing, the registry and the
   database commit cost on top;
2. **DNS answers/s** of the broker's responder (UDP, A queries for a site name with three
   live volunteers, ``--window`` queries in flight): repeated queries (served by the
   responder's answer cache by their bytes) and distinct ones (each with its own EDNS cookie:
   parsed by dnspython, answered from the cache by question); the ratio to the target
   (5,000 answers/s); **before/after**: the same distinct queries against the same
   responder with its caches off (``max_cached=0``: every answer rendered by dnspython, as
   before the question cache) in its own process, so the speedup is a ratio of one run;
   the same two responders without sockets (microseconds per distinct query, in this
   process: the ratio without the I/O's noise);
   and a reference: a trivial asyncio UDP echo server in its own process, driven by the
   same load generator (the cost of Python datagram I/O alone), plus the round trip of one
   ``dns.query.udp`` against that echo (dnspython's own client cost, for scale).

3. **cache sharing** (paper §5.3): three in-process volunteers (127.0.0.2-4) of a real
   splitting origin and broker, ``curl`` downloading one file through each in turn: payloads
   the origin's store sent per download, peer lookups and **messages per lookup** (1.00: one
   ring owner, O(1)); then the ring alone at 10 to 10^4 members: microseconds per owner
   lookup against a reference (one SHA-256 of the id, which any hash-named lookup pays), the
   largest member's share of 10^5 keys against the mean, and the hop count a Chord DHT would
   need (log2 n, modelled) beside the ring's 1.

Every timed figure is measured ``--repeats`` times (default 5), all figures once per round so
that each ratio's two sides run next to each other, and printed as ``median (min–max, n)``;
targets count as met only when the median meets them.  The cache-sharing counts (payloads,
lookups, messages) are counted once: they do not depend on the machine's speed.

``--json PATH`` writes the numbers.  Usage:
``python benchmarks/bench_barnraising.py [--quick] [--part all|broker|sharing] [--clients N]
[--window N] [--repeats N] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
import multiprocessing
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))

import dns.edns  # noqa: E402
import dns.exception  # noqa: E402
import dns.message  # noqa: E402
import dns.query  # noqa: E402
import h11  # noqa: E402
from _common import Repeated, add_repeats_option, fail, repo_env, rounds, write_json  # noqa: E402

from sslsplit.barnraising.aio.client import BrokerClient  # noqa: E402
from sslsplit.barnraising.protocol import JoinReply, SiteInfo, encode_reply  # noqa: E402
from sslsplit.barnraising.ring import Ring  # noqa: E402

BENCH = "bench_barnraising"
SITE = "bench/site"
NAME = "www.bench.test"
JOIN_TARGET = 1000.0
DNS_TARGET = 5000.0


# --- reference servers (each in its own process) -------------------------------------------


def _http_constant(port_pipe: multiprocessing.connection.Connection) -> None:
    """An h11 server that answers every request with one constant, valid join reply."""
    site = SiteInfo(SITE, ("127.0.0.1", 8443), ("127.0.0.1", 8444), (NAME,), {})
    _, body = encode_reply(JoinReply("0" * 32, 3600.0, site))

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER)
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await reader.read(16384)
                conn.receive_data(data)
                if not data:
                    break
            elif isinstance(event, h11.EndOfMessage):
                writer.write(conn.send(h11.Response(status_code=200, headers=[
                    ("content-type", "application/json"), ("content-length", str(len(body)))]))
                    + conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage()))
                conn.start_next_cycle()
            elif isinstance(event, h11.ConnectionClosed):
                break
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port_pipe.send(server.sockets[0].getsockname()[1])
        await asyncio.Event().wait()

    asyncio.run(main())


def _udp_echo(port_pipe: multiprocessing.connection.Connection) -> None:
    """An asyncio UDP server that sends every datagram back unchanged."""

    class Echo(asyncio.DatagramProtocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport

        def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
            self.transport.sendto(data, addr)  # type: ignore[attr-defined]

    async def main() -> None:
        transport, _ = await asyncio.get_running_loop().create_datagram_endpoint(
            Echo, local_addr=("127.0.0.1", 0))
        port_pipe.send(transport.get_extra_info("sockname")[1])
        await asyncio.Event().wait()

    asyncio.run(main())


def _dns_uncached(port_pipe: multiprocessing.connection.Connection) -> None:
    """The broker's responder with its answer caches off, three live volunteers."""
    from sslsplit.barnraising.aio.dns import DNSServer
    from sslsplit.barnraising.zone import Responder

    live = ("127.0.0.2", "127.0.0.3", "127.0.0.4")

    async def main() -> None:
        server = DNSServer(Responder(["bench.test"], {NAME: live}.get, max_cached=0))
        await server.start("127.0.0.1", 0)
        port_pipe.send(server.port)
        await asyncio.Event().wait()

    asyncio.run(main())


def _spawn(target: object) -> tuple[multiprocessing.Process, int]:
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=target, args=(child,), daemon=True)
    proc.start()
    if not parent.poll(30):
        fail(BENCH, "a reference server did not start")
    return proc, parent.recv()


# --- the broker ----------------------------------------------------------------------------


def _start_broker(db: Path) -> tuple[subprocess.Popen[str], int, int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "sslsplit.barnraising.broker", "--site", SITE,
         "--server", "127.0.0.1:8443", "--store", "127.0.0.1:8444", "--name", NAME,
         "--db", str(db), "--listen", "127.0.0.1:0", "--dns-port", "0", "--lease", "3600",
         "--join-rate", "1e9", "--join-burst", "1e9"],
        cwd=REPO, env=repo_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    ports = []
    for _ in range(2):
        line = proc.stdout.readline()
        match = re.search(r":(\d+)$", line.strip())
        if not match:
            proc.kill()
            fail(BENCH, f"the broker did not start: {proc.stderr.read() if proc.stderr else ''}")
        ports.append(int(match.group(1)))
    return proc, ports[0], ports[1]


# --- load generators -----------------------------------------------------------------------


async def _joins(port: int, clients: int, seconds: float, first_port: int) -> float:
    """Joins per second by ``clients`` concurrent keep-alive clients during ``seconds``."""
    counter = itertools.cycle(range(first_port, 65536))  # a long run may come round to re-joins
    done = 0
    end = 0.0

    async def one(local: str) -> None:
        nonlocal done
        client = BrokerClient(f"barnraising://127.0.0.1:{port}/{SITE}", local_host=local)
        while time.perf_counter() < end:
            await client.join(next(counter))
            done += 1
        await client.close()

    start = time.perf_counter()
    end = start + seconds
    await asyncio.gather(*(one(f"127.0.1.{i + 1}") for i in range(clients)))
    return done / (time.perf_counter() - start)


class _Flood(asyncio.DatagramProtocol):
    """Keeps ``window`` queries in flight; counts the responses."""

    def __init__(self, queries: list[bytes], window: int) -> None:
        self.queries = queries
        self.window = window
        self.received = 0
        self.sent = 0
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        for _ in range(self.window):
            self._send()

    def _send(self) -> None:
        assert self.transport is not None
        self.transport.sendto(self.queries[self.sent % len(self.queries)])
        self.sent += 1

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.received += 1
        self._send()


def _queries(distinct: bool) -> list[bytes]:
    """A queries for the site's name: 1,024 that differ only in id (what the responder's
    answer cache serves), or 8,192 that each carry their own 8-byte EDNS client cookie (RFC
    7873, as BIND's resolver sends) -- twice the cache's size, so every one is rendered anew."""
    queries = []
    for i in range(8192 if distinct else 1024):
        options = [dns.edns.GenericOption(dns.edns.OptionType.COOKIE, i.to_bytes(8, "big"))]
        q = dns.message.make_query(NAME, "A", use_edns=0 if distinct else False,
                                   options=options if distinct else None)
        q.id = i & 0xFFFF
        queries.append(q.to_wire())
    return queries


async def _answers(port: int, window: int, seconds: float, distinct: bool = False) -> float:
    queries = _queries(distinct)
    loop = asyncio.get_running_loop()
    transport, flood = await loop.create_datagram_endpoint(
        lambda: _Flood(queries, window), remote_addr=("127.0.0.1", port))
    await asyncio.sleep(0.2)  # warm up
    first, start = flood.received, time.perf_counter()
    await asyncio.sleep(seconds)
    rate = (flood.received - first) / (time.perf_counter() - start)
    transport.close()
    return rate


def _dnspython_round_trip_us(port: int, n: int) -> float:
    query = dns.message.make_query(NAME, "A")
    times = []
    for _ in range(n):
        start = time.perf_counter()
        try:
            dns.query.udp(query, "127.0.0.1", port=port, timeout=2, ignore_unexpected=True)
        except dns.query.UnexpectedSource:
            pass
        except dns.exception.DNSException:
            pass  # the echo is not a valid answer; the round trip is what is timed
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def _responder_us(max_cached: int, seconds: float) -> float:
    """Microseconds per distinct query (EDNS cookies) of the responder alone, no sockets."""
    from sslsplit.barnraising.zone import Responder

    live = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
    responder = Responder(["bench.test"], {NAME: live}.get, max_cached=max_cached)
    queries = _queries(distinct=True)  # twice the by-bytes cache: each is parsed anew
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for i in range(done % len(queries), done % len(queries) + 512):
            responder.respond(queries[i % len(queries)], max_size=4096)
        done += 512
    return (time.perf_counter() - start) / done * 1e6


async def _three_volunteers(port: int) -> None:
    for host in ("127.0.0.2", "127.0.0.3", "127.0.0.4"):
        client = BrokerClient(f"barnraising://127.0.0.1:{port}/{SITE}", local_host=host)
        await client.join(443)
        await client.close()


# --- cache sharing ---------------------------------------------------------------------------


async def _sharing(tmp: Path, size: int) -> dict[str, float | int]:
    """Three volunteers, one download through each: origin payloads and peer messages."""
    import random
    import shutil

    from sslsplit.aio.server import SplittingServer
    from sslsplit.aio.volunteer import Volunteer
    from sslsplit.barnraising.aio.broker import Broker
    from sslsplit.barnraising.registry import Registry, SiteConfig
    from tls12.certs import generate_self_signed, write_credentials

    if shutil.which("curl") is None:
        fail(BENCH, "curl not found on PATH; install curl")
    (tmp / "www").mkdir()
    body = random.Random(5).randbytes(size)
    (tmp / "www" / "f.bin").write_bytes(body)
    creds = generate_self_signed(NAME)
    write_credentials(creds, tmp / "site.pem", tmp / "site.key")
    origin = SplittingServer(tmp / "www", creds)
    await origin.start("127.0.0.1", 0, 0)
    config = SiteConfig(SITE, ("127.0.0.1", origin.port), ("127.0.0.1", origin.store_port),
                        (NAME,), {"memory_mb": 64})
    broker = Broker(Registry([config], ":memory:", lease_seconds=60))
    await broker.start("127.0.0.1", 0)
    uri = f"barnraising://127.0.0.1:{broker.port}/{SITE}"
    volunteers = [Volunteer(uri, host=f"127.0.0.{i}") for i in (2, 3, 4)]
    per_download = []
    try:
        for v in volunteers:
            await v.start()
        for v in volunteers:
            await v.refresh_ring()
        for v in volunteers:
            before = origin.store_stats.found
            proc = await asyncio.create_subprocess_exec(
                "curl", "--silent", "--show-error", "--tlsv1.2", "--ciphers", "AES128-SHA256",
                "--cacert", str(tmp / "site.pem"), "--resolve", f"{NAME}:{v.port}:{v.host}",
                f"https://{NAME}:{v.port}/f.bin", "--output", str(tmp / "out.bin"))
            if await proc.wait() != 0 or (tmp / "out.bin").read_bytes() != body:
                fail(BENCH, "a download through a volunteer failed")
            per_download.append(origin.store_stats.found - before)
        lookups = sum(v.ring.lookups for v in volunteers if v.ring is not None)
        messages = sum(v.ring.messages for v in volunteers if v.ring is not None)  # written to sockets
        received = sum(v.peer_server.received for v in volunteers if v.peer_server is not None)
        if received != messages:
            fail(BENCH, f"peers received {received} requests but {messages} were sent")
    finally:
        for v in volunteers:
            await v.stop()
        await broker.close()
        await origin.close()
    records = -(-size // 16384)
    return {"sharing_file_bytes": size, "sharing_records": records,
            "origin_payloads_download_1": per_download[0],
            "origin_payloads_downloads_2_3": per_download[1] + per_download[2],
            "peer_lookups": lookups, "peer_messages": messages, "peer_messages_received": received,
            "messages_per_lookup": messages / lookups if lookups else 0.0}


def _ring_costs(quick: bool, repeats: int) -> dict[str, object]:
    """Ring build, owner lookup and churn at 10 to 10^4 members; lookups and the SHA-256 reference repeated."""
    import hashlib
    import random

    rng = random.Random(1)
    keys = [rng.randbytes(32) for _ in range(20_000 if quick else 50_000)]  # stub ids
    out: dict[str, object] = {}

    def per_key_us(fn: object) -> float:
        start = time.perf_counter()
        for key in keys:
            fn(key)  # type: ignore[operator]
        return (time.perf_counter() - start) / len(keys) * 1e6

    rings = {}
    for n in (10, 100, 1000, 10_000):
        members = [(f"10.0.{i >> 8}.{i & 255}", 7000) for i in range(n)]
        start = time.perf_counter()
        rings[n] = Ring(members)
        out[f"ring_build_s_n{n}"] = time.perf_counter() - start
        out[f"ring_max_share_over_mean_n{n}"] = max(rings[n].shares().values()) * n
    sha = hashlib.sha256
    steps = {"reference_sha256_us": lambda: per_key_us(lambda k: sha(k).digest())}
    for n, ring in rings.items():
        steps[f"ring_owner_us_n{n}"] = lambda ring=ring: per_key_us(ring.owner)
    for name, values in rounds(steps, repeats).items():  # SHA-256, ring 10, ..., SHA-256, ...
        out[name] = Repeated.of(values).to_json()
    for n, ring in rings.items():
        members = [(f"10.0.{i >> 8}.{i & 255}", 7000) for i in range(n)]
        churn = max(1, n // 100)  # 1 % leave, as many join
        start = time.perf_counter()
        ring.update(members[churn:] + [(f"10.1.{i >> 8}.{i & 255}", 7000) for i in range(churn)])
        out[f"ring_churn_update_s_n{n}"] = time.perf_counter() - start
    return out


def _median(figure: object) -> float:
    assert isinstance(figure, dict)
    return float(figure["median"])


def _text(figure: object, spec: str = ".2f") -> str:
    assert isinstance(figure, dict)
    return Repeated.of(figure["repeats"]).text(spec)


def _print_sharing(out: dict[str, object]) -> None:
    print(f"cache sharing, 3 volunteers, {out['sharing_file_bytes']:,} B file "
          f"({out['sharing_records']} records), one curl through each:")
    print(f"  payloads from the origin's store: {out['origin_payloads_download_1']} for the first "
          f"download, {out['origin_payloads_downloads_2_3']} for the next two together")
    print(f"  peer lookups {out['peer_lookups']}, messages {out['peer_messages']}: "
          f"{out['messages_per_lookup']:.2f} messages per lookup (one ring owner, O(1))")
    ref = _median(out["reference_sha256_us"])
    print(f"  reference: one SHA-256 of an id {_text(out['reference_sha256_us'])} us")
    for n in (10, 100, 1000, 10_000):
        owner = out[f"ring_owner_us_n{n}"]
        print(f"  ring of {n:>6,}: owner lookup {_text(owner)} us "
              f"= {_median(owner) / ref:.1f} x one SHA-256 (medians); "
              f"build {out[f'ring_build_s_n{n}'] * 1e3:.0f} ms, 1 % churn "  # type: ignore[operator]
              f"{out[f'ring_churn_update_s_n{n}'] * 1e3:.0f} ms; largest share "  # type: ignore[operator]
              f"{out[f'ring_max_share_over_mean_n{n}']:.2f} x mean; messages 1 vs Chord "
              f"~{math.log2(n):.1f} hops (modelled)")


def build_parser() -> argparse.ArgumentParser:
    """The command line: ``--quick``, ``--clients``, ``--window``, ``--repeats``, ``--json``, ``--part``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="shorter measurements")
    parser.add_argument("--clients", type=int, default=8, help="concurrent join clients (8)")
    parser.add_argument("--window", type=int, default=32, help="DNS queries in flight (32)")
    add_repeats_option(parser)
    parser.add_argument("--json", type=Path, help="write the numbers here")
    parser.add_argument("--part", choices=("all", "broker", "sharing"), default="all",
                        help="what to measure (default all)")
    return parser


def _broker_steps(args: argparse.Namespace, seconds: float, port: int, dns_port: int, http_port: int,
                  echo_port: int, uncached_port: int) -> dict[str, Callable[[], float]]:
    """One round: every figure once, each ratio's two sides next to each other."""
    trips = 100 if args.quick else 300
    first_port = itertools.count(1000, 9000)  # each repeat's joins start at new ports
    return {
        "dns_answers_per_s": lambda: asyncio.run(_answers(dns_port, args.window, seconds)),
        "reference_udp_echo_per_s": lambda: asyncio.run(_answers(echo_port, args.window, seconds)),
        "dns_answers_per_s_uncached": lambda: asyncio.run(
            _answers(dns_port, args.window, seconds, distinct=True)),
        "dns_answers_per_s_caches_off": lambda: asyncio.run(
            _answers(uncached_port, args.window, seconds, distinct=True)),
        "responder_us_per_distinct_query": lambda: _responder_us(4096, seconds / 2),
        "responder_us_per_distinct_query_caches_off": lambda: _responder_us(0, seconds / 2),
        "dnspython_round_trip_us_vs_echo": lambda: _dnspython_round_trip_us(echo_port, trips),
        "dnspython_round_trip_us_vs_broker": lambda: _dnspython_round_trip_us(dns_port, trips),
        "joins_per_s": lambda: asyncio.run(_joins(port, args.clients, seconds, next(first_port) % 56000)),
        "reference_http_requests_per_s": lambda: asyncio.run(
            _joins(http_port, args.clients, seconds, 1000)),
    }


def _measure_broker(args: argparse.Namespace, seconds: float) -> dict[str, Repeated]:
    """Start the broker and the three reference servers, run the interleaved rounds, stop them all."""
    with tempfile.TemporaryDirectory() as tmp:
        broker, port, dns_port = _start_broker(Path(tmp) / "bench.db")
        http_ref, http_port = _spawn(_http_constant)
        echo, echo_port = _spawn(_udp_echo)
        uncached, uncached_port = _spawn(_dns_uncached)
        try:
            asyncio.run(_three_volunteers(port))  # DNS first, while exactly 3 are live
            steps = _broker_steps(args, seconds, port, dns_port, http_port, echo_port, uncached_port)
            return {name: Repeated.of(v) for name, v in rounds(steps, args.repeats).items()}
        finally:
            broker.send_signal(signal.SIGTERM)
            try:
                broker.wait(10)
            except subprocess.TimeoutExpired:
                broker.kill()
            for proc in (http_ref, echo, uncached):
                proc.kill()


def _add_ratios(fig: dict[str, Repeated]) -> None:
    """Add to ``fig`` the ratios to the targets and references and the caches' speedups, pair by pair."""
    fig["joins_ratio_to_target"] = fig["joins_per_s"].map(lambda v: v / JOIN_TARGET)
    fig["joins_ratio_to_reference"] = fig["joins_per_s"].over(fig["reference_http_requests_per_s"])
    fig["dns_ratio_to_target"] = fig["dns_answers_per_s"].map(lambda v: v / DNS_TARGET)
    fig["dns_ratio_to_reference"] = fig["dns_answers_per_s"].over(fig["reference_udp_echo_per_s"])
    fig["dns_uncached_ratio_to_reference"] = fig["dns_answers_per_s_uncached"].over(fig["reference_udp_echo_per_s"])
    fig["dns_question_cache_speedup"] = fig["dns_answers_per_s_uncached"].over(fig["dns_answers_per_s_caches_off"])
    fig["responder_caches_speedup"] = fig["responder_us_per_distinct_query_caches_off"].over(
        fig["responder_us_per_distinct_query"])


def _print_broker(fig: dict[str, Repeated], args: argparse.Namespace, seconds: float) -> None:
    """The broker's figures: joins/s, DNS answers/s (repeated, distinct, caches off), references."""
    print(f"median (min–max, n) of {args.repeats} interleaved repeats of {seconds:g} s (measured)")
    print(f"broker joins/s ({args.clients} keep-alive clients, SQLite WAL commit per join): "
          f"{fig['joins_per_s'].text(',.0f')} = {fig['joins_ratio_to_target'].text()} x target "
          f"{JOIN_TARGET:,.0f}")
    print(f"  reference: constant-reply h11 server, same clients: "
          f"{fig['reference_http_requests_per_s'].text(',.0f')} req/s; broker/reference = "
          f"{fig['joins_ratio_to_reference'].text()}")
    print(f"DNS answers/s (UDP, {args.window} in flight, 3 live volunteers): "
          f"{fig['dns_answers_per_s'].text(',.0f')} = {fig['dns_ratio_to_target'].text()} x target "
          f"{DNS_TARGET:,.0f}")
    print(f"  every query distinct (EDNS cookie; parsed, answered from the question cache): "
          f"{fig['dns_answers_per_s_uncached'].text(',.0f')}")
    print(f"  before/after: same distinct queries, responder with caches off (rendered by "
          f"dnspython each time): {fig['dns_answers_per_s_caches_off'].text(',.0f')}; with caches / "
          f"without = {fig['dns_question_cache_speedup'].text()}")
    print(f"  the responder alone (no sockets), per distinct query: "
          f"{fig['responder_us_per_distinct_query'].text('.0f')} us with caches, "
          f"{fig['responder_us_per_distinct_query_caches_off'].text('.0f')} us without: "
          f"{fig['responder_caches_speedup'].text()} x")
    print(f"  reference: asyncio UDP echo, same load: {fig['reference_udp_echo_per_s'].text(',.0f')} "
          f"datagrams/s; responder/echo = {fig['dns_ratio_to_reference'].text()} "
          f"(distinct queries {fig['dns_uncached_ratio_to_reference'].text()})")
    print(f"  dnspython dns.query.udp round trip: {fig['dnspython_round_trip_us_vs_echo'].text('.0f')} us "
          f"against the echo, {fig['dnspython_round_trip_us_vs_broker'].text('.0f')} us against the "
          "responder")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not 1 <= args.clients <= 200 or not 1 <= args.window <= 4096:
        parser.error("--clients must be 1-200 and --window 1-4096")
    began = time.perf_counter()
    seconds = 0.5 if args.quick else 1.0  # per figure and repeat

    out: dict[str, object] = {"clients": args.clients, "window": args.window, "seconds": seconds}
    if args.part in ("all", "sharing"):
        with tempfile.TemporaryDirectory() as tmp:
            out.update(asyncio.run(_sharing(Path(tmp), 256_000 if args.quick else 1_000_000)))
        out.update(_ring_costs(args.quick, args.repeats))
        _print_sharing(out)
    if args.part == "sharing":
        return _finish(args, out, began)
    fig = _measure_broker(args, seconds)
    _add_ratios(fig)
    out.update({name: r.to_json() for name, r in fig.items()})
    out["joins_target_met"] = fig["joins_per_s"].median >= JOIN_TARGET
    out["dns_target_met"] = fig["dns_answers_per_s"].median >= DNS_TARGET
    out["dns_uncached_target_met"] = fig["dns_answers_per_s_uncached"].median >= DNS_TARGET
    _print_broker(fig, args, seconds)
    return _finish(args, out, began)


def _finish(args: argparse.Namespace, out: dict[str, object], began: float) -> int:
    wall = time.perf_counter() - began
    print(f"wall time {wall:.0f} s")
    if args.json:
        write_json(args.json, out, repeats=args.repeats, wall_s=wall)
    return 0


if __name__ == "__main__":
    sys.exit(main())
