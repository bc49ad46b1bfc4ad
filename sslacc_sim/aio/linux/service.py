"""One connection's server side, the same on the primary and on a node that took it over.

:class:`Service` serves HTTP/1.1 from a :class:`Docroot`, inside :mod:`tls12` or over plain
TCP: ``GET /name`` answers with the file, ``POST`` (an upload, ``Content-Length`` bytes) with a
:func:`receipt` of what arrived; a connection carries requests until one says
``Connection: close`` or the client closes (keep-alive, pipelining allowed). Where the exchange
stands is the JSON-able ``app`` dictionary (phase, response offset, bytes of a next request
already read, the upload's running count and CRC), mirrored with every update, so a node that
takes the connection over goes on from exactly there. No byte is written before the buddy
acknowledged the update that describes it (cluster, then commit:
:mod:`sslacc_sim.aio.linux.mirror`); a response's body goes out pipelined, each segment written
while the next one's update is on its way (:meth:`Service._send_body_segment`), and it writes
only while the node holds its :class:`Lease` (renewed by the buddy's answers to keepalives): a
node that was stopped and wakes up finds its lease expired and fences itself before a byte
leaves. A connection is handed off as finished (the ``done`` frame) only once the kernel's send
queue is empty (``SIOCOUTQ``): until then the buddy can still be asked for the tail.

:func:`~sslacc_sim.aio.linux.rebuild.rebuild` is the buddy's side of the recipe: from the
mirrored state and the file it produces, byte for byte, the server bytes the client may still
lack.
"""

from __future__ import annotations

import fcntl
import json
import math
import socket
import struct
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

from tls12 import ServerConnection
from tls12.events import ApplicationData, ConnectionClosed

from ...errors import SslaccError
from ...sessionwire import encode_session
from .docroot import Docroot, Stream
from .mirror import ACK, MOVED, MirrorState, frame_bytes, join_blob, send_frame
from .report import say

__all__ = [
    "BATCH", "Lease", "LeaseExpired", "DiePoint", "Service", "outq", "write_leased",
]

#: Seconds a connection whose mirror link failed waits for the cluster's verdict on the mirror
#: (the member's death watch, which hears of it by the same link's end or the keepalive
#: timeout, 0.2 s) before it ends (:attr:`Service.alone`).
ALONE_WAIT_S = 1.0
#: Plaintext bytes of the response per mirrored segment (64 records of 16 KiB). Each segment
#: costs an update and its acknowledgement, a wake-up of the buddy and one of the owner. With
#: 256 KiB segments the buddy took 0.20 of a core under the cluster benchmark's load and 0.14
#: with 1 MiB; the pair's goodput went from 0.83 to 0.89 (five interleaved rounds each, with the
#: sniffer's nap; docs/sslacc-cluster.md, "Goodput"). A larger segment holds more bytes back
#: before the first one leaves (sealing 1 MiB takes about a millisecond) and holds a MiB per
#: connection sending one. A takeover seals again only the records it needs (:mod:`.rebuild`),
#: whatever the size.
BATCH = 1 << 20
_SIOCOUTQ = 0x5411
_TCP_CLOSE = 7  # tcp_info.tcpi_state
_ACK_TIMEOUT_S = 10.0  # a buddy that does not acknowledge an update for this long is dead
_WRITE_CHUNK = 1 << 16  # the lease is checked before every chunk this size
_DRAIN_POLL_S = 0.0005
_DRAIN_LIMIT_S = 60.0
_MAX_HEAD = 16 * 1024  # longest request head (bytes): a client sending more is cut off
_RESPONSE_KEYS = ("path", "close", "upload")  # what names a response (app, body segments)


class LeaseExpired(SslaccError, RuntimeError):
    """The node no longer holds its lease: its buddy may have taken the connection over."""


def outq(sock: socket.socket) -> int:
    """Bytes written on ``sock`` that the peer has not acknowledged (``SIOCOUTQ``)."""
    return int(struct.unpack("i", fcntl.ioctl(sock.fileno(), _SIOCOUTQ, b"\0" * 4))[0])


