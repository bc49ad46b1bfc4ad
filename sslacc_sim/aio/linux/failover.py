"""Real failover on Linux: curl downloads from node A, A dies, node B finishes the download.

One run (:func:`run_failover`) builds the :class:`~sslacc_sim.aio.linux.netns.Topology`, writes a
file of ``size`` pseudo-random bytes and a self-signed certificate for ``sacc.test``, starts the
backup (node B) and the primary (node A, ``--die-at point``), a sniffer and an unmodified
``curl`` in the client namespace::

    curl --tls-max 1.2 --ciphers AES128-SHA --cacert cert.pem \\
         --resolve sacc.test:443:10.88.0.100 https://sacc.test/file -o out

(plain runs: ``curl http://10.88.0.100:80/file``). When A prints ``DIE`` the run notes the
time (*the cut*), takes A's LAN link down (``ip link set eth0 down``) and SIGKILLs A. B notices
on the cluster link, restores the connection and serves the rest. The run passes when curl
exits 0 and the file's SHA-256 equals the original's.

Measured per run (seconds from the cut, i.e. from the moment ``ip link set eth0 down`` has
returned, after which nothing of A's reaches the client; ``time.monotonic()`` in every
process):
``restored_s`` B has the socket running again (rebuild, restore, address, ARP);
``next_segment_s`` the client's first data segment from the server after the cut (often a
retransmission of bytes it already had); ``next_new_byte_s`` the first segment carrying a byte
beyond everything the client had received before the cut. Both include B's retransmission
timer: a restored socket has no RTT sample, so its first timeout is Linux's initial 1 s unless
the window probe's answer lets it send new data sooner.

:func:`measure_failover` repeats runs over several points and returns a DataFrame.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from cryptography.hazmat.primitives.asymmetric import rsa

from tls12.certs import Credentials, self_signed_certificate, write_credentials

from ...errors import SslaccError
from .netns import MIRROR_ADDRESSES, VIP, Topology
from .node import POINTS

__all__ = [
    "FailoverResult", "FailoverFailed", "run_failover", "measure_failover", "HOSTNAME",
    "file_bytes", "wait_line", "first_line", "lines_of", "site_credentials", "node_env",
]

#: The name in the certificate; curl maps it to the virtual IP with ``--resolve``.
HOSTNAME = "sacc.test"
_READY_S = 20.0


class FailoverFailed(SslaccError, RuntimeError):
    """A run did not end with curl's exit status 0 and a byte-identical file."""


@dataclass(frozen=True)
class FailoverResult:
    """One run (module docstring); times in seconds, ``None`` when not applicable."""

    point: str
    suite: str
    size: int
    curl_exit: int
    identical: bool
    took_over: bool
    restored_s: float | None
    next_segment_s: float | None
    next_new_byte_s: float | None
    resent_bytes: int | None
    updates: int | None
    total_s: float
    """The whole run: namespaces, key generation, processes, download, teardown."""
    died_at: int | None = None
    """Server bytes node A had written when it stopped (positions count from the first byte
    after the SYN-ACK)."""
    cut_record_start: int | None = None
    """``mid-record`` only: where the record A wrote half of starts, and ends."""
    cut_record_end: int | None = None
    client_had: int | None = None
    """Server bytes the client had received before the cut (from the sniffer)."""
    client_lacked: int | None = None
    """Bytes B's window probe found the client lacking (``None``: no answer within 0.2 s)."""
    resumed_at_ack: bool | None = None
    """B restored the socket a second time at the client's ACK to send the rest at once."""
    reset_held: int | None = None
    """Clients B let no reset reach while it rebased (``claim.ResetHold``; ``None``: no hold)."""
    download_s: float | None = None
    """curl's ``time_total``: from before the TCP SYN to the last byte."""


def file_bytes(size: int) -> bytes:
    """``size`` pseudo-random bytes, the same every time (the file the runs download)."""
    out = bytearray()
    block = hashlib.sha256(b"sslacc").digest()
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(block + counter.to_bytes(8, "big")).digest() * 128
        counter += 1
    return bytes(out[:size])


