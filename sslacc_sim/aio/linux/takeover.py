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
* a connection the client reset, or whose SYN was never answered, is left alone (the client's
  next SYN reaches the new owner's listener).

The server bytes the client may lack go into the send queue as already sent: from the client's
last acknowledgement heard on the LAN (or, without it, from the first mirrored segment not
known to be acknowledged) to the mirrored end. :func:`resume` then asks the client with a window
probe where it stands and restores once more at its answer
(:func:`~sslacc_sim.aio.linux.repair.rebase`), the missing bytes written as new data, so that a
restored socket, which has no RTT sample, need not wait for its 1 s retransmission timer.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, replace

from tls12 import ServerConfig

from . import repair
from .mirror import MirrorState
from .service import Docroot, rebuild
from .sniff import Flow

__all__ = ["Restored", "restore_flow", "resume", "gratuitous_arp", "snapshot_from_flow"]

_PROBE_WAIT_S = 0.2  # how long a restored socket waits for the answer to its window probe
_REPROBES = 4  # probes sent again when no answer came (0.8 s more at most)
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
    resend: bytes = b""
    """After a rebase: the bytes the client lacks, to write as new data."""
    lacked: int | None = None
    """Server bytes the client had not acknowledged (from the LAN record; ``None``: unknown)."""


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
    stream = docroot.stream(state.app["path"]) if "path" in state.app else None
    start, unacked = rebuild(state, stream, config)
    snap = state.tcp
    rcv_first = repair.seq_add(snap.rcv_nxt, state.rcv_pos)
    unread = b""
    use_flow = flow is not None and (sniff_data or from_sniff)
    if use_flow:
        assert flow is not None
        rel = (rcv_first - flow.rcv_base) & _MASK
        if rel > len(flow.data):
            raise ValueError(f"the LAN record ends at {len(flow.data)}, the owner consumed {rel}")
        unread = bytes(flow.data[rel:])
    heard = _acked_position(flow, snap, start, state.snd_pos) if use_flow else None
    lacked = None if heard is None else state.snd_pos - heard
    # The socket stands at the mirrored end (``snd_pos``), never at the acknowledgement heard:
    # the client may have received more than it had acknowledged when the link went down, and
    # its later ACK would then acknowledge data the restored socket never sent, which the
    # kernel drops; the connection would stall. Bytes before the acknowledgement heard are
    # certainly in the client: they are not queued again.
    first = heard if heard is not None and at_ack else start
    at = replace(snap, snd_nxt=repair.seq_add(snap.snd_nxt, state.snd_pos), rcv_nxt=rcv_first)
    if use_flow and flow is not None and flow.acked is not None:
        # the client's window as last heard, not as it was at accept: a slow reader's window
        # may be nearly closed, and a socket that believes it wide open sends into the void
        # and waits for its retransmission timer (a smaller window with the same ACK is not
        # taken as an update by the kernel)
        window = flow.client_window << snap.snd_wscale
        at = replace(at, snd_wnd=window, max_window=max(snap.max_window, window))
    queued = unacked[first - start :]
    sock = repair.restore(at, queued, unread=unread)
    return Restored(tuple(snap.remote), sock, state, at, from_sniff, queued=queued,  # type: ignore[arg-type]
                    queued_start=first, unread=len(unread), lacked=lacked)  # fmt: skip


def _acked_position(flow: Flow | None, snap: repair.TcpSnapshot, start: int, end: int
                    ) -> int | None:  # fmt: skip
    """The client's last acknowledgement heard, as a position of the server's stream, when it
    lies within the mirrored ``[start, end]``; else ``None``."""
    if flow is None or flow.acked is None:
        return None if end else 0
    pos = (flow.acked - snap.snd_nxt) & _MASK
    return pos if start <= pos <= end else None


def resume(r: Restored, resume_at_ack: bool = True) -> tuple[socket.socket, str]:
    """Ready a restored, already running socket to send what the client lacks; return the
    socket to serve on (a new one when it was rebased at the client's acknowledgement: the
    caller then writes ``r.resend`` first, which may block on a slow reader) and what was
    done: ``rebased``, ``nothing-queued``, ``off``, ``no-answer`` (the probe's answer did not
    come within 0.2 s), ``client-has-all``."""
    if not r.queued:
        return r.sock, "nothing-queued"
    if not resume_at_ack:
        return r.sock, "off"
    missing = repair.await_ack(r.sock, _PROBE_WAIT_S)
    for _ in range(_REPROBES):
        if missing is not None:
            break
        # Linux answers a probe (an old sequence number) at most once per 500 ms per
        # connection (net.ipv4.tcp_invalid_ratelimit): a slow reader that has just answered
        # the dead owner's zero-window probes stays silent. Probe again.
        repair.probe_again(r.sock)
        missing = repair.await_ack(r.sock, _PROBE_WAIT_S)
    if missing is None:
        return r.sock, "no-answer"
    if not missing:
        return r.sock, "client-has-all"
    # The client lacks the last ``missing`` bytes. Left alone they would go out when the
    # retransmission timer fires (1 s: a restored socket has no RTT sample). Instead, restore
    # again exactly at the client's ACK, with those bytes as new data: sent at once.
    # Client bytes waiting in the receive queue move to the new socket with it.
    pending = r.sock.recv(repair.unread(r.sock)) if repair.unread(r.sock) else b""
    at_ack = replace(r.snap, snd_nxt=repair.seq_add(r.snap.snd_nxt, -missing))
    sock = repair.rebase(r.sock, at_ack, unread=pending)
    r.resend = r.queued[-missing:]
    return sock, "rebased"


def gratuitous_arp(dev: str, address: str, count: int = 3) -> None:
    """Broadcast ``count`` ARP requests for ``address`` from ``dev``'s MAC (sender = target =
    ``address``): neighbours move their entry for it to this host at once."""
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0806)) as s:
        s.bind((dev, 0))
        mac = s.getsockname()[4]
        ip = socket.inet_aton(address)
        arp = struct.pack(">HHBBH", 1, 0x0800, 6, 4, 1) + mac + ip + b"\0" * 6 + ip
        frame = b"\xff" * 6 + mac + b"\x08\x06" + arp
        for _ in range(count):
            s.send(frame)