def closed(sock: socket.socket) -> bool:
    """The kernel has closed the connection (``TCP_CLOSE``: the peer reset it); a socket that is
    not TCP (a test's ``socketpair``) has no such state and is never closed here."""
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return False
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] == _TCP_CLOSE


def write_leased(sock: socket.socket, data: bytes, lease: Lease | None) -> None:
    """Write ``data``, checking before every 64 KiB that the node still holds ``lease``
    (:class:`LeaseExpired` if not; ``None``: no lease to hold)."""
    view = memoryview(data)
    while view:
        if lease is not None and not lease.valid() and not lease.wait_valid():
            raise LeaseExpired("the lease ran out before a write")
        chunk = view[:_WRITE_CHUNK]
        sock.sendall(chunk)
        view = view[len(chunk) :]


@dataclass
class Lease:
    """The right to send, renewed by the buddy's answers and valid for ``duration`` s from the
    moment the renewed keepalive was *sent* (so it ends before the buddy, which counts from
    when it last *received* one, declares the node dead). ``None`` renewals: always valid."""

    duration: float
    renewed: float = field(default_factory=time.monotonic)
    grace: float = 0.0
    """Seconds a writer waits for an expired lease to come back (renewed, or held for good
    once the node goes on alone) before :class:`LeaseExpired`; 0 in the chain layout. A
    bucket-layout member waits: its lease runs out *before* the cluster has decided whether
    its mirror died (then it goes on alone) or it was cut off itself (then it fences itself)."""

    successor: Lease | None = None
    """The lease a new mirror renews once the ring re-formed (:meth:`Primary.retarget
    <sslacc_sim.aio.linux.primary.Primary.retarget>`): a write begun under this one goes on
    under it (a 256 KiB write to a slow client outlives a lease nobody renews any more)."""

    def renew(self, sent_at: float) -> None:
        """A keepalive sent at ``sent_at`` was answered."""
        self.renewed = max(self.renewed, sent_at)

    def valid(self) -> bool:
        """The node may still send (under this lease, or the one that replaced it)."""
        return time.monotonic() - self.renewed < self.duration or (
            self.successor is not None and self.successor.valid())  # fmt: skip

    def wait_valid(self) -> bool:
        """Wait up to :attr:`grace` seconds for the lease to be valid again; whether it is."""
        deadline = time.monotonic() + self.grace
        while not self.valid():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.002)
        return True

    def forever(self) -> None:
        """Valid from now on: the node has no buddy left to renew it (its mirror was declared
        dead and it serves alone, :attr:`Service.alone`)."""
        self.renewed = math.inf


@dataclass
class DiePoint:
    """Where ``--die-at`` stops the primary (``sslacc_sim.aio.linux.node``)."""

    name: str
    after: int = 0

    def die(self, position: int, record: tuple[int, int] | None = None) -> None:
        """Say so (``DIE <point> {"pos": bytes written, "record": [start, end] of the record
        cut in half}``) and wait to be killed: the orchestrator cuts the link, then SIGKILLs."""
        say(f"DIE {self.name} " + json.dumps({"pos": position, "record": record}))
        time.sleep(3600)
        raise SystemExit(f"not killed at {self.name}")


_die_lock = threading.Lock()


