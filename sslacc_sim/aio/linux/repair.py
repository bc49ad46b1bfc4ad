"""Linux ``TCP_REPAIR``: read a live TCP connection's state on one host, rebuild it on another.

A TCP connection is, to its peer, a handful of numbers: the next sequence number each side
expects, the options agreed in the SYN exchange (MSS, window scaling, SACK, timestamps) and the
windows. Linux lets a process with ``CAP_NET_ADMIN`` read and write those numbers directly
("repair mode", added for checkpoint/restore in userspace, CRIU):

* on a socket in repair mode, ``TCP_REPAIR_QUEUE`` selects the send or the receive queue and
  ``TCP_QUEUE_SEQ`` reads or sets that queue's sequence number (``write_seq`` / ``rcv_nxt``);
  ``TCP_REPAIR_WINDOW`` reads or sets the windows; ``TCP_INFO`` tells the options;
* ``connect()`` in repair mode sends no SYN: the socket goes straight to ESTABLISHED with the
  sequence numbers set above; ``TCP_REPAIR_OPTIONS`` then installs the MSS, window scales and
  SACK permission the original SYN exchange negotiated;
* ``send()`` in repair mode with the send queue selected puts bytes into the queue *as if
  already transmitted*: they count as sent but unacknowledged and go out again when the
  retransmission timer fires. The backup rebuilds them (here: re-seals them with the mirrored
  TLS state) and the peer treats any it already had as duplicates;
* leaving repair mode with ``0`` sends a window probe (the peer answers with its current ACK and
  window), with ``-1`` it sends nothing.

:func:`snapshot` reads a fresh connection (the primary does it once, right after ``accept``:
from then on it counts the bytes it writes and reads, so it knows both sequence numbers
without asking the kernel again); :func:`restore` builds the connection on the backup.
The order follows what the kernel requires (CRIU's ``soccr/soccr.c`` does the same): queue
sequence numbers before ``connect``, options after it, queue contents, then windows.

A restored socket has no RTT sample, so its first retransmission waits Linux's initial RTO
(1 s). :func:`answered` reads the answer to the window probe (how much of the queue the peer
lacks) and :func:`rebase` restores the socket once more at exactly the peer's ACK, so that the
missing bytes can be written as new data and leave at once.

TCP timestamps are not restored: the testbed turns them off in the server namespaces
(``net.ipv4.tcp_timestamps=0``); a connection that negotiated them is refused with
:class:`RepairError` rather than restored with a clock the peer would reject (PAWS).

Python has no names for these options; the numbers are from ``linux/tcp.h`` and ``linux/in.h``.
"""

from __future__ import annotations

import fcntl
import socket
import struct
from dataclasses import asdict, dataclass, replace
from typing import Any

from ...errors import SslaccError

__all__ = [
    "TCP_REPAIR",
    "TCP_REPAIR_QUEUE",
    "TCP_QUEUE_SEQ",
    "TCP_REPAIR_OPTIONS",
    "TCP_REPAIR_WINDOW",
    "TCP_RECV_QUEUE",
    "TCP_SEND_QUEUE",
    "RepairError",
    "TcpSnapshot",
    "snapshot",
    "restore",
    "leave_repair",
    "answered",
    "rebase",
    "old_byte_probe",
    "send_ack",
    "replay_packet",
    "append_received",
    "received_up_to",
    "unread",
    "seq_add",
]

TCP_REPAIR = 19
TCP_REPAIR_QUEUE = 20
TCP_QUEUE_SEQ = 21
TCP_REPAIR_OPTIONS = 22
TCP_REPAIR_WINDOW = 29
TCP_RECV_QUEUE = 1
TCP_SEND_QUEUE = 2
_REPAIR_ON, _REPAIR_OFF, _REPAIR_OFF_NO_PROBE = 1, 0, -1
_FIONREAD = 0x541B
_SIOCOUTQ = 0x5411
_TCP_INFO_SEGS_IN = 140  # offset of tcpi_segs_in in struct tcp_info
_IP_FREEBIND = 15
_IP_TRANSPARENT = 19
_SO_SNDBUFFORCE = 32
_TCPOPT_MAXSEG, _TCPOPT_WINDOW, _TCPOPT_SACK_PERM = 2, 3, 4
_TCPI_OPT_TIMESTAMPS, _TCPI_OPT_SACK, _TCPI_OPT_WSCALE = 1, 2, 4
_WINDOW = struct.Struct("=5I")  # struct tcp_repair_window
_REPAIR_OPT = struct.Struct("=2I")  # struct tcp_repair_opt


