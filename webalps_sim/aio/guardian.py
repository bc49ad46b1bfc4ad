"""The guardian process: the secure coprocessor's role, reached over a local socket.

Run it as::

    python -m webalps_sim.guardian --state-dir STATE --listen /run/guardian.sock \\
        [--app null|evoting] [--cost-model off|4758] [--max-connections 64] ...

Before serving, the guardian loads its identity (:mod:`webalps_sim.identity`): at its first
start it generates its key pair and writes a certificate request carrying the measurement of
the guardian program (:mod:`webalps_sim.measure`); until the WebALPS CA has certified it the
guardian exits with status 3 and says what to do.  ``--init`` only prepares the key and the
request.  A guardian whose code changed needs a new certificate.

Serving (:class:`GuardianServer`): a Unix stream socket, one
:class:`webalps_sim.service.GuardianService` for all host connections (one card), and **one
thread** for all of them: a ``selectors`` loop reads whatever each connection sent, answers
every complete frame in order (pipelined requests included) and writes the replies with one
``send``.  It prints ``guardian listening on PATH`` once it accepts connections and runs until
SIGINT/SIGTERM.

Bounds, each a constructor argument of :class:`GuardianServer` /
:class:`webalps_sim.service.GuardianService` and a command-line flag (defaults in brackets):

* ``--max-connections`` [64] host connections at once: one more gets an ``ERROR`` frame
  (``LIMIT``) and is closed; the others are served on;
* ``--max-frame-bytes`` [1 MiB + 64 KiB, :data:`DEFAULT_MAX_FRAME_BYTES`] the largest frame
  accepted (the length field's count: type, request id and payload), so at most that much is
  buffered per connection; a header announcing more gets ``ERROR`` (``LIMIT``) and the
  connection is closed at once, without reading the body (a length above the protocol's
  4 MiB maximum is ``MALFORMED``, as any broken framing);
* ``--max-sessions`` [16,384, :data:`webalps_sim.service.DEFAULT_MAX_SESSIONS`] key handles
  (live connections and cached sessions), least recently used evicted first, and as many
  pending ECDHE keys;
* ``--session-lifetime`` [3600 s, :data:`webalps_sim.service.DEFAULT_SESSION_LIFETIME`] idle
  seconds after which a handle is dropped.

Every handle belongs to the host connection that created it: when that connection closes
(the host stopped, restarted or lost the guardian), all of them are freed.  A malformed frame
gets an ``ERROR`` reply (``MALFORMED``) and closes *that* connection; the others go on.  A host
that sends requests without reading the replies is not read from until its replies are
written, so the guardian buffers at most one read's replies per connection.

``--debug-reveal-secrets FILE`` appends each handle's premaster, master secret and keys (and an
ECDHE handshake's ephemeral private key) to FILE, one JSON line each: a test switch for the
secret search, never for deployment.

``--keylog FILE`` (or, without it, the ``SSLKEYLOGFILE`` environment variable) appends each
handle's NSS key-log line (``CLIENT_RANDOM <client random> <master secret>``,
:mod:`tls12.keylog`) to FILE, so that Wireshark can decrypt a capture of the clients'
connections.  In WebALPS the key log comes from here (or from the client): the host never holds
a master secret.  A debugging switch, off by default, announced by a warning on stderr.

The command is ``python -m webalps_sim.guardian`` (:mod:`webalps_sim.guardian` is its entry
point); the code lives here because it serves a socket.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import os
import selectors
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tls12.keylog import KEYLOG_HELP, KeyLogError, KeyLogFile, program_keylog

from .. import protocol as p
from ..app import AppUnavailable, CostCharger, GuardianApp, load_app, load_cost_model
from ..identity import KEY_FILE, NotCertified, init_state, load_identity
from ..service import DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_LIFETIME, GuardianService

__all__ = ["GuardianServer", "DEFAULT_MAX_CONNECTIONS", "DEFAULT_MAX_FRAME_BYTES",
           "build_parser", "main"]

logger = logging.getLogger(__name__)

DEFAULT_MAX_CONNECTIONS = 64
"""Host connections served at once."""
DEFAULT_MAX_FRAME_BYTES = p.DEFAULT_MAX_FRAME_BYTES
"""The largest frame accepted from a host (:data:`webalps_sim.codec.DEFAULT_MAX_FRAME_BYTES`)."""


class _HostConnection:
    """One host connection's state in the loop: its frame decoder and unsent replies."""

    __slots__ = ("sock", "owner", "decoder", "out", "closing")

    def __init__(self, sock: socket.socket, owner: int, max_frame: int) -> None:
        self.sock = sock
        self.owner = owner
        self.decoder = p.FrameDecoder(max_frame)
        self.out = bytearray()
        self.closing = False
        """Close once ``out`` is written (an error frame was the last reply)."""


