"""Running real programs on a :class:`~testbed.linux.linktestbed.LinkTestbed`: servers, curl, Squid.

The link testbed gives three namespaces and a shaped path; the measured figures
(``sine.experiments.link``, ``sslsplit.experiments.link``) need three more things on top, and
they are the same for every paper:

:func:`start_listening`
    start a server program inside a node and wait for the line it prints once it listens
    (``"splitting server on"``, ``"serving"``, ``"listening on"``); a program that exits or
    stays silent raises :class:`ProgramFailed` with its stderr, so a broken server is one clear
    error, not a curl timeout later.
:func:`curl`
    one download with ``curl`` inside a node, timed by curl itself (``-w``): the phases of
    :class:`CurlTiming` in seconds from before the SYN, so a figure's "latency" is
    ``time_total`` measured by the client as the papers measured it.
:class:`SquidRun`
    a private, unmodified Squid in the ``middle`` node (the cache between client and origin),
    with a memory cache, its own directory and logs, listening on the middle's client-side
    address and open to the client network only. It is :func:`start_squid` (config, start,
    wait, errors) run in the node; the loopback interop tests start their Squid with the same
    function, so there is one Squid configuration in the project.

:func:`run_capture`
    a pcap of one run beside its results, when the caller asks for one (``capture_dir``):
    what the client's link carried, for Wireshark or ``tshark``; off by default.
:func:`alternate_halves`, :func:`grid_fit`, :func:`log_error`
    the recalibration the figures share: the model's free parameters are fitted on one half
    of the measured points and judged on the other.

Everything here is protocol-agnostic (no TLS, no SINE); it only starts processes through the
testbed's :meth:`~testbed.linux.linktestbed.LinkTestbed.popen` / ``run``, so the testbed's teardown
kills whatever is left.
"""

from __future__ import annotations

import itertools
import math
import os
import pwd
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from .capture import HEADERS, Capture
from .linktestbed import ADDRESSES, LinkTestbed, TestbedError

__all__ = [
    "ProgramFailed",
    "start_listening",
    "stop",
    "run_capture",
    "CURL_FIELDS",
    "CurlTiming",
    "curl",
    "SQUID_PORT",
    "squid_binary",
    "squid_config",
    "start_squid",
    "stop_squid",
    "SquidRun",
    "alternate_halves",
    "grid_fit",
    "log_error",
]

#: Seconds a server has to print its "listening" line (Python start-up plus key generation on
#: a loaded machine).
_START_TIMEOUT = 120.0


class ProgramFailed(TestbedError):
    """A program run in a namespace did not start, or exited non-zero; carries its stderr."""


def start_listening(tb: LinkTestbed, node: str, argv: Sequence[str], ready: str,
                    timeout: float = _START_TIMEOUT, cwd: str | None = None
                    ) -> subprocess.Popen[str]:
    """Start ``argv`` in ``node`` and return once a line of its stdout contains ``ready``.

    Earlier lines (a program announcing a generated certificate, say) are skipped. The
    returned process's stdout is still a pipe: read it after :func:`stop` for a summary line.
    Raises :class:`ProgramFailed` (with the program's stderr) when it exits first or prints
    nothing matching within ``timeout`` seconds; the process is killed then.
    """
    proc = tb.popen(node, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd)
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + timeout
    text = ""
    while True:
        left = deadline - time.monotonic()
        ready_fds, _, _ = select.select([fd], [], [], max(left, 0))
        # os.read, not readline: a buffered reader could swallow the ready line together with
        # the one before it, and select() would then wait for bytes already read
        chunk = os.read(fd, 65536).decode(errors="replace") if ready_fds else ""
        text += chunk
        if ready in text:
            return proc
        if chunk:
            continue
        seen = [ln.strip() for ln in text.splitlines() if ln.strip()]
        # EOF (the program exited) or the deadline passed
        proc.kill()
        _, err = proc.communicate()
        what = f"exited with status {proc.returncode}" if ready_fds else f"timed out ({timeout:g} s)"
        detail = (err or "").strip().splitlines()[-3:] or seen[-3:]
        raise ProgramFailed(f"{argv[0]} ... in {node} {what} before printing {ready!r}: "
                            f"{' | '.join(detail) or 'no output'}")


