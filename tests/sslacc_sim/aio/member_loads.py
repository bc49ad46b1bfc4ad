"""The load the bucket-layout member tests share: rate-limited curl downloads of one 4 MiB file,
and curl uploads.

Each download takes about 4 s (``--limit-rate 1M``), so a fault 1 s in finds all of them
running; each runs on a new connection, so their source ports spread them over the buckets.
"""

from __future__ import annotations

import subprocess
import zlib
from pathlib import Path

from sslacc_sim.aio.linux.buckets import bucket_of
from sslacc_sim.aio.linux.campaign_buckets import bucket_answers
from sslacc_sim.aio.linux.docroot import receipt
from sslacc_sim.aio.linux.failover import HOSTNAME, file_bytes, site_credentials
from sslacc_sim.aio.linux.netns import ADDRESSES, VIP, Topology
from sslacc_sim.buckets import BucketTable


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


def ports_of_members(count: int, members: int, buckets: int, first: int = 30000) -> list[int]:
    """``count`` client source ports whose connections the bucket table gives to members
    ``0, 1, ..., members - 1`` in turn (the campaign's table: bucket ``b`` on member ``b mod
    members``), so that every member serves its share."""
    table = BucketTable(members, buckets)
    by_member: dict[int, list[int]] = {m: [] for m in range(members)}
    port = first
    while any(len(p) < -(-count // members) for p in by_member.values()):
        by_member[table.owner[bucket_of(ADDRESSES["client"], port, buckets)]].append(port)
        port += 1
    return [by_member[i % members][i // members] for i in range(count)]


def uploads(topo: Topology, cert: Path, tmp_path: Path, body: bytes, ports: list[int]
            ) -> list[subprocess.Popen[str]]:  # fmt: skip
    """One curl upload (``POST``) of ``body`` from each of ``ports`` in the client's namespace,
    at full speed (a member run with ``--stall-ms`` reads them slowly: its receive queue
    fills, bytes acknowledged and not yet consumed), the receipt into ``tmp_path / up<i>``."""
    upload = tmp_path / "upload.bin"
    upload.write_bytes(body)
    return [topo.popen("client", [
        "curl", "-sS", "--cacert", str(cert), "--resolve", f"{HOSTNAME}:443:{VIP}",
        "--local-port", str(port), "--data-binary", f"@{upload}",
        "-H", "Content-Type: application/octet-stream", "-H", "Expect:",
        "-o", str(tmp_path / f"up{i}"), "--max-time", "60", f"https://{HOSTNAME}/up"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i, port in enumerate(ports)]  # fmt: skip


def receipts(curls: list[subprocess.Popen[str]], tmp_path: Path, body: bytes) -> list[bool]:
    """Which of the finished uploads exited cleanly with the receipt of exactly ``body``."""
    expected = receipt(len(body), zlib.crc32(body))
    return [c.returncode == 0 and (tmp_path / f"up{i}").read_bytes() == expected
            for i, c in enumerate(curls)]  # fmt: skip


def served_buckets(topo: Topology, cert: Path, buckets: int) -> list[str]:
    """The HTTP status of one new connection in each of ``buckets`` buckets (``""``: no
    answer): which buckets some member serves (the campaign's probe, on ``/f``)."""
    return bucket_answers(topo, cert, buckets, "/f")
