"""SSL-splitting proxy throughput, as deployed and in-process, and the origin's CPU per warm download.

All figures use key-expose mode with TLS_RSA_WITH_AES_128_CBC_SHA and 16 KiB
records; MB = 10^6 bytes of HTTP body (payload); CPU = user + system time.

**1. The deployed proxy.**  Three programs in separate processes on loopback:
the origin ``python -m sslsplit.server --mode key-expose``, the proxy
``python -m sslsplit.proxy`` and curl downloading a ``--mib`` MiB file through
it.  The proxy's CPU seconds over each download are read from
``/proc/<pid>/stat`` (all its threads): the figures are MB of payload per
proxy CPU-second and proxy CPU-seconds per GB, each over as many downloads
as it takes the proxy to spend half a CPU-second (``/proc`` counts 10 ms
ticks).  Two proxies:

* *warm* -- its memory cache holds every payload.  The ids were checked with
  SHA-256 when the cache was filled; the memory level is trusted on read, so a
  warm download hashes nothing: per record the proxy parses a stub, looks the
  payload up, encrypts payload + MAC (AES-128-CBC, C extension) and writes it --
  in runs of ``sslsplit.aio.proxy.BATCH`` stubs: one cut of the buffered stubs, one
  cache call and one socket write per run.
* *verify-on-fill* -- ``--memory-mb 0``: it keeps nothing, so every payload
  comes from the origin's record store over HTTP (the cache-miss protocol) and
  its SHA-256 id is checked before use -- a cold proxy's work on every record.

The download's wall-clock MB/s is shown too; it includes curl's decryption and
the origin, which share the same cores.

**2. The proxy's per-record code in this process**, on a stub stream captured
from a real splitting-server connection, as ``SplittingProxy._server_to_client``
runs it without sockets: the splicer in batch mode (``SplittingProxy.new_splicer``,
runs of ``sslsplit.aio.proxy.BATCH`` messages), each run's payloads from
``SplittingProxy.payloads_for`` (one batch lookup in the cache hierarchy) and its
records from ``Splicer.supply_many``, in CPU seconds of this process.  Three
cases: *warm memory* (as deployed: no hash in the loop); *warm memory, verify on
read* (``MemoryCache(verify_on_read=True)``: SHA-256 of every payload in the
loop); *verify-on-fill* (every payload comes from an untrusted source -- a dict
standing in for the origin's store -- is checked with SHA-256, put into the
memory cache, then encrypted).  A fourth row, *per-record path, warm memory*, is
the same work one stub at a time (``Splicer.next_message`` / ``handle``,
``SplittingProxy.payload_for`` / ``record_for``: what the proxy ran before its
batch mode, and still runs for a subclass that overrides a per-stub hook).

**3. The origin's CPU per warm 1 MiB download** through the proxy, against
``testbed.https_server`` serving the same file directly (``/proc`` of both,
over ``--downloads`` downloads each per repeat).

References, measured in the same run: ``openssl speed -evp aes-128-cbc`` and
``openssl speed -evp sha256`` at 16 KiB, in MB per CPU second.  Every proxy
figure is shown as a ratio of AES-128-CBC; the hashing cases also as a ratio
of ``1 / (1/aes + 1/sha256)``, the rate at which OpenSSL alone encrypts *and*
hashes each byte once.  Each measurement runs ``--repeats`` times (default 5),
interleaved with the references (one round: references, every case, then the
origin pair), and every figure prints as ``median (min–max, n)``; a
ratio's repeat is one round's figure over the same round's reference.

Usage: ``python benchmarks/bench_splice.py [--seconds S] [--repeats N] [--mib N] [--downloads N] [--json PATH]``.
Without openssl, curl or the built C extension it exits with status 1 and one
line saying what is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import (  # noqa: E402
    Repeated,
    add_repeats_option,
    fail,
    free_port,
    repo_env,
    require_c_extension,
    require_tools,
    start_and_read_port,
    tls12_server,
    tree_cpu_seconds,
    write_json,
)

from sslsplit.aio.proxy import SplittingProxy  # noqa: E402
from sslsplit.cache import CacheHierarchy, MemoryCache  # noqa: E402
from sslsplit.splicer import PayloadsNeeded, Splicer  # noqa: E402
from sslsplit.store import RecordStore  # noqa: E402
from sslsplit.wire import IDEncoding, KeyExpose, Stub  # noqa: E402
from sslsplit.writer import SplittingRecordWriter  # noqa: E402
from tls12 import ClientConfig, ClientConnection, ServerConfig, ServerConnection  # noqa: E402
from tls12.certs import generate_self_signed, write_credentials  # noqa: E402
from tls12.suites import CipherSuite  # noqa: E402
from tls12.testing import pipe  # noqa: E402

BENCH = "bench_splice"
SUITE = CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA
CURL_CIPHERS = "AES128-SHA"
RECORD = 16384


# --- references ------------------------------------------------------------------


def openssl_speed(exe: str, algorithm: str, seconds: float) -> float:
    """MB per CPU second of ``openssl speed -evp ALGORITHM`` on 16 KiB blocks."""
    cmd = [exe, "speed", "-evp", algorithm, "-bytes", str(RECORD), "-seconds", str(max(1, round(seconds)))]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    match = re.search(rf"^{re.escape(algorithm)}\s+([\d.]+)k\s*$", proc.stdout, re.I | re.M)
    if match is None:
        lines = (proc.stderr + proc.stdout).strip().splitlines()
        fail(BENCH, f"openssl speed -evp {algorithm} gave no figure ({lines[-1] if lines else 'no output'})")
    return float(match.group(1)) / 1000.0  # 1000s of bytes per second -> MB/s


# --- 2. in-process splice --------------------------------------------------------


class _StoreSource:
    """An untrusted payload source held in memory: the origin's record store without the HTTP."""

    name = "store"

    def __init__(self, store: RecordStore) -> None:
        self.store = store

    async def fetch(self, encoding: IDEncoding, ident: bytes) -> bytes | None:
        return self.store.get(ident)

    async def close(self) -> None:
        pass


