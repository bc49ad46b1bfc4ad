"""The guardian process: the secure coprocessor's role, reached over a local socket.

Run it as::

    python -m webalps_sim.guardian --state-dir STATE --listen /run/guardian.sock \\
        [--app null|evoting] [--cost-model off|4758]

Before serving, the guardian loads its identity (:mod:`webalps_sim.identity`): at its first
start it generates its key pair and writes a certificate request carrying the measurement of
the guardian program (:mod:`webalps_sim.measure`); until the WebALPS CA has certified it the
guardian exits with status 3 and says what to do.  ``--init`` only prepares the key and the
request.  A guardian whose code changed needs a new certificate.

Serving (:class:`GuardianServer`): a Unix stream socket, one
:class:`webalps_sim.service.GuardianService` for all host connections (one card), a blocking
thread per host connection, frames of :mod:`webalps_sim.protocol` answered in order.  A malformed
frame gets an ``ERROR`` reply and closes *that* connection; the others go on.  It prints
``guardian listening on PATH`` once it accepts connections and runs until SIGINT/SIGTERM.

``--debug-reveal-secrets FILE`` appends each handle's premaster, master secret and keys to FILE
(one JSON line each): a test switch for the secret search, never for deployment.
The command is ``python -m webalps_sim.guardian`` (:mod:`webalps_sim.guardian` is its entry
point); the code lives here because it serves a socket with threads.
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

from .. import protocol as p
from ..app import AppUnavailable, CostCharger, GuardianApp, load_app, load_cost_model
from ..identity import KEY_FILE, NotCertified, init_state, load_identity
from ..service import GuardianService

__all__ = ["GuardianServer", "build_parser", "main"]

logger = logging.getLogger(__name__)


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
        cost: CostCharger = load_cost_model(args.cost_model)
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