def site_credentials(workdir: Path) -> tuple[Path, Path]:
    """A fresh RSA key and a self-signed certificate naming :data:`HOSTNAME`, as PEM files."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    creds = Credentials((self_signed_certificate(key, HOSTNAME),), key)
    cert, key_path = workdir / "cert.pem", workdir / "key.pem"
    write_credentials(creds, cert, key_path)
    return cert, key_path


#: One reader thread per node process: its lines in a queue, ``None`` at the end. (A select()
#: on a buffered pipe misses a line the previous readline() already pulled into the buffer: a
#: node that prints two lines at once would seem to print one.)
_LINES: weakref.WeakKeyDictionary[subprocess.Popen[str], queue.Queue[str | None]] = (
    weakref.WeakKeyDictionary())
#: The last lines :func:`wait_line` skipped, per process (at most :data:`_SKIPPED_KEPT`): what
#: a failure's message shows.
_SKIPPED_KEPT = 40
_SKIPPED: weakref.WeakKeyDictionary[subprocess.Popen[str], collections.deque[str]] = (
    weakref.WeakKeyDictionary())


def lines_of(proc: subprocess.Popen[str]) -> queue.Queue[str | None]:
    """The queue of ``proc``'s stdout lines (started on first use)."""
    q = _LINES.get(proc)
    if q is None:
        q = _LINES[proc] = queue.Queue()
        out = proc.stdout
        assert out is not None

        def pump() -> None:
            try:
                for line in out:
                    q.put(line)
            except (OSError, ValueError):
                pass
            q.put(None)

        threading.Thread(target=pump, daemon=True).start()
    return q


def node_env() -> dict[str, str]:
    """This environment with the repository first on ``PYTHONPATH``, for the ``python -m``
    programs started inside the namespaces."""
    repo = str(Path(__file__).resolve().parents[3])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))}


def wait_line(proc: subprocess.Popen[str], prefix: str, timeout: float) -> str:
    """The first line of ``proc``'s stdout starting with ``prefix`` (others are skipped).
    :class:`FailoverFailed` if none comes within ``timeout`` seconds or the process ends; its
    message ends with the last lines skipped, which say what the process did instead."""
    deadline = time.monotonic() + timeout
    q = lines_of(proc)
    skipped = _SKIPPED.setdefault(proc, collections.deque(maxlen=_SKIPPED_KEPT))
    while True:
        left = deadline - time.monotonic()
        try:
            line = q.get(timeout=max(left, 0.0)) if left > 0 else q.get_nowait()
        except queue.Empty:
            raise FailoverFailed(f"no {prefix!r} line within {timeout} s"
                                 + _lines_before(skipped)) from None  # fmt: skip
        if line is None:
            q.put(None)  # the end stays visible to later calls
            raise FailoverFailed(f"process exited before printing {prefix!r}: "
                                 f"{proc.stderr.read() if proc.stderr else ''}"
                                 + _lines_before(skipped))  # fmt: skip
        if line.startswith(prefix):
            return line.rstrip("\n")
        skipped.append(line.rstrip("\n"))



def _lines_before(skipped: collections.deque[str]) -> str:
    """The tail of a failure's message: the lines skipped, each cut to 300 characters."""
    if not skipped:
        return "; it printed nothing else"
    return "; its last lines:\n" + "\n".join(line[:300] for line in skipped)


def first_line(proc: subprocess.Popen[str], starts: tuple[str, ...], timeout: float,
               seen: list[str] | None = None) -> str:  # fmt: skip
    """The first line of ``proc``'s stdout starting with one of ``starts``, or ``""`` if none
    came within ``timeout`` or it exited first (:func:`wait_line` raises instead); every line
    read on the way, that one included, is appended to ``seen``."""
    deadline, q = time.monotonic() + timeout, lines_of(proc)
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = q.get(timeout=left)
        except queue.Empty:
            break
        if line is None:
            q.put(None)  # the end stays visible to later calls
            break
        if seen is not None:
            seen.append(line.rstrip("\n")[:2000])
        if line.startswith(starts):
            return line.rstrip("\n")
    return ""


def _float(text: str) -> float | None:
    try:
        return float(text.strip())
    except ValueError:
        return None


def _first_after(seen: list[list[float]], cut: float
                 ) -> tuple[float | None, float | None, int | None]:  # fmt: skip
    """(first segment after ``cut``, first segment with a byte beyond all before it), both
    relative to ``cut``, and the bytes received before ``cut``; sequence numbers compared
    modulo 2^32 from the first segment (the server's first byte)."""
    if not seen:
        return None, None, None
    data = [(float(r[0]), int(r[3]), int(r[4])) for r in seen if int(r[4]) > 0]
    if not data:
        return None, None, None
    base = data[0][1]
    before = [(s - base) % (1 << 32) + n for t, s, n in data if t < cut]
    high = max(before, default=0)
    after = [(t, (s - base) % (1 << 32) + n) for t, s, n in data if t >= cut]
    first = after[0][0] - cut if after else None
    new = next((t - cut for t, end in after if end > high), None)
    return first, new, high


