"""``python -m sine.fetch URL``: fetch one or more documents and print verification results.

Example (through a Squid on port 3128)::

    python -m sine.fetch http://127.0.0.1:8080/index.html http://127.0.0.1:8080/a.html \\
        --key docroot/.sine/public.pem --proxy http://127.0.0.1:3128 --mode sinex

Exit status 0 when every document verified, 1 otherwise.  ``--output FILE`` writes the
verified bytes of the last document (only verified bytes are ever written).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from urllib.parse import urlsplit

from .algorithms import VerifyingKey
from .client import MODES, fetch_and_report

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m sine.fetch",
        description="Fetch documents from a SINE origin (optionally through a proxy) and "
        "verify them block by block.",
    )
    p.add_argument("urls", nargs="+", metavar="URL", help="http://host:port/path (same origin)")
    p.add_argument("--key", type=Path, help="origin's public key (PEM), pinned out of band")
    p.add_argument("--proxy", help="HTTP proxy, e.g. http://127.0.0.1:3128")
    p.add_argument("--mode", choices=MODES, default="sine")
    p.add_argument("--tls-origin", help="https://host:port of the origin (SINEB, https)")
    p.add_argument("--tls-ca", type=Path, help="PEM certificate pinned for --tls-origin")
    p.add_argument("--collect", action="store_true", help="SINEB: batched AT_collect")
    p.add_argument("--output", type=Path, help="write the last document's verified bytes")
    args = p.parse_args(argv)
    origins = {f"{urlsplit(u).scheme}://{urlsplit(u).netloc}" for u in args.urls}
    if len(origins) != 1:
        p.error("all URLs must share one origin (one session)")
    key = VerifyingKey.from_pem(args.key.read_bytes()) if args.key else None

    return fetch_and_report(
        origins.pop(), args.urls, mode=args.mode, public_key=key, proxy=args.proxy,
        tls_origin=args.tls_origin, tls_ca=args.tls_ca.read_bytes() if args.tls_ca else None,
        collect=args.collect, output=args.output,
    )


if __name__ == "__main__":
    sys.exit(main())
