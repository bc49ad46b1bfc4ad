"""The load the bucket-layout member tests share: rate-limited curl downloads of one 4 MiB file.

Each download takes about 4 s (``--limit-rate 1M``), so a fault 1 s in finds all of them
running; each runs on a new connection, so their source ports spread them over the buckets.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from sslacc_sim.aio.linux.failover import HOSTNAME, file_bytes, site_credentials
from sslacc_sim.aio.linux.netns import VIP, Topology


def four_mib_site(tmp_path: Path) -> tuple[Path, bytes, Path, Path]:
    """A document root with one 4 MiB file ``f``: ``(docroot, its bytes, cert, key)``."""
    docroot = tmp_path / "www"
    docroot.mkdir()
    body = file_bytes(4 << 20)
    (docroot / "f").write_bytes(body)
    cert, key = site_credentials(tmp_path)
    return docroot, body, cert, key


def slow_downloads(topo: Topology, cert: Path, tmp_path: Path, count: int
                   ) -> list[subprocess.Popen[str]]:  # fmt: skip
    """``count`` curl downloads of ``/f`` at 1 MB/s from the client's namespace, each into
    ``tmp_path / out<i>``, printing its source port."""
    return [topo.popen("client", [
        "curl", "-sS", "--cacert", str(cert), "--resolve", f"{HOSTNAME}:443:{VIP}",
        "--limit-rate", "1M", "-o", str(tmp_path / f"out{i}"), "-w", "%{local_port}",
        "--max-time", "40", f"https://{HOSTNAME}/f"], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE) for i in range(count)]  # fmt: skip


def arrived(curls: list[subprocess.Popen[str]], tmp_path: Path, body: bytes) -> list[bool]:
    """Which of the finished downloads exited cleanly with exactly ``body``."""
    return [c.returncode == 0 and (tmp_path / f"out{i}").read_bytes() == body
            for i, c in enumerate(curls)]  # fmt: skip
