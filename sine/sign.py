"""``python -m sine.sign DOCROOT``: sign (or re-sign) every document of a document root.

Writes ``DOCROOT/.sine/tags/*.at`` and ``DOCROOT/.sine/public.pem`` and prints, per document,
what was done (``new``, ``content``, ``renewed``, ``forward-authenticator``, ``unchanged``).
The private key is read from ``--key`` (PEM, PKCS#8), created there if the file is missing.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from testbed.cli import (
    UsageError,
    describe_os_error,
    load_pem_arg,
    positive_int,
    program_name,
    run_main,
)

from .algorithms import HashAlg, SigAlg, SigningKey
from .format import MAX_BLOCK_SIZE, MIN_BLOCK_SIZE
from .site import sign_site

__all__ = ["main", "build_parser", "load_or_create_key"]

_SIG_NAMES = {"rsa-pss": SigAlg.RSA_PSS_SHA256, "ed25519": SigAlg.ED25519,
              "ecdsa-p256": SigAlg.ECDSA_P256_SHA256}
_HASH_NAMES = {"sha256": HashAlg.SHA256, "sha384": HashAlg.SHA384, "sha512": HashAlg.SHA512}


def load_or_create_key(path: Path, alg: SigAlg = SigAlg.RSA_PSS_SHA256) -> SigningKey:
    """Load the PEM private key at ``path``, or generate one there (mode 0600)."""
    if path.exists():
        return SigningKey.from_pem(path.read_bytes())
    key = SigningKey.generate(alg)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key.to_pem())
    return key


def _block_size(text: str) -> int:
    value = positive_int(text)
    if not MIN_BLOCK_SIZE <= value <= MAX_BLOCK_SIZE:
        raise argparse.ArgumentTypeError(
            f"expected {MIN_BLOCK_SIZE} to {MAX_BLOCK_SIZE} bytes, got {text!r}")
    return value


def _origin(text: str) -> str:
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
        raise argparse.ArgumentTypeError(f"expected an origin http(s)://HOST[:PORT], got {text!r}")
    try:
        parts.port  # noqa: B018 -- urlsplit checks the port only when asked
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad port in origin {text!r}") from None
    return text


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m sine.sign`` argument parser."""
    p = argparse.ArgumentParser(
        prog=program_name("sine.sign"),
        description="Sign every document under DOCROOT with SINE tags (SINEX forward "
        "authenticators for HTML pages); re-signs only what changed.",
    )
    p.add_argument("docroot", type=Path, help="document root to sign")
    p.add_argument("--key", type=Path, required=True,
                   help="PEM private key (created if missing; keep it outside DOCROOT)")
    p.add_argument("--alg", choices=sorted(_SIG_NAMES), default="rsa-pss",
                   help="signature scheme for a newly created key (default rsa-pss, 2048 bit)")
    p.add_argument("--hash", choices=sorted(_HASH_NAMES), default="sha256")
    p.add_argument("--block-size", type=_block_size, default=1024,
                   help=f"bytes per block, {MIN_BLOCK_SIZE} to {MAX_BLOCK_SIZE} (default 1024)")
    p.add_argument("--lifetime", type=positive_int, default=86400,
                   help="seconds until E (default 86400)")
    p.add_argument("--no-sinex", action="store_true", help="no forward authenticators")
    p.add_argument("--origin", type=_origin, action="append", default=[],
                   help="absolute origin (http://host:port) whose links count as same-site")
    return p


def _key(path: Path, alg: SigAlg) -> SigningKey:
    """The key at ``path`` (refusing anything but a PEM private key), or a new one there."""
    if path.exists():
        return load_pem_arg("--key", path, "private key", SigningKey.from_pem)
    try:
        return load_or_create_key(path, alg)
    except OSError as exc:
        raise UsageError(f"--key {path}: cannot create: {describe_os_error(exc)}") from None


def _run(args: argparse.Namespace) -> int:
    if not args.docroot.is_dir():
        raise UsageError(f"{args.docroot} is not a directory")
    key = _key(args.key, _SIG_NAMES[args.alg])
    report = sign_site(
        args.docroot, key, time.time(), lifetime=args.lifetime, block_size=args.block_size,
        hash_alg=_HASH_NAMES[args.hash], sinex=not args.no_sinex,
        site_origins=tuple(args.origin),
    )
    for path, action in sorted(report.actions.items()):
        print(f"{action:22} {path}")
    print(f"{len(report.signed())} signed, {len(report.actions) - len(report.signed())} unchanged")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point; bad input is one line on stderr and exit status 2, never a traceback."""
    return run_main(build_parser(), _run, argv)


if __name__ == "__main__":
    sys.exit(main())