def _check_run(point: str | None, plain: bool) -> str:
    """Refuse a point that does not exist or a handshake point in a plain run; curl's path."""
    if point is not None and point not in POINTS:
        raise ValueError(f"point must be one of {POINTS} or None, got {point!r}")
    if plain and point in POINTS[:2]:
        raise ValueError(f"{point} is a TLS handshake point; plain runs have none")
    curl = shutil.which("curl")
    if curl is None:
        raise FailoverFailed("curl not found on PATH; install curl")
    return curl


@dataclass(frozen=True)
class _Site:
    """What both nodes serve: the file, its port, and (TLS) the suite and certificate."""

    work: Path
    body: bytes
    port: int
    node_args: list[str]
    """The arguments the primary and the backup share."""
    cert: Path | None


def _site(work: Path, size: int, plain: bool, suite: str) -> _Site:
    """Write the file (and, for TLS, a fresh certificate) into ``work``; the nodes' arguments."""
    body = file_bytes(size)
    (work / "file").write_bytes(body)
    port = 80 if plain else 443
    common = ["--file", str(work / "file"), "--vip", VIP, "--mirror", MIRROR_ADDRESSES["b"],
              "--port", str(port)]  # fmt: skip
    cert = None
    if plain:
        common.append("--plain")
    else:
        cert, key = site_credentials(work)
        common += ["--suite", suite, "--cert", str(cert), "--key", str(key)]
    return _Site(work, body, port, common, cert)


def _start_nodes(topo: Topology, site: _Site, point: str | None, die_after: int,
                 resume_at_ack: bool) -> tuple[subprocess.Popen[str], ...]:  # fmt: skip
    """Backup, primary and sniffer, each started once the one before said ``ready``."""
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "env": node_env()}
    node = [sys.executable, "-m", "sslacc_sim.aio.linux.node"]
    no_resume = [] if resume_at_ack else ["--no-resume-at-ack"]
    backup = topo.popen("b", [*node, "backup", *site.node_args, *no_resume,
                              *topo.fence_args("a")], **pipes)  # fmt: skip
    wait_line(backup, "ready", _READY_S)
    die = ["--die-at", point, "--die-after", str(die_after)] if point else []
    primary = topo.popen("a", [*node, "primary", *site.node_args, *die], **pipes)
    wait_line(primary, "ready", _READY_S)
    sniffer = topo.popen("client", [*node, "sniff", "--src", VIP, "--port", str(site.port),
                                    "--out", str(site.work / "sniffed.json")], **pipes)  # fmt: skip
    wait_line(sniffer, "ready", _READY_S)
    return backup, primary, sniffer


