"""The cluster link between the two nodes: framed updates, acknowledgements, the backup's copy.

Cluster-then-commit (SSLACC §4): the primary sends an update describing the bytes it is about
to write to the client, *waits for the backup's acknowledgement*, and only then writes them.
Whatever the client can have seen, the backup can therefore produce again. Every update says:

* ``rcv_pos``: client bytes the primary has consumed (counted from the first byte after the
  SYN), ``snd_pos``: server bytes written once this update's segment is out, ``una_pos``: the
  first server byte the client has not acknowledged yet (from ``SIOCOUTQ``, a lower bound:
  the client may have acknowledged more by the time the primary dies);
* ``app``: where the HTTP exchange is (phase, response offset, a next request's bytes already
  read, an upload's running count and CRC: :mod:`~sslacc_sim.aio.linux.service`);
* ``seg``: the segment about to be written, as bytes (``raw``: handshake flights, alerts) or,
  for the response body, as a *recipe*: stream offset, plaintext length and TLS write sequence
  number. Re-sealing is deterministic (CBC IVs derive from the keys and the sequence number,
  :mod:`tls12.record`), so the recipe and the file give the very bytes the primary wrote;
* TLS state: the whole connection (:meth:`tls12.ServerConnection.export_state`) after each
  step that read from the client, the keys once (:meth:`~tls12.ServerConnection.export_keys`)
  and an 18-byte :class:`tls12.state.Progress` per body segment.

:class:`MirrorState` is the backup's copy: pure bookkeeping, no I/O. Frames are
``>II`` (header length, blob length), a JSON header, then the blob (the header names the
lengths of the parts inside it). The first frame is ``tcp`` (the
:class:`~sslacc_sim.aio.linux.repair.TcpSnapshot` taken right after ``accept``); ``done`` ends a
connection that needs no takeover.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass, field
from typing import Any

from tls12.buffer import Buffer, Writer
from tls12.session import Session

from ...errors import SslaccError
from ...sessionwire import decode_session, encode_session
from .repair import TcpSnapshot

__all__ = [
    "ACK", "DEAD", "MOVED", "RELEASE", "JOIN_FRAMES", "MirrorError", "Segment", "MirrorState",
    "frame_bytes", "send_frame", "recv_frame",
    "split_blob", "join_blob", "read_session", "dead_frame", "read_dead_frame",
]

#: A frame starts with two 4-byte lengths: the JSON header's and the blob's.
_LENGTHS = 8
_MAX_FRAME = 1 << 24
#: The backup's one-byte acknowledgement of an update.
ACK = b"\x06"
_BLOB_PARTS = ("raw", "full", "keys", "progress", "session", "unread")


class MirrorError(SslaccError, RuntimeError):
    """A malformed or out-of-order frame on the cluster link."""


def frame_bytes(header: dict[str, Any], blob: bytes = b"") -> bytes:
    """One frame's bytes: the two lengths, ``header`` as JSON and ``blob``."""
    head = json.dumps(header, separators=(",", ":")).encode()
    out = Writer()
    out.push_uint(len(head), 4)
    out.push_uint(len(blob), 4)
    out.push_bytes(head)
    out.push_bytes(blob)
    return out.getvalue()


def send_frame(sock: socket.socket, header: dict[str, Any], blob: bytes = b"") -> None:
    """One frame: ``header`` as JSON and ``blob``."""
    sock.sendall(frame_bytes(header, blob))


#: The type of a member's notice that it judged another member dead (the bucket layout).
DEAD = "dead"
#: The last frame on a connection's old link when its owner hands it to a new mirror while the
#: old one lives (a join re-formed the ring): the old mirror forgets it, no death.
MOVED = "moved"
#: The last frame on an owner's old keepalive link when it mirrors elsewhere from now on (a
#: join re-formed the ring): the old mirror retires its watch of it, no death.
RELEASE = "release"
#: The frames of a join (:mod:`~sslacc_sim.aio.linux.join`), which one member sends another's
#: cluster listener and which are answered by a frame, not an acknowledgement.
JOIN_FRAMES = frozenset({"join", "give", "ungive", "joined"})
#: Largest member id a ``dead`` frame may name.
_MAX_MEMBER = 1 << 16


def dead_frame(member: int) -> dict[str, Any]:
    """The header of a ``dead`` frame: ``member`` died (no blob)."""
    return {"type": DEAD, "member": member}


def read_dead_frame(header: dict[str, Any]) -> int:
    """The member a ``dead`` frame names; anything else is a :class:`MirrorError`."""
    member = header.get("member")
    if header.get("type") != DEAD or type(member) is not int or not 0 <= member < _MAX_MEMBER:
        raise MirrorError(f"not a dead frame naming a member: {header!r}"[:200])
    return member


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            if buf:
                raise MirrorError(f"cluster link closed inside a frame ({len(buf)}/{n} bytes)")
            return None
        buf += chunk
    return bytes(buf)


