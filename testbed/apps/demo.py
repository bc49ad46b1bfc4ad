"""Demo: unmodified curl downloads files from the HTTPS file server, for every suite.

What it shows: the TLS 1.2 core interoperates with OpenSSL (through curl)
for each implemented cipher suite, byte-exact (sha256 compared), and what
each download costs in time and in bytes on the server's socket.  The
overhead column is ``bytes on the server socket / file size - 1``: record
headers, MACs, padding, explicit IVs, handshake and HTTP headers.

Run it with ``python -m testbed.demo`` (``--help`` for the options; that module is a thin
entry point calling :func:`main` here); it writes

* ``<out>/downloads.csv`` -- one row per (suite, size);
* ``<out>/throughput.png`` -- MB/s against file size, one line per suite.

``--keylog FILE`` (or, without it, the ``SSLKEYLOGFILE`` environment variable, which curl reads
too) appends each connection's NSS key-log line to FILE (:mod:`tls12.keylog`): a debugging
switch, off by default, announced by a warning on stderr.

Loopback numbers are dominated by CPU cost (ours and curl's), not by a
network; they are a smoke test and a baseline, not a benchmark (see
``benchmarks/bench_https.py`` for the comparison with nginx).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from testbed import cli
from tls12.certs import generate_self_signed
from tls12.config import ServerConfig
from tls12.keylog import KeyLog
from tls12.suites import SUITES, CipherSuite, parse_suite_list

from .harness import BackgroundServer

__all__ = ["DownloadResult", "parse_size", "curl_cipher_arg", "make_docroot", "run_demo", "main"]

DEFAULT_SIZES = "1K,64K,1M,16M"
CURL_TIMEOUT = 300.0


@dataclass(frozen=True)
class DownloadResult:
    """One curl download."""

    suite: str
    size_bytes: int
    seconds: float
    mb_per_s: float
    server_bytes_out: int
    server_bytes_in: int
    overhead: float
    sha256_ok: bool


def parse_size(text: str) -> int:
    """``"16M"`` -> 16 MiB, ``"4000"`` -> 4000, ``"1K"`` -> 1024 (binary units)."""
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    factor = 1
    for suffix, mult in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30)):
        if text.endswith(suffix):
            text, factor = text[: -len(suffix)], mult
            break
    value = int(float(text) * factor)
    if value < 0:
        raise ValueError(f"negative size {text!r}")
    return value


def curl_cipher_arg(suite: CipherSuite) -> str:
    """The ``--ciphers`` value for curl/OpenSSL; NULL suites need security level 0."""
    params = SUITES[suite]
    return f"{params.openssl_name}:@SECLEVEL=0" if params.cipher == "null" else params.openssl_name


def make_docroot(root: Path, sizes: list[int], seed: int = 1) -> dict[int, str]:
    """Write ``file_<size>.bin`` of pseudo-random bytes for each size; returns sha256 by size."""
    rng = random.Random(seed)
    digests: dict[int, str] = {}
    for size in sizes:
        data = rng.randbytes(size)
        (root / f"file_{size}.bin").write_bytes(data)
        digests[size] = hashlib.sha256(data).hexdigest()
    return digests


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _download(server: BackgroundServer, suite: CipherSuite, size: int, target: Path) -> tuple[float, str]:
    cmd = [
        "curl", "--silent", "--show-error", "--insecure",
        "--ciphers", curl_cipher_arg(suite),
        "--output", str(target),
        f"{server.url}/file_{size}.bin",
    ]  # fmt: skip
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=CURL_TIMEOUT)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"curl failed ({proc.returncode}) for {SUITES[suite].openssl_name}: {proc.stderr.strip()}")
    return seconds, _sha256_file(target)


def run_demo(sizes: list[int], suites: tuple[CipherSuite, ...], show_progress: bool = True,
             keylog: KeyLog | None = None) -> list[DownloadResult]:
    """Download every size with every suite; returns one :class:`DownloadResult` each.
    ``keylog`` is the server's debugging switch of :mod:`tls12.keylog` (off by default)."""
    from tqdm import tqdm

    if shutil.which("curl") is None:
        raise FileNotFoundError("curl is not installed (apt-get install curl)")
    results: list[DownloadResult] = []
    with tempfile.TemporaryDirectory(prefix="tls12-demo-") as tmp:
        root = Path(tmp) / "www"
        root.mkdir()
        digests = make_docroot(root, sizes)
        config = ServerConfig(credentials=generate_self_signed(), cipher_suites=tuple(suites),
                              keylog=keylog)
        with BackgroundServer(root, config) as server:
            jobs = [(s, n) for s in suites for n in sizes]
            for suite, size in tqdm(jobs, desc="downloads", unit="file", disable=not show_progress):
                before = server.wait_idle()
                seconds, digest = _download(server, suite, size, Path(tmp) / "out.bin")
                server.wait_idle()
                record = server.stats.connections[before]
                results.append(
                    DownloadResult(
                        suite=SUITES[suite].openssl_name,
                        size_bytes=size,
                        seconds=seconds,
                        mb_per_s=size / seconds / 1e6,
                        server_bytes_out=record.bytes_out,
                        server_bytes_in=record.bytes_in,
                        overhead=record.bytes_out / size - 1 if size else float("nan"),
                        sha256_ok=digest == digests[size],
                    )
                )
    return results