class RepairError(SslaccError, OSError):
    """The kernel refused a repair step (the message names the step), or the connection uses
    an option this module does not restore."""


@dataclass(frozen=True)
class TcpSnapshot:
    """What a backup needs to rebuild one TCP connection (all sequence numbers are 32-bit).

    ``snd_nxt`` and ``rcv_nxt`` are the sequence numbers at the moment of the snapshot; a
    primary that tracks the bytes it moved adds them (:func:`seq_add`) before a restore.
    """

    local: tuple[str, int]
    remote: tuple[str, int]
    snd_nxt: int
    rcv_nxt: int
    mss: int
    snd_wscale: int
    rcv_wscale: int
    sack: bool
    snd_wnd: int
    max_window: int
    rcv_wnd: int

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values (tuples become lists)."""
        return asdict(self)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> TcpSnapshot:
        """Inverse of :meth:`to_json`."""
        return cls(**{**doc, "local": tuple(doc["local"]), "remote": tuple(doc["remote"])})


def seq_add(seq: int, n: int) -> int:
    """``seq + n`` in TCP's 32-bit sequence space."""
    return (seq + n) & 0xFFFFFFFF


def _set(sock: socket.socket, option: int, value: int, step: str) -> None:
    try:
        # 32-bit sequence numbers above 2^31 do not fit setsockopt's C int: pass the bytes
        sock.setsockopt(socket.IPPROTO_TCP, option, struct.pack("=i" if value < 0 else "=I", value))
    except OSError as exc:
        raise RepairError(exc.errno, f"{step}: {exc.strerror}") from None


def _queue_seq(sock: socket.socket, queue: int) -> int:
    _set(sock, TCP_REPAIR_QUEUE, queue, "select repair queue")
    seq: int = struct.unpack("=I", sock.getsockopt(socket.IPPROTO_TCP, TCP_QUEUE_SEQ, 4))[0]
    return seq


def snapshot(sock: socket.socket) -> TcpSnapshot:
    """Read the state of the connected ``sock`` (briefly in repair mode, left without a probe).

    Take it before the application writes or reads a byte: ``snd_nxt`` is then the sequence
    number of the first byte it will write, ``rcv_nxt`` of the first it will read.
    """
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    options, wscales = info[5], info[6]
    snd_mss = struct.unpack_from("=I", info, 16)[0]
    if options & _TCPI_OPT_TIMESTAMPS:
        raise RepairError(0, "the connection uses TCP timestamps; turn net.ipv4.tcp_timestamps off")
    _set(sock, TCP_REPAIR, _REPAIR_ON, "enter repair mode")
    try:
        snd_nxt = _queue_seq(sock, TCP_SEND_QUEUE)
        # rcv_nxt counts bytes the kernel has but the application has not read yet (a
        # request that arrived before accept returned): the snapshot starts at the first
        # unread byte, so that the primary's own count of bytes read applies on top of it.
        # A segment arriving between the two reads would shift the start by its length (a
        # ClientHello arrives just as accept returns): read until rcv_nxt held still.
        while True:
            before = _queue_seq(sock, TCP_RECV_QUEUE)
            waiting = unread(sock)
            if _queue_seq(sock, TCP_RECV_QUEUE) == before:
                break
        rcv_nxt = seq_add(before, -waiting)
        window = sock.getsockopt(socket.IPPROTO_TCP, TCP_REPAIR_WINDOW, _WINDOW.size)
        _, snd_wnd, max_window, rcv_wnd, _ = _WINDOW.unpack(window)
    finally:
        _set(sock, TCP_REPAIR, _REPAIR_OFF_NO_PROBE, "leave repair mode")
    scaled = bool(options & _TCPI_OPT_WSCALE)
    return TcpSnapshot(
        local=sock.getsockname()[:2],
        remote=sock.getpeername()[:2],
        snd_nxt=snd_nxt,
        rcv_nxt=rcv_nxt,
        mss=snd_mss,
        snd_wscale=wscales & 0x0F if scaled else 0,
        rcv_wscale=wscales >> 4 if scaled else 0,
        sack=bool(options & _TCPI_OPT_SACK),
        snd_wnd=snd_wnd,
        max_window=max_window,
        rcv_wnd=rcv_wnd,
    )


