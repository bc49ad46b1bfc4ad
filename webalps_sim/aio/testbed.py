"""The WebALPS testbed: CA, guardians and hosts started as real processes on loopback.

:func:`testbed` starts the hosts of :data:`HOSTS` (plain HTTP, normal HTTPS, and WebALPS with
the 4758 cost model off and on), each serving one 2 KB file; for a WebALPS host it first has the
WebALPS CA certify a fresh guardian (``python -m webalps_sim.ca``), starts the guardian
(``python -m webalps_sim.guardian``) and then the host (``python -m webalps_sim.host``) relaying
to it.  :func:`measure_run` is one closed-loop load run (:mod:`webalps_sim.aio.loadgen`) with the
CPU seconds every process spent during it.  The experiments (:mod:`webalps_sim.experiments`)
turn such runs into tables; everything here launches and times processes.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .loadgen import LoadResult, closed_loop

__all__ = ["FILE_NAME", "FILE_SIZE", "HOSTS", "Testbed", "certify_guardian", "cpu_seconds", "measure_run",
           "testbed"]

REPO = Path(__file__).resolve().parents[2]
FILE_NAME, FILE_SIZE = "2k.bin", 2048
#: Hosts measured: name -> (host mode, guardian cost model or None).
HOSTS = {"HTTP": ("http", None), "HTTPS": ("https", None), "WebALPS-native": ("webalps", "off"),
         "WebALPS-4758": ("webalps", "4758")}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (Linux ``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Testbed:
    """Running server processes: one URL per host name, their pids, the CA and the counters."""

    workdir: Path
    urls: dict[str, str] = field(default_factory=dict)
    pids: dict[str, dict[str, int]] = field(default_factory=dict)
    cafile: Path | None = None
    stats: dict[str, Path] = field(default_factory=dict)

    def cpu(self, host: str) -> dict[str, float]:
        return {role: cpu_seconds(pid) for role, pid in self.pids[host].items()}


def _env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def _wait(check: Any, proc: subprocess.Popen[bytes], what: str, log: Path,
          timeout: float = 60.0) -> None:
    """Wait until ``check()``; if the process dies first, fail with the end of its log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-600:] if log.exists() else ""
            raise RuntimeError(f"{what} exited with status {proc.returncode}: {tail}")
        if check():
            return
        time.sleep(0.05)
    raise TimeoutError(f"{what} not ready after {timeout} s")


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _start(stack: ExitStack, cmd: list[str], log: Path,
           env: dict[str, str] | None = None, cpu: int | None = None) -> subprocess.Popen[bytes]:
    out = stack.enter_context(open(log, "wb"))  # noqa: SIM115
    pin = None if cpu is None else (lambda: os.sched_setaffinity(0, {cpu}))
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=env or _env(), start_new_session=True, preexec_fn=pin)

    def stop() -> None:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)

    stack.callback(stop)
    return proc


def _host_cmd(mode: str, port: int, docroot: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "webalps_sim.host", "--mode", mode, "--port", str(port),
            "--docroot", str(docroot), "--quiet", *extra]


def certify_guardian(state: Path, ca: Path) -> Path:
    """Make a guardian state folder ``state`` and have the WebALPS CA in ``ca`` (made if absent)
    certify it, with the programs a user runs; the CA certificate's path."""
    state.mkdir()
    steps = [["webalps_sim.guardian", "--state-dir", str(state), "--app", "null", "--init"],
             ["webalps_sim.ca", "sign", "--dir", str(ca), "--csr", str(state / "guardian.csr"),
              "--app", "null", "--out", str(state / "guardian-chain.pem")]]
    if not ca.exists():
        steps.insert(0, ["webalps_sim.ca", "init", "--dir", str(ca)])
    for step in steps:  # the WebALPS CA certifies the guardian (see webalps_sim.ca)
        done = subprocess.run([sys.executable, "-m", *step], env=_env(), capture_output=True,
                              text=True, timeout=120)
        if done.returncode:
            raise RuntimeError(f"{' '.join(step[:2])} failed: {done.stderr.strip()[-600:]}")
    return ca / "ca.pem"


def _start_webalps(stack: ExitStack, bed: Testbed, name: str, cost_model: str,
                   docroot: Path, cpu: int | None = None) -> None:
    state = bed.workdir / f"guardian-{name}"
    sock = state / "guardian.sock"
    stats = bed.workdir / f"cost-{name}.json"
    env = {**_env(), "WEBALPS_COST_STATS": str(stats)}
    ca = bed.workdir / "ca"
    certify_guardian(state, ca)
    glog, hlog = bed.workdir / f"guardian-{name}.log", bed.workdir / f"host-{name}.log"
    guardian = _start(stack, [sys.executable, "-m", "webalps_sim.guardian", "--state-dir",
                              str(state), "--listen", str(sock), "--app", "null",
                              "--cost-model", cost_model], glog, env, cpu)
    _wait(sock.exists, guardian, f"guardian ({name})", glog)
    port = _free_port()
    host = _start(stack, _host_cmd("webalps", port, docroot, "--guardian", str(sock)), hlog,
                  cpu=cpu)
    _wait(lambda: _port_open(port), host, f"host ({name})", hlog)
    bed.urls[name] = f"https://127.0.0.1:{port}/{FILE_NAME}"
    bed.pids[name] = {"host": host.pid, "guardian": guardian.pid}
    bed.stats[name] = stats
    bed.cafile = ca / "ca.pem"


@contextmanager
def testbed(hosts: Sequence[str] = tuple(HOSTS), workdir: Path | None = None, *,
            server_cpu: int | None = None) -> Iterator[Testbed]:
    """Start the named hosts (keys of :data:`HOSTS`) serving a 2 KB file; stop them on exit.

    ``server_cpu``: run every server process (each host, each guardian) on that CPU only (the
    load generator is the caller's to place).  A guardian then shares its host's CPU and runs while the host
    waits for it, as the paper's host waits for its card: no round trip wakes a second, idle
    CPU, which on a virtual machine costs several times a bare same-CPU socket round trip.
    """
    with ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="webalps-")))
        bed = Testbed(workdir)
        docroot = workdir / "docroot"
        docroot.mkdir(exist_ok=True)
        (docroot / FILE_NAME).write_bytes(random.Random(0).randbytes(FILE_SIZE))
        for name in hosts:
            mode, cost_model = HOSTS[name]
            if mode == "webalps":
                _start_webalps(stack, bed, name, cost_model or "off", docroot, server_cpu)
                continue
            port = _free_port()
            log = workdir / f"host-{name}.log"
            proc = _start(stack, _host_cmd(mode, port, docroot), log, cpu=server_cpu)
            _wait(lambda p=port: _port_open(p), proc, f"host ({name})", log)
            bed.urls[name] = f"{mode}://127.0.0.1:{port}/{FILE_NAME}"
            bed.pids[name] = {"host": proc.pid}
        yield bed


def measure_run(bed: Testbed, host: str, urls: Any, seconds: float, clients: int = 1,
             seed: int = 0) -> tuple[LoadResult, dict[str, float]]:
    """One closed-loop run; also the CPU seconds the server processes and the load generator
    (this process, all its threads) spent during it, by role."""
    before = {**bed.cpu(host), "client": time.process_time()}
    result = closed_loop(urls, seconds=seconds, clients=clients, seed=seed)
    after = {**bed.cpu(host), "client": time.process_time()}
    return result, {role: after[role] - before[role] for role in before}
