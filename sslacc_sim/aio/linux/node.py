"""A node of the two-node accelerator: ``python -m sslacc_sim.aio.linux.node {primary,backup,sniff}``.

``primary`` (node A) listens on the virtual IP, accepts one connection, takes its
:func:`~sslacc_sim.aio.linux.repair.snapshot` and serves one file over HTTP/1.1, inside
:mod:`tls12` (``--suite``) or over plain TCP (``--plain``). Before each write it sends the
backup an update and waits for the acknowledgement (:mod:`sslacc_sim.aio.linux.mirror`).
``--die-at`` makes it stop at one instant of the connection's life and print
``DIE <point> <position>``; the orchestrator then cuts its link and kills it
(:mod:`sslacc_sim.aio.linux.failover`). The points:

``after-server-hello-flight``
    the ServerHello ... ServerHelloDone flight is written; the client's answer will be lost;
``after-client-key-exchange``
    the client's ClientKeyExchange, ChangeCipherSpec and Finished are read and the answer is
    mirrored, not written;
``transfer``
    after the body segment that takes the written bytes past ``--die-after``;
``mid-record``
    in the segment holding byte ``--die-after``: the whole records before the one holding
    it, then half of that record.

``backup`` (node B) receives the updates on the cluster link. When the link closes without a
``done`` frame (the primary's kernel closes it when the process dies) it takes over: rebuilds
the unacknowledged bytes from the mirrored state and the file, restores the socket in repair
mode bound to the virtual IP, adds the address, announces it with a gratuitous ARP, leaves
repair mode and carries on serving. It prints ``RESTORED {json}`` with its timings
(``time.monotonic()``, which is one clock for every namespace).

``sniff`` records, in the client's namespace, the arrival time, sequence number and length of
every TCP segment with data from the server (an ``AF_PACKET`` socket), and writes them as JSON
when stopped with SIGTERM: the orchestrator finds the client's first byte after the cut there.

A node serves exactly one connection, then exits: the testbed measures one failover per run.

What this does not cover (the SimPy model does, :mod:`sslacc_sim`): Linux acknowledges the
client's bytes when they arrive, before the primary has read and mirrored them; the paper's
relay withholds that ACK until the backup has the state (SSLACC §5.5). A primary dying
between a read and its update would lose the client's bytes (the client, acknowledged, never
resends them), so every death point here lies after an update. Closing handshakes (FIN in a
queue) are not restored either: the connection must be established when A dies.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import signal
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testbed import cli
from tls12 import ServerConfig, ServerConnection
from tls12.certs import load_credentials
from tls12.events import ApplicationData, ConnectionClosed
from tls12.state import Progress
from tls12.suites import SUITES, suite_by_name

from . import repair
from .mirror import (
    ACK,
    MirrorState,
    Segment,
    join_blob,
    recv_frame,
    send_frame,
)

__all__ = ["POINTS", "BATCH", "response_head", "Stream", "Service", "main"]

#: Instants at which ``--die-at`` stops the primary (module docstring).
POINTS = ("after-server-hello-flight", "after-client-key-exchange", "transfer", "mid-record")
#: Plaintext bytes of the response per mirrored segment (16 records of 16 KiB).
BATCH = 1 << 18
_SIOCOUTQ = 0x5411
_SO_RCVBUFFORCE = 33
_SNDBUF = 1 << 18  # bounds what the client can lack, and so what a takeover re-sends
_PROBE_WAIT_S = 0.2  # how long a takeover waits for the answer to its window probe
_ACK_TIMEOUT_S = 10.0  # a backup that does not acknowledge an update for this long is dead


def response_head(size: int) -> bytes:
    """The HTTP response header for a body of ``size`` bytes (the same on both nodes)."""
    return (
        "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
        f"Content-Length: {size}\r\nConnection: close\r\n\r\n"
    ).encode()


class Stream:
    """The response as one byte stream: :func:`response_head` then the file."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("rb")
        self.size = path.stat().st_size
        self.head = response_head(self.size)
        self.total = len(self.head) + self.size

    def read(self, offset: int, n: int) -> bytes:
        """``n`` bytes from ``offset`` (short only at the end)."""
        out = self.head[offset : offset + n]
        start = max(0, offset - len(self.head))
        self._file.seek(start)
        return out + self._file.read(n - len(out))


