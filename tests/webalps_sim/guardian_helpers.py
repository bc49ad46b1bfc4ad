"""Shared set-up of the WebALPS guardian/host tests: a CA, a certified guardian, a host, clients.

* :func:`provision` -- a fresh WebALPS CA and a guardian state directory it certified;
* :class:`GuardianProcess` -- ``python -m webalps_sim.guardian`` as a child process (what the
  kill test kills, and what keeps the guardian's secrets out of the test process);
* :class:`InProcessGuardian` -- the same server on a thread here, for fast protocol tests;
* :func:`webalps_host` -- the WebALPS host (:mod:`webalps_sim.aio.host`) on a background thread,
  with an optional tap on the host<->guardian channel;
* :func:`curl_get` / :func:`python_get` -- unmodified clients that verify the guardian's chain.
"""

from __future__ import annotations

import http.client
import os
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from testbed.apps.harness import BackgroundServer
from tls12.suites import SUITES
from webalps_sim.aio.channel import GuardianChannel
from webalps_sim.aio.guardian import GuardianServer
from webalps_sim.aio.host import (
    WEBALPS_SUITES,
    GuardianSessionStore,
    guardian_answer,
    handle_releaser,
    webalps_config,
    webalps_connection,
)
from webalps_sim.aio.remote import RemoteDelegate
from webalps_sim.app import GuardianApp
from webalps_sim.ca import init_ca
from webalps_sim.identity import certify, load_identity
from webalps_sim.service import GuardianService

REPO = Path(__file__).resolve().parents[2]
SUITE_NAMES = {s: SUITES[s].openssl_name for s in WEBALPS_SUITES}
"""OpenSSL names of the suites a guardian serves (RSA key exchange, CBC)."""


def child_env() -> dict[str, str]:
    """Environment for ``python -m webalps_sim...`` children: the checkout on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


@dataclass(frozen=True)
class Provisioned:
    ca_dir: Path
    ca_pem: Path
    state_dir: Path


def provision(tmp: Path, app: str = "null") -> Provisioned:
    """A CA in ``tmp/ca`` and a guardian in ``tmp/guardian`` certified by it."""
    ca_pem = init_ca(tmp / "ca")
    certify(tmp / "guardian", tmp / "ca", app)
    return Provisioned(tmp / "ca", ca_pem, tmp / "guardian")


class GuardianProcess:
    """The guardian as a child process on the Unix socket ``sock``."""

    def __init__(self, state_dir: Path, sock: Path, *args: str,
                 env: dict[str, str] | None = None) -> None:
        self.state_dir = state_dir
        self.sock = sock
        self.args = args
        self.env = {**child_env(), **(env or {})}
        self.proc: subprocess.Popen[str] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 60.0) -> GuardianProcess:
        cmd = [sys.executable, "-m", "webalps_sim.guardian", "--state-dir", str(self.state_dir),
               "--listen", str(self.sock), *self.args]
        self.proc = subprocess.Popen(cmd, cwd=REPO, env=self.env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        line = self.proc.stdout.readline()
        while "guardian listening" not in line:
            if not line or time.monotonic() > deadline:
                self.proc.kill()
                _, err = self.proc.communicate(timeout=10)
                raise RuntimeError(f"guardian did not start: {line!r} {err}")
            line = self.proc.stdout.readline()
        return self

    def kill(self) -> None:
        """SIGKILL: no clean-up of any kind, as a crash or a pulled plug."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        if self.proc is not None:
            for stream in (self.proc.stdout, self.proc.stderr):
                if stream is not None:
                    stream.close()

    def __enter__(self) -> GuardianProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class InProcessGuardian:
    """The guardian's server on a thread of this process (its secrets are then in this process)."""

    def __init__(self, state_dir: Path, sock: Path, app: GuardianApp | None = None,
                 app_name: str = "null") -> None:
        key, chain, measurement = load_identity(state_dir, app_name)
        self.service = GuardianService(key, chain, measurement, app=app, app_name=app_name)
        self.sock = sock
        self._server: GuardianServer | None = None

    def __enter__(self) -> InProcessGuardian:
        self._server = GuardianServer(self.service, self.sock).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()


