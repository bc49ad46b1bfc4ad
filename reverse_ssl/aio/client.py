"""``python -m reverse_ssl.client``: connect to a Reverse SSL server, or load it.

One connection (default): handshake in the chosen mode, send ``--message``,
print what came back and what was negotiated.  ``--load``: a closed loop of
``--concurrency`` clients doing handshake + echo + close for ``--duration``
seconds; prints handshakes per second.

Modes: ``client-auth`` (a fresh self-signed client certificate of
``--key-bits``), ``puzzle`` (solve the server's RSA key-generation puzzle),
``original`` (do not offer Reverse SSL: the standard RSA handshake).

``--keylog FILE`` (or, without it, the ``SSLKEYLOGFILE`` environment variable) appends each
connection's NSS key-log line to FILE (:mod:`tls12.keylog`): a debugging switch, off by
default, announced by a warning on stderr.

Example::

    python -m reverse_ssl.client --port 8443 --mode puzzle --message hello
    python -m reverse_ssl.client --port 8443 --mode client-auth --load --concurrency 8 --duration 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Sequence

from testbed import cli
from tls12.certs import Credentials, generate_self_signed
from tls12.config import ClientConfig
from tls12.errors import TLSError
from tls12.keylog import KeyLog

from ..config import RSA_SUITES, ReverseClientConfig, SeenKeyCache
from ..messages import Mode
from .server import check_loopback
from .stream import closed_loop_load, connect

__all__ = ["main", "build_parser", "make_client_config"]

MODES = {"client-auth": (Mode.CLIENT_AUTH,), "puzzle": (Mode.PUZZLE,), "original": ()}


def make_client_config(mode: str, credentials: Credentials | None, seen: SeenKeyCache | None = None,
                       keylog: KeyLog | None = None) -> ReverseClientConfig:
    """A client offering exactly ``mode`` (see the module docstring); ``keylog`` is the
    debugging switch of :mod:`tls12.keylog` (off by default)."""
    return ReverseClientConfig(
        ClientConfig(server_name="localhost", cipher_suites=RSA_SUITES, keylog=keylog),
        modes=MODES[mode],
        credentials=credentials,
        seen_keys=seen if seen is not None else SeenKeyCache(),
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=cli.program_name("reverse_ssl.client"), description=__doc__.split("\n\n")[0])
    p.add_argument("--host", type=check_loopback, default="127.0.0.1", help="loopback address of the server")
    p.add_argument("--port", type=cli.remote_port, required=True, help="server port")
    p.add_argument("--mode", choices=sorted(MODES), default="puzzle", help="handshake to offer")
    p.add_argument("--key-bits", type=cli.rsa_bits, default=2048, help="size of the client-auth certificate key")
    p.add_argument("--message", default="hello, reverse SSL", help="text to send (single connection)")
    p.add_argument("--load", action="store_true", help="closed-loop load instead of one connection")
    p.add_argument("--concurrency", type=cli.positive_int, default=8, help="concurrent clients with --load")
    p.add_argument("--duration", type=cli.positive_float, default=5.0, help="seconds of load with --load")
    p.add_argument("--timeout", type=cli.positive_float, default=30.0, help="handshake timeout in seconds")
    cli.add_keylog_option(p)
    return p


async def _one(args: argparse.Namespace, config: ReverseClientConfig) -> dict[str, object]:
    start = time.perf_counter()
    stream = await connect(args.host, args.port, config, handshake_timeout=args.timeout)
    handshake_s = time.perf_counter() - start
    payload = args.message.encode()
    stream.write(payload)
    echoed = await stream.read_exactly(len(payload))
    await stream.close()
    conn = stream.conn
    solution = getattr(conn, "puzzle_solution", None)
    return {
        "mode": conn.mode.name if getattr(conn, "mode", None) is not None else "original",  # type: ignore[attr-defined]  # getattr checks that this connection has a mode
        "echo": echoed.decode(errors="replace"),
        "handshake_seconds": handshake_s,
        "server_used_fallback_signature": getattr(conn, "server_used_fallback_signature", False),
        "puzzle_p_attempts": solution.p_attempts if solution else None,
        "bytes_out": stream.bytes_out,
        "bytes_in": stream.bytes_in,
    }


def _run(args: argparse.Namespace) -> int:
    creds = generate_self_signed("client", key_size=args.key_bits) if args.mode == "client-auth" else None
    seen = SeenKeyCache()
    keylog = cli.keylog_arg(args.keylog)
    where = f"{args.host}:{args.port}"
    if args.load:
        result = asyncio.run(
            closed_loop_load(
                args.host, args.port, lambda: make_client_config(args.mode, creds, seen, keylog),
                concurrency=args.concurrency, duration=args.duration,
            )
        )
        print(json.dumps({"handshakes": result.handshakes, "errors": result.errors,
                          "seconds": result.seconds, "rate": result.rate}))
        if result.handshakes == 0:
            raise cli.CLIError(f"no handshake with {where} completed in {result.seconds:.1f} s "
                               f"({result.errors} connections failed)")
        return 0
    try:
        print(json.dumps(asyncio.run(_one(args, make_client_config(args.mode, creds, seen, keylog)))))
    except TLSError as exc:
        raise cli.CLIError(f"handshake with {where} failed: {type(exc).__name__}: {exc}") from None
    except TimeoutError:
        raise cli.CLIError(f"handshake with {where} timed out after {args.timeout:g} s") from None
    except asyncio.IncompleteReadError:
        raise cli.CLIError(f"{where} closed the connection before echoing") from None
    except OSError as exc:
        raise cli.connect_error(where, exc) from None
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; bad input is one line on stderr and status 2, a failed connection status 1."""
    return cli.run_main(build_parser(), _run, list(argv) if argv is not None else None)
