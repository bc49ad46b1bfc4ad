"""The guardian process: the secure coprocessor's role, reached over a local socket.

Run it as::

    python -m webalps_sim.guardian --state-dir STATE --listen /run/guardian.sock \\
        [--app null|evoting] [--cost-model off|4758]

At its first start the guardian generates its RSA key pair in ``STATE/guardian.key`` (mode
0600; the key never leaves this process) and writes a certificate request,
``STATE/guardian.csr``, carrying the measurement of the guardian program
(:mod:`webalps_sim.measure`).  Until the WebALPS CA has certified it
(``python -m webalps_sim.ca sign ... --out STATE/guardian-chain.pem``, see
:mod:`webalps_sim.ca`) the guardian refuses to serve: it exits with status 3 and says what to
do.  ``--init`` only prepares the key and the request.  At every start it checks that the
certificate is for its own key and for the program it is now running (same application, same
measurement); a guardian whose code changed needs a new certificate.

Serving (:class:`GuardianServer`): a Unix stream socket, one
:class:`webalps_sim.service.GuardianService` for all host connections (one card), a blocking
thread per host connection, frames of :mod:`webalps_sim.protocol` answered in order.  A malformed
frame gets an ``ERROR`` reply and closes *that* connection; the others go on.  It prints
``guardian listening on PATH`` once it accepts connections and runs until SIGINT/SIGTERM.

``--debug-reveal-secrets FILE`` appends each handle's premaster, master secret and keys to FILE
(one JSON line each): a test switch for the secret search, never for deployment.
:func:`certify` does the CA's part and the guardian's at once for tests, experiments and demos.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from . import protocol as p
from .app import AppUnavailable, CostModel, GuardianApp, load_app, load_cost_model
from .ca import CAError, guardian_identity, make_csr, sign_csr, write_chain
from .measure import measure
from .service import GuardianService

__all__ = [
    "KEY_FILE",
    "CSR_FILE",
    "CHAIN_FILE",
    "NotCertified",
    "init_state",
    "load_identity",
    "certify",
    "GuardianServer",
    "main",
]

logger = logging.getLogger(__name__)

KEY_FILE = "guardian.key"
CSR_FILE = "guardian.csr"
CHAIN_FILE = "guardian-chain.pem"


class NotCertified(Exception):
    """The guardian has no certificate for its key and program (yet)."""


def init_state(state_dir: str | Path, app: str, key_size: int = 2048) -> Path:
    """Generate the key pair if there is none, and (re)write the certificate request."""
    d = Path(state_dir)
    d.mkdir(parents=True, exist_ok=True)
    key_path = d / KEY_FILE
    if key_path.exists():
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        if not isinstance(key, rsa.RSAPrivateKey):
            raise NotCertified(f"{key_path} is not an RSA key")
    else:
        key = rsa.generate_private_key(public_exponent=65537, key_size=key_size)
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
    csr = make_csr(key, app, measure(app))
    (d / CSR_FILE).write_bytes(csr.public_bytes(serialization.Encoding.PEM))
    return d / CSR_FILE


def load_identity(state_dir: str | Path, app: str) -> tuple[rsa.RSAPrivateKey, tuple[bytes, ...], bytes]:
    """The key, the certified chain (DER) and the measurement; :class:`NotCertified` if unusable."""
    d = Path(state_dir)
    key = serialization.load_pem_private_key((d / KEY_FILE).read_bytes(), password=None)
    assert isinstance(key, rsa.RSAPrivateKey)
    chain_path = d / CHAIN_FILE
    if not chain_path.exists():
        raise NotCertified(
            f"no certificate yet: have {d / CSR_FILE} signed with `python -m webalps_sim.ca sign "
            f"--dir CA --csr {d / CSR_FILE} --app {app} --out {chain_path}`"
        )
    chain = x509.load_pem_x509_certificates(chain_path.read_bytes())
    leaf_key = chain[0].public_key()
    if not isinstance(leaf_key, rsa.RSAPublicKey) or leaf_key.public_numbers() != key.public_key().public_numbers():
        raise NotCertified(f"{chain_path} certifies another key")
    try:
        identity = guardian_identity(chain[0])
    except CAError as exc:
        raise NotCertified(f"{chain_path}: {exc}") from None
    measurement = measure(app)
    if identity.app != app or identity.measurement != measurement:
        raise NotCertified(
            f"{chain_path} certifies application {identity.app!r} with measurement "
            f"{identity.measurement.hex()[:16]}..., but this guardian runs {app!r} measuring "
            f"{measurement.hex()[:16]}...: have a new request signed"
        )
    der = tuple(c.public_bytes(serialization.Encoding.DER) for c in chain)
    return key, der, measurement


def certify(state_dir: str | Path, ca_dir: str | Path, app: str = "null",
            key_size: int = 2048) -> Path:
    """Guardian request + CA signature in one step (tests, experiments, demos); the chain's path."""
    csr_path = init_state(state_dir, app, key_size)
    csr = x509.load_pem_x509_csr(csr_path.read_bytes())
    chain_path = Path(state_dir) / CHAIN_FILE
    write_chain(sign_csr(ca_dir, csr, app), chain_path)
    return chain_path