def captured_stream(mib: int) -> tuple[bytes, RecordStore]:
    """What a splitting server sends a proxy for ``mib`` MiB of body after the handshake, and its store."""
    store = RecordStore()  # the writer's records stay pinned while it lives
    server = ServerConnection(
        ServerConfig(credentials=generate_self_signed(), cipher_suites=(SUITE,)),
        record_writer=SplittingRecordWriter(store),
    )
    client = ClientConnection(ClientConfig(cipher_suites=(SUITE,)))
    splicer = Splicer(os.urandom)  # splices the handshake for the client

    def splice(data: bytes) -> bytes:
        splicer.feed(data)
        records = b""
        while (msg := splicer.next_message()) is not None:
            record = splicer.handle(msg)
            if record is None:
                assert isinstance(msg, Stub)
                payload = store.get(msg.ident)
                assert payload is not None
                record = splicer.rebuild(msg, payload)
            records += record
        return records

    pipe(client, server, to_client=splice, max_rounds=4)
    assert client.handshake_complete
    server.send_data(os.urandom(mib << 20))
    return server.data_to_send(), store


async def _splice(proxy: SplittingProxy, stream: bytes, key: bytes) -> int:
    """The proxy's work on ``stream`` as ``SplittingProxy._server_to_client`` does it (batch mode),
    without sockets; returns payload bytes."""
    splicer = proxy.new_splicer()
    splicer.expose(KeyExpose(0x0303, key, os.urandom(16)))
    payload = 0
    events = splicer.receive_data(stream)
    while events:
        event = events.pop(0)
        assert isinstance(event, PayloadsNeeded)
        splicer.data_to_send_view()  # the runs before: here the proxy writes them to the client
        payloads = await proxy.payloads_for(event.keys)
        payload += sum(map(len, payloads))
        events += splicer.supply_many(event.keys, payloads, checked=True)
    splicer.data_to_send_view()
    return payload


async def _splice_per_record(proxy: SplittingProxy, stream: bytes, key: bytes) -> int:
    """The per-record path: one stub at a time through ``payload_for`` and ``record_for``."""
    splicer = Splicer(os.urandom)
    splicer.expose(KeyExpose(0x0303, key, os.urandom(16)))
    splicer.feed(stream)
    payload = 0
    while (msg := splicer.next_message()) is not None:
        record = splicer.handle(msg)
        if record is None:
            assert isinstance(msg, Stub)
            data = await proxy.payload_for(msg)
            proxy.record_for(splicer, msg, data)
            payload += len(data)
    return payload


def in_process(case: str, stream: bytes, store: RecordStore, mib: int, seconds: float) -> float:
    """MB of payload per CPU second of this process for ``case`` (see the module docstring):
    ``warm``, ``verify-on-read``, ``verify-on-fill`` or ``per-record warm``."""
    source = _StoreSource(store)
    splice = _splice_per_record if case == "per-record warm" else _splice
    key = os.urandom(16)

    def hierarchy() -> CacheHierarchy:
        memory = MemoryCache((mib + 1) << 20, verify_on_read=case == "verify-on-read")
        return CacheHierarchy([memory], [source])

    async def run() -> float:
        proxy = SplittingProxy(("127.0.0.1", 9), hierarchy())  # never started: its per-record methods only
        if case != "verify-on-fill":
            await _splice(proxy, stream, key)  # fill the memory level (ids checked), untimed
        total, cpu = 0, 0.0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            if case == "verify-on-fill":
                proxy.hierarchy = hierarchy()  # empty again: every payload is fetched and checked
            t0 = time.process_time()
            total += await splice(proxy, stream, key)
            cpu += time.process_time() - t0
        return total / cpu / 1e6

    return asyncio.run(run())