def write_outputs(results: list[DownloadResult], out: Path) -> tuple[Path, Path]:
    """Write ``downloads.csv`` and ``throughput.png`` into ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / "downloads.csv"
    with csv_path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(asdict(results[0]).keys()))
        writer.writeheader()
        for r in results:
            writer.writerow(asdict(r))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for suite in dict.fromkeys(r.suite for r in results):
        rows = sorted((r for r in results if r.suite == suite and r.size_bytes > 0), key=lambda r: r.size_bytes)
        ax.plot([r.size_bytes for r in rows], [r.mb_per_s for r in rows], marker="o", label=suite)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    sizes = sorted({r.size_bytes for r in results if r.size_bytes > 0})
    ax.set_xticks(sizes, [_size_label(n) for n in sizes], rotation=30)
    ax.set_xlabel("file size")
    ax.set_ylabel("download throughput (MB/s, 1 MB = 10^6 B)")
    ax.set_title("curl downloads from testbed.https_server over loopback\n(includes curl start-up and TLS handshake)", fontsize="medium")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(title="cipher suite", fontsize="small")
    fig.tight_layout()
    png_path = out / "throughput.png"
    fig.savefig(png_path, dpi=120)
    plt.close(fig)
    return csv_path, png_path


def _size_label(n: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor and n % factor == 0:
            return f"{n // factor} {unit}"
    return f"{n} B"


def format_table(results: list[DownloadResult]) -> str:
    """A fixed-width text table of the results."""
    lines = [f"{'suite':<24} {'size (B)':>10} {'seconds':>8} {'MB/s':>8} {'server out (B)':>15} {'overhead':>9}  sha256"]
    for r in results:
        overhead = f"{r.overhead:9.2%}" if r.size_bytes else f"{'-':>9}"
        lines.append(
            f"{r.suite:<24} {r.size_bytes:>10} {r.seconds:>8.3f} {r.mb_per_s:>8.1f} "
            f"{r.server_bytes_out:>15} {overhead}  {'ok' if r.sha256_ok else 'MISMATCH'}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m testbed.demo``."""
    parser = argparse.ArgumentParser(
        prog=cli.program_name("testbed.demo"),
        description="Download files of several sizes with curl from testbed.https_server for each cipher suite.",
    )
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help="comma-separated sizes, K/M suffixes (default %(default)s)")
    parser.add_argument(
        "--suites",
        default=":".join(p.openssl_name for p in SUITES.values()),
        help="colon-separated OpenSSL suite names (default: all implemented)",
    )
    parser.add_argument("--out", type=cli.directory, default=Path("results/tls12_demo"), help="output folder (default %(default)s)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    cli.add_keylog_option(parser)
    args = parser.parse_args(argv)
    try:
        sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    except (ValueError, OverflowError) as exc:
        parser.error(f"--sizes {args.sizes!r}: {exc}")
    if not sizes:
        parser.error(f"--sizes {args.sizes!r}: no size given")
    try:
        suites = parse_suite_list(args.suites)
    except ValueError as exc:
        parser.error(f"--suites: {exc}")
    try:
        keylog = cli.keylog_arg(args.keylog)
    except cli.UsageError as exc:
        parser.error(str(exc))
    try:
        results = run_demo(sizes, suites, show_progress=not args.no_progress, keylog=keylog)
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 1
    print(format_table(results))
    csv_path, png_path = write_outputs(results, args.out)
    print(f"wrote {csv_path} and {png_path}")
    bad = [r for r in results if not r.sha256_ok]
    if bad:
        print(f"{parser.prog}: error: {len(bad)} download(s) did not match the served file", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