def recv_frame(sock: socket.socket) -> tuple[dict[str, Any], bytes] | None:
    """The next frame, or ``None`` when the peer closed the link between frames."""
    lengths = _recv_exact(sock, _LENGTHS)
    if lengths is None:
        return None
    prefix = Buffer(lengths)
    head_len, blob_len = prefix.pull_uint(4), prefix.pull_uint(4)
    if head_len + blob_len > _MAX_FRAME:
        raise MirrorError(f"frame of {head_len + blob_len} bytes is too large")
    body = _recv_exact(sock, head_len + blob_len)
    if body is None:
        raise MirrorError("cluster link closed inside a frame")
    frame = Buffer(body)
    try:
        header = json.loads(frame.pull_bytes(head_len))
    except ValueError as exc:
        raise MirrorError(f"frame header is not JSON: {exc}") from None
    if not isinstance(header, dict) or "type" not in header:
        raise MirrorError("frame header has no type")
    return header, frame.pull_rest()


def split_blob(header: dict[str, Any], blob: bytes) -> dict[str, bytes]:
    """The named parts of an update's blob (lengths in ``header["parts"]``, in
    :data:`_BLOB_PARTS` order)."""
    lengths = header.get("parts", {})
    sizes = [int(lengths.get(name, 0)) for name in _BLOB_PARTS]
    if min(sizes) < 0 or sum(sizes) != len(blob):
        raise MirrorError(f"blob of {len(blob)} bytes, parts add up to {sum(sizes)}")
    buf = Buffer(blob)
    return {name: buf.pull_bytes(n) for name, n in zip(_BLOB_PARTS, sizes, strict=True)}


def join_blob(parts: dict[str, bytes]) -> tuple[dict[str, int], bytes]:
    """Inverse of :func:`split_blob`: the lengths for the header and the blob."""
    unknown = set(parts) - set(_BLOB_PARTS)
    if unknown:
        raise ValueError(f"unknown blob parts {sorted(unknown)}")
    lengths = {name: len(parts[name]) for name in _BLOB_PARTS if parts.get(name)}
    return lengths, b"".join(parts[name] for name in _BLOB_PARTS if parts.get(name))


def read_session(data: bytes) -> Session:
    """A mirrored session (:func:`sslacc_sim.sessions.decode_session`'s wire form), every
    failure a :class:`MirrorError`."""
    try:
        session = decode_session(data)
        valid = (isinstance(session.cipher_suite, int) and isinstance(session.extended_master_secret, bool)
                 and (session.server_name is None or isinstance(session.server_name, str))
                 and 0 < len(session.session_id) <= 32 and len(session.master_secret) == 48)  # fmt: skip
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise MirrorError(f"malformed session: {exc!r}"[:200]) from None
    if not valid:
        raise MirrorError("malformed session: a field out of range")
    return session


@dataclass(frozen=True)
class Segment:
    """Server bytes ``[pos, pos + length)`` of the connection, as written by the primary.

    Either ``raw`` holds them, or they are the records sealing ``plain_len`` bytes of the
    response stream from ``offset`` on, starting at TLS write sequence ``write_seq``
    (``None``: a plain-TCP run, the bytes are the stream itself); ``stream`` names that
    response (JSON of ``path``, ``close`` and ``upload``: a keep-alive connection has several).
    """

    pos: int
    length: int
    raw: bytes | None = None
    offset: int = 0
    plain_len: int = 0
    write_seq: int | None = None
    stream: str | None = None

    @property
    def end(self) -> int:
        return self.pos + self.length