def _start_curl(topo: Topology, curl: str, site: _Site, suite: str,
                timeout: float) -> subprocess.Popen[str]:  # fmt: skip
    """An unmodified curl in the client namespace, downloading the file to ``work/out``."""
    if site.cert is None:
        url, tls = f"http://{VIP}:{site.port}/file", []
    else:
        url = f"https://{HOSTNAME}/file"
        tls = ["--tls-max", "1.2", "--ciphers", suite, "--cacert", str(site.cert),
               "--resolve", f"{HOSTNAME}:443:{VIP}"]  # fmt: skip
    return topo.popen("client", [curl, "-sS", "--max-time", str(timeout), *tls, url,
                                 "-o", str(site.work / "out"), "-w", "%{time_total}"],
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


def _kill_primary(topo: Topology, primary: subprocess.Popen[str], backup: subprocess.Popen[str],
                  timeout: float) -> tuple[dict[str, Any], float, dict[str, Any]]:  # fmt: skip
    """At A's ``DIE``: cut A's link (the cut's time), SIGKILL A, wait for B's ``RESTORED``.

    Returns what A said when it died, the cut's ``time.monotonic()`` and B's restore report."""
    died = json.loads(wait_line(primary, "DIE", timeout).split(" ", 2)[2])
    topo.cut("a")
    cut = time.monotonic()  # A's link is down: nothing of A's reaches the client now
    primary.kill()
    restored = json.loads(wait_line(backup, "RESTORED", timeout).split(" ", 1)[1])
    resumed = json.loads(wait_line(backup, "RESUMED", timeout).split(" ", 1)[1])
    return died, cut, {**restored, "resumed_at_ack": bool(resumed["resumed_at_ack"]),
                       "reset_held": resumed.get("reset_held")}


def _wait_curl(client: subprocess.Popen[str], timeout: float) -> tuple[str, str, int]:
    """curl's stdout, stderr and exit status (-1: it outlived its own ``--max-time``)."""
    try:
        curl_out, curl_err = client.communicate(timeout=timeout + 10)
        return curl_out, curl_err, client.returncode
    except subprocess.TimeoutExpired:
        client.kill()
        curl_out, curl_err = client.communicate()
        return curl_out, curl_err, -1


def _result(point: str | None, suite: str, site: _Site, curl: tuple[str, str, int],
            takeover: tuple[dict[str, Any], float, dict[str, Any]] | None,
            seen: list[list[float]], start: float) -> FailoverResult:  # fmt: skip
    """The run's :class:`FailoverResult` from curl, the file, B's report and the sniffer."""
    out = site.work / "out"
    got = out.read_bytes() if out.exists() else b""
    identical = hashlib.sha256(got).digest() == hashlib.sha256(site.body).digest()
    restored = takeover[2] if takeover else None
    cut = takeover[1] if takeover else None
    result = FailoverResult(
        point=point or "none", suite="plain" if site.cert is None else suite, size=len(site.body),
        curl_exit=curl[2], identical=identical, took_over=restored is not None,
        restored_s=restored["restored"] - cut if restored and cut else None,
        next_segment_s=None, next_new_byte_s=None,
        resent_bytes=int(restored["resent_bytes"]) if restored else None,
        updates=int(restored["updates"]) if restored else None,
        total_s=time.monotonic() - start, download_s=_float(curl[0]),
    )  # fmt: skip
    if takeover is None:
        return result
    died = takeover[0]
    first, new, had = _first_after(seen, takeover[1])
    record = died.get("record") or (None, None)
    return FailoverResult(**{
        **asdict(result), "next_segment_s": first, "next_new_byte_s": new,
        "died_at": died["pos"], "cut_record_start": record[0],
        "cut_record_end": record[1], "client_had": had,
        "client_lacked": takeover[2]["client_lacked"],
        "resumed_at_ack": takeover[2]["resumed_at_ack"],
        "reset_held": takeover[2]["reset_held"]})  # fmt: skip


def run_failover(point: str | None, *, size: int = 16 << 20, suite: str = "AES128-SHA",
                 plain: bool = False, die_after: int = 4 << 20, resume_at_ack: bool = True,
                 timeout: float = 60.0) -> FailoverResult:  # fmt: skip
    """One download with node A dying at ``point`` (``None``: no failure); see the module
    docstring. ``resume_at_ack=False`` leaves the resend to B's retransmission timer
    (:mod:`sslacc_sim.aio.linux.takeover`). :class:`FailoverFailed` unless curl exits 0
    with a byte-identical file."""
    curl = _check_run(point, plain)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sacc-") as tmp, Topology() as topo:
        site = _site(Path(tmp), size, plain, suite)
        backup, primary, sniffer = _start_nodes(topo, site, point, die_after, resume_at_ack)
        client = _start_curl(topo, curl, site, suite, timeout)
        takeover = _kill_primary(topo, primary, backup, timeout) if point is not None else None
        curl_result = _wait_curl(client, timeout)
        sniffer.send_signal(signal.SIGTERM)
        sniffer.wait(timeout=10)
        sniffed = site.work / "sniffed.json"
        seen = json.loads(sniffed.read_text()) if sniffed.exists() else []
        result = _result(point, suite, site, curl_result, takeover, seen, start)
        if result.curl_exit != 0 or not result.identical:
            backup_err = ""
            if backup.poll() is not None and backup.stderr is not None:
                backup_err = backup.stderr.read()[-2000:]
            raise FailoverFailed(f"{result}: curl: {curl_result[1].strip()} backup: {backup_err}")
        return result


def measure_failover(points: tuple[str | None, ...] = POINTS, *, repeat: int = 1,
                     size: int = 16 << 20, suite: str = "AES128-SHA", plain: bool = False,
                     resume_at_ack: bool = True) -> pd.DataFrame:  # fmt: skip
    """:func:`run_failover` ``repeat`` times per point, one row per run (measured times)."""
    rows = []
    for point in points:
        for _ in range(repeat):
            result = run_failover(point, size=size, suite=suite, plain=plain,
                                  resume_at_ack=resume_at_ack)  # fmt: skip
            rows.append({**asdict(result), "resume_at_ack": resume_at_ack})
    return pd.DataFrame(rows)