def webalps_host(docroot: Path, sock: Path, tap: Callable[[str, bytes], None] | None = None,
                 store_size: int = 0) -> tuple[BackgroundServer, GuardianChannel]:
    """A WebALPS host for ``docroot`` relaying to the guardian at ``sock`` (not started);
    ``store_size`` > 0 gives it a session cache of that many sessions.  The channel is the
    host's own (:class:`webalps_sim.aio.channel.GuardianChannel`, on the server's loop)."""
    fetch = RemoteDelegate(sock)
    chain = fetch.chain()
    fetch.close()
    channel = GuardianChannel(sock, tap=tap)
    store = GuardianSessionStore(channel, store_size) if store_size else None
    server = BackgroundServer(docroot, webalps_config(chain, session_store=store),
                              connection_factory=webalps_connection,
                              on_close=handle_releaser(channel, store),
                              answer=guardian_answer(channel))
    return server, channel


def curl_get(url: str, ca_pem: Path, cipher: str, *, extra: tuple[str, ...] = ()
             ) -> subprocess.CompletedProcess[bytes]:
    """``curl`` fetching ``url`` with one suite, verifying the chain against ``ca_pem``."""
    return subprocess.run(
        ["curl", "-sS", "--max-time", "120", "--tlsv1.2", "--tls-max", "1.2", "--ciphers", cipher,
         "--cacert", str(ca_pem), *extra, url],
        capture_output=True, timeout=180,
    )


def client_context(ca_pem: Path, cipher: str) -> ssl.SSLContext:
    """Python ``ssl`` verifying the chain and host name against the WebALPS CA, TLS 1.2, one suite."""
    ctx = ssl.create_default_context(cafile=str(ca_pem))
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(cipher)
    return ctx


def python_get(port: int, path: str, ca_pem: Path, cipher: str, host: str = "localhost"
               ) -> tuple[int, dict[str, str], bytes]:
    """One GET with Python's ``http.client`` over ``ssl``: status, headers, body."""
    conn = http.client.HTTPSConnection(host, port, context=client_context(ca_pem, cipher),
                                       timeout=120)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


class HostProcess:
    """``python -m webalps_sim.host`` as a child process: its TLS port and ``--http-port``.

    The host runs apart from the test, as in a deployment: a guardian frozen with SIGSTOP
    cannot stall the test's own threads, and the host's liveness is its process's.
    """

    def __init__(self, docroot: Path, sock: Path, *args: str) -> None:
        self.cmd = [sys.executable, "-m", "webalps_sim.host", "--mode", "webalps", "--port", "0",
                    "--http-port", "0", "--guardian", str(sock), "--docroot", str(docroot),
                    "--quiet", *args]
        self.proc: subprocess.Popen[str] | None = None
        self.port = self.http_port = 0

    def start(self, timeout: float = 60.0) -> HostProcess:
        self.proc = subprocess.Popen(self.cmd, cwd=REPO, env=child_env(), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while not (self.port and self.http_port):
            line = self.proc.stdout.readline()
            if not line or time.monotonic() > deadline:
                self.proc.kill()
                _, err = self.proc.communicate(timeout=10)
                raise RuntimeError(f"host did not start: {line!r} {err}")
            if line.startswith("listening on https://"):
                self.port = int(line.rsplit(":", 1)[1])
            elif line.startswith("listening on http://"):
                self.http_port = int(line.rsplit(":", 1)[1])
        return self

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> str:
        """Stop the host (SIGTERM); its stderr."""
        if self.proc is None:
            return ""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        err = self.proc.stderr.read() if self.proc.stderr is not None else ""
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        self.proc = None  # stopped: a second stop() does nothing
        return err

    def __enter__(self) -> HostProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


GNUTLS_PRIORITY = {
    "AES128-SHA": "+RSA:+AES-128-CBC:+SHA1",
    "AES256-SHA": "+RSA:+AES-256-CBC:+SHA1",
    "AES128-SHA256": "+RSA:+AES-128-CBC:+SHA256",
    "ECDHE-RSA-AES128-SHA": "+ECDHE-RSA:+AES-128-CBC:+SHA1",
    "ECDHE-RSA-AES128-SHA256": "+ECDHE-RSA:+AES-128-CBC:+SHA256",
}
"""GnuTLS priority fragments that offer exactly one of the guardian's suites."""


def gnutls_priority(openssl_name: str) -> str:
    """A GnuTLS priority string offering TLS 1.2 and only the suite ``openssl_name``."""
    return ("NONE:+VERS-TLS1.2:" + GNUTLS_PRIORITY[openssl_name]
            + ":+COMP-NULL:+SIGN-ALL:+GROUP-ALL:+CTYPE-X509")
