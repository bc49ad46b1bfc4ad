"""``python -m reverse_ssl.server``: a Reverse SSL echo server on a loopback address.

It serves the modes you allow (client authentication, client puzzles, and the
standard handshake for clients without Reverse SSL), keeps a pool of
offline-signed one-time keys refilled in the background, and stops by itself
after ``--duration`` seconds or ``--max-handshakes`` handshakes (or on
SIGTERM / Ctrl-C).  On exit it
writes ``--stats-json``: handshakes by mode, refusals by reason, the process
CPU seconds spent while serving (what the throughput experiment divides by),
and the pool's metrics.

``--keylog FILE`` (or, without it, the ``SSLKEYLOGFILE`` environment variable) appends each
connection's NSS key-log line to FILE (:mod:`tls12.keylog`): a debugging switch, off by
default, announced by a warning on stderr.

Example::

    python -m reverse_ssl.server --port 8443 --key-bits 2048 --pool 500 --duration 30
    python -m reverse_ssl.client --port 8443 --mode puzzle --message hello
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from testbed import cli
from tls12.certs import Credentials, generate_self_signed, load_credentials
from tls12.config import ServerConfig
from tls12.keylog import KeyLog

from ..config import RSA_SUITES, ReverseServerConfig
from ..messages import Mode
from ..onoff import OfflineToken, make_offline_token
from ..ots import OTSScheme
from ..puzzle import Construction, PuzzleParams, SignaturePolicy
from .pool import PoolRefiller, SignaturePool
from .stream import ReverseServerStats, echo_handler, serve

__all__ = ["main", "build_parser", "run_server", "puzzle_params", "check_loopback", "parse_modes"]


def check_loopback(host: str) -> str:
    """The testbed only listens on / connects to loopback addresses."""
    if host == "localhost":
        return host
    try:
        if ipaddress.ip_address(host).is_loopback:
            return host
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"{host!r} is not a loopback address")


def parse_modes(text: str) -> tuple[Mode, ...]:
    names = {"client-auth": Mode.CLIENT_AUTH, "puzzle": Mode.PUZZLE}
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        if part not in names:
            raise argparse.ArgumentTypeError(f"unknown mode {part!r}; use client-auth, puzzle")
        out.append(names[part])
    return tuple(out)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=cli.program_name("reverse_ssl.server"), description=__doc__.split("\n\n")[0])
    p.add_argument("--host", type=check_loopback, default="127.0.0.1", help="loopback address to listen on")
    p.add_argument("--port", type=cli.port, default=0, help="TCP port (0 = any free port; see --port-file)")
    p.add_argument("--port-file", type=cli.output_file, help="write the chosen port here once listening")
    p.add_argument("--cert", type=Path, help="PEM certificate chain (default: fresh self-signed)")
    p.add_argument("--key", type=Path, help="PEM RSA private key for --cert")
    p.add_argument("--key-bits", type=cli.rsa_bits, default=2048, help="RSA size of the self-signed key")
    p.add_argument("--modes", type=parse_modes, default=(Mode.CLIENT_AUTH, Mode.PUZZLE),
                   help="comma list of reverse modes in preference order: client-auth,puzzle ('' = none)")
    p.add_argument("--no-original", action="store_true", help="refuse clients without Reverse SSL")
    p.add_argument("--pool", type=cli.non_negative_int, default=256, help="capacity of the one-time key pool (0 = no pool)")
    p.add_argument("--prefill", action="store_true", help="fill the pool before listening")
    p.add_argument("--refill-rate", type=cli.non_negative_float, default=100.0,
                   help="max tokens per second made in the background (0 = no background refill)")
    p.add_argument("--ots", choices=[s.name.lower() for s in OTSScheme if s is not OTSScheme.RSA_FALLBACK],
                   default="lamport", help="one-time signature scheme")
    p.add_argument("--puzzle-bits", type=cli.positive_int, default=1024, help="RSA modulus size the puzzle asks for")
    p.add_argument("--puzzle-k", type=cli.positive_int, default=None, help="log2 half-width of the modulus window")
    p.add_argument("--preimage-bits", type=cli.non_negative_int, default=0, help="p > 0 selects the second construction")
    p.add_argument("--signature-policy", choices=[s.value for s in SignaturePolicy], default="when_pool_empty",
                   help="when to verify the puzzle's self-signature")
    p.add_argument("--duration", type=cli.non_negative_float, default=60.0, help="stop after this many seconds")
    p.add_argument("--max-handshakes", type=cli.non_negative_int, default=0, help="stop after this many handshakes (0 = no limit)")
    p.add_argument("--stats-json", type=cli.output_file, help="write the statistics here on exit")
    cli.add_keylog_option(p)
    p.add_argument("-v", "--verbose", action="store_true", help="log every refused connection")
    return p


def puzzle_params(args: argparse.Namespace) -> PuzzleParams:
    """The puzzle the command line asks for (``ValueError`` names what is inconsistent)."""
    construction = Construction.HASH_AND_RANGE if args.preimage_bits else Construction.RANGE
    return PuzzleParams(construction, args.puzzle_bits, args.puzzle_k, args.preimage_bits)


async def run_server(args: argparse.Namespace, creds: Credentials | None = None,
                     keylog: KeyLog | None = None) -> dict[str, object]:
    """Serve until the duration or handshake limit is reached; return the statistics.

    ``creds`` defaults to ``--cert``/``--key``, or a fresh self-signed key of ``--key-bits``;
    ``keylog`` is the debugging switch of :mod:`tls12.keylog` (off by default).
    """
    if creds is None:
        creds = load_credentials(args.cert, args.key) if args.cert else generate_self_signed(key_size=args.key_bits)
    pool = SignaturePool(args.pool) if args.pool > 0 else None
    scheme = OTSScheme[args.ots.upper()]

    def factory() -> OfflineToken:
        assert creds is not None and creds.private_key is not None  # --key or generated
        return make_offline_token(creds.private_key, os.urandom, scheme)

    if pool is not None and args.prefill:
        pool.fill(factory)
    puzzle = puzzle_params(args)
    config = ReverseServerConfig(
        ServerConfig(credentials=creds, cipher_suites=RSA_SUITES, keylog=keylog),
        modes=args.modes,
        allow_original=not args.no_original,
        pool=pool,
        puzzle=puzzle,
        signature_policy=SignaturePolicy(args.signature_policy),
    )
    stats = ReverseServerStats()
    refiller = PoolRefiller(pool, factory, max_rate=args.refill_rate) if pool is not None and args.refill_rate > 0 else None
    server = await serve(echo_handler, args.host, args.port, config, stats=stats)
    port = server.sockets[0].getsockname()[1]
    if args.port_file:
        args.port_file.write_text(str(port))
    print(f"reverse_ssl.server listening on {args.host}:{port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    if os.name == "posix" and threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)  # stop cleanly and still write the statistics
    cpu0, wall0 = time.process_time(), time.monotonic()
    if refiller is not None:
        refiller.start()
    try:
        while time.monotonic() - wall0 < args.duration and not stop.is_set():
            if args.max_handshakes and stats.total_handshakes >= args.max_handshakes:
                break
            await asyncio.sleep(0.05)
    finally:
        if refiller is not None:
            refiller.stop()
        server.close()
        await server.wait_closed()
    result: dict[str, object] = {
        "port": port,
        "cpu_seconds": time.process_time() - cpu0,
        "wall_seconds": time.monotonic() - wall0,
        **stats.as_dict(),
        "pool": asdict(pool.metrics()) if pool is not None else None,
    }
    return result


def _run(args: argparse.Namespace) -> int:
    if bool(args.cert) != bool(args.key):
        raise cli.UsageError("--cert and --key go together")
    try:
        puzzle_params(args)
    except ValueError as exc:
        raise cli.UsageError(f"--puzzle-bits/--puzzle-k/--preimage-bits: {exc}") from None
    creds = cli.load_credentials_arg(args.cert, args.key) if args.cert else None
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    result = asyncio.run(run_server(args, creds, cli.keylog_arg(args.keylog)))
    if args.stats_json:
        args.stats_json.write_text(json.dumps(result, indent=2))
    print(json.dumps(result), flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; bad input is one line on stderr and status 2 (1 when the port is in use)."""
    return cli.run_main(build_parser(), _run, list(argv) if argv is not None else None)