@dataclass(eq=False)
class Service:
    """One connection's server side (module docstring).

    ``conn`` is ``None`` for plain TCP. ``mirror`` (this connection's cluster link) is ``None``
    on a node without a buddy. ``snd_pos`` / ``rcv_pos`` count the bytes written / consumed.
    ``lease``: when set, no byte is written without it (:class:`LeaseExpired`).
    """

    sock: socket.socket
    docroot: Docroot
    conn: ServerConnection | None
    mirror: socket.socket | None = None
    die: DiePoint | None = None
    lease: Lease | None = None
    snd_pos: int = 0
    rcv_pos: int = 0
    app: dict[str, Any] = field(default_factory=lambda: {"phase": "request", "offset": 0})
    keys_sent: bool = False
    session_sent: bool = False
    """The connection's session went out in an update (once: the buddy stores it)."""
    stream: Stream | None = None
    done_sent: bool = False
    stall: float = 0.0
    """Seconds to wait before each read (a loaded server: the client's bytes wait in the
    kernel, acknowledged and not yet consumed; the campaign's ``--stall-ms``)."""
    alone: threading.Event | None = None
    """Set once this node's mirror has been declared dead by the cluster (the bucket layout's
    member: :mod:`~sslacc_sim.aio.linux.member`). A mirror link that fails then, or within
    :data:`ALONE_WAIT_S` after, leaves the connection unmirrored instead of ending it; without
    the event (the chain layout) a failing link ends the connection, as before."""
    shadow: MirrorState | None = None
    """The mirror's view of this connection, kept here too (every frame applied before it is
    sent): what :meth:`readopt` hands a new mirror in one ``adopt`` frame."""
    _mirror_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    """Held while a frame goes to the mirror, while its answer is read, and by :meth:`readopt`."""
    _held: tuple[bytes, list[int]] | None = field(default=None, repr=False)
    """A body segment (its bytes and its records' lengths) the mirror acknowledged, not yet
    written: it goes out while the next segment's update awaits its acknowledgement (the
    pipelined commit)."""
    _ack_on: socket.socket | None = field(default=None, repr=False)
    """The mirror link an update was sent on whose acknowledgement is not yet read."""

    def __post_init__(self) -> None:
        if self.stream is None and self.app["phase"] == "response":
            self.stream = self.docroot.open(self.app)

    def serve(self) -> None:
        """Run the connection to its end."""
        while True:
            if self.app["phase"] == "response":
                assert self.stream is not None
                if self.app["offset"] < self.stream.total:
                    self._send_body_segment()
                    continue
                self._flush()
                if self.app.get("close", True):
                    self._finish()
                    return
                self._next_request()
                continue
            if self.app["phase"] == "closed":
                self._finish()
                return
            if self.stall:
                time.sleep(self.stall)
            data = self.sock.recv(1 << 16)
            if not data:
                return
            self.rcv_pos += len(data)
            self._on_data(data)

    # -- receiving --

    def _on_data(self, data: bytes) -> None:
        was_established = False
        if self.conn is None:
            plain, out, closed = data, b"", False
        else:
            was_established = self.conn.handshake_complete
            events = self.conn.receive_data(data)
            plain = b"".join(e.data for e in events if isinstance(e, ApplicationData))
            closed = any(isinstance(e, ConnectionClosed) for e in events)
            out = self.conn.data_to_send()
        self._take(plain)
        full = self.conn.export_state() if self.conn is not None else b""
        self._commit({"raw": out, "full": full}, raw=True)
        point = None
        if self.conn is not None and out:
            established = self.conn.handshake_complete
            point = ("after-server-hello-flight" if not established
                     else "after-client-key-exchange" if not was_established else None)
        dying = point is not None and self.die is not None and self.die.name == point
        if dying and point == "after-client-key-exchange":
            self._die(self.snd_pos)  # mirrored, never written
        if dying:
            # The client answers the server's flight within a millisecond; were A's kernel
            # to acknowledge the answer before the cut, the client would never resend it to
            # B. Delayed ACKs (40 ms or more) keep it unacknowledged until the link is down.
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 0)
        self._write(out)
        if dying:
            self._die(self.snd_pos)
        if closed:
            self.app = {**self.app, "phase": "closed"}

    # -- the HTTP exchange --

    def _take(self, plain: bytes) -> None:
        """Advance the exchange over the client's decrypted bytes ``plain``: request heads and
        upload bodies; the bytes of a next request wait in ``app["pending"]`` while a response
        goes out (pipelining)."""
        buf = self.app.get("pending", "").encode("latin-1") + plain
        while buf and self.app["phase"] in ("request", "upload"):
            if self.app["phase"] == "upload":
                buf = self._take_upload(buf)
                continue
            head, sep, rest = buf.partition(b"\r\n\r\n")
            if not sep:
                if len(buf) > _MAX_HEAD:
                    raise ValueError(f"a request head longer than {_MAX_HEAD} bytes")
                break
            self._start_request(head)
            buf = rest
        self.app = {**self.app, "pending": buf.decode("latin-1")}

    def _start_request(self, head: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        method, _, rest = lines[0].partition(" ")
        path, _, version = rest.partition(" ")
        if method not in ("GET", "POST") or not version.startswith("HTTP/1."):
            raise ValueError(f"only GET and POST are served, got {lines[0][:40]!r}")
        fields = {name.strip().lower(): value.strip()
                  for name, colon, value in (line.partition(":") for line in lines[1:]) if colon}
        close = fields.get("connection", "").lower() == "close" or version == "HTTP/1.0"
        if method == "GET":
            self._respond({"path": path, "close": close})
            return
        length = fields.get("content-length", "")
        if not (length.isascii() and length.isdigit()):
            raise ValueError("a POST without a valid Content-Length")
        self.app = {"phase": "upload", "path": path, "close": close, "left": int(length),
                    "got": 0, "crc": 0}  # fmt: skip
        if not int(length):
            self._take_upload(b"")

    def _take_upload(self, buf: bytes) -> bytes:
        """Count and checksum the upload's bytes in ``buf``; the rest (a next request)."""
        app = self.app
        take = min(int(app["left"]), len(buf))
        got, crc = app["got"] + take, zlib.crc32(buf[:take], app["crc"])
        self.app = {**app, "left": app["left"] - take, "got": got, "crc": crc}
        if not self.app["left"]:
            self._respond({"path": app["path"], "close": app["close"], "upload": [got, crc]})
        return buf[take:]

    def _respond(self, response: dict[str, Any]) -> None:
        self.stream = self.docroot.open(response)
        self.app = {"phase": "response", "offset": 0, **response}

    def _next_request(self) -> None:
        """The response went out and the connection stays: on to the next request, maybe
        read already."""
        self._flush()
        self.stream = None
        self.app = {"phase": "request", "offset": 0, "pending": self.app.get("pending", "")}
        self._take(b"")

    def _die(self, position: int, record: tuple[int, int] | None = None) -> None:
        assert self.die is not None
        with _die_lock:  # one connection announces the death; the others wait with it
            self.die.die(position, record)

    # -- sending --

    def _send_body_segment(self) -> None:
        """The pipelined commit: segment n+1's update goes to the mirror, segment n (whose
        update the mirror acknowledged before) is written while the mirror applies it, and only
        then is n+1's acknowledgement read; n+1 is written on the next call (or by
        :meth:`_flush`). No byte leaves before its update is acknowledged, and the connection
        no longer stands idle for the round trip of every segment."""
        held = self._next_segment()
        self._flush()
        self._await_ack()
        self._held = held

    def _flush(self) -> None:
        """Write the acknowledged segment :attr:`_held`, if any (and stop at a die point)."""
        if self._held is None:
            return
        data, lengths = self._held
        self._held = None
        die = self.die
        if die is not None and die.name == "mid-record" and self.snd_pos + len(data) > die.after:
            done = 0
            for length in lengths:
                start = self.snd_pos + done
                if start + length > die.after:
                    self._write(data[: done + length // 2])
                    self._die(self.snd_pos, (start, start + length))
                done += length
        self._write(data)
        if die is not None and die.name == "transfer" and self.snd_pos >= die.after:
            self._die(self.snd_pos)

    def _next_segment(self) -> tuple[bytes, list[int]]:
        """The response's next segment, encrypted, its update sent (not yet acknowledged); its
        bytes and its records' lengths (the records themselves are not kept: a MiB each)."""
        assert self.stream is not None
        offset = self.app["offset"]
        plain = self.stream.read(offset, min(BATCH, self.stream.total - offset))
        parts: dict[str, bytes] = {}
        write_seq = None
        if self.conn is None:
            records = [plain]
        else:
            if not self.keys_sent:
                parts["keys"] = self.conn.export_keys()
                self.keys_sent = True
            write_seq = self.conn.export_progress().write_seq
            self.conn.send_data(plain)
            records = self.conn.data_to_send_records()
            parts["progress"] = self.conn.export_progress().to_bytes()
        data = b"".join(records)
        self.app = {**self.app, "offset": offset + len(plain)}
        seg = {"pos": self._end(), "length": len(data), "offset": offset,
               "plain_len": len(plain), "write_seq": write_seq,
               "stream": {k: self.app[k] for k in _RESPONSE_KEYS if k in self.app}}  # fmt: skip
        self._commit(parts, seg=seg, length=len(data), wait=False)
        return data, [len(r) for r in records]

    def _end(self) -> int:
        """The position after the last byte committed: written, or held to be written."""
        return self.snd_pos + (len(self._held[0]) if self._held is not None else 0)

    def _finish(self) -> None:
        self._flush()
        if self.conn is not None and not self.conn.closed:
            self.conn.close()
            out = self.conn.data_to_send()
            self._commit({"raw": out, "full": self.conn.export_state()}, raw=True)
            self._write(out)
        # The FIN goes at once: a client that has everything acknowledges it and closes (no
        # delayed ACK to wait for). A buddy restoring the connection before ``done`` stands at
        # the same sequence number and sends its own FIN there, so the client's ACK fits.
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the client has closed (or reset) already: it has what it wanted, or not
        if self.mirror is not None:
            # finished only when the client has every byte (and the FIN): until then the
            # buddy may still have to send the tail
            deadline = time.monotonic() + _DRAIN_LIMIT_S
            while outq(self.sock) and time.monotonic() < deadline and not closed(self.sock):
                time.sleep(_DRAIN_POLL_S)
            if outq(self.sock) and not closed(self.sock):  # a reset client will never ACK
                raise ConnectionError(f"the client acknowledged nothing for {_DRAIN_LIMIT_S} s")
            self.end_mirror()
        self.sock.settimeout(10)
        try:
            while self.sock.recv(1 << 16):
                pass
        except OSError:
            pass
        self.sock.close()

    def serve_to_end(self) -> None:
        """:meth:`serve`, then tell the buddy the connection is over (``done``) however it
        ended here: finished, closed by the client, or an error of this connection (the client
        reset it, sent garbage; raised again after). Only the node's own death may look like
        one to the buddy: a link closed without ``done`` makes it take the whole node over."""
        try:
            self.serve()
        except (LeaseExpired, SystemExit):
            raise
        except Exception as exc:
            self.end_mirror(repr(exc)[:200])
            raise
        self.end_mirror("the client closed")  # no-op after a finished response

    def end_mirror(self, why: str = "") -> None:
        """Tell the buddy this connection is over (``done``): finished, or ended by the client
        or an error here (``why``), never to be taken over. Sent once; a link that fails here
        is left to the buddy's rule (its end is then a death)."""
        with self._mirror_lock:
            if self.mirror is None or self.done_sent:
                return
            self.done_sent = True
            try:
                send_frame(self.mirror, {"type": "done", **({"why": why} if why else {})})
            except OSError:
                if not self._go_alone():
                    raise

    def _write(self, data: bytes) -> None:
        write_leased(self.sock, data, self.lease)
        self.snd_pos += len(data)

    def _commit(self, parts: dict[str, bytes], *, seg: dict[str, Any] | None = None,
                length: int = 0, raw: bool = False, wait: bool = True) -> None:  # fmt: skip
        """Cluster-then-commit: the update for the bytes about to be written, sent (and applied
        to :attr:`shadow` even while the connection is alone, for :meth:`readopt`); ``wait``:
        its acknowledgement read too (else by the caller's :meth:`_await_ack`)."""
        if self.mirror is None and self.shadow is None:
            return
        if raw and parts.get("raw"):
            assert self._held is None, "a raw update follows a flushed body"
            seg = {"pos": self.snd_pos, "length": len(parts["raw"]), "raw": True}
            length = len(parts["raw"])
        elif raw:
            parts.pop("raw", None)
        if not self.session_sent and self.conn is not None and self.conn.session is not None:
            # the update that commits the server's Finished: the buddy holds the session
            # before the client can learn its ID (the shared session table, sessions module)
            if self.conn.session.session_id and self.conn.session.handle is None:
                parts["session"] = encode_session(self.conn.session)
            self.session_sent = True
        lengths, blob = join_blob(parts)
        header = {"type": "update", "rcv_pos": self.rcv_pos, "snd_pos": self._end() + length,
                  "una_pos": self.snd_pos - outq(self.sock), "app": self.app, "seg": seg,
                  "parts": lengths}  # fmt: skip
        with self._mirror_lock:
            if self.shadow is not None:
                self.shadow.apply(header, blob)  # before it is sent: an adopt carries it too
            if self.mirror is None:
                return  # alone (readopt may hand it to a new mirror later)
            try:
                send_frame(self.mirror, header, blob)
            except OSError:
                if self._go_alone():
                    return
                raise
            self._ack_on = self.mirror
        if wait:
            self._await_ack()

    def _await_ack(self) -> None:
        """Read the acknowledgement of the update last sent, if one is outstanding on the
        current mirror link (an ``adopt`` on a new link, :meth:`readopt`, covered it)."""
        with self._mirror_lock:
            link, self._ack_on = self._ack_on, None
            if link is None or link is not self.mirror:
                return
            try:
                answer = link.recv(1)
            except TimeoutError:
                answer = b""
            except OSError:
                if self._go_alone():
                    return
                raise
            if answer != ACK:
                if self._go_alone():
                    return
                raise ConnectionError(
                    f"the buddy did not acknowledge an update within {_ACK_TIMEOUT_S} s")

    def _go_alone(self) -> bool:
        """The mirror link failed: if the cluster declares the mirror dead (now or within
        :data:`ALONE_WAIT_S`), go on unmirrored and say so; else ``False`` (the caller raises).
        An update the dead mirror never acknowledged is not committed anywhere, and no byte
        it describes has left: the node, the only one left for it, writes it now (and, when
        the ring re-forms, hands it to the new mirror with the rest: :meth:`readopt`)."""
        if self.alone is None or not self.alone.wait(ALONE_WAIT_S):
            return False
        if self.mirror is not None:
            self.mirror.close()
        self.mirror = None
        return True

    def readopt(self, link: socket.socket, lease: Lease, alone: threading.Event, *,
                tell_old: bool = False) -> bool:  # fmt: skip
        """The ring re-formed (another thread's call): hand this connection to the new mirror on
        ``link`` -- its whole :attr:`shadow` in one ``adopt`` frame, the update its dead mirror
        never acknowledged included -- and mirror to it from then on, under its ``lease`` and
        ``alone``. ``False`` (``link`` closed) if the connection has ended, keeps no shadow, or
        the new mirror does not acknowledge it: it goes on alone. ``tell_old``: the old
        mirror lives (a join), and its link ends with ``moved`` (else it would see a death)."""
        with self._mirror_lock:
            if self.shadow is None or self.done_sent or self.shadow.tcp is None:
                link.close()
                return False
            try:
                send_frame(link, *self.shadow.adopt_frame())
                link.settimeout(_ACK_TIMEOUT_S)
                taken = link.recv(1) == ACK
            except OSError:
                taken = False
            if not taken:
                link.close()
                return False
            if self.mirror is not None:
                if tell_old:
                    _tell_moved(self.mirror, outstanding=self._ack_on is self.mirror)
                self.mirror.close()
            self.mirror, self.alone, self._ack_on = link, alone, None
            if self.lease is not None:
                self.lease = lease  # written under the new mirror's lease from now on
            return True


def _tell_moved(old: socket.socket, *, outstanding: bool = False) -> None:
    """End a connection's old mirror link with ``moved``: the old mirror lives and reads it
    (it acknowledged every update on it); one that does not within a second gets a link cut
    short, the death it then is. ``outstanding``: an update's acknowledgement is still unread
    on the link; it is read first (the adopt on the new link covers that update), so that the
    close ends the link with a FIN, not with the reset of unread bytes."""
    try:
        old.settimeout(1.0)
        if outstanding:
            old.recv(1)
        old.sendall(frame_bytes({"type": MOVED}))
    except OSError:
        pass