def stop(proc: subprocess.Popen[str], timeout: float = 10.0) -> str:
    """SIGTERM ``proc``, wait (SIGKILL after ``timeout`` s) and return the rest of its stdout."""
    if proc.poll() is None:
        proc.terminate()
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out or ""


@contextmanager
def run_capture(tb: LinkTestbed, capture_dir: str | os.PathLike[str] | None, run: str,
                node: str = "client", dev: str = "veth0", snaplen: int = HEADERS
                ) -> Iterator[Capture | None]:
    """``with run_capture(tb, capture_dir, run):`` -- tcpdump on ``dev`` of ``node`` into
    ``capture_dir/<run>.pcap`` while the body runs, or nothing when ``capture_dir`` is
    ``None`` (the default of the experiments: their runs and timings stay as they were).

    The link experiments pass ``results/<experiment>/captures`` (``sslsplit.experiments.link``:
    one pcap per download, ``<protocol>_<size>_<rep>.pcap``; ``sine.experiments.link.measure``:
    one per plan, ``<run>.pcap``), so each run's packets sit beside its CSV row.
    Headers only and 64 MiB at most per file (:class:`~testbed.linux.capture.Capture`)."""
    if capture_dir is None:
        yield None
        return
    with tb.capture(node, dev, Path(capture_dir, f"{run}.pcap"), snaplen=snaplen) as cap:
        yield cap


# --- curl -------------------------------------------------------------------------------------

#: curl ``-w`` variables read into :class:`CurlTiming`, in this order.
CURL_FIELDS = ("time_namelookup", "time_connect", "time_appconnect", "time_pretransfer",
               "time_starttransfer", "time_total", "size_download", "http_code")


@dataclass(frozen=True)
class CurlTiming:
    """One curl transfer. Times in seconds from the start of the transfer (before the TCP SYN);
    ``time_appconnect`` is 0 without TLS; ``size_download`` is body bytes."""

    time_namelookup: float
    time_connect: float
    time_appconnect: float
    time_pretransfer: float
    time_starttransfer: float
    time_total: float
    size_download: int
    http_code: int

    @classmethod
    def parse(cls, text: str) -> CurlTiming:
        """Read the output of ``-w`` with :data:`CURL_FIELDS` separated by spaces."""
        parts = text.split()
        if len(parts) != len(CURL_FIELDS):
            raise ValueError(f"expected {len(CURL_FIELDS)} curl -w fields, got {text!r}")
        values = dict(zip(CURL_FIELDS, parts, strict=True))
        fields: dict[str, Any] = {
            k: (int(float(v)) if k in ("size_download", "http_code") else float(v))
            for k, v in values.items()}
        return cls(**fields)



def curl(tb: LinkTestbed, url: str, node: str = "client", proxy: str | None = None,
         ciphers: str | None = None, timeout: float = 900.0,
         extra: Sequence[str] = ()) -> CurlTiming:
    """Download ``url`` once with curl in ``node`` (body discarded) and return its timings.

    TLS is 1.2 with certificate checks off (the servers use fresh self-signed certificates);
    ``ciphers`` restricts the suites (e.g. ``"AES128-SHA"`` for RSA key exchange); ``proxy`` is
    an ``http://host:port`` forward proxy. A transfer curl reports as failed, or an HTTP status
    other than 200, raises :class:`ProgramFailed`.
    """
    if shutil.which("curl") is None:
        raise ProgramFailed("curl not found on PATH; install curl")
    argv = ["curl", "-s", "-S", "-k", "--tlsv1.2", "--tls-max", "1.2", "-o", "/dev/null",
            "-w", " ".join(f"%{{{f}}}" for f in CURL_FIELDS)]
    if ciphers:
        argv += ["--ciphers", ciphers]
    if proxy:
        argv += ["--proxy", proxy]
    out = tb.run(node, [*argv, *extra, url], timeout=timeout)
    if out.returncode != 0:
        raise ProgramFailed(f"curl {url} failed ({out.returncode}): {out.stderr.strip()}")
    timing = CurlTiming.parse(out.stdout)
    if timing.http_code != 200:
        raise ProgramFailed(f"curl {url}: HTTP {timing.http_code}")
    return timing


# --- Squid ------------------------------------------------------------------------------------

#: Port Squid listens on in the middle node.
SQUID_PORT = 3128
_SQUID = os.environ.get("SQUID", "/usr/sbin/squid")


