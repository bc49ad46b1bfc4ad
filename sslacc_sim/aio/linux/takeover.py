"""Rebuilding one connection on the buddy: from the mirrored state, from what the LAN carried.

:func:`restore_flow` turns what the buddy knows of one connection into a socket in repair mode:

* a **mirrored** connection (a :class:`~sslacc_sim.aio.linux.mirror.MirrorState`): the server
  bytes the client may lack are rebuilt from the state and the file
  (:func:`~sslacc_sim.aio.linux.service.rebuild`); the client bytes the owner had received but
  not consumed come from the LAN record (:class:`~sslacc_sim.aio.linux.sniff.Flow`) and go back
  into the receive queue;
* a connection the owner's kernel **established but its server never mirrored** (the SYN and
  SYN-ACK were heard, no ``tcp`` frame arrived): a fresh connection at the first byte after the
  SYN exchange, the client's bytes (its ClientHello, say) in the receive queue;
* a connection the client reset is left alone;
* a connection whose SYN was heard but no SYN-ACK (the owner died before answering, or its
  answer never left): :func:`replay_syns` hands the client's SYN, as heard, to the new owner's
  own stack once the address is claimed, and its listener answers at once. Left alone, the
  client would send the SYN again only when its timer fires (1 s, RFC 6298's initial RTO).

The server bytes the client may lack go into the send queue as already sent: from the client's
last acknowledgement heard on the LAN (or, without it, from the first mirrored segment not
known to be acknowledged) to the last server byte heard on the LAN plus
:data:`RESTORE_MARGIN` (or, without it, to the mirrored end). The mirrored bytes after that
were never sent: rebuilding them (sealing TLS records again) before the claim would hold every
connection up, so :func:`tail` rebuilds them once the connection runs, as new data. :func:`resume_all` then asks the client with a window
probe where it stands and restores once more at its answer
(:func:`~sslacc_sim.aio.linux.repair.rebase`), the missing bytes written as new data, so that a
restored socket, which has no RTT sample, need not wait for its 1 s retransmission timer.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from tls12 import ServerConfig, ServerConnection

from . import repair
from .claim import ResetHold
from .docroot import Docroot
from .mirror import MirrorState
from .rebuild import rebuild
from .service import Service
from .sniff import Flow

__all__ = ["Restored", "restore_flow", "resume_all", "acknowledge", "replay_syns", "tail", "snapshot_from_flow",
           "RESTORE_MARGIN", "send_now", "serve_quietly"]

_REPROBE_S = 0.005  # no answer to a probe within this: probe again (old_byte_probe)
_ANSWER_WITHIN_S = 1.0  # no answer at all within this: leave it to the retransmission timer
RESTORE_MARGIN = 1 << 16
"""Bytes past the last server byte heard that are restored as sent all the same, in case the
sniffer missed the last frame (one segmentation-offload frame carries up to 64 KiB; the
client may acknowledge what it got)."""
#: Bytes of the never-sent tail rebuilt at a time (:func:`tail`).
TAIL_PIECE = 1 << 18
_MASK = 0xFFFFFFFF


@dataclass
class Restored:
    """A connection restored in repair mode, not yet running.

    ``queued``/``queued_start``: the bytes put into the send queue as already sent (the
    client may lack them) and the position of the first.
    """

    key: tuple[str, int]
    sock: socket.socket
    state: MirrorState
    snap: repair.TcpSnapshot
    from_sniff: bool
    queued: bytes = b""
    queued_start: int = 0
    unread: int = 0
    received: bytes = b""
    """The client bytes put into the receive queue (``unread`` of them): an ``adopt`` frame
    hands them to the next buddy, whose LAN record may not hold them."""
    resend: bytes = b""
    """After a rebase: the bytes the client lacks, to write as new data."""
    lacked: int | None = None
    """Server bytes the client had not acknowledged (from the LAN record; ``None``: unknown)."""
    tail_from: int = 0
    """Where the send queue ends: the mirrored bytes from here on are written after the
    claim (:func:`tail`)."""


def snapshot_from_flow(flow: Flow, vip: str, port: int) -> repair.TcpSnapshot:
    """The :class:`~sslacc_sim.aio.linux.repair.TcpSnapshot` the owner would have taken at
    ``accept``, from the SYN exchange heard on the LAN."""
    if flow.server_isn is None:
        raise ValueError("no SYN-ACK heard for this connection")
    scaled = flow.client_wscale is not None and flow.server_wscale is not None
    snd_wscale = flow.client_wscale if scaled else 0
    rcv_wscale = flow.server_wscale if scaled else 0
    return repair.TcpSnapshot(
        local=(vip, port), remote=flow.client,
        snd_nxt=(flow.server_isn + 1) & _MASK, rcv_nxt=flow.rcv_base,
        mss=flow.client_mss, snd_wscale=snd_wscale or 0, rcv_wscale=rcv_wscale or 0,
        sack=flow.client_sack and flow.server_sack,
        snd_wnd=flow.client_window << (snd_wscale or 0),
        max_window=flow.client_window << (snd_wscale or 0),
        rcv_wnd=max(flow.server_window << (rcv_wscale or 0), 65535),
    )  # fmt: skip


def restore_flow(state: MirrorState | None, flow: Flow | None, docroot: Docroot,
                 config: ServerConfig | None, vip: str, port: int, *, sniff_data: bool = True,
                 sniff_unaccepted: bool = True, at_ack: bool = True) -> Restored | None:  # fmt: skip
    """One connection in repair mode (module docstring), or ``None`` when there is nothing to
    restore. ``at_ack=False``: never at the client's acknowledgement (everything the client
    may lack goes into the send queue, for the kernel's retransmission timer). Raises ``ValueError``/:class:`~sslacc_sim.aio.linux.repair.RepairError` when the
    connection cannot be restored (the caller reports it and goes on with the others)."""
    if flow is not None and flow.reset:
        return None
    from_sniff = state is None or state.tcp is None
    if from_sniff:
        if flow is None or not flow.established or not sniff_unaccepted:
            return None
        if flow.fin and flow.server_fin:
            return None  # both sides closed: an earlier owner finished it, nothing to restore
        state = MirrorState(tcp=snapshot_from_flow(flow, vip, port))
    assert state is not None and state.tcp is not None
    if state.done:
        return None
    segments = state.unacked()
    start = segments[0].pos if segments else state.snd_pos  # the first byte the client may lack
    snap = state.tcp
    rcv_first = repair.seq_add(snap.rcv_nxt, state.rcv_pos)
    unread = b""
    use_flow = flow is not None and (sniff_data or from_sniff)
    if use_flow:
        assert flow is not None
        unread = flow.data_from((rcv_first - flow.rcv_base) & _MASK)
    heard = _acked_position(flow, snap, start, state.snd_pos) if use_flow else None
    lacked = None if heard is None else state.snd_pos - heard
    # The socket stands at the mirrored end (``snd_pos``), never at the acknowledgement heard:
    # the client may have received more than it had acknowledged when the link went down, and
    # its later ACK would then acknowledge data the restored socket never sent, which the
    # kernel drops; the connection would stall. Bytes before the acknowledgement heard are
    # certainly in the client: they are not queued again.
    first = heard if heard is not None and at_ack else start
    # Only what the client may be acknowledging is rebuilt before the address is claimed:
    # up to the last server byte heard on the LAN and a margin for frames the sniffer missed.
    # Bytes beyond were never sent (the client cannot acknowledge them); they are rebuilt
    # and written as new data after the claim (:func:`tail`).
    wire = _sent_position(flow, snap, first, state.snd_pos) if use_flow and at_ack else None
    cut = state.snd_pos if wire is None else min(state.snd_pos, wire + RESTORE_MARGIN)
    _, queued = rebuild(state, docroot, config, first, cut)
    at = replace(snap, snd_nxt=repair.seq_add(snap.snd_nxt, cut), rcv_nxt=rcv_first)
    if use_flow and flow is not None and flow.acked is not None:
        # the client's window as last heard, not as it was at accept: a slow reader's window
        # may be nearly closed, and a socket that believes it wide open sends into the void
        # and waits for its retransmission timer (a smaller window with the same ACK is not
        # taken as an update by the kernel)
        window = flow.client_window << snap.snd_wscale
        at = replace(at, snd_wnd=window, max_window=max(snap.max_window, window))
    sock = repair.restore(at, queued, unread=unread)
    return Restored(tuple(snap.remote), sock, state, at, from_sniff, queued=queued,  # type: ignore[arg-type]  # tuple() of the (host, port) pair loses its item types
                    queued_start=first, unread=len(unread), received=unread, lacked=lacked,
                    tail_from=cut)  # fmt: skip


def _sent_position(flow: Flow | None, snap: repair.TcpSnapshot, first: int, end: int
                   ) -> int | None:  # fmt: skip
    """The position after the last server byte heard on the LAN, at least ``first``; ``None``
    when none was heard or it lies beyond the mirrored ``end`` (never: the owner mirrors
    before it sends)."""
    if flow is None or flow.sent_end is None:
        return None
    pos = (flow.sent_end - snap.snd_nxt) & _MASK
    return max(pos, first) if pos <= end else None


def tail(r: Restored, docroot: Docroot, config: ServerConfig | None,
         sent: int | None = None) -> Iterator[bytes]:  # fmt: skip
    """The server bytes after the restored socket's send queue up to the mirrored end: never
    sent by the old owner, written as new data once the connection runs. In pieces of
    :data:`TAIL_PIECE` bytes, each rebuilt as it is wanted: a client waiting for the tail gets
    its first bytes before the rest (a megabyte or two) is sealed again. ``sent``: the bytes
    of :attr:`Restored.resend` out already; the rest of it comes first."""
    if sent is not None:
        yield r.resend[sent:]
    state = r.state
    for lo in range(r.tail_from, state.snd_pos, TAIL_PIECE):
        yield rebuild(state, docroot, config, lo, min(lo + TAIL_PIECE, state.snd_pos))[1]


def _acked_position(flow: Flow | None, snap: repair.TcpSnapshot, start: int, end: int
                    ) -> int | None:  # fmt: skip
    """The client's last acknowledgement heard, as a position of the server's stream, when it
    lies within the mirrored ``[start, end]``; else ``None``."""
    if flow is None or flow.acked is None:
        return None if end else 0
    pos = (flow.acked - snap.snd_nxt) & _MASK
    return pos if start <= pos <= end else None


def replay_syns(flows: dict[tuple[str, int], Flow], skip: set[tuple[str, int]]) -> int:
    """Replay the SYN of every connection heard that nobody answered (no SYN-ACK, no reset,
    not among ``skip``, the restored ones) into this host's stack; returns how many.

    Call it after the address is claimed: the listener then answers each with a SYN-ACK of its
    own, and the client, still in ``SYN-SENT``, takes it. A SYN whose SYN-ACK the owner sent
    but the sniffer missed would meet a client already established on the owner's sequence
    numbers: its ACK would not fit the new SYN-ACK and the listener would reset it. The
    sniffer's record is complete up to the claim (it is drained first), so that takes a frame
    lost on the LAN itself."""
    replayed = 0
    for key, flow in flows.items():
        if key in skip or flow.established or flow.reset or not flow.syn or flow.end:
            continue
        try:
            repair.replay_packet(flow.syn)
        except (OSError, ValueError):
            continue  # the client's own timer will send the SYN again
        replayed += 1
    return replayed


def resume_all(restored: list[Restored], on_resumed: Callable[[Restored, socket.socket, str], None],
               resume_at_ack: bool = True, hold: ResetHold | None = None) -> None:  # fmt: skip
    """Ready every restored, already running socket to send what its client lacks, all at
    once: one loop reads the answers to the window probes their leaving repair mode sent.

    ``on_resumed(r, sock, how)`` is called as each connection is ready, with the socket to
    serve on (a new one when it was rebased at the client's acknowledgement: ``r.resend``
    must then be written first) and what was done: ``rebased``, ``nothing-queued``, ``off``,
    ``client-has-all``, ``no-answer`` (no probe was answered within 1 s; the kernel's timer
    retransmits) or ``failed`` (the rebase raised: ``r.sock`` is closed, the connection lost).
    A connection waits for no other: probes go out together and are read as they come.

    ``hold``: no reset leaves for the connections that may be rebased until the last is
    (:class:`~sslacc_sim.aio.linux.claim.ResetHold`; ``None``: resets are held otherwise, as
    the bucket layout's filter does for every connection, or not at all)."""
    waiting: dict[int, tuple[Restored, float, float]] = {}
    start = time.monotonic()
    for i, r in enumerate(restored):
        if not r.queued:
            acknowledge(r, r.snap.snd_nxt)  # the client holds every server byte
            on_resumed(r, r.sock, "nothing-queued")
        elif not resume_at_ack:
            on_resumed(r, r.sock, "off")
        else:
            waiting[i] = (r, start + _ANSWER_WITHIN_S, start + _REPROBE_S)
    with (hold.held(r.key for r, _, _ in waiting.values()) if hold else contextlib.nullcontext()):
        _answers(waiting, on_resumed)


def _answers(waiting: dict[int, tuple[Restored, float, float]],
             on_resumed: Callable[[Restored, socket.socket, str], None]) -> None:  # fmt: skip
    """:func:`resume_all`'s loop: read each probe's answer, probe again, rebase."""
    while waiting:
        for i, (r, give_up, reprobe) in list(waiting.items()):
            missing = repair.answered(r.sock)
            if missing is None:
                now = time.monotonic()
                if now >= give_up:
                    del waiting[i]
                    on_resumed(r, r.sock, "no-answer")
                elif now >= reprobe:
                    # no answer to the window probe yet: it may be rate-limited (the client
                    # answered one of the dead owner's lately); a byte it holds never is
                    first = repair.seq_add(r.snap.snd_nxt, -len(r.queued))
                    repair.old_byte_probe(r.snap.local, r.snap.remote, repair.seq_add(first, -2))
                    waiting[i] = (r, give_up, now + _REPROBE_S)
                continue
            del waiting[i]
            if not missing:
                acknowledge(r, r.snap.snd_nxt)
                on_resumed(r, r.sock, "client-has-all")
                continue
            try:
                sock = _rebase(r, missing)
            except OSError:
                r.sock.close()
                on_resumed(r, r.sock, "failed")
                continue
            on_resumed(r, sock, "rebased")
        if waiting:
            time.sleep(0.0002)


def acknowledge(r: Restored, seq: int) -> None:
    """Tell the client at once which of its bytes the restored socket holds (its ``rcv_nxt``:
    the receive queue's end), in a bare ACK at ``seq``, the client's own acknowledgement
    (:func:`~sslacc_sim.aio.linux.repair.send_ack`: the window probe's ACK is ignored). A
    rebased connection needs none: the bytes it writes carry the acknowledgement."""
    rcv_nxt = repair.seq_add(r.snap.rcv_nxt, r.unread)
    window = min(r.snap.rcv_wnd >> r.snap.rcv_wscale, 0xFFFF)
    try:
        repair.send_ack(r.snap.local, r.snap.remote, seq, rcv_nxt, window)
    except OSError:
        pass  # the kernel's next segment carries the acknowledgement anyway


def _rebase(r: Restored, missing: int) -> socket.socket:
    """The client lacks the last ``missing`` queued bytes. Left alone they would go out when
    the retransmission timer fires (1 s: a restored socket has no RTT sample). Instead,
    restore again exactly at the client's ACK, with those bytes (``r.resend``) to be written
    as new data: sent at once. Client bytes waiting in the receive queue move along."""
    pending = r.sock.recv(repair.unread(r.sock)) if repair.unread(r.sock) else b""
    at_ack = replace(r.snap, snd_nxt=repair.seq_add(r.snap.snd_nxt, -missing))
    sock = repair.rebase(r.sock, at_ack, unread=pending)
    r.resend = r.queued[-missing:]
    return sock


def send_now(sock: socket.socket, data: bytes) -> int:
    """Write what ``sock`` takes of ``data`` without blocking; return how much."""
    if not data:
        return 0
    sock.setblocking(False)
    try:
        return sock.send(data)
    except BlockingIOError:
        return 0
    finally:
        sock.setblocking(True)


def serve_quietly(sock: socket.socket, docroot: Docroot, config: ServerConfig | None) -> None:
    """Serve a connection accepted after a takeover to its end, unmirrored; its error ends
    it alone."""
    try:
        Service(sock, docroot, ServerConnection(config) if config is not None else None).serve()
    except Exception as exc:  # noqa: BLE001 - one connection's error ends it alone
        print(f"ERROR new connection: {exc!r}", file=sys.stderr, flush=True)
    finally:
        sock.close()

