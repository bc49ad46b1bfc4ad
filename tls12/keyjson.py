"""One direction's record keys as a JSON document (what state export writes).

:func:`keys_to_json` / :func:`keys_from_json` turn a :class:`tls12.record.DirectionKeys` into
hex strings and back; :meth:`tls12.connection.Connection.export_machinery` (seam 3) uses them for
the read and write epochs and the pending keys.  The suite number names the algorithms, so the
document holds the four key strings and nothing else.  Re-exported by :mod:`tls12.connection`.
"""

from __future__ import annotations

from typing import Any

from .record import DirectionKeys
from .suites import SUITES, CipherSuite

__all__ = ["keys_to_json", "keys_from_json"]


def keys_to_json(keys: DirectionKeys | None) -> dict[str, Any] | None:
    """One direction's keys as hex strings (the suite names the algorithms)."""
    if keys is None:
        return None
    return {
        "suite": int(keys.params.suite),
        "enc_key": keys.enc_key.hex(),
        "mac_key": keys.mac_key.hex(),
        "iv": keys.iv.hex(),
        "iv_key": keys.iv_key.hex(),
    }


def keys_from_json(data: dict[str, Any] | None) -> DirectionKeys | None:
    if data is None:
        return None
    params = SUITES[CipherSuite(data["suite"])]
    return DirectionKeys(
        params,
        bytes.fromhex(data["enc_key"]),
        bytes.fromhex(data["mac_key"]),
        bytes.fromhex(data["iv"]),
        bytes.fromhex(data.get("iv_key", "")),  # absent in documents of earlier versions
    )