# --- 1 and 3. deployed -----------------------------------------------------------


MIN_CPU = 0.5
"""CPU seconds a deployed measurement accumulates at least (``/proc`` counts in 10 ms ticks)."""


def curl_get(curl: str, url: str, size: int) -> None:
    """curl ``url`` to /dev/null; stops the benchmark unless exactly ``size`` body bytes arrived."""
    proc = subprocess.run(
        [curl, "-sk", "--ciphers", CURL_CIPHERS, "-o", os.devnull, "-w", "%{size_download}", url],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    if proc.returncode != 0 or proc.stdout.strip() != str(size):
        fail(BENCH, f"download of {url} failed: curl exit {proc.returncode}, {proc.stdout.strip()} B, {proc.stderr.strip()}")


def cpu_of(pid: int) -> float:
    cpu = tree_cpu_seconds(pid)
    if cpu is None:
        fail(BENCH, f"cannot read the CPU time of process {pid} from /proc")
    return cpu


def downloads(curl: str, url: str, size: int, pid: int, *, at_least: int = 1, max_count: int = 100) -> tuple[float, float, int]:
    """Download ``url`` until process ``pid`` has spent :data:`MIN_CPU` (and ``at_least`` downloads).

    Returns (CPU seconds of ``pid``, wall seconds, downloads), each over the whole batch.
    """
    c0, t0, n = cpu_of(pid), time.perf_counter(), 0
    while n < at_least or (cpu_of(pid) - c0 < MIN_CPU and n < max_count):
        curl_get(curl, url, size)
        n += 1
    return cpu_of(pid) - c0, time.perf_counter() - t0, n


@dataclass
class Deployment:
    curl: str
    warm_port: int
    warm_pid: int
    fill_port: int
    fill_pid: int
    origin_pid: int
    https_port: int
    https_pid: int


# --- the run ---------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One case's repeated figures (each repeat from one round, so ratios pair with that round's references)."""

    name: str
    mb_per_cpu_s: Repeated
    cpu_s_per_gb: Repeated
    wall_mb_per_s: Repeated | None
    x_aes: Repeated
    x_aes_sha: Repeated | None

    def to_json(self) -> dict[str, object]:
        return {k: (v.to_json() if isinstance(v, Repeated) else v) for k, v in vars(self).items()}


def build_parser() -> argparse.ArgumentParser:
    """The command line: ``--seconds``, ``--repeats``, ``--mib``, ``--stream-mib``, ``--downloads``, ``--json``."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Exits with status 1 and one line when openssl, curl or the C extension is missing.")
    ap.add_argument("--seconds", type=float, default=1.0, help="seconds per in-process and openssl measurement (default 1)")
    add_repeats_option(ap)
    ap.add_argument("--mib", type=int, default=32, help="size in MiB of the file downloaded through the proxies (default 32)")
    ap.add_argument("--stream-mib", type=int, default=16, help="MiB of body in the in-process stub stream (default 16)")
    ap.add_argument("--downloads", type=int, default=20,
                    help="1 MiB downloads per server and repeat for the origin CPU figure (default 20)")
    ap.add_argument("--json", type=Path, help="also write the results and run configuration as JSON")
    return ap


@dataclass
class Rounds:
    """Every repeat of every figure, in round order (one list entry per round)."""

    cpu_rate: dict[str, list[float]] = field(default_factory=dict)  # MB per CPU second
    wall_rate: dict[str, list[float]] = field(default_factory=dict)
    refs: dict[str, list[float]] = field(default_factory=lambda: {"aes-128-cbc": [], "sha256": []})
    origin_ms: dict[str, list[float]] = field(default_factory=lambda: {"split": [], "https": []})


def one_round(got: Rounds, dep: Deployment, openssl: str, args: argparse.Namespace, stream: bytes,
              store: RecordStore) -> None:
    """One round: the openssl references, then every in-process and deployed case, then the origin pair."""
    size = args.mib << 20
    for algorithm in got.refs:
        got.refs[algorithm].append(openssl_speed(openssl, algorithm, args.seconds))
    for case in ("warm", "verify-on-read", "verify-on-fill", "per-record warm"):
        got.cpu_rate.setdefault(f"in-process {case}", []).append(
            in_process(case, stream, store, args.stream_mib, args.seconds))
    for name, port, pid in (("deployed warm", dep.warm_port, dep.warm_pid),
                            ("deployed verify-on-fill", dep.fill_port, dep.fill_pid)):
        cpu, wall, n = downloads(dep.curl, f"https://127.0.0.1:{port}/big", size, pid)
        got.cpu_rate.setdefault(name, []).append(n * size / max(cpu, 1e-9) / 1e6)
        got.wall_rate.setdefault(name, []).append(n * size / wall / 1e6)
    for name, ms in origin_cpu(dep, args.downloads).items():
        got.origin_ms[name].append(ms)


def measure_rounds(args: argparse.Namespace, tools: dict[str, str]) -> Rounds:
    """Capture the stub stream, start the deployment, warm the proxy and run ``--repeats`` rounds."""
    stream, store = captured_stream(args.stream_mib)
    size = args.mib << 20
    got = Rounds()
    with tempfile.TemporaryDirectory() as tmp, deployment(Path(tmp), args, tools["curl"]) as dep:
        curl_get(dep.curl, f"https://127.0.0.1:{dep.warm_port}/big", size)  # fills the warm proxy (ids checked)
        curl_get(dep.curl, f"https://127.0.0.1:{dep.warm_port}/f1m", 1 << 20)  # and for the origin figure
        for _ in range(args.repeats):
            one_round(got, dep, tools["openssl"], args, stream, store)
    return got


LABELS = {
    "deployed warm": "proxy process, warm memory cache",
    "deployed verify-on-fill": "proxy process, verify-on-fill (--memory-mb 0)",
    "in-process warm": "in-process splice, warm memory (no hash)",
    "in-process verify-on-read": "in-process splice, warm memory, verify on read",
    "in-process verify-on-fill": "in-process splice, verify-on-fill",
    "in-process per-record warm": "in-process, per-record path, warm memory",
}
"""The cases in table order (deployed first) and their printed names."""

HASHING = {"deployed verify-on-fill", "in-process verify-on-read", "in-process verify-on-fill"}
"""The cases that hash every payload, also compared with OpenSSL's AES + SHA-256 rate."""


def build_rows(got: Rounds, aes: Repeated, both: Repeated) -> dict[str, Row]:
    """One :class:`Row` per case, its ratios paired round by round with the references."""
    rows = {}
    for k in LABELS:  # deployed first
        mb = Repeated.of(got.cpu_rate[k])
        rows[k] = Row(LABELS[k], mb, mb.map(lambda v: 1e3 / v),
                      Repeated.of(got.wall_rate[k]) if k in got.wall_rate else None,
                      mb.over(aes), mb.over(both) if k in HASHING else None)
    return rows


def print_table(args: argparse.Namespace, refs: dict[str, Repeated], rows: dict[str, Row],
                origin: dict[str, Repeated]) -> None:
    """The references, one line per case, and the origin's CPU per download."""
    aes, sha, both = refs["openssl_aes_128_cbc"], refs["openssl_sha256"], refs["aes_plus_sha256"]
    print(f"SSL-splitting proxy, key-expose AES128-SHA, 16 KiB records; median (min–max, n) of {args.repeats} "
          f"interleaved repeats; downloads of {args.mib} MiB by curl; MB = 1e6 B of payload (measured)")
    width = max(len(r.name) for r in rows.values()) + 2
    print(f"{'openssl speed -evp aes-128-cbc':<{width}} {aes.text('.1f')} MB/s cpu")
    print(f"{'openssl speed -evp sha256':<{width}} {sha.text('.1f')} MB/s cpu")
    print(f"{'  both, once per byte: 1/(1/aes+1/sha256)':<{width}} {both.text('.1f')} MB/s cpu")
    for r in rows.values():
        wall_text = "" if r.wall_mb_per_s is None else f", wall {r.wall_mb_per_s.median:.1f} MB/s"
        sha_text = "" if r.x_aes_sha is None else f", x aes+sha {r.x_aes_sha.text()}"
        print(f"{r.name:<{width}} {r.mb_per_cpu_s.text('.1f')} MB/s cpu{wall_text}; x aes {r.x_aes.text()}{sha_text}")
    print(f"origin CPU per warm 1 MiB download via proxy: {origin['split_cpu_ms_per_download'].text()} ms; "
          f"testbed.https_server: {origin['https_cpu_ms_per_download'].text()} ms; ratio {origin['ratio'].text()}")


def run_config(args: argparse.Namespace, openssl: str) -> dict[str, object]:
    """The run configuration written to the JSON (sizes, suite, Python, machine, openssl version)."""
    return {
        "seconds": args.seconds, "mib": args.mib, "stream_mib": args.stream_mib,
        "downloads": args.downloads, "suite": SUITE.name, "python": sys.version.split()[0],
        "machine": platform.machine(), "cpus": os.cpu_count(),
        "openssl": subprocess.run([openssl, "version"], capture_output=True, text=True, check=False).stdout.strip(),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if not args.seconds > 0 or min(args.mib, args.stream_mib, args.downloads) < 1:
        ap.error("--seconds, --mib, --stream-mib and --downloads must be positive")
    tools = require_tools(BENCH, {"openssl": "openssl", "curl": "curl"})
    require_c_extension(BENCH)
    began = time.perf_counter()

    got = measure_rounds(args, tools)
    aes, sha = Repeated.of(got.refs["aes-128-cbc"]), Repeated.of(got.refs["sha256"])
    both = Repeated.of(1 / (1 / a + 1 / s) for a, s in zip(aes.repeats, sha.repeats, strict=True))
    refs = {"openssl_aes_128_cbc": aes, "openssl_sha256": sha, "aes_plus_sha256": both}
    rows = build_rows(got, aes, both)
    split_ms, https_ms = Repeated.of(got.origin_ms["split"]), Repeated.of(got.origin_ms["https"])
    origin = {"split_cpu_ms_per_download": split_ms, "https_cpu_ms_per_download": https_ms,
              "ratio": split_ms.over(https_ms)}
    print_table(args, refs, rows, origin)
    wall_s = time.perf_counter() - began
    print(f"wall time {wall_s:.0f} s")

    if args.json:
        result = {
            "config": run_config(args, tools["openssl"]),
            "references_MBps": {k: v.to_json() for k, v in refs.items()},
            "rows": {k: r.to_json() for k, r in rows.items()},
            "origin": {k: v.to_json() for k, v in origin.items()},
        }
        write_json(args.json, result, repeats=args.repeats, wall_s=wall_s)
    return 0


def origin_cpu(dep: Deployment, count: int) -> dict[str, float]:
    """Origin CPU milliseconds per 1 MiB download: splitting server through the warm proxy vs https_server."""
    warm = f"https://127.0.0.1:{dep.warm_port}/f1m"
    out = {}
    for name, url, pid in (("split", warm, dep.origin_pid), ("https", f"https://127.0.0.1:{dep.https_port}/f1m", dep.https_pid)):
        cpu, _, n = downloads(dep.curl, url, 1 << 20, pid, at_least=count, max_count=count)
        out[name] = cpu / n * 1000
    return out


@contextmanager
def deployment(tmp: Path, args: argparse.Namespace, curl: str) -> Iterator[Deployment]:
    """Origin, two proxies (warm; ``--memory-mb 0``) and testbed.https_server, each in its own process."""
    root = tmp / "www"
    root.mkdir()
    (root / "big").write_bytes(os.urandom(args.mib << 20))
    (root / "f1m").write_bytes(os.urandom(1 << 20))
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    write_credentials(generate_self_signed(), cert, key)
    py, env, store = sys.executable, repo_env(), free_port()
    store_mb = str(2 * args.mib + 16)
    with ExitStack() as stack:
        port, origin = stack.enter_context(start_and_read_port(
            [py, "-m", "sslsplit.server", "--root", str(root), "--port", "0", "--store-port", str(store),
             "--cert", str(cert), "--key", str(key), "--mode", "key-expose", "--store-max-mb", store_mb],
            r"splitting server on \S+:(\d+),", env=env,
        ))  # fmt: skip
        proxies = [
            stack.enter_context(start_and_read_port(
                [py, "-m", "sslsplit.proxy", "--server", f"127.0.0.1:{port}", "--store", f"127.0.0.1:{store}",
                 "--listen", f"127.0.0.1:{free_port()}", "--memory-mb", memory],
                r"splitting proxy on \S+:(\d+) ", env=env,
            ))  # fmt: skip
            for memory in (store_mb, "0")
        ]
        https_port, https_pid = stack.enter_context(
            start_and_read_port(tls12_server(root, cert, key, CURL_CIPHERS), r"listening on https://\S+:(\d+)", env=env)
        )
        (warm_port, warm_pid), (fill_port, fill_pid) = proxies
        yield Deployment(curl, warm_port, warm_pid, fill_port, fill_pid, origin, https_port, https_pid)


if __name__ == "__main__":
    sys.exit(main())