@dataclass
class DiePoint:
    """Where ``--die-at`` stops the primary."""

    name: str
    after: int = 0

    def die(self, position: int, record: tuple[int, int] | None = None) -> None:
        """Say so (``DIE <point> {"pos": bytes written, "record": [start, end] of the record
        cut in half}``) and wait to be killed: the orchestrator cuts the link, then SIGKILLs."""
        print(f"DIE {self.name} " + json.dumps({"pos": position, "record": record}), flush=True)
        time.sleep(3600)
        raise SystemExit(f"not killed at {self.name}")


@dataclass
class Service:
    """One connection's server side, the same on the primary and on a backup that took over.

    ``conn`` is ``None`` for plain TCP. ``mirror`` (the cluster link) is ``None`` on a node
    without a backup. ``snd_pos`` / ``rcv_pos`` count the bytes written / consumed.
    """

    sock: socket.socket
    stream: Stream
    conn: ServerConnection | None
    mirror: socket.socket | None = None
    die: DiePoint | None = None
    snd_pos: int = 0
    rcv_pos: int = 0
    app: dict[str, Any] = field(default_factory=lambda: {"phase": "request", "offset": 0})
    keys_sent: bool = False
    _request: bytes = b""

    def serve(self) -> None:
        """Run the connection to its end."""
        while True:
            if self.app["phase"] == "response":
                if self.app["offset"] < self.stream.total:
                    self._send_body_segment()
                    continue
                self._finish()
                return
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
        self._request += plain
        if b"\r\n\r\n" in self._request and self.app["phase"] == "request":
            if not self._request.startswith(b"GET "):
                raise ValueError(f"only GET is served, got {self._request[:20]!r}")
            self.app = {"phase": "response", "offset": 0}
        full = self.conn.export_state() if self.conn is not None else b""
        self._commit({"raw": out, "full": full}, raw=True)
        point = None
        if self.conn is not None and out:
            established = self.conn.handshake_complete
            point = ("after-server-hello-flight" if not established
                     else "after-client-key-exchange" if not was_established else None)
        dying = point is not None and self.die is not None and self.die.name == point
        if dying and point == "after-client-key-exchange":
            self.die.die(self.snd_pos)  # type: ignore[union-attr]  # mirrored, never written
        if dying:
            # The client answers the server's flight within a millisecond; were A's kernel
            # to acknowledge the answer before the cut, the client would never resend it to
            # B. Delayed ACKs (40 ms or more) keep it unacknowledged until the link is down.
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 0)
        self._write(out)
        if dying:
            self.die.die(self.snd_pos)  # type: ignore[union-attr]
        if closed:
            self.app = {"phase": "closed", "offset": self.app.get("offset", 0)}

    # -- sending --

    def _send_body_segment(self) -> None:
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
        self.app = {"phase": "response", "offset": offset + len(plain)}
        seg = {"pos": self.snd_pos, "length": len(data), "offset": offset,
               "plain_len": len(plain), "write_seq": write_seq}  # fmt: skip
        self._commit(parts, seg=seg, length=len(data))
        die = self.die
        if die is not None and die.name == "mid-record" and self.snd_pos + len(data) > die.after:
            done = 0
            for record in records:
                start = self.snd_pos + done
                if start + len(record) > die.after:
                    self._write(data[: done + len(record) // 2])
                    die.die(self.snd_pos, (start, start + len(record)))
                done += len(record)
        self._write(data)
        if die is not None and die.name == "transfer" and self.snd_pos >= die.after:
            die.die(self.snd_pos)

    def _finish(self) -> None:
        if self.conn is not None and not self.conn.closed:
            self.conn.close()
            out = self.conn.data_to_send()
            self._commit({"raw": out, "full": self.conn.export_state()}, raw=True)
            self._write(out)
        if self.mirror is not None:
            send_frame(self.mirror, {"type": "done"})
        self.sock.shutdown(socket.SHUT_WR)
        self.sock.settimeout(10)
        try:
            while self.sock.recv(1 << 16):
                pass
        except OSError:
            pass
        self.sock.close()

    def _write(self, data: bytes) -> None:
        if data:
            self.sock.sendall(data)
            self.snd_pos += len(data)

    def _commit(self, parts: dict[str, bytes], *, seg: dict[str, Any] | None = None,
                length: int = 0, raw: bool = False) -> None:  # fmt: skip
        """Cluster-then-commit: the update for the bytes about to be written, acknowledged."""
        if self.mirror is None:
            return
        if raw and parts.get("raw"):
            seg = {"pos": self.snd_pos, "length": len(parts["raw"]), "raw": True}
            length = len(parts["raw"])
        elif raw:
            parts.pop("raw", None)
        outq = struct.unpack("i", fcntl.ioctl(self.sock.fileno(), _SIOCOUTQ, b"\0" * 4))[0]
        lengths, blob = join_blob(parts)
        header = {"type": "update", "rcv_pos": self.rcv_pos, "snd_pos": self.snd_pos + length,
                  "una_pos": self.snd_pos - outq, "app": self.app, "seg": seg,
                  "parts": lengths}  # fmt: skip
        send_frame(self.mirror, header, blob)
        try:
            answer = self.mirror.recv(1)
        except TimeoutError:
            answer = b""
        if answer != ACK:
            raise ConnectionError(
                f"the backup did not acknowledge an update within {_ACK_TIMEOUT_S} s")


# --- rebuilding on the backup ---------------------------------------------------------------


def rebuild(state: MirrorState, stream: Stream, config: ServerConfig | None
            ) -> tuple[int, bytes]:  # fmt: skip
    """``(position, bytes)``: the server bytes from the first segment the client may lack up to
    ``state.snd_pos``, byte-identical to what the primary wrote (or was about to write)."""
    segments = state.unacked()
    data = b"".join(_segment_bytes(seg, state, stream, config) for seg in segments)
    return (segments[0].pos if segments else state.snd_pos), data


def _segment_bytes(seg: Segment, state: MirrorState, stream: Stream,
                   config: ServerConfig | None) -> bytes:  # fmt: skip
    if seg.raw is not None:
        return seg.raw
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


def take_over(state: MirrorState, stream: Stream, config: ServerConfig | None, vip: str,
              dev: str, *, resume_at_ack: bool = True) -> tuple[Service, dict[str, Any]]:  # fmt: skip
    """Restore the connection ``state`` describes; return the service and the timings.

    With ``resume_at_ack`` a socket whose window probe shows the client lacking bytes is
    rebased at the client's ACK (:func:`sslacc_sim.aio.linux.repair.rebase`) so the rest goes out
    at once; without, the kernel resends them when its retransmission timer fires. The rebase
    closes and reopens the socket in repair mode: a client segment arriving in those few
    syscalls would meet no socket and be answered with a reset (CRIU locks the network with
    netfilter around a restore for this reason). It is only done while the client is idle:
    it has just answered the probe, and nothing it sent is waiting to be read.
    """
    t0 = time.monotonic()
    if state.tcp is None:
        raise RuntimeError("the primary died before it accepted a connection")
    start, unacked = rebuild(state, stream, config)
    snap = state.tcp
    snap = repair.TcpSnapshot(**{**snap.to_json(), "local": snap.local, "remote": snap.remote,
                                 "snd_nxt": repair.seq_add(snap.snd_nxt, state.snd_pos),
                                 "rcv_nxt": repair.seq_add(snap.rcv_nxt, state.rcv_pos)})
    t1 = time.monotonic()
    # everything the client may lack goes into the queue as already sent (so that any ACK the
    # client sends is one the socket accepts); the window probe on leaving repair mode asks
    # the client for its ACK
    sock = repair.restore(snap, unacked)
    subprocess.run(["ip", "addr", "add", f"{vip}/24", "dev", dev], check=True,
                   capture_output=True)  # fmt: skip
    gratuitous_arp(dev, vip)
    repair.leave_repair(sock)
    missing = repair.await_ack(sock, _PROBE_WAIT_S)
    resumed = False
    if missing and resume_at_ack and repair.unread(sock) == 0:
        # The client lacks the last ``missing`` bytes. Left alone they would go out when the
        # retransmission timer fires (1 s: a restored socket has no RTT sample). Instead,
        # restore again exactly at the client's ACK, with those bytes as new data: sent now.
        acked = state.snd_pos - missing
        sock = repair.rebase(sock, repair.TcpSnapshot(**{
            **snap.to_json(), "local": snap.local, "remote": snap.remote,
            "snd_nxt": repair.seq_add(snap.snd_nxt, -missing)}))
        sock.sendall(unacked[acked - start :])
        resumed = True
    t2 = time.monotonic()
    conn = None
    if config is not None:
        if state.tls_full is None:
            raise RuntimeError("no mirrored TLS state")
        conn = ServerConnection.import_state(config, state.tls_full)
        if state.progress is not None:
            conn.import_progress(state.progress)
    service = Service(sock, stream, conn, snd_pos=state.snd_pos, rcv_pos=state.rcv_pos,
                      app=dict(state.app) or {"phase": "request", "offset": 0},
                      keys_sent=True)  # fmt: skip
    timings = {"detected": t0, "rebuilt": t1, "restored": t2, "resent_bytes": len(unacked),
               "client_lacked": missing, "resumed_at_ack": resumed,
               "updates": state.updates}  # fmt: skip
    return service, timings


# --- the three programs --------------------------------------------------------------------


def _config(args: argparse.Namespace) -> ServerConfig | None:
    if args.plain:
        return None
    suite = suite_by_name(args.suite)
    return ServerConfig(credentials=load_credentials(args.cert, args.key), cipher_suites=(suite,))


def _primary(args: argparse.Namespace) -> int:
    config = _config(args)
    stream = Stream(Path(args.file))
    mirror = socket.create_connection((args.mirror, args.mirror_port), timeout=_ACK_TIMEOUT_S)
    mirror.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SNDBUF)
    listener.bind((args.vip, args.port))
    listener.listen(1)
    print("ready", flush=True)
    sock, _ = listener.accept()
    listener.close()
    snap = repair.snapshot(sock)
    send_frame(mirror, {"type": "tcp", "tcp": snap.to_json()})
    die = DiePoint(args.die_at, args.die_after) if args.die_at else None
    conn = ServerConnection(config) if config is not None else None
    Service(sock, stream, conn, mirror=mirror, die=die).serve()
    return 0


def _backup(args: argparse.Namespace) -> int:
    config = _config(args)
    stream = Stream(Path(args.file))
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((args.mirror, args.mirror_port))
    listener.listen(1)
    print("ready", flush=True)
    link, _ = listener.accept()
    link.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    state = MirrorState()
    while (frame := recv_frame(link)) is not None:
        state.apply(*frame)
        if frame[0]["type"] == "update":
            link.sendall(ACK)
        if state.done:
            print("DONE primary finished", flush=True)
            return 0
    service, timings = take_over(state, stream, config, args.vip, args.dev,
                                 resume_at_ack=not args.no_resume_at_ack)
    print("RESTORED " + json.dumps(timings), flush=True)
    service.serve()
    print("SERVED", flush=True)
    return 0


def _sniff(args: argparse.Namespace) -> int:
    src = socket.inet_aton(args.src)
    seen: list[tuple[float, int, int]] = []
    stop = False

    def _stop(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800)) as s:
        s.setsockopt(socket.SOL_SOCKET, _SO_RCVBUFFORCE, 1 << 25)  # beyond rmem_max: root
        s.bind((args.dev, 0))
        s.settimeout(0.2)
        print("ready", flush=True)
        while not stop:
            try:
                frame = s.recv(256)
            except (TimeoutError, InterruptedError):
                continue
            now = time.monotonic()
            ip = frame[14:]
            if len(ip) < 40 or ip[9] != 6 or ip[12:16] != src:
                continue
            ihl = (ip[0] & 0x0F) * 4
            total = struct.unpack(">H", ip[2:4])[0]
            tcp = ip[ihl:]
            sport, _, seq = struct.unpack(">HHI", tcp[:8])
            payload = total - ihl - (tcp[12] >> 4) * 4
            if sport == args.port and payload > 0:
                seen.append((now, seq, payload))
    Path(args.out).write_text(json.dumps(seen))
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sslacc_sim.aio.linux.node", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Run by sslacc_sim.aio.linux.failover as root inside its "
                                "network namespaces; the options name what each node needs.")
    sub = p.add_subparsers(dest="role", required=True)
    for role in ("primary", "backup"):
        r = sub.add_parser(role, help=f"run node {'A' if role == 'primary' else 'B'}")
        r.add_argument("--file", required=True, help="the file to serve")
        r.add_argument("--vip", required=True, help="the virtual IP")
        r.add_argument("--port", type=cli.port, default=443)
        r.add_argument("--mirror", required=True, help="the backup's cluster-link address")
        r.add_argument("--mirror-port", type=cli.remote_port, default=7400)
        r.add_argument("--plain", action="store_true", help="HTTP over plain TCP, no TLS")
        r.add_argument("--suite", default="AES128-SHA",
                       help="one suite (OpenSSL name), e.g. " + ", ".join(
                           s.openssl_name for s in list(SUITES.values())[:3]))
        r.add_argument("--cert", help="PEM certificate (TLS)")
        r.add_argument("--key", help="PEM RSA key (TLS)")
        if role == "primary":
            r.add_argument("--die-at", choices=POINTS, help="stop here and wait to be killed")
            r.add_argument("--die-after", type=cli.non_negative_int, default=4 << 20,
                           help="bytes written before transfer / mid-record (default 4 MiB)")
        else:
            r.add_argument("--dev", default="eth0", help="the LAN interface to take the VIP on")
            r.add_argument("--no-resume-at-ack", action="store_true",
                           help="leave the resend to the kernel's retransmission timer")
    s = sub.add_parser("sniff", help="record the server's data segments seen by the client")
    s.add_argument("--dev", default="eth0")
    s.add_argument("--src", required=True, help="the server address (the virtual IP)")
    s.add_argument("--port", type=cli.port, default=443)
    s.add_argument("--out", required=True, help="JSON file written on SIGTERM")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point; see the module docstring."""
    parser = _parser()

    def body(args: argparse.Namespace) -> int:
        # what the node needs is checked before it binds, connects or opens a raw socket, so
        # that a wrong command line is one line naming the option (status 2), never a traceback
        if args.role in ("primary", "backup"):
            if not args.plain and not (args.cert and args.key):
                raise cli.UsageError("--cert and --key are needed unless --plain")
            if not args.plain:
                try:
                    suite_by_name(args.suite)
                except ValueError as exc:
                    raise cli.UsageError(f"--suite: {exc}") from None
                cli.load_credentials_arg(args.cert, args.key)
            if not Path(args.file).is_file():
                raise cli.UsageError(f"--file {args.file}: no such file" if not
                                     Path(args.file).exists() else f"--file {args.file}: not a file")
        else:
            try:
                socket.if_nametoindex(args.dev)
            except OSError:
                raise cli.UsageError(f"--dev {args.dev}: no such network interface") from None
        handler = {"primary": _primary, "backup": _backup, "sniff": _sniff}[args.role]
        try:
            return handler(args)
        except RuntimeError as exc:  # MirrorError, a takeover without a connection: one line
            raise cli.CLIError(str(exc)) from None

    return cli.run_main(parser, body, argv)


if __name__ == "__main__":
    sys.exit(main())