def restore(
    snap: TcpSnapshot, unacked: bytes, *, snd_una: int | None = None, sndbuf: int = 1 << 23,
    unread: bytes = b"",
) -> socket.socket:
    """A socket in repair mode continuing the connection ``snap`` describes.

    ``unread`` are client bytes from ``snap.rcv_nxt`` on that the application has not read:
    they go into the receive queue (``rcv_nxt`` ends after them), as if just received.

    ``unacked`` are the bytes from ``snd_una`` (default: ``snap.snd_nxt - len(unacked)``) up to
    ``snap.snd_nxt``: the kernel holds them as sent and retransmits them on its timer. The
    local address need not be configured yet (``IP_FREEBIND`` and ``IP_TRANSPARENT``): restore first, then take the
    address, so that no packet of the peer meets a host without the socket (it would answer
    with a reset). Call :func:`leave_repair` to let the connection run.
    """
    if snd_una is None:
        snd_una = seq_add(snap.snd_nxt, -len(unacked))
    if seq_add(snd_una, len(unacked)) != snap.snd_nxt:
        raise ValueError("unacked must span exactly snd_una .. snd_nxt")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_SNDBUFFORCE, sndbuf)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_IP, _IP_FREEBIND, 1)
        # FREEBIND lets bind() take an address this host does not have yet; connect()'s route
        # lookup also refuses such a source unless the socket is transparent
        sock.setsockopt(socket.IPPROTO_IP, _IP_TRANSPARENT, 1)
        _set(sock, TCP_REPAIR, _REPAIR_ON, "enter repair mode")
        sock.bind(snap.local)
        _set(sock, TCP_REPAIR_QUEUE, TCP_RECV_QUEUE, "select the receive queue")
        _set(sock, TCP_QUEUE_SEQ, snap.rcv_nxt, "set rcv_nxt")
        _set(sock, TCP_REPAIR_QUEUE, TCP_SEND_QUEUE, "select the send queue")
        _set(sock, TCP_QUEUE_SEQ, snd_una, "set the send sequence")
        try:
            sock.connect(snap.remote)
        except OSError as exc:
            raise RepairError(exc.errno, f"connect in repair mode: {exc.strerror}") from None
        _set_options(sock, snap)
        if unread:
            _set(sock, TCP_REPAIR_QUEUE, TCP_RECV_QUEUE, "select the receive queue")
            _fill(sock, unread)
            _set(sock, TCP_REPAIR_QUEUE, TCP_SEND_QUEUE, "select the send queue")
        view = memoryview(unacked)
        while view:  # TCP_SEND_QUEUE is selected: these bytes count as sent
            sent = sock.send(view[: 1 << 16])
            view = view[sent:]
        rcv_end = seq_add(snap.rcv_nxt, len(unread))
        window = _WINDOW.pack(rcv_end, snap.snd_wnd, snap.max_window, snap.rcv_wnd,
                              rcv_end)  # fmt: skip
        try:
            sock.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR_WINDOW, window)
        except OSError as exc:
            raise RepairError(exc.errno, f"set the windows: {exc.strerror}") from None
    except BaseException:
        sock.close()
        raise
    return sock


def _set_options(sock: socket.socket, snap: TcpSnapshot) -> None:
    """Install the options the SYN exchange negotiated (after ``connect`` in repair mode)."""
    opts = [(_TCPOPT_MAXSEG, snap.mss)]
    if snap.snd_wscale or snap.rcv_wscale:
        opts.append((_TCPOPT_WINDOW, snap.snd_wscale | snap.rcv_wscale << 16))
    if snap.sack:
        opts.append((_TCPOPT_SACK_PERM, 0))
    blob = b"".join(_REPAIR_OPT.pack(*o) for o in opts)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR_OPTIONS, blob)
    except OSError as exc:
        raise RepairError(exc.errno, f"set TCP options: {exc.strerror}") from None


def _fill(sock: socket.socket, data: bytes) -> None:
    """Put ``data`` into the selected repair queue."""
    view = memoryview(data)
    while view:
        try:
            sent = sock.send(view[: 1 << 16])
        except OSError as exc:
            raise RepairError(exc.errno, f"fill a repair queue: {exc.strerror}") from None
        view = view[sent:]


