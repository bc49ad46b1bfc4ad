"""Rebuilding on the buddy: the server bytes a client may lack, byte-identical to the owner's.

The mirror holds no response bytes, only what makes them (:class:`~sslacc_sim.aio.linux.mirror.
MirrorState`): the raw handshake flights, and for each body segment the response it came from,
its offset and length in the plaintext and the TLS write sequence of its first record. With the
mirrored record keys, sealing that plaintext again from that sequence number gives exactly the
records the owner wrote (:mod:`tls12` seals deterministically: the explicit IVs come from k').
:func:`rebuild` is what a takeover sends again (:mod:`~sslacc_sim.aio.linux.takeover`).
"""

from __future__ import annotations

import json

from tls12 import ServerConfig, ServerConnection
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

    data = b"".join(_segment_bytes(seg, state, stream_of(seg) if seg.raw is None else None,
                                   config) for seg in touched)  # fmt: skip
    if touched:
        data = data[lo - touched[0].pos : hi - touched[0].pos]
    return lo, data


def _segment_bytes(seg: Segment, state: MirrorState, stream: Stream | None,
                   config: ServerConfig | None) -> bytes:  # fmt: skip
    if seg.raw is not None:
        return seg.raw
    if stream is None:
        raise ValueError("a body segment without a response stream")
    plain = stream.read(seg.offset, seg.plain_len)
    if seg.write_seq is None:
        data = plain
    else:
        if config is None or state.tls_keys is None:
            raise ValueError("a TLS segment without mirrored keys")
        conn = ServerConnection.import_state(config, state.tls_keys)
        conn.import_progress(Progress(0, seg.write_seq))
        conn.send_data(plain)
        data = conn.data_to_send()
    if len(data) != seg.length:
        raise ValueError(f"rebuilt {len(data)} bytes for a {seg.length}-byte segment")
    return data
