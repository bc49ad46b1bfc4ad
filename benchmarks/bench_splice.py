"""SSL-splitting benchmarks: proxy splice throughput and server CPU per warm download.

1. **Proxy splice throughput** in key-expose mode (AES-128-CBC-SHA, 16 KiB
   records, warm cache): the proxy's per-record work -- parse a stub, look
   the payload up in its memory cache, check its SHA-256 id, encrypt payload +
   MAC -- measured in-process on a stub stream captured from a real splitting
   server connection, in MB of payload per second of CPU time, and as a ratio
   of ``openssl speed -evp aes-128-cbc`` (16 KiB blocks) measured in the same
   run (target >= 0.5).  The end-to-end figure (curl through a warm proxy on
   loopback, wall clock, client decryption on the same two cores) is shown too.
2. **Server CPU per warm 1 MiB download**: CPU seconds the origin process
   spends per download of a 1 MiB file through a warm proxy, against
   ``tls12.https_server`` serving the same file directly (both measured from
   ``/proc/<pid>/stat`` of the server processes, same suite).

Usage: ``python benchmarks/bench_splice.py [--seconds S] [--downloads N] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sslsplit.cache import MemoryCache  # noqa: E402
from sslsplit.splicer import Splicer  # noqa: E402
from sslsplit.store import RecordStore  # noqa: E402
from sslsplit.wire import Stub  # noqa: E402
from sslsplit.writer import SplittingRecordWriter  # noqa: E402
from tls12 import ClientConfig, ClientConnection, ServerConfig, ServerConnection  # noqa: E402
from tls12.certs import generate_self_signed, write_credentials  # noqa: E402
from tls12.suites import CipherSuite  # noqa: E402

SUITE = CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA


def openssl_speed_aes(seconds: int) -> float | None:
    """MB/s of ``openssl speed -evp aes-128-cbc`` at 16 KiB (per CPU second, as openssl reports)."""
    exe = shutil.which("openssl")
    if exe is None:
        return None
    out = subprocess.run([exe, "speed", "-evp", "aes-128-cbc", "-bytes", "16384", "-seconds", str(seconds)],
                         capture_output=True, text=True, check=False).stdout
    m = re.search(r"^aes-128-cbc\s+([\d.]+)k\s*$", out, re.M | re.I)
    return float(m.group(1)) / 1000.0 if m else None


def captured_stream(mib: int) -> tuple[bytes, MemoryCache]:
    """A warm proxy's input: the stub stream of a real connection sending ``mib`` MiB, and the cache."""
    store = RecordStore()
    writer = SplittingRecordWriter(store)
    server = ServerConnection(ServerConfig(credentials=generate_self_signed(), cipher_suites=(SUITE,)), record_writer=writer)
    client = ClientConnection(ClientConfig(cipher_suites=(SUITE,)))
    splicer = Splicer(os.urandom)  # splices the handshake for the client
    for _ in range(4):
        if data := client.data_to_send():
            server.receive_data(data)
        if data := server.data_to_send():
            splicer.feed(data)
            records = b""
            while (msg := splicer.next_message()) is not None:
                rec = splicer.handle(msg)
                records += rec if rec is not None else splicer.rebuild(msg, store.get(msg.ident))  # type: ignore[union-attr, arg-type]
            client.receive_data(records)
    assert client.handshake_complete
    server.send_data(os.urandom(mib << 20))
    stream = server.data_to_send()
    cache = MemoryCache(2 * mib << 20)
    for ident in list(store._entries):
        cache.put(writer.encoding, ident, store.get(ident))  # type: ignore[arg-type]
    return stream, cache