def append_received(sock: socket.socket, data: bytes) -> None:
    """Add ``data`` to the receive queue of ``sock`` (in repair mode) as if it had just been
    received after ``rcv_nxt``, which moves past it; the windows follow."""
    if not data:
        return
    _set(sock, TCP_REPAIR_QUEUE, TCP_RECV_QUEUE, "select the receive queue")
    _fill(sock, data)
    rcv_nxt = _queue_seq(sock, TCP_RECV_QUEUE)
    _set(sock, TCP_REPAIR_QUEUE, TCP_SEND_QUEUE, "select the send queue")
    _, snd_wnd, max_window, rcv_wnd, _ = _WINDOW.unpack(
        sock.getsockopt(socket.IPPROTO_TCP, TCP_REPAIR_WINDOW, _WINDOW.size))
    try:
        sock.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR_WINDOW,
                        _WINDOW.pack(rcv_nxt, snd_wnd, max_window, rcv_wnd, rcv_nxt))  # fmt: skip
    except OSError as exc:
        raise RepairError(exc.errno, f"set the windows: {exc.strerror}") from None


def received_up_to(sock: socket.socket) -> int:
    """``rcv_nxt`` of ``sock`` (in repair mode)."""
    seq = _queue_seq(sock, TCP_RECV_QUEUE)
    _set(sock, TCP_REPAIR_QUEUE, TCP_SEND_QUEUE, "select the send queue")
    return seq


def leave_repair(sock: socket.socket, *, probe: bool = True) -> None:
    """Let the restored ``sock`` run; with ``probe`` the kernel sends a window probe at once,
    whose answer tells it how much of the queue the peer already has."""
    _set(sock, TCP_REPAIR, _REPAIR_OFF if probe else _REPAIR_OFF_NO_PROBE, "leave repair mode")


def unread(sock: socket.socket) -> int:
    """Bytes received on ``sock`` that the application has not read yet (``FIONREAD``)."""
    return int(struct.unpack("i", fcntl.ioctl(sock.fileno(), _FIONREAD, b"\0" * 4))[0])


