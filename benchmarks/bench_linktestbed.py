"""HTTPS over the kernel-shaped ADSL line vs the SimPy model.

The real ``python -m testbed.https_server`` runs in the origin namespace of a
:class:`testbed.linux.linktestbed.LinkTestbed` with the ADSL profile (160 kbit/s from the origin,
1.5 Mbit/s towards it, 10 ms each way, the client on a 100 Mbit/s LAN in front of the middle
node), and ``curl`` in the client namespace downloads files of each size; curl's
``time_total`` (from before the TCP SYN to the last body byte) is the measurement. Next to it:
:func:`sslsplit.model_latency.request_latency` for ``"https"`` with the same link parameters,

``model_s``
    the model as the paper figures use it (``AdslTestbed()``: initial window 2 segments,
    52-byte TCP/IP headers);
``model_kernel_tcp_s``
    the same links with Linux's TCP constants (initial window 10, 66 bytes per segment counting
    the Ethernet header ``tbf`` charges) -- kernel facts, not values fitted to this run.

The model is *not* recalibrated from these runs. The server is restricted to ``AES128-SHA``
(RSA key exchange, as the model's handshake). Needs root, iproute2 and curl; without them it
stops with one line and exit status 1.

Usage::

    python benchmarks/bench_linktestbed.py                  # 1 KB, 64 KB, 1 MB; 5 repeats
    python benchmarks/bench_linktestbed.py --sizes 1000 65536 --repeats 1 --csv out.csv
    python benchmarks/bench_linktestbed.py --no-serialise  # tbf alone: small files too fast
"""

from __future__ import annotations

import argparse
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from netsim.tcp import TcpParams  # noqa: E402
from sslsplit.model_latency import AdslTestbed, request_latency  # noqa: E402
from sslsplit.params import ADSL_PROFILE as ADSL  # noqa: E402
from testbed.linux.linktestbed import (  # noqa: E402
    LinkTestbed,
    NamespacesUnavailable,
    check_available,
)

#: The sizes of the first measured point (bytes).
SIZES = (1_000, 65_536, 1_048_576)
PORT = 8443
#: Linux TCP: RFC 6928 initial window; 20 IP + 32 TCP (timestamps) + 14 Ethernet bytes.
KERNEL_TCP = TcpParams(init_cwnd=10.0, header=66)

__all__ = ["SIZES", "KERNEL_TCP", "https_vs_model", "main"]


def _start_server(tb: LinkTestbed, root: Path) -> subprocess.Popen[str]:
    proc = tb.popen("origin", [sys.executable, "-m", "testbed.https_server", "--root", str(root),
                               "--host", "0.0.0.0", "--port", str(PORT),
                               "--ciphers", "AES128-SHA", "--quiet"],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    ready, _, _ = select.select([proc.stdout], [], [], 30)
    line = proc.stdout.readline() if ready and proc.stdout else ""
    if not line.startswith("listening on"):
        proc.kill()
        _, err = proc.communicate()
        raise RuntimeError(f"https_server did not start: {err.strip() or line.strip()}")
    return proc


def _curl_time(tb: LinkTestbed, url: str) -> float:
    out = tb.run("client", ["curl", "-k", "-s", "-S", "--tlsv1.2", "-o", "/dev/null",
                            "-w", "%{time_total} %{size_download}", url], timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"curl failed: {out.stderr.strip()}")
    return float(out.stdout.split()[0])


def https_vs_model(sizes: Sequence[int] = SIZES, repeat: int = 5,
                   serialise: bool = True) -> pd.DataFrame:
    """One row per size: measured seconds (median of ``repeat`` curl downloads, plus min and
    max), the two model columns and measured / model ratios (median, min and max over the
    repeats: the model is deterministic, so each repeat's ratio is its time over the model's). ``serialise=False`` leaves the
    line to ``tbf`` alone (see :mod:`testbed.linux.linktestbed`: small transfers then beat the line)."""
    check_available()
    rows = []
    with tempfile.TemporaryDirectory() as tmp, LinkTestbed(ADSL, serialise=serialise) as tb:
        root = Path(tmp)
        root.chmod(0o755)
        for size in sizes:
            (root / f"f{size}").write_bytes(b"a" * size)
        server = _start_server(tb, root)
        try:
            url = f"https://{tb.address('origin')}:{PORT}/f"
            for size in sizes:
                times = [_curl_time(tb, f"{url}{size}") for _ in range(repeat)]
                model = request_latency("https", size)
                kernel = request_latency("https", size, AdslTestbed(tcp=KERNEL_TCP))
                measured = statistics.median(times)
                rows.append({
                    "size_bytes": size, "profile": ADSL.name, "serialise": serialise,
                    "repeats": repeat,
                    "measured_s": measured, "measured_min_s": min(times),
                    "measured_max_s": max(times), "model_s": model,
                    "model_kernel_tcp_s": kernel, "measured_over_model": measured / model,
                    "measured_over_kernel_tcp": measured / kernel,
                    "measured_over_model_min": min(times) / model,
                    "measured_over_model_max": max(times) / model,
                })
        finally:
            server.kill()
            server.communicate()
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    """Print the comparison table (and write it as CSV with ``--csv``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--repeats", "--repeat", dest="repeat", type=int, default=5,
                        help="curl downloads per size (default 5; the README wants >= 5)")
    parser.add_argument("--csv", type=Path)
    parser.add_argument("--no-serialise", dest="serialise", action="store_false",
                        help="shape with tbf only (no per-frame serialisation in the relay)")
    args = parser.parse_args(argv)
    if args.repeat < 1 or min(args.sizes) < 1:
        parser.error("--repeats and --sizes must be positive")
    try:
        check_available()
    except NamespacesUnavailable as exc:
        print(f"bench_linktestbed: {exc}", file=sys.stderr)
        return 1
    if shutil.which("curl") is None:
        print("bench_linktestbed: curl not found on PATH; install curl", file=sys.stderr)
        return 1
    df = https_vs_model(args.sizes, args.repeat, args.serialise)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(df.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    if args.csv:
        df.to_csv(args.csv, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