def squid_binary() -> str:
    """Path of the squid executable (``$SQUID``, ``/usr/sbin/squid`` or on PATH); raises
    :class:`ProgramFailed` with what to install when there is none."""
    path = _SQUID if os.path.exists(_SQUID) else shutil.which("squid")
    if not path:
        raise ProgramFailed("squid is not installed: the measured figures need a real Squid "
                            "(Debian package 'squid')")
    return path


_CONF = """\
http_port {listen}:{port}
pid_filename {dir}/squid.pid
access_log stdio:{dir}/access.log squid
cache_log {dir}/cache.log
cache_store_log none
coredump_dir {dir}
netdb_filename none
pinger_enable off
shutdown_lifetime 0 seconds
buffered_logs off
cache_mem {cache_mb} MB
maximum_object_size_in_memory 16 MB
maximum_object_size 16 MB
acl clients src {allow}
http_access allow clients
http_access deny all
dns_nameservers 127.0.0.1
refresh_pattern . 0 20% 4320
via on
forwarded_for delete
{user}
"""


def squid_config(workdir: Path, listen: str = "127.0.0.1", port: int = SQUID_PORT,
                 allow: str = "127.0.0.1/32", cache_mb: int = 64, user: str | None = None) -> str:
    """A minimal ``squid.conf``: memory cache only (``cache_mb``), pid file and logs in
    ``workdir``, listening on ``listen:port``, serving clients from ``allow`` (CIDR) only,
    objects up to 16 MB cached, caching what the origin's ``Cache-Control`` allows.
    ``user`` is ``cache_effective_user`` (Squid started as root drops to it)."""
    return _CONF.format(listen=listen, port=port, dir=workdir, cache_mb=cache_mb, allow=allow,
                        user=f"cache_effective_user {user}" if user else "")


def start_squid(workdir: Path, listen: str, port: int, allow: str, cache_mb: int = 64,
                startup_timeout: float = 30.0,
                popen: Callable[..., subprocess.Popen[str]] = subprocess.Popen
                ) -> subprocess.Popen[str]:
    """Write :func:`squid_config` into ``workdir``, start ``squid -N`` with it and return the
    running process once Squid logs "Accepting HTTP Socket connections".

    ``popen`` starts the program: :class:`subprocess.Popen` on this host (the loopback interop
    tests), or a testbed node's (:class:`SquidRun`). Started as root, Squid drops to the
    ``proxy`` user (the Debian package's), which is handed ``workdir`` for its logs and pid
    file -- so ``workdir`` must be reachable by that user (a fresh directory in ``/tmp`` is;
    pytest's per-user tree, mode 0700, is not). Logs of an earlier run in ``workdir`` are
    removed first. A Squid that exits or does not accept within ``startup_timeout`` seconds is
    stopped and raises :class:`ProgramFailed` with the end of its logs.
    """
    binary = squid_binary()
    workdir.mkdir(parents=True, exist_ok=True)
    workdir.chmod(0o777)
    user = None
    if os.geteuid() == 0:
        user = "proxy"
        pw = pwd.getpwnam(user)
        os.chown(workdir, pw.pw_uid, pw.pw_gid)
    for name in ("cache.log", "stderr.log", "squid.pid"):
        (workdir / name).unlink(missing_ok=True)
    conf = workdir / "squid.conf"
    conf.write_text(squid_config(workdir, listen, port, allow, cache_mb, user))
    with open(workdir / "stderr.log", "w") as stderr:
        proc = popen([binary, "-N", "-f", str(conf)], stdout=subprocess.DEVNULL, stderr=stderr,
                     text=True)
    deadline = time.monotonic() + startup_timeout
    log = workdir / "cache.log"
    try:
        while time.monotonic() < deadline:
            code = proc.poll()
            if code is not None:
                raise ProgramFailed(f"squid exited with status {code}: {_squid_logs(workdir)}")
            if log.exists() and "Accepting HTTP Socket connections" in log.read_text(
                    errors="replace"):
                return proc
            time.sleep(0.1)
        raise ProgramFailed(f"squid did not accept connections on {listen}:{port} in "
                            f"{startup_timeout:g} s: {_squid_logs(workdir)}")
    except BaseException:
        stop_squid(proc)  # no Squid outlives a failed (or interrupted) start
        raise