@dataclass
class MirrorState:
    """Everything the backup knows about the one connection it mirrors."""

    tcp: TcpSnapshot | None = None
    rcv_pos: int = 0
    snd_pos: int = 0
    una_pos: int = 0
    app: dict[str, Any] = field(default_factory=dict)
    segments: list[Segment] = field(default_factory=list)
    tls_full: bytes | None = None
    tls_keys: bytes | None = None
    progress: bytes | None = None
    session: Session | None = None
    """The session the connection's handshake made (or resumed), once an update carried it."""
    new_session: bool = False
    """The last frame applied carried :attr:`session` (the buddy stores it then)."""
    updates: int = 0
    done: bool = False
    unread: bytes = b""
    """What an ``adopt`` frame carried of the client's bytes after :attr:`rcv_pos`: those its
    sender holds unread (a restored connection's receive queue), which the buddy's LAN record
    may lack (:meth:`FlowTracker.hold <sslacc_sim.aio.linux.sniff.FlowTracker.hold>`)."""

    def adopt_frame(self, unread: bytes = b"") -> tuple[dict[str, Any], bytes]:
        """This whole state as one ``adopt`` frame: how a node that took a connection over
        hands its buddy everything at once before it writes a byte (:meth:`apply` reads it);
        ``unread``: the client's bytes after :attr:`rcv_pos` the sender holds (:attr:`unread`)."""
        if self.tcp is None:
            raise MirrorError("nothing to hand over before the tcp frame")
        raws = [s.raw or b"" for s in self.segments]
        parts = {"raw": b"".join(raws), "full": self.tls_full or b"",
                 "keys": self.tls_keys or b"", "progress": self.progress or b"",
                 "session": encode_session(self.session) if self.session else b"",
                 "unread": unread}  # fmt: skip
        lengths, blob = join_blob(parts)
        header = {"type": "adopt", "tcp": self.tcp.to_json(), "rcv_pos": self.rcv_pos,
                  "snd_pos": self.snd_pos, "una_pos": self.una_pos, "app": self.app,
                  "updates": self.updates, "parts": lengths,
                  "segments": [[s.pos, s.length, s.raw is not None, len(r), s.offset,
                                s.plain_len, s.write_seq, s.stream]
                               for s, r in zip(self.segments, raws, strict=True)]}  # fmt: skip
        return header, blob

    def _adopt(self, header: dict[str, Any], blob: bytes) -> None:
        if self.tcp is not None:
            raise MirrorError("an adopt frame for a connection already mirrored")
        parts = split_blob(header, blob)
        raw = Buffer(parts["raw"])
        segments = []
        for pos, length, is_raw, raw_len, offset, plain_len, write_seq, stream in header["segments"]:
            data = raw.pull_bytes(int(raw_len))
            segments.append(Segment(int(pos), int(length), data if is_raw else None,
                                    int(offset), int(plain_len), write_seq,
                                    None if stream is None else str(stream)))  # fmt: skip
        self.tcp = TcpSnapshot.from_json(header["tcp"])
        self.rcv_pos, self.snd_pos = int(header["rcv_pos"]), int(header["snd_pos"])
        self.una_pos, self.app = int(header["una_pos"]), dict(header["app"])
        self.updates, self.segments = int(header["updates"]), segments
        self.tls_full = parts["full"] or None
        self.tls_keys = parts["keys"] or None
        self.progress = parts["progress"] or None
        self.unread = parts["unread"]
        if parts["session"]:
            self.session, self.new_session = read_session(parts["session"]), True

    def apply(self, header: dict[str, Any], blob: bytes) -> None:
        """Take one frame from the primary (``tcp``, ``adopt``, ``update`` or ``done``); a
        frame that is not what its type says is a :class:`MirrorError` (to the buddy, a death
        of the owner), never another exception."""
        try:
            self._apply(header, blob)
        except MirrorError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise MirrorError(f"malformed {str(header.get('type'))[:20]!r} frame: {exc!r}"[:300]) from None

    def _apply(self, header: dict[str, Any], blob: bytes) -> None:
        kind = header["type"]
        self.new_session = False
        if kind == "adopt":
            self._adopt(header, blob)
            return
        if kind == "tcp":
            if self.tcp is not None:
                raise MirrorError("a second tcp frame for one connection")
            self.tcp = TcpSnapshot.from_json(header["tcp"])
            return
        if kind == "done":
            self.done = True
            return
        if kind != "update":
            raise MirrorError(f"unknown frame type {kind!r}")
        if self.tcp is None:
            raise MirrorError("an update before the tcp frame")
        parts = split_blob(header, blob)
        seg = header.get("seg")
        if seg is not None:
            if seg["pos"] != self.snd_pos:
                raise MirrorError(f"segment at {seg['pos']}, expected {self.snd_pos}")
            raw = parts["raw"] if seg.get("raw") else None
            named = seg.get("stream")
            stream = None if named is None else json.dumps(named, sort_keys=True)
            self.segments.append(Segment(seg["pos"], seg["length"], raw, seg.get("offset", 0),
                                         seg.get("plain_len", 0), seg.get("write_seq"), stream))
        self.snd_pos = int(header["snd_pos"])
        self.rcv_pos = int(header["rcv_pos"])
        self.una_pos = max(self.una_pos, int(header["una_pos"]))
        self.app = dict(header["app"])
        if parts["keys"]:
            self.tls_keys = parts["keys"]
        if parts["full"]:
            self.tls_full, self.progress = parts["full"], None
        if parts["progress"]:
            self.progress = parts["progress"]
        if parts["session"]:
            self.session, self.new_session = read_session(parts["session"]), True
        # segments the client has acknowledged are never needed again
        self.segments = [s for s in self.segments if s.end > self.una_pos]
        self.updates += 1

    def unacked(self) -> list[Segment]:
        """The segments from the first one the client may lack up to ``snd_pos`` (contiguous)."""
        for a, b in zip(self.segments, self.segments[1:], strict=False):
            if a.end != b.pos:
                raise MirrorError(f"gap in the mirrored segments at {a.end}")
        return list(self.segments)
