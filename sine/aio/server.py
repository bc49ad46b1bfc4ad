"""The SINE origin server on sockets: asyncio + h11 listeners around :class:`sine.origin.Origin`.

:class:`OriginServer` listens on HTTP and, optionally, HTTPS and writes the bytes of
:meth:`sine.origin.Origin.respond` (the routes are listed in :mod:`sine.origin`) to each
connection.  :func:`main` is ``python -m sine.server`` (whose module only imports it):
``python -m sine.server --help`` runs it.
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import time
from collections.abc import Callable
from pathlib import Path

import h11

from testbed import cli

from ..origin import Origin, OriginStats
from ..site import STORE_DIR

__all__ = ["OriginServer", "OriginStats", "make_self_signed", "build_parser", "main"]


class OriginServer(Origin):
    """Serve ``docroot`` (signed by :mod:`sine.sign`) over HTTP and, optionally, HTTPS.

    The answers are :class:`sine.origin.Origin`'s; this class adds the listeners and the
    connection loop.  ``clock`` defaults to the wall clock.
    """

    def __init__(self, docroot: Path | str, clock: Callable[[], float] = time.time) -> None:
        super().__init__(docroot, clock)
        self._servers: list[asyncio.base_events.Server] = []
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(
        self, host: str = "127.0.0.1", port: int = 0, *, tls: ssl.SSLContext | None = None,
        tls_port: int = 0,
    ) -> tuple[int, int | None]:
        """Listen; return ``(http_port, tls_port or None)``."""
        http = await asyncio.start_server(
            lambda r, w: self._connection(r, w, False), host, port)
        self._servers.append(http)
        http_port = http.sockets[0].getsockname()[1]
        bound_tls = None
        if tls is not None:
            srv = await asyncio.start_server(
                lambda r, w: self._connection(r, w, True), host, tls_port, ssl=tls)
            self._servers.append(srv)
            bound_tls = srv.sockets[0].getsockname()[1]
        return http_port, bound_tls

    async def close(self) -> None:
        for srv in self._servers:
            srv.close()
        for writer in list(self._writers):
            writer.close()
        for _ in range(100):  # bounded: let connection tasks observe the close
            if not self._writers:
                break
            await asyncio.sleep(0.01)
        for srv in self._servers:
            await srv.wait_closed()
        self._servers.clear()

    # -- connection loop ---------------------------------------------------------------------

    async def _connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, is_tls: bool
    ) -> None:
        conn = h11.Connection(h11.SERVER)
        if is_tls:
            self.stats.tls_connections += 1
        request: h11.Request | None = None
        self._writers.add(writer)
        try:
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await reader.read(65536))
                elif isinstance(event, h11.Request):
                    request = event
                elif isinstance(event, h11.EndOfMessage) and request is not None:
                    await self._respond(conn, writer, request, is_tls)
                    if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                        break
                    conn.start_next_cycle()
                    request = None
                elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                    break
        except (h11.ProtocolError, ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()
            try:
                await writer.wait_closed()
            except (ConnectionError, ssl.SSLError):
                pass

    async def _respond(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, req: h11.Request, is_tls: bool
    ) -> None:
        for data in self.respond(conn, req, is_tls):
            writer.write(data)
            await writer.drain()


def make_self_signed(host: str = "127.0.0.1", days: int = 30) -> tuple[bytes, bytes]:
    """A fresh P-256 key and its self-signed certificate for ``host`` (an IP-address SAN when
    ``host`` is an address: the link testbed's origin listens on a namespace address), as
    ``(cert_pem, key_pem)`` for :class:`OriginServer`; the certificate is
    :func:`tls12.certs.self_signed_certificate`'s."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    from tls12.certs import self_signed_certificate

    key = ec.generate_private_key(ec.SECP256R1())
    cert = self_signed_certificate(key, host, days)
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem



def server_tls_context(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert_file, key_file)
    return ctx


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m sine.server`` argument parser."""
    p = argparse.ArgumentParser(
        prog=cli.program_name("sine.server"),
        description="Serve a document root signed by 'python -m sine.sign' (SINE, SINEB, SINEX).",
    )
    p.add_argument("docroot", type=Path)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=cli.port, default=8080, help="HTTP port (default 8080)")
    p.add_argument("--tls-port", type=cli.port, default=8443,
                   help="HTTPS port for SINEB AT_sign (default 8443)")
    p.add_argument("--tls-cert", type=Path, help="PEM certificate (generated if omitted)")
    p.add_argument("--tls-key", type=Path, help="PEM private key of --tls-cert")
    p.add_argument("--no-tls", action="store_true", help="HTTP only")
    p.add_argument("--duration", type=cli.non_negative_float, default=0,
                   help="stop after this many seconds (default 0: run until Ctrl-C)")
    return p


def _load_tls(cert: Path, key: Path) -> ssl.SSLContext:
    """A server context for ``cert`` and ``key``, each checked with a message naming it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    cli.load_pem_arg("--tls-cert", cert, "certificate", x509.load_pem_x509_certificates)
    cli.load_pem_arg("--tls-key", key, "private key",
                     lambda pem: serialization.load_pem_private_key(pem, password=None))
    try:
        return server_tls_context(cert, key)
    except ssl.SSLError as exc:
        raise cli.UsageError(f"--tls-key {key} does not match --tls-cert {cert} "
                             f"({exc.reason or exc})") from None


def _run(args: argparse.Namespace) -> int:
    docroot: Path = args.docroot
    if not docroot.is_dir():
        raise cli.UsageError(f"{docroot} is not a directory")
    if not Path(docroot, STORE_DIR, "public.pem").is_file():
        raise cli.UsageError(f"{docroot} is not signed: run "
                             f"'python -m sine.sign {docroot} --key KEY' first")
    if (args.tls_cert is None) != (args.tls_key is None):
        raise cli.UsageError("--tls-cert and --tls-key go together")
    ctx = None
    if not args.no_tls:
        cert, key = args.tls_cert, args.tls_key
        if cert is None:
            cert_pem, key_pem = make_self_signed(args.host)
            store = Path(docroot, STORE_DIR)
            cert, key = store / "tls-cert.pem", store / "tls-key.pem"
            cert.write_bytes(cert_pem)
            key.write_bytes(key_pem)
            key.chmod(0o600)
            print(f"generated TLS certificate {cert} (pin it with sine.fetch --tls-ca)")
        ctx = _load_tls(cert, key)

    async def run() -> None:
        server = OriginServer(docroot)
        ports = await server.start(args.host, args.port, tls=ctx, tls_port=args.tls_port)
        print(f"serving {docroot} on http://{args.host}:{ports[0]}"
              + (f" and https://{args.host}:{ports[1]}" if ports[1] else ""), flush=True)
        try:
            if args.duration:
                await asyncio.sleep(args.duration)
            else:
                await asyncio.Event().wait()
        finally:
            await server.close()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:  # Ctrl-C is how the server is meant to stop
        pass
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point; bad input is one line on stderr and exit status 2 (1 when the port is in
    use), never a traceback."""
    return cli.run_main(build_parser(), _run, argv)