class GuardianServer:
    """Serves one :class:`GuardianService` on a Unix stream socket: a thread per host connection.

    Each connection thread loops on a blocking ``recv_into`` a buffer of its own (no allocation
    per read, :data:`webalps_sim.protocol.RECV_SIZE`): it cuts the bytes into frames, answers
    every complete frame under the service lock (one card: requests never overlap), and sends
    all the replies to one read with a single ``sendall``.  A blocking loop keeps the guardian's
    round trip close to a bare socket round trip; an asyncio loop adds its own wake-up,
    callbacks and futures to every request (``benchmarks/bench_webalps.py`` measures the
    round trip end to end).

    A malformed frame gets an ``ERROR`` reply and closes *that* connection; the others go on.
    ``start()`` serves on a daemon thread, ``close()`` stops accepting, shuts every connection
    and waits for the threads.  The socket file is made mode 0600 (only this user's host).
    """

    def __init__(self, service: GuardianService, path: str | Path) -> None:
        self.service = service
        self.path = Path(path)
        if self.path.is_socket():
            self.path.unlink()  # a stale socket of an earlier run
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(self.path))
        os.chmod(self.path, 0o600)
        self._listener.listen(64)
        self._lock = threading.Lock()  # the connection set
        self._service_lock = threading.Lock()  # one card: one request at a time
        self._conns: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._closed = False

    def start(self) -> GuardianServer:
        """Accept connections on a daemon thread; returns ``self``."""
        thread = threading.Thread(target=self.serve_forever, name="guardian-accept", daemon=True)
        self._threads.append(thread)
        thread.start()
        return self

    def serve_forever(self) -> None:
        """Accept host connections until :meth:`close`."""
        while not self._closed:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                break  # closed
            with self._lock:
                if self._closed:
                    conn.close()
                    break
                self._conns.add(conn)
                self._threads = [t for t in self._threads if t.is_alive()]
            thread = threading.Thread(target=self._serve_connection, args=(conn,),
                                      name="guardian-conn", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve_connection(self, conn: socket.socket) -> None:
        decoder = p.FrameDecoder()
        handle = self.service.handle_frame
        lock = self._service_lock
        buffer = bytearray(p.RECV_SIZE)
        view = memoryview(buffer)
        try:
            while n := conn.recv_into(buffer):
                try:
                    frames = decoder.feed(view[:n])
                except p.ProtocolError as exc:
                    logger.warning("malformed frame from a host connection: %s", exc)
                    conn.sendall(p.message_frame(p.Error(p.ErrorCode.MALFORMED, str(exc)),
                                                 exc.request_id))
                    return
                if len(frames) == 1:
                    with lock:
                        reply = handle(frames[0])
                else:
                    with lock:
                        reply = b"".join([handle(frame) for frame in frames])
                if reply:
                    conn.sendall(reply)
        except OSError as exc:
            if not self._closed:
                logger.info("host connection lost: %r", exc)
        finally:
            with self._lock:
                self._conns.discard(conn)
            conn.close()

    def close(self) -> None:
        """Stop accepting, end every host connection and wait for the threads (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            conns = list(self._conns)
        for sock in (self._listener, *conns):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._listener.close()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(10)

    def __enter__(self) -> GuardianServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m webalps_sim.guardian",
                                     description="The WebALPS guardian (trusted co-server).")
    parser.add_argument("--state-dir", required=True, type=Path,
                        help="key, certificate request, certificate chain, application state")
    parser.add_argument("--listen", type=Path, help="Unix socket path to serve on")
    parser.add_argument("--app", default="null", help="guardian application: null or evoting")
    parser.add_argument("--cost-model", default="off",
                        help="off (native speed) or a model of webalps_sim.costmodel, e.g. 4758")
    parser.add_argument("--init", action="store_true",
                        help="only generate the key and write the certificate request")
    parser.add_argument("--key-size", type=int, default=2048,
                        help="RSA bits of a new key, 1024 to 16384 (default 2048)")
    parser.add_argument("--debug-reveal-secrets", type=Path, metavar="FILE",
                        help="TEST ONLY: append every handle's secrets to FILE as JSON lines")
    return parser


def _run(service: GuardianService, path: Path) -> None:
    """Serve until SIGINT/SIGTERM."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with GuardianServer(service, path):
        print(f"guardian listening on {path}", flush=True)
        stop.wait()


def main(argv: list[str] | None = None) -> int:
    """Entry point; bad input or a missing certificate is one line on stderr,
    ``python -m webalps_sim.guardian: error: ...``: status 2 for bad usage, 3 when the guardian
    is not certified (yet), 1 for a failure at run time (an unwritable state folder or socket)."""
    # (plain argparse, not testbed.cli: the guardian loads only the measured modules)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.state_dir.exists() and not args.state_dir.is_dir():
        parser.error(f"--state-dir {args.state_dir}: exists and is not a directory")
    if not 1024 <= args.key_size <= 16384:
        parser.error(f"--key-size: expected 1024 to 16384 bits, got {args.key_size}")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    try:
        if not (args.state_dir / KEY_FILE).exists() or args.init:
            csr = init_state(args.state_dir, args.app, args.key_size)
            print(f"certificate request written to {csr}", flush=True)
            if args.init:
                return 0
        if args.listen is None:
            raise AppUnavailable("--listen PATH is required to serve")
        key, chain, measurement = load_identity(args.state_dir, args.app)
        cost: CostModel = load_cost_model(args.cost_model)
        try:
            app: GuardianApp = load_app(args.app, args.state_dir)
        except AppUnavailable:
            raise
        except Exception as exc:  # noqa: BLE001 - the application's own configuration error
            raise AppUnavailable(f"application {args.app!r} failed to start: {exc}") from None
    except NotCertified as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 3
    except AppUnavailable as exc:
        parser.error(str(exc))
    except OSError as exc:
        print(f"{parser.prog}: error: {exc.filename}: {exc.strerror}" if exc.filename else
              f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 1
    reveal = None
    if args.debug_reveal_secrets is not None:
        print("webalps_sim.guardian: WARNING: --debug-reveal-secrets writes every session secret "
              f"to {args.debug_reveal_secrets}", file=sys.stderr)
        reveal_path: Path = args.debug_reveal_secrets

        def reveal(line: str) -> None:
            with reveal_path.open("a") as f:
                f.write(line + "\n")

    service = GuardianService(key, chain, measurement, app=app, app_name=args.app, cost=cost,
                              reveal=reveal)
    try:
        _run(service, args.listen)
    except OSError as exc:  # the socket's folder is missing, or the path is taken
        print(f"{parser.prog}: error: --listen {args.listen}: {exc.strerror or exc}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
