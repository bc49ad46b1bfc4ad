"""Rebuilding on the buddy: the server bytes a client may lack, byte-identical to the owner's.

The mirror holds no response bytes, only what makes them (:class:`~sslacc_sim.aio.linux.mirror.
MirrorState`): the raw handshake flights, and for each body segment the response it came from,
its offset and length in the plaintext and the TLS write sequence of its first record. With the
mirrored record keys, sealing that plaintext again from that sequence number gives exactly the
records the owner wrote (:mod:`tls12` seals deterministically: the explicit IVs come from k').
:func:`rebuild` is what a takeover sends again (:mod:`~sslacc_sim.aio.linux.takeover`).

A takeover needs a span of bytes, not whole segments: from the client's last acknowledgement to
the last byte heard on the LAN. Only the records that span touches are sealed again. A segment's
records are cut as :meth:`~tls12.connection.Connection.send_data` cuts them, each
:data:`~tls12.record.MAX_PLAINTEXT` bytes of plaintext but the last, and every full record has
the same size on the wire; sealing the last one alone gives that size.
"""

from __future__ import annotations

import json

from tls12 import ServerConfig, ServerConnection
from tls12.record import MAX_PLAINTEXT
from tls12.state import Progress

from .docroot import Docroot, Stream
from .mirror import MirrorState, Segment

__all__ = ["rebuild"]


def rebuild(state: MirrorState, streams: Docroot | Stream | None, config: ServerConfig | None,
            lo: int | None = None, hi: int | None = None) -> tuple[int, bytes]:  # fmt: skip
    """``(position, bytes)``: the server bytes from the first segment the client may lack up to
    ``state.snd_pos``, byte-identical to what the primary wrote (or was about to write).

    ``streams``: where the body segments' plaintext comes from: a :class:`Docroot` (each
    segment names its response, which a keep-alive connection may have had several of) or one
    :class:`Stream` for every segment. ``lo``/``hi``: only the bytes ``[lo, hi)`` of that span
    (clamped to it), rebuilding only the segments they touch: a takeover rebuilds what the
    client may be acknowledging before it claims the address, the rest after."""
    segments = state.unacked()
    start = segments[0].pos if segments else state.snd_pos
    lo = start if lo is None else max(lo, start)
    hi = state.snd_pos if hi is None else min(hi, state.snd_pos)
    touched = [seg for seg in segments if seg.end > lo and seg.pos < hi]
    opened: dict[str, Stream] = {}

    def stream_of(seg: Segment) -> Stream | None:
        if not isinstance(streams, Docroot):
            return streams
        if seg.stream is None:
            raise ValueError("a body segment that names no response")
        if seg.stream not in opened:
            opened[seg.stream] = streams.open(json.loads(seg.stream))
        return opened[seg.stream]

    return lo, b"".join(
        _segment_bytes(seg, state, stream_of(seg) if seg.raw is None else None, config,
                       max(lo, seg.pos) - seg.pos, min(hi, seg.end) - seg.pos)
        for seg in touched)  # fmt: skip


def _segment_bytes(seg: Segment, state: MirrorState, stream: Stream | None,
                   config: ServerConfig | None, a: int, b: int) -> bytes:  # fmt: skip
    """Bytes ``[a, b)`` of the segment ``seg`` (offsets into it), its records sealed again."""
    if seg.raw is not None:
        return seg.raw[a:b]
    if stream is None:
        raise ValueError("a body segment without a response stream")
    if seg.write_seq is None:
        if seg.length != seg.plain_len:
            raise ValueError(f"a {seg.length}-byte plain segment of {seg.plain_len} bytes")
        return stream.read(seg.offset + a, b - a)
    if config is None or state.tls_keys is None:
        raise ValueError("a TLS segment without mirrored keys")
    count = max(1, -(-seg.plain_len // MAX_PLAINTEXT))  # records (an empty body: one, empty)
    keys, write_seq, server = state.tls_keys, seg.write_seq, config

    def seal(first: int, last: int) -> bytes:
        """Records ``first`` to ``last - 1`` of the segment, sealed as the owner sealed them."""
        conn = ServerConnection.import_state(server, keys)
        conn.import_progress(Progress(0, write_seq + first))
        start = first * MAX_PLAINTEXT
        conn.send_data(stream.read(seg.offset + start, min(seg.plain_len, last * MAX_PLAINTEXT) - start))
        return conn.data_to_send()

    if count == 1 or (a == 0 and b == seg.length):
        data = seal(0, count)
        if len(data) != seg.length:
            raise ValueError(f"rebuilt {len(data)} bytes for a {seg.length}-byte segment")
        return data[a:b]
    tail = seal(count - 1, count)
    full, rest = divmod(seg.length - len(tail), count - 1)  # the wire size of a full record
    if rest or full <= 0 or len(tail) > full:
        raise ValueError(f"a {seg.length}-byte segment is not {count} records of this suite")
    first, last = min(a // full, count - 1), min(-(-b // full), count)
    body = seal(first, min(last, count - 1)) if first < count - 1 else b""  # the full ones
    data = body + (tail if last == count else b"")
    return data[a - first * full : b - first * full]