def stop_squid(proc: subprocess.Popen[str]) -> None:
    """Stop a Squid from :func:`start_squid`: SIGTERM, then SIGKILL after 10 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _squid_logs(workdir: Path) -> str:
    """The end of Squid's stderr and cache log, on one line (for error messages)."""
    text = []
    for name in ("stderr.log", "cache.log"):
        p = workdir / name
        if p.exists():
            text.append(p.read_text(errors="replace")[-800:])
    return " | ".join(t.strip().replace("\n", " | ") for t in text if t.strip()) or "no log"


class SquidRun:
    """``with SquidRun(tb) as squid:`` -- Squid in the ``middle`` node for the client network.

    Listens on the middle's client-side address (:attr:`proxy_url`), serves the client
    network only, keeps its config and logs in a fresh directory (removed by :meth:`stop`).
    Starting, the ``proxy`` user and the errors are :func:`start_squid`'s."""

    def __init__(self, tb: LinkTestbed, port: int = SQUID_PORT, cache_mb: int = 64,
                 startup_timeout: float = 30.0) -> None:
        self.tb, self.port, self.cache_mb = tb, port, cache_mb
        self.startup_timeout = startup_timeout
        self.dir = Path(tempfile.mkdtemp(prefix="wstb-squid-"))
        self.proc: subprocess.Popen[str] | None = None

    @property
    def proxy_url(self) -> str:
        """``http://<middle>:<port>``, for curl's ``--proxy`` or a SINE client's ``proxy``."""
        return f"http://{ADDRESSES['middle']}:{self.port}"

    @property
    def access_log(self) -> Path:
        return self.dir / "access.log"

    def start(self) -> SquidRun:
        try:
            self.proc = start_squid(
                self.dir, ADDRESSES["middle"], self.port, _client_net(), self.cache_mb,
                self.startup_timeout,
                popen=lambda argv, **kw: self.tb.popen("middle", argv, **kw))
        except BaseException:
            self.stop()
            raise
        return self

    def access_codes(self) -> list[str]:
        """Squid's result codes (``TCP_MISS``, ``TCP_MEM_HIT``, ...) from its access log, in
        order: how a run proves the cache served a warm request."""
        if not self.access_log.exists():
            return []
        return [f[3].split("/")[0] for f in
                (ln.split() for ln in self.access_log.read_text().splitlines()) if len(f) > 3]

    def stop(self) -> None:
        """Stop Squid (SIGTERM, then SIGKILL) and remove its directory."""
        if self.proc is not None:
            stop_squid(self.proc)
            self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> SquidRun:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def _client_net() -> str:
    """The client network in CIDR (the client's address with a /24)."""
    a, b, c, _ = ADDRESSES["client"].split(".")
    return f"{a}.{b}.{c}.0/24"


# --- calibration: fit on some runs, judge on the others ---------------------------------------


def alternate_halves(n: int) -> list[str]:
    """``"calibration"`` / ``"held-out"`` labels for ``n`` points sorted along their x axis:
    even positions calibrate, odd ones are held out, so both halves span the whole axis."""
    return ["calibration" if i % 2 == 0 else "held-out" for i in range(n)]


def grid_fit(loss: Callable[[dict[str, float]], float],
             grid: dict[str, Sequence[float]]) -> tuple[dict[str, float], float]:
    """The point of the Cartesian ``grid`` (parameter name -> candidate values) with the least
    ``loss``, and that loss. Exhaustive and deterministic (ties: the first in grid order);
    small grids only -- each candidate runs the model on every calibration point."""
    best: tuple[dict[str, float], float] | None = None
    for values in itertools.product(*grid.values()):
        params = dict(zip(grid, values, strict=True))
        value = loss(params)
        if best is None or value < best[1]:
            best = (params, value)
    if best is None:
        raise ValueError("grid_fit needs at least one candidate per parameter")
    return best


def log_error(model: Sequence[float], measured: Sequence[float]) -> float:
    """Mean squared log ratio model / measured (symmetric in over- and under-estimates)."""
    if len(model) != len(measured) or not model:
        raise ValueError("log_error needs equally long, non-empty sequences")
    return sum(math.log(m / x) ** 2 for m, x in zip(model, measured, strict=True)) / len(model)