class GuardianServer:
    """Serves one :class:`GuardianService` on a Unix stream socket from one thread.

    The loop (:meth:`serve_forever`) waits on every host connection with a selector; a readable
    connection is read into one buffer shared by all (:data:`webalps_sim.protocol.RECV_SIZE`,
    no allocation per read), cut into frames, every complete frame is answered in order and
    the replies go out with one ``send``.  Only when the kernel does not take them all does
    the connection wait for writability (and is not read meanwhile).  One thread serialises
    the requests as the one card does, without a lock.

    ``start()`` runs the loop on a daemon thread; ``serve_forever()`` runs it on the caller's.
    ``close()`` (from any thread or a signal handler) stops accepting, ends every connection
    and waits for the loop.  The socket file is made mode 0600 (only this user's host).
    """

    def __init__(self, service: GuardianService, path: str | Path, *,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, not {max_connections}")
        if not 5 <= max_frame_bytes <= p.MAX_FRAME:
            raise ValueError(f"max_frame_bytes must be 5..{p.MAX_FRAME}, not {max_frame_bytes}")
        self.service = service
        self.path = Path(path)
        self.max_connections = max_connections
        self.max_frame_bytes = max_frame_bytes
        if self.path.is_socket():
            self.path.unlink()  # a stale socket of an earlier run
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(self.path))
        os.chmod(self.path, 0o600)
        self._listener.listen(128)
        self._listener.setblocking(False)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._conns: dict[socket.socket, _HostConnection] = {}
        self._owners = itertools.count(1)
        self._buffer = bytearray(p.RECV_SIZE)
        self._view = memoryview(self._buffer)
        self._threads: list[threading.Thread] = []
        self._loop_thread: threading.Thread | None = None
        self._closed = False
        self._stopped = threading.Event()
        self.refused = 0
        """Host connections turned away at the connection limit."""

    @property
    def connections(self) -> int:
        """Host connections being served now."""
        return len(self._conns)

    def start(self) -> GuardianServer:
        """Run the loop on a daemon thread; returns ``self``."""
        thread = threading.Thread(target=self.serve_forever, name="guardian", daemon=True)
        self._threads.append(thread)
        self._loop_thread = thread
        thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve host connections until :meth:`close`."""
        if self._loop_thread is None:
            self._loop_thread = threading.current_thread()
        try:
            while not self._closed:
                for key, events in self._selector.select():
                    sock = key.fileobj
                    if sock is self._listener:
                        self._accept()
                    elif sock is self._wake_r:
                        self._drain_wake()
                    else:
                        self._ready(self._conns.get(sock), events)  # type: ignore[call-overload]  # registered objects are the listener, the wake pipe and our sockets
        finally:
            self._shutdown()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of descriptors, or closed: try again later
                logger.warning("accept failed: %s", exc)
                return
            if len(self._conns) >= self.max_connections:
                self._refuse(sock)
                continue
            sock.setblocking(False)
            conn = _HostConnection(sock, next(self._owners), self.max_frame_bytes)
            self._conns[sock] = conn
            self._selector.register(sock, selectors.EVENT_READ, None)

    def _refuse(self, sock: socket.socket) -> None:
        """One connection over the limit: a ``LIMIT`` error frame, then close."""
        self.refused += 1
        error = p.Error(p.ErrorCode.LIMIT, f"the guardian serves at most {self.max_connections} "
                        "host connections")
        try:
            sock.setblocking(False)
            sock.send(p.message_frame(error, 0))
        except OSError:
            pass
        sock.close()

    def _ready(self, conn: _HostConnection | None, events: int) -> None:
        if conn is None:
            return
        if events & selectors.EVENT_WRITE:
            self._flush(conn)
        elif events & selectors.EVENT_READ:
            self._read(conn)

    def _read(self, conn: _HostConnection) -> None:
        try:
            n = conn.sock.recv_into(self._buffer)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            logger.info("host connection lost: %r", exc)
            n = 0
        if not n:
            self._close(conn)
            return
        try:
            frames = conn.decoder.feed(self._view[:n])
        except p.FrameTooLarge as exc:
            self._fail(conn, p.ErrorCode.LIMIT, exc)
            return
        except p.ProtocolError as exc:
            self._fail(conn, p.ErrorCode.MALFORMED, exc)
            return
        if frames:
            self._answer(conn, frames)
            self._flush(conn)

    def _answer(self, conn: _HostConnection, frames: list[p.Frame]) -> None:
        """Queue the replies to ``frames``, in order.  A bug in the service answers that one
        request ``INTERNAL``: the framing is intact, so the connection (and every handle it
        owns) goes on, and the loop that serves the others never sees the exception."""
        handle, owner, out = self.service.handle_frame, conn.owner, conn.out
        for frame in frames:
            try:
                out += handle(frame, owner)
            except Exception as exc:  # noqa: BLE001 - one request's failure, not the guardian's
                logger.exception("the guardian failed on a request")
                error = p.Error(p.ErrorCode.INTERNAL, f"guardian failure: {type(exc).__name__}")
                out += p.message_frame(error, frame.request_id)

    def _fail(self, conn: _HostConnection, code: p.ErrorCode, exc: p.ProtocolError) -> None:
        """A frame the guardian will not read: an error reply, then that connection closes."""
        logger.warning("refused a frame from a host connection: %s", exc)
        conn.out += p.message_frame(p.Error(code, str(exc)), exc.request_id)
        conn.closing = True
        self._flush(conn)

    def _flush(self, conn: _HostConnection) -> None:
        """Send what is pending; wait for writability (not reading) if the kernel is full."""
        try:
            sent = conn.sock.send(conn.out) if conn.out else 0
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError as exc:
            logger.info("host connection lost: %r", exc)
            self._close(conn)
            return
        del conn.out[:sent]
        if conn.out:
            self._selector.modify(conn.sock, selectors.EVENT_WRITE, None)
        elif conn.closing:
            self._close(conn)
        else:
            self._selector.modify(conn.sock, selectors.EVENT_READ, None)

    def _close(self, conn: _HostConnection) -> None:
        """End a host connection and free every handle it created."""
        if self._conns.pop(conn.sock, None) is None:
            return
        self._selector.unregister(conn.sock)
        conn.sock.close()
        freed = self.service.close_owner(conn.owner)
        if freed:
            logger.info("host connection closed: %d handles freed", freed)

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(64):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def _shutdown(self) -> None:
        for conn in list(self._conns.values()):
            self._close(conn)
        self._selector.close()
        self._listener.close()
        self._wake_r.close()
        self._wake_w.close()
        self._stopped.set()

    def close(self) -> None:
        """Stop accepting, end every host connection and wait for the loop (idempotent; from a
        signal handler on the loop's own thread it only tells the loop to stop)."""
        if self._closed:
            return
        self._closed = True
        loop = self._loop_thread
        if loop is None:  # never served: nothing else will close the sockets
            self._shutdown()
            return
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        if loop is not threading.current_thread():
            self._stopped.wait(10)
            for thread in self._threads:
                thread.join(10)

    def __enter__(self) -> GuardianServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def build_parser() -> argparse.ArgumentParser:
    # named as testbed.cli.program_name does, without importing it (only measured modules load)
    script = "webalps-guardian"  # its console script ([project.scripts] in pyproject.toml)
    prog = script if Path(sys.argv[0]).name == script else "python -m webalps_sim.guardian"
    parser = argparse.ArgumentParser(prog=prog,
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
    parser.add_argument("--keylog", type=Path, metavar="FILE", help=KEYLOG_HELP)
    parser.add_argument("--max-connections", type=int, default=DEFAULT_MAX_CONNECTIONS,
                        metavar="N", help="host connections served at once; one more gets a "
                        f"LIMIT error and is closed (default {DEFAULT_MAX_CONNECTIONS})")
    parser.add_argument("--max-frame-bytes", type=int, default=DEFAULT_MAX_FRAME_BYTES,
                        metavar="BYTES", help="largest frame accepted from a host, at most "
                        f"{p.MAX_FRAME} (default {DEFAULT_MAX_FRAME_BYTES})")
    parser.add_argument("--max-sessions", type=int, default=DEFAULT_MAX_SESSIONS, metavar="N",
                        help="key handles kept (least recently used evicted first), and as "
                        f"many pending ECDHE keys (default {DEFAULT_MAX_SESSIONS})")
    parser.add_argument("--session-lifetime", type=float, default=DEFAULT_SESSION_LIFETIME,
                        metavar="SECONDS", help="idle seconds after which a handle is dropped "
                        f"(default {DEFAULT_SESSION_LIFETIME:g})")
    return parser


def _check_limits(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """One clear usage error per bound out of range."""
    if args.max_connections < 1:
        parser.error(f"--max-connections: expected at least 1, got {args.max_connections}")
    if not 5 <= args.max_frame_bytes <= p.MAX_FRAME:
        parser.error(f"--max-frame-bytes: expected 5 to {p.MAX_FRAME}, got {args.max_frame_bytes}")
    if args.max_sessions < 1:
        parser.error(f"--max-sessions: expected at least 1, got {args.max_sessions}")
    if not args.session_lifetime > 0:
        parser.error(f"--session-lifetime: expected a positive number of seconds, got "
                     f"{args.session_lifetime}")


def _run(service: GuardianService, path: Path, args: argparse.Namespace) -> None:
    """Serve on this thread until SIGINT/SIGTERM."""
    server = GuardianServer(service, path, max_connections=args.max_connections,
                            max_frame_bytes=args.max_frame_bytes)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: server.close())
    print(f"guardian listening on {path}", flush=True)
    server.serve_forever()


def _debug_switches(parser: argparse.ArgumentParser, args: argparse.Namespace
                    ) -> tuple[Callable[[str], None] | None, KeyLogFile | None]:
    """The two switches that write secrets, each announced on stderr: ``--debug-reveal-secrets``
    and the key log (``--keylog``, else ``SSLKEYLOGFILE``; a path that cannot be written is a
    usage error now, not a failure in a handshake)."""
    try:
        keylog = program_keylog(args.keylog)
    except KeyLogError as exc:
        parser.error(str(exc))
    if args.debug_reveal_secrets is None:
        return None, keylog
    print("webalps_sim.guardian: WARNING: --debug-reveal-secrets writes every session secret "
          f"to {args.debug_reveal_secrets}", file=sys.stderr)
    reveal_path: Path = args.debug_reveal_secrets

    def reveal(line: str) -> None:
        with reveal_path.open("a") as f:
            f.write(line + "\n")

    return reveal, keylog


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
    _check_limits(parser, args)
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
    reveal, keylog = _debug_switches(parser, args)
    service = GuardianService(key, chain, measurement, app=app, app_name=args.app, cost=cost,
                              reveal=reveal, keylog=keylog, max_sessions=args.max_sessions,
                              session_lifetime=args.session_lifetime, clock=time.monotonic)
    try:
        _run(service, args.listen, args)
    except OSError as exc:  # the socket's folder is missing, or the path is taken
        print(f"{parser.prog}: error: --listen {args.listen}: {exc.strerror or exc}",
              file=sys.stderr)
        return 1
    return 0

