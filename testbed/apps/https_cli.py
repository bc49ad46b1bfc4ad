"""Command line of the HTTPS file server: ``python -m testbed.https_server --root DIR ...``.

``--help`` lists all options; for example::

    python -m testbed.https_server --root DIR --port 8443 --ciphers AES128-SHA:NULL-SHA
    python -m testbed.https_server --root DIR --loop uvloop     # uvloop's event loop ('fast' extra)

prints ``listening on https://HOST:PORT`` once it accepts connections and serves until SIGINT
or SIGTERM.  Bad input is one line on stderr and exit status 2, a failure at run time (a port
already in use) one line and exit status 1 (see :func:`testbed.cli.run_main`).  Without
``--cert``/``--key`` the server makes a fresh self-signed certificate.  ``python -m
testbed.https_server`` is a thin entry point that calls :func:`main` here.

Debugging with Wireshark: ``--keylog FILE`` (or, without it, the ``SSLKEYLOGFILE`` environment
variable) appends each connection's NSS key-log line to FILE (:mod:`tls12.keylog`), announced
by a warning on stderr; off by default.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from testbed import cli
from tls12.aio import DEFAULT_HANDSHAKE_TIMEOUT
from tls12.certs import generate_self_signed
from tls12.config import ServerConfig
from tls12.session import InMemorySessionStore
from tls12.suites import DEFAULT_SUITES, SUITES, parse_suite_list

from .file_handler import DEFAULT_IDLE_TIMEOUT
from .server import LOOPS, loop_factory, start_server

__all__ = ["build_parser", "main"]

logger = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface (also used by ``--help``)."""
    names = ":".join(p.openssl_name for p in SUITES.values())
    default = ":".join(SUITES[s].openssl_name for s in DEFAULT_SUITES)
    parser = argparse.ArgumentParser(
        prog=cli.program_name("testbed.https_server"),
        description="Static-file HTTPS server (HTTP/1.1 over the tls12 TLS 1.2 core).",
    )
    parser.add_argument("--root", required=True, type=cli.existing_directory, help="directory to serve")
    parser.add_argument("--port", type=cli.port, default=8443, help="TCP port (0 = any free port; default 8443)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--cert", type=Path, help="PEM certificate chain (default: a fresh self-signed one)")
    parser.add_argument("--key", type=Path, help="PEM RSA private key belonging to --cert")
    parser.add_argument(
        "--ciphers",
        default=default,
        help=f"colon-separated suites in preference order (known: {names}; default {default})",
    )
    parser.add_argument("--session-cache", action="store_true", help="enable session resumption by session ID")
    parser.add_argument(
        "--handshake-timeout", type=cli.positive_float, default=DEFAULT_HANDSHAKE_TIMEOUT, help="seconds (default %(default)s)"
    )
    parser.add_argument(
        "--idle-timeout", type=cli.positive_float, default=DEFAULT_IDLE_TIMEOUT, help="keep-alive seconds (default %(default)s)"
    )
    parser.add_argument(
        "--no-coalesce",
        dest="coalesce",
        action="store_false",
        help="write each response head in a TLS record of its own (default: the head shares the first record with the body)",
    )
    parser.add_argument(
        "--random-ivs",
        action="store_true",
        help="random explicit CBC IVs, so large writes use OpenSSL's multi-block seal "
        "(tls12.config.ServerConfig.random_ivs; default: IVs derived from k', reproducible)",
    )
    parser.add_argument(
        "--loop", choices=LOOPS, default="asyncio",
        help="event loop: asyncio's own or uvloop (optional: the 'fast' extra; default %(default)s)",
    )
    cli.add_keylog_option(parser)
    parser.add_argument("--quiet", action="store_true", help="no per-request log lines")
    return parser


async def _serve_until_signal(args: argparse.Namespace, config: ServerConfig) -> None:
    """Serve until SIGINT or SIGTERM, then close the listening socket and return."""
    server = await start_server(
        args.root,
        args.host,
        args.port,
        config,
        handshake_timeout=args.handshake_timeout,
        idle_timeout=args.idle_timeout,
        coalesce=args.coalesce,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    host, port = server.sockets[0].getsockname()[:2]
    print(f"listening on https://{host}:{port}", flush=True)
    async with server:
        await stop.wait()
    logger.info("stopping")


def _main(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    if (args.cert is None) != (args.key is None):
        raise cli.UsageError("--cert and --key go together")
    try:
        suites = parse_suite_list(args.ciphers)
    except ValueError as exc:
        raise cli.UsageError(f"--ciphers: {exc}") from None
    try:
        factory = loop_factory(args.loop)
    except ModuleNotFoundError as exc:
        raise cli.UsageError(str(exc)) from None
    creds = cli.load_credentials_arg(args.cert, args.key) if args.cert else generate_self_signed()
    config = ServerConfig(
        credentials=creds,
        cipher_suites=suites,
        session_store=InMemorySessionStore() if args.session_cache else None,
        keylog=cli.keylog_arg(args.keylog),
        random_ivs=args.random_ivs,
    )
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(_serve_until_signal(args, config))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m testbed.https_server``: bad input is one line on stderr, exit 2."""
    return cli.run_main(build_parser(), _main, argv)


if __name__ == "__main__":
    sys.exit(main())
