"""Pure-Python reference twin of the ``sine._chaincrypto`` C extension.

Same interface, same results, same errors as the C ``verify_run``; used when the extension is
not built, when ``SINE_PURE_PYTHON=1``, and by the tests as the reference the C code is
compared against.  SHA-2 comes from :mod:`hashlib` and the comparison from
:func:`hmac.compare_digest`.  See :mod:`sine.chaincrypto` for the interface.

Like the C code, each record is copied before it is hashed, and the copy is what is checked
and returned.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from typing import Any

__all__ = ["verify_run", "verify_run_joined", "MIN_BLOCK_SIZE", "MAX_BLOCK_SIZE", "GIL_RELEASE_BYTES"]

MIN_BLOCK_SIZE = 16
MAX_BLOCK_SIZE = 1 << 20
GIL_RELEASE_BYTES = 64 * 1024  # the C code's threshold; meaningless here, kept for parity

_HASHES: dict[str, tuple[Callable[..., Any], int]] = {
    "sha256": (hashlib.sha256, 32),
    "sha384": (hashlib.sha384, 48),
    "sha512": (hashlib.sha512, 64),
}


def _count(what: str, value: object) -> int:
    if not isinstance(value, int):
        raise TypeError(f"{what} must be an int")
    if value < 0:
        raise ValueError(f"{what} must not be negative")
    return value


def _bytes_view(value: object) -> memoryview:
    """A flat byte view of any C-contiguous buffer (TypeError / BufferError like the C code)."""
    try:
        view = memoryview(value)  # type: ignore[arg-type]  # checked here, as in C
    except TypeError:
        raise TypeError(f"a bytes-like object is required, not {type(value).__name__!r}") from None
    if not view.c_contiguous:
        view.release()
        raise BufferError("memoryview: underlying buffer is not C-contiguous")
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


def verify_run(
    hash_name: str,
    block_size: int,
    trusted: bytes,
    data: bytes | bytearray | memoryview,
    max_records: int,
    links: bytes | bytearray | memoryview | None = None,
    /,
) -> tuple[list[bytes], bytes, bool]:
    """Check up to ``max_records`` whole records of ``data``; see :mod:`sine.chaincrypto`."""
    if not isinstance(hash_name, str):
        raise TypeError("hash_name must be a str")
    if hash_name not in _HASHES:
        raise ValueError(f"unsupported hash {hash_name!r}")
    new, hlen = _HASHES[hash_name]
    bs = _count("block_size", block_size)
    if not MIN_BLOCK_SIZE <= bs <= MAX_BLOCK_SIZE:
        raise ValueError(f"block_size must be in {MIN_BLOCK_SIZE}..{MAX_BLOCK_SIZE}")
    if not isinstance(trusted, bytes):
        raise TypeError("trusted must be bytes")
    if len(trusted) != hlen:
        raise ValueError(f"trusted must be {hlen} bytes for {hash_name}")
    limit = _count("max_records", max_records)
    blocks: list[bytes] = []
    with _bytes_view(data) as view:
        if links is None:
            size = bs + hlen
            count = min(limit, len(view) // size)
            for i in range(count):
                record = bytes(view[i * size : (i + 1) * size])
                if not hmac.compare_digest(new(record).digest(), trusted):
                    return blocks, trusted, True
                blocks.append(record[:bs])
                trusted = record[bs:]
            return blocks, trusted, False
        with _bytes_view(links) as link_view:
            count = min(limit, len(view) // bs, len(link_view) // hlen)
            for i in range(count):
                block = bytes(view[i * bs : (i + 1) * bs])
                link = bytes(link_view[i * hlen : (i + 1) * hlen])
                h = new(block)
                h.update(link)
                if not hmac.compare_digest(h.digest(), trusted):
                    return blocks, trusted, True
                blocks.append(block)
                trusted = link
            return blocks, trusted, False


def verify_run_joined(
    hash_name: str,
    block_size: int,
    trusted: bytes,
    data: bytes | bytearray | memoryview,
    max_records: int,
    links: bytes | bytearray | memoryview | None = None,
    /,
) -> tuple[bytes, bytes, bool]:
    """:func:`verify_run` with the verified blocks joined into one bytes object."""
    blocks, trusted, mismatch = verify_run(hash_name, block_size, trusted, data, max_records,
                                           links)
    return b"".join(blocks), trusted, mismatch
