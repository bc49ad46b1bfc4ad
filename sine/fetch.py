"""``python -m sine.fetch URL``: fetch one or more documents and print verification results.

Example (through a Squid on port 3128)::

    python -m sine.fetch http://127.0.0.1:8080/index.html http://127.0.0.1:8080/a.html \\
        --key docroot/.sine/public.pem --proxy http://127.0.0.1:3128 --mode sinex

Exit status 0 when every document verified, 1 otherwise (a document failed verification, or the
origin or proxy could not be reached), 2 for a bad command line (a URL that is not
``http://host[:port]/...``, a ``--key`` that is not a PEM public key, a missing option the mode
needs).  Errors are one line on stderr.  ``--output FILE`` writes the verified bytes of the last
document (only verified bytes are ever written).

One line per document: ``URL: verified; N verified bytes; trust=signature; cache=HIT
(X-Cache-Status: HIT)``.  ``cache=`` says whether a cache served the document and which
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

from .aio.client import MODES, fetch_and_report
from .algorithms import VerifyingKey
from .errors import SineError

__all__ = ["main", "build_parser"]

_NEEDS_KEY = ("sine", "separate", "sinex")
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
    return p


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
        )
    except SineError as exc:  # the origin or the proxy cannot be reached (HttpConnection)
        raise CLIError(str(exc)) from exc


def main(argv: list[str] | None = None) -> int:
    """Entry point; bad input is one line on stderr and status 2, see the module docstring."""
    return run_main(build_parser(), _run, argv)


if __name__ == "__main__":
    sys.exit(main())