def splice_throughput(seconds: float, mib: int = 16) -> float:
    """MB of payload spliced per CPU second by the proxy's core (warm memory cache)."""
    from sslsplit.cache import CacheHierarchy
    from sslsplit.wire import KeyExpose

    stream, cache = captured_stream(mib)
    hierarchy = CacheHierarchy([cache])
    key = os.urandom(16)
    total_bytes, cpu = 0, 0.0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        splicer = Splicer(os.urandom)
        splicer.expose(KeyExpose(0x0303, key, os.urandom(16)))
        t0 = time.process_time()
        splicer.feed(stream)
        out = 0
        while (msg := splicer.next_message()) is not None:
            if isinstance(msg, Stub) and msg.encoding.digest_name:
                payload = hierarchy.lookup_local(msg.encoding, msg.ident, count=True)  # the proxy's warm path
                out += len(splicer.rebuild(msg, payload, checked=True))  # type: ignore[arg-type]
        cpu += time.process_time() - t0
        total_bytes += mib << 20
    return total_bytes / cpu / 1e6


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _start(cmd: list[str], ready: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        if ready in line:
            return proc
    proc.kill()
    raise RuntimeError(f"{cmd} did not start")


def _curl(url: str, out: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(["curl", "-sk", "--ciphers", "AES128-SHA", url, "-o", str(out)], check=True, timeout=300)
    return time.perf_counter() - t0


def server_cpu(downloads: int, big_mib: int) -> dict[str, float]:
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "www"
        root.mkdir()
        (root / "f1m").write_bytes(os.urandom(1 << 20))
        (root / "big").write_bytes(os.urandom(big_mib << 20))
        cert, key = Path(tmp) / "c.pem", Path(tmp) / "k.pem"
        write_credentials(generate_self_signed(), cert, key)
        sport, store, pport, hport = (_free_port() for _ in range(4))
        procs = [
            _start([py, "-m", "sslsplit.server", "--root", str(root), "--port", str(sport), "--store-port", str(store),
                    "--cert", str(cert), "--key", str(key), "--mode", "key-expose"], "splitting server"),
            _start([py, "-m", "tls12.https_server", "--root", str(root), "--port", str(hport), "--cert", str(cert),
                    "--key", str(key), "--ciphers", "AES128-SHA"], "listening"),
        ]
        procs.append(_start([py, "-m", "sslsplit.proxy", "--server", f"127.0.0.1:{sport}", "--store", f"127.0.0.1:{store}",
                             "--listen", f"127.0.0.1:{pport}"], "splitting proxy"))
        try:
            out = Path(tmp) / "out"
            _curl(f"https://127.0.0.1:{pport}/f1m", out)  # warm the proxy
            _curl(f"https://127.0.0.1:{pport}/big", out)
            results = {}
            for name, pid, url in (("split", procs[0].pid, f"https://127.0.0.1:{pport}/f1m"),
                                   ("https", procs[1].pid, f"https://127.0.0.1:{hport}/f1m")):
                c0 = _cpu_seconds(pid)
                for _ in range(downloads):
                    _curl(url, out)
                results[f"{name}_cpu_ms_per_download"] = (_cpu_seconds(pid) - c0) / downloads * 1000
            t = min(_curl(f"https://127.0.0.1:{pport}/big", out) for _ in range(2))
            results["end_to_end_warm_proxy_MBps"] = (big_mib << 20) / t / 1e6
            t = min(_curl(f"https://127.0.0.1:{hport}/big", out) for _ in range(2))
            results["end_to_end_https_MBps"] = (big_mib << 20) / t / 1e6
            return results
        finally:
            for p in procs:
                p.send_signal(signal.SIGTERM)
            for p in procs:
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=3.0, help="seconds per throughput measurement (default 3)")
    ap.add_argument("--downloads", type=int, default=20, help="1 MiB downloads per server for the CPU figure (default 20)")
    ap.add_argument("--big-mib", type=int, default=64, help="file size of the end-to-end run in MiB (default 64)")
    ap.add_argument("--json", type=Path, help="also write the results as JSON")
    args = ap.parse_args(argv)
    ref = openssl_speed_aes(max(1, round(args.seconds)))
    splice = splice_throughput(args.seconds)
    cpu = server_cpu(args.downloads, args.big_mib)
    ratio = splice / ref if ref else None
    print(f"{'measurement':58} {'value':>12}")
    print(f"{'openssl speed -evp aes-128-cbc (16 KiB), MB/s':58} {ref or float('nan'):12.1f}")
    print(f"{'proxy splice, key-expose, warm, MB/s (CPU time)':58} {splice:12.1f}")
    print(f"{'  ratio to openssl aes-128-cbc (target >= 0.5)':58} {ratio or float('nan'):12.2f}")
    print(f"{'server CPU per warm 1 MiB download via proxy, ms':58} {cpu['split_cpu_ms_per_download']:12.2f}")
    print(f"{'https_server CPU per 1 MiB download, ms':58} {cpu['https_cpu_ms_per_download']:12.2f}")
    print(f"{'  ratio split / https':58} {cpu['split_cpu_ms_per_download'] / cpu['https_cpu_ms_per_download']:12.2f}")
    print(f"{'end to end: curl via warm proxy, MB/s (wall)':58} {cpu['end_to_end_warm_proxy_MBps']:12.1f}")
    print(f"{'end to end: curl from https_server, MB/s (wall)':58} {cpu['end_to_end_https_MBps']:12.1f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"openssl_aes_128_cbc_MBps": ref, "splice_MBps": splice, "ratio": ratio, **cpu}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
