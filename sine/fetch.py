"""``python -m sine.fetch URL``: fetch one or more documents and print verification results.

Example (through a Squid on port 3128)::

    python -m sine.fetch http://127.0.0.1:8080/index.html http://127.0.0.1:8080/a.html \\
        --key docroot/.sine/public.pem --proxy http://127.0.0.1:3128 --mode sinex

Exit status 0 when every document verified, 1 otherwise (a document failed verification, or the
origin or proxy could not be reached), 2 for a bad command line (a URL that is not
``http://host[:port]/...``, a ``--key`` that is not a PEM public key, a missing option the mode
needs).  Errors are one line on stderr.  ``--output FILE`` writes the verified bytes of the last
document (only verified bytes are ever written).

Tree mode and ranges::

    python -m sine.fetch http://127.0.0.1:8080/video.bin --key public.pem --mode tree \\
        --tree blake3-4096 --range 1048576-2097151 --output slice.bin

``--mode tree`` verifies against the signed Merkle tree (``--tree``, default ``sha256-1024``;
the origin signs ``sha256-1024`` and ``blake3-1024`` by default), ``--mode mice`` the
``mi-sha256-03`` coding under its RFC 9421 signature.  ``--range A-B`` (also ``A-`` and
``-N``, as in ``Range: bytes=...``) fetches and releases only those bytes: tree mode fetches the
covering chunk groups and ``O(log n)`` hashes, the chain modes the whole prefix up to the range.
``--accept-gzip`` lets a cache gzip whole responses (the client inflates them, bounded, before it
verifies).  Nothing unverified is ever printed as verified or written: on a failure the
output holds the verified prefix only (for a tree range: nothing) and the status is 1.

One line per document: ``URL: verified; N verified bytes; trust=signature; cache=HIT
(X-Cache-Status: HIT)`` (with ``--range``, ``N verified bytes (bytes A-B of L)``).  ``cache=`` says whether a cache served the document and which
header said so: RFC 9211 ``Cache-Status`` first, then nginx's ``X-Cache-Status``, Squid's
``X-Cache`` and a positive ``Age`` (:func:`sine.cache_status.cache_verdict`); ``cache=-`` when
none of them decides (no cache on the path, or one that says nothing).  Then one line of session
counters (public-key operations, origin round trips, requests, bytes).
"""

from __future__ import annotations

import argparse
import sys
from urllib.parse import SplitResult, urlsplit

from cryptography import x509

from testbed.cli import (
    CLIError,
    UsageError,
    load_pem_arg,
    output_file,
    program_name,
    run_main,
)

from .aio.client import DEFAULT_TREE, KEY_MODES, MODES, fetch_and_report
from .algorithms import VerifyingKey
from .errors import SineError
from .tree_http import ByteRange, InvalidRange, parse_range, parse_tree_id

__all__ = ["main", "build_parser"]

_NEEDS_KEY = KEY_MODES
_NEEDS_TLS = ("sineb", "https")


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m sine.fetch`` argument parser."""
    p = argparse.ArgumentParser(
        prog=program_name("sine.fetch"),
        description="Fetch documents from a SINE origin (optionally through a proxy) and "
        "verify them block by block.",
    )
    p.add_argument("urls", nargs="+", metavar="URL", help="http://host:port/path (same origin)")
    p.add_argument("--key", metavar="PEM", help="origin's public key (PEM), pinned out of band; "
                   f"needed by modes {', '.join(_NEEDS_KEY)}")
    p.add_argument("--proxy", metavar="URL", help="HTTP proxy, e.g. http://127.0.0.1:3128")
    p.add_argument("--mode", choices=MODES, default="sine")
    p.add_argument("--tls-origin", metavar="URL",
                   help="https://host:port of the origin (modes sineb, https)")
    p.add_argument("--tls-ca", metavar="PEM", help="certificate pinned for --tls-origin")
    p.add_argument("--collect", action="store_true", help="SINEB: batched AT_collect")
    p.add_argument("--output", type=output_file, metavar="FILE",
                   help="write the last document's verified bytes")
    p.add_argument("--tree", type=_tree, default=DEFAULT_TREE, metavar="ID",
                   help=f"tree mode: hash and group size, e.g. blake3-4096 (default "
                   f"{DEFAULT_TREE})")
    p.add_argument("--range", type=_byte_range, metavar="A-B", dest="byte_range",
                   help="fetch and verify only bytes A..B (also A- and -N)")
    p.add_argument("--accept-gzip", action="store_true",
                   help="let caches gzip whole responses (inflated before verification)")
    return p


def _tree(text: str) -> str:
    try:
        parse_tree_id(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _byte_range(text: str) -> ByteRange:
    """``A-B``, ``A-`` or ``-N`` as one byte range."""
    try:
        spec = parse_range("bytes=" + text) if "," not in text else None
    except InvalidRange as exc:
        raise argparse.ArgumentTypeError(f"bad range {text!r}: {exc}") from None
    if spec is None:
        raise argparse.ArgumentTypeError(f"bad range {text!r}: expected A-B, A- or -N")
    return spec


def _url(option: str, text: str, scheme: str) -> SplitResult:
    """``text`` parsed as ``scheme://host[:port]...``, or a :class:`UsageError`."""
    parts = urlsplit(text)
    if parts.scheme != scheme or not parts.hostname:
        raise UsageError(f"{option} {text!r}: expected an {scheme}://HOST[:PORT]/... URL")
    try:
        parts.port  # noqa: B018 -- urlsplit checks the port only when asked
    except ValueError as exc:
        raise UsageError(f"{option} {text!r}: bad port ({exc})") from None
    return parts


def _checked_certificates(pem: bytes) -> bytes:
    """``pem`` itself, once every certificate in it has parsed."""
    x509.load_pem_x509_certificates(pem)
    return pem


def _run(args: argparse.Namespace) -> int:
    origins = {f"{p.scheme}://{p.netloc}" for p in (_url("URL", u, "http") for u in args.urls)}
    if len(origins) != 1:
        raise UsageError("all URLs must share one origin (one session)")
    if args.proxy is not None:
        _url("--proxy", args.proxy, "http")
    if args.tls_origin is not None:
        _url("--tls-origin", args.tls_origin, "https")
    if args.mode in _NEEDS_KEY and args.key is None:
        raise UsageError(f"--key: mode {args.mode} needs the origin's public key (PEM)")
    if args.mode in _NEEDS_TLS and (args.tls_origin is None or args.tls_ca is None):
        raise UsageError(f"mode {args.mode} needs --tls-origin and --tls-ca")
    key = load_pem_arg("--key", args.key, "public key", VerifyingKey.from_pem) if args.key else None
    tls_ca = None
    if args.tls_ca:
        tls_ca = load_pem_arg("--tls-ca", args.tls_ca, "certificate", _checked_certificates)
    try:
        return fetch_and_report(
            origins.pop(), args.urls, mode=args.mode, public_key=key, proxy=args.proxy,
            tls_origin=args.tls_origin, tls_ca=tls_ca, collect=args.collect, output=args.output,
            byte_range=args.byte_range, tree=args.tree, accept_gzip=args.accept_gzip,
        )
    except SineError as exc:  # the origin or the proxy cannot be reached (HttpConnection)
        raise CLIError(str(exc)) from exc


def main(argv: list[str] | None = None) -> int:
    """Entry point; bad input is one line on stderr and status 2, see the module docstring."""
    return run_main(build_parser(), _run, argv)


if __name__ == "__main__":
    sys.exit(main())