def answered(sock: socket.socket) -> int | None:
    """Whether the peer of a just restored socket has sent a segment yet (the answer to the
    window probe): ``None`` if not, else how many queued bytes it left unacknowledged."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_SEGS_IN + 4)
    if not struct.unpack_from("=I", info, _TCP_INFO_SEGS_IN)[0]:
        return None
    unacked: int = struct.unpack("i", fcntl.ioctl(sock.fileno(), _SIOCOUTQ, b"\0" * 4))[0]
    return unacked


def old_byte_probe(local: tuple[str, int], remote: tuple[str, int], seq: int) -> None:
    """Make the peer acknowledge at once: send it one byte at ``seq``, which it must already
    hold, ending before the last acknowledgement it sent (``seq + 1`` before it: a byte
    ending just at it counts as in the window, and the segment's ACK field, 0, gets it
    dropped).

    A window probe (what leaving repair mode sends) carries no data, so the peer answers it
    at most once per ``net.ipv4.tcp_invalid_ratelimit`` (500 ms): a slow reader that answered
    the dead owner's zero-window probes stays silent. A segment with data below the window is
    never rate-limited: Linux answers with a duplicate ACK every time (its ``tcp_send_dupack``
    path; data segments are exempt from the ACK-loop limit), and drops the byte unread, so its
    value does not matter. Sent from a raw socket (``IPPROTO_RAW``: header written here,
    nothing received), from ``local``, which must be an address of this host."""
    _send_segment(local, remote, seq, 0, 0, b"\0")


def send_ack(local: tuple[str, int], remote: tuple[str, int], seq: int, ack: int,
             window: int) -> None:
    """Send the peer a bare ACK it accepts: ``seq`` is where the peer's receive side stands
    (its last acknowledgement), ``ack`` this host's ``rcv_nxt``, ``window`` the unscaled
    field.

    A restored socket leaving repair mode sends a window probe, whose sequence number is one
    below the peer's acknowledgement on purpose (so that it is answered): the peer drops it
    as old *before it reads its acknowledgement*. Client bytes put into the receive queue
    on takeover are then acknowledged only by the next segment the kernel sends, and an
    uploading client, with nothing else to come, waits for its retransmission timer (200 ms
    or more) first. This segment is in the window: the peer processes its ACK at once."""
    if not 0 <= window <= 0xFFFF:
        raise ValueError(f"window field must be 0..65535, got {window}")
    _send_segment(local, remote, seq, ack, window, b"")


def _send_segment(local: tuple[str, int], remote: tuple[str, int], seq: int, ack: int,
                  window: int, payload: bytes) -> None:  # fmt: skip
    """One TCP segment with the ACK flag (Linux drops one without it) from a raw socket."""
    src, dst = socket.inet_aton(local[0]), socket.inet_aton(remote[0])
    tcp = struct.pack(">HHIIBBHHH", local[1], remote[1], seq & 0xFFFFFFFF, ack & 0xFFFFFFFF,
                      5 << 4, 0x10, window, 0, 0)  # fmt: skip
    pseudo = src + dst + struct.pack(">BBH", 0, socket.IPPROTO_TCP, len(tcp) + len(payload))
    tcp = tcp[:16] + struct.pack(">H", _checksum(pseudo + tcp + payload)) + tcp[18:]
    total = 20 + len(tcp) + len(payload)
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, total, 0, 0x4000, 64, socket.IPPROTO_TCP, 0,
                     src, dst)  # fmt: skip  (the kernel fills in the header checksum)
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW) as raw:
        raw.sendto(ip + tcp + payload, (remote[0], 0))


def replay_packet(packet: bytes) -> None:
    """Hand the IPv4 ``packet`` (header included, as heard on the wire) to this host's own
    stack, as if it had just arrived: sent from a raw socket to its destination, which must
    be an address of this host, it loops back through ``lo`` and is received with its
    original source. The kernel fills in the IP header checksum; the TCP checksum is computed
    again here: a frame heard on a veth carries only the partial sum the sender's kernel left
    for offload (``CHECKSUM_PARTIAL``), which the receiving stack counts as an error
    (``TcpInCsumErrors``) and drops."""
    ihl = (packet[0] & 0x0F) * 4 if packet else 0
    if len(packet) < 40 or packet[0] >> 4 != 4 or ihl < 20 or packet[9] != socket.IPPROTO_TCP \
            or len(packet) < ihl + 20:
        raise ValueError("not an IPv4 TCP packet")
    tcp = bytearray(packet[ihl:])
    tcp[16:18] = b"\0\0"
    pseudo = packet[12:20] + struct.pack(">BBH", 0, socket.IPPROTO_TCP, len(tcp))
    tcp[16:18] = struct.pack(">H", _checksum(pseudo + bytes(tcp)))
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW) as raw:
        raw.sendto(packet[:ihl] + bytes(tcp), (socket.inet_ntoa(packet[16:20]), 0))


def _checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071) of ``data``."""
    if len(data) % 2:
        data += b"\0"
    words: tuple[int, ...] = struct.unpack(f">{len(data) // 2}H", data)
    total = sum(words)
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def rebase(sock: socket.socket, snap: TcpSnapshot, *, unread: bytes = b"") -> socket.socket:
    """Replace the restored ``sock`` by a fresh one at ``snap`` with an empty queue.

    Closing a socket in repair mode sends nothing (no FIN, no reset), so the peer sees one
    connection throughout. Used once the peer's ACK is known: ``snap.snd_nxt`` is that ACK,
    and what follows it can be written as new data, to be sent at once. The windows are the
    ones ``sock`` holds now (the peer's answer updated them), not ``snap``'s. ``unread``:
    client bytes from ``snap.rcv_nxt`` on, read out of ``sock`` by the caller, for the new
    socket's receive queue. A segment of the peer that arrives between the close and the
    restore meets no socket: hold resets meanwhile (:class:`~sslacc_sim.aio.linux.claim.ResetHold`).
    """
    _set(sock, TCP_REPAIR, _REPAIR_ON, "enter repair mode")
    window = sock.getsockopt(socket.IPPROTO_TCP, TCP_REPAIR_WINDOW, _WINDOW.size)
    _, snd_wnd, max_window, rcv_wnd, _ = _WINDOW.unpack(window)
    snap = replace(snap, snd_wnd=snd_wnd, max_window=max_window, rcv_wnd=rcv_wnd)
    sock.close()
    fresh = restore(snap, b"", unread=unread)
    leave_repair(fresh, probe=False)
    if snd_wnd == 0:
        # A closed window: the update that opens it may have come while no socket was there
        # (dropped: claim.ResetHold); left alone, the persist timer would ask for it (a second
        # or more). Ask now, with a byte the client holds: a window probe would go unanswered
        # if the client answered one within 500 ms, as it did the old socket's zero-window
        # probes (old_byte_probe). The answer counts as a window update: its sequence number
        # is the snd_wl1 restore set.
        try:
            old_byte_probe(snap.local, snap.remote, seq_add(snap.snd_nxt, -2))
        except OSError:
            pass  # the persist timer asks instead
    return fresh
