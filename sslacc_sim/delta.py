"""Handshake-update deltas: an exported ``tls12`` state as the change from the previous one.

During the handshake every cluster update carries the whole exported state
(:func:`tls12.state.export_connection`, ~4 KB), most of it the raw handshake transcript and the
queued output, and from one checkpoint to the next most of it does not change: the transcript
only grows (the messages read since are appended), a few fields are new (the master secret,
the pending keys, the state).  A mirror that holds the previous checkpoint therefore needs only

* the document's leaves that changed, were added or were removed, and
* for a string that grew at its end (the transcript), only the appended part.

:func:`make_delta` computes that between two exported documents; :func:`apply_delta`
rebuilds the new document from the old one and the delta, **byte for byte**.  Both documents
are JSON objects (``export_connection`` writes ``json.dumps(doc, sort_keys=True)``), so the
delta works on the parsed objects and the rebuilt document is serialised the way the owner's
was; the first document's serialisation is checked once (else :class:`DeltaError`, and the
owner sends whole states).  A cluster keeps one :class:`DeltaWriter` per (connection,
mirror) at the owner and one :class:`DeltaReader` at the mirror: each holds its last
document parsed, so an update costs one parse at the owner and, at the mirror, the
operations plus one serialisation.  The delta carries the first eight
bytes of the SHA-256 of the document it applies to and of the document it makes, so a mirror
holding another base, or a delta damaged on the way, fails with :class:`DeltaError` instead of
importing a wrong state.  The cluster MAC already authenticates the message; the digests
check the *pairing* of delta and base, not the sender.

Wire form: one compact JSON object ``{"v": 1, "base": hex, "digest": hex, "style": i,
"ops": [...]}``; an operation is ``["s", path, value]`` (set a leaf), ``["d", path]`` (delete
it) or ``["a", path, suffix]`` (append ``suffix`` to the string at ``path``); a path is the
list of keys from the top.  Lists are leaves (set whole).

Sizes (one RSA handshake of the model, measured by ``tests/sslacc_sim/test_delta.py`` and
:func:`sslacc_sim.experiments.cluster_bytes`): the ClientKeyExchange, ChangeCipherSpec and
Finished updates shrink from ~3.8-4.2 KB each to a few hundred bytes to ~1 KB; the first
update (the "pre-ServerHello" state after the ClientHello) has no base and stays whole.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .errors import SslaccError

__all__ = ["DeltaError", "DeltaReader", "DeltaWriter", "apply_delta", "make_delta"]

_VERSION = 1
#: The serialisations a document may use: ``export_connection``'s and the compact one of
#: ``export_keys``; a delta names which one rebuilds its document.
_STYLES: tuple[tuple[str, str], ...] = ((", ", ": "), (",", ":"))


class DeltaError(SslaccError, ValueError):
    """A delta cannot be made (the document is not a JSON object this codec reproduces) or
    does not apply (another base, a damaged delta, a result that differs from the owner's)."""


def _digest(doc: bytes) -> str:
    return hashlib.sha256(doc).digest()[:8].hex()


def _load(doc: bytes, what: str) -> dict[str, Any]:
    try:
        value = json.loads(doc)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DeltaError(f"the {what} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise DeltaError(f"the {what} is not a JSON object")
    return value


def _dump(value: dict[str, Any], style: int) -> bytes:
    return json.dumps(value, sort_keys=True, separators=_STYLES[style]).encode()


def _diff(old: dict[str, Any], new: dict[str, Any], path: list[str],
          ops: list[list[Any]]) -> None:
    for key in sorted(old.keys() - new.keys()):
        ops.append(["d", [*path, key]])
    for key in sorted(new):
        here, value = [*path, key], new[key]
        if key not in old:
            ops.append(["s", here, value])
            continue
        before = old[key]
        if isinstance(before, dict) and isinstance(value, dict):
            _diff(before, value, here, ops)
        elif isinstance(before, str) and isinstance(value, str) and value != before \
                and value.startswith(before):
            ops.append(["a", here, value[len(before):]])
        elif type(before) is not type(value) or before != value:
            ops.append(["s", here, value])


class DeltaWriter:
    """The owner's side for one mirror: the last document sent to it, kept parsed, so that a
    delta costs one parse (of the new document) instead of two.

    ``first`` is the document sent whole; it is parsed when the first delta is made (a
    connection whose handshake ends before costs nothing), and its serialisation (one of the
    two ``tls12`` writes) found then, once, by re-serialising it; later documents are assumed
    to be written the same way, and the mirror's rebuild checks it (the new document's
    digest).
    """

    def __init__(self, first: bytes) -> None:
        self._first: bytes | None = first
        self._doc: dict[str, Any] = {}
        self._style = 0
        self._digest = ""

    def _parse_first(self, first: bytes) -> None:
        self._doc = _load(first, "base document")
        for style in range(len(_STYLES)):
            if _dump(self._doc, style) == first:
                break
        else:
            raise DeltaError("the document is not in a serialisation the delta can rebuild")
        self._style, self._digest, self._first = style, _digest(first), None

    def delta(self, new: bytes) -> bytes:
        """The delta from the last document to ``new``, which becomes the last document."""
        if self._first is not None:
            self._parse_first(self._first)
        after = _load(new, "new document")
        ops: list[list[Any]] = []
        _diff(self._doc, after, [], ops)
        digest = _digest(new)
        out = {"v": _VERSION, "base": self._digest, "digest": digest, "style": self._style,
               "ops": ops}
        self._doc, self._digest = after, digest
        return json.dumps(out, sort_keys=True, separators=(",", ":")).encode()


class DeltaReader:
    """The mirror's side: the document it holds, kept parsed (from the first delta on), and
    deltas applied to it."""

    def __init__(self, first: bytes) -> None:
        self._first: bytes | None = first
        self._doc: dict[str, Any] = {}
        self._digest = ""

    def apply(self, delta: bytes) -> bytes:
        """Apply ``delta`` and return the new document, byte-identical to the owner's, or
        :class:`DeltaError` (another base, an unknown version, a damaged delta); on an
        error the held document is unusable (take a whole one again)."""
        if self._first is not None:
            self._doc, self._digest = _load(self._first, "base document"), _digest(self._first)
            self._first = None
        d = _load(delta, "delta")
        if d.get("v") != _VERSION:
            raise DeltaError(f"unsupported delta version {d.get('v')!r}")
        if d.get("base") != self._digest:
            raise DeltaError("the delta was made against another base document")
        style = d.get("style")
        # an int (``1.0 in range(2)`` holds too, and a bool is an int): anything else is damage
        if (not isinstance(style, int) or isinstance(style, bool)
                or style not in range(len(_STYLES)) or not isinstance(d.get("ops"), list)):
            raise DeltaError("malformed delta")
        for op in d["ops"]:
            _apply_op(self._doc, op)
        out = _dump(self._doc, style)
        if _digest(out) != d.get("digest"):
            raise DeltaError("the rebuilt document differs from the owner's")
        self._digest = d["digest"]
        return out


def make_delta(old: bytes, new: bytes) -> bytes:
    """The delta that turns document ``old`` into ``new`` (module docstring; stateless
    :class:`DeltaWriter`).  :class:`DeltaError` if either is not a JSON object or ``old`` is
    not in a serialisation this codec reproduces byte for byte."""
    return DeltaWriter(old).delta(new)


def apply_delta(old: bytes, delta: bytes) -> bytes:
    """The document ``delta`` makes of ``old`` (stateless :class:`DeltaReader`)."""
    return DeltaReader(old).apply(delta)


def _parent(doc: dict[str, Any], path: Any) -> tuple[dict[str, Any], str]:
    if not isinstance(path, list) or not path or not all(isinstance(k, str) for k in path):
        raise DeltaError(f"bad path in delta: {path!r}")
    node = doc
    for key in path[:-1]:
        node = node.get(key)                          # type: ignore[assignment]  # may be anything; checked on the next line
        if not isinstance(node, dict):
            raise DeltaError(f"path {path!r} does not lead to an object in the base")
    return node, path[-1]


def _apply_op(doc: dict[str, Any], op: Any) -> None:
    if not isinstance(op, list) or not op:
        raise DeltaError(f"malformed delta operation {op!r}")
    kind = op[0]
    if kind == "s" and len(op) == 3:
        node, key = _parent(doc, op[1])
        node[key] = op[2]
    elif kind == "d" and len(op) == 2:
        node, key = _parent(doc, op[1])
        if key not in node:
            raise DeltaError(f"delta deletes {op[1]!r}, which the base does not have")
        del node[key]
    elif kind == "a" and len(op) == 3 and isinstance(op[2], str):
        node, key = _parent(doc, op[1])
        if not isinstance(node.get(key), str):
            raise DeltaError(f"delta appends to {op[1]!r}, which is not a string")
        node[key] += op[2]
    else:
        raise DeltaError(f"malformed delta operation {op!r}")
