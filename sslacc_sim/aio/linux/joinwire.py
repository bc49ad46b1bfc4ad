"""What a join says and reads (:mod:`~sslacc_sim.aio.linux.join`): its frames, each checked
as it is read, the question one member asks another's cluster listener (:func:`ask`; the
master's beats while it admits a newcomer, :func:`beating`), and the kernel's list of
connections a donor reads to tell its idle buckets from its busy ones (:func:`busy_buckets`).
"""

from __future__ import annotations

import ipaddress
import re
import socket
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ...errors import SslaccError
from ...membership import MAX_BUCKETS
from .buckets import bucket_of
from .mirror import MirrorError, frame_bytes, recv_frame, send_frame

__all__ = ["JoinError", "ASK_S", "BEAT_S", "SILENT_S", "RELAY_S", "WAIT", "MAX_MEMBER",
           "busy_buckets", "connections", "join_frame", "joined_frame", "read_newcomer",
           "read_buckets", "read_count", "ask", "beating", "still_waiting", "relay", "with_entry"]

#: Seconds the master waits for each member's answer.
ASK_S = 10.0
#: A master that admits a newcomer sends it a :data:`WAIT` frame this often (seconds) until it
#: answers (:func:`beating`): asking the donors and telling the members may take seconds.
BEAT_S = 0.1
#: A newcomer gives up on a master it has heard nothing from -- no beat, no answer, no
#: connection -- for this long (seconds): it hangs, or its cluster link is gone (its question
#: would otherwise wait out its whole limit while its donors' gifts go unserved).
SILENT_S = 0.5
#: Seconds a member waits for another's acknowledgement of a relayed ``joined`` or an
#: ``ungive``.
RELAY_S = 2.0
#: The type of a master's "still working on your join" frame.
WAIT = "wait"
#: Ids are below this.
MAX_MEMBER = 1 << 16
#: ``/proc/net/tcp`` states of a socket no client byte can reach any more: LISTEN, TIME_WAIT,
#: CLOSE.
_QUIET = frozenset({"0A", "06", "07"})
_PROC_ADDRESS = re.compile(r"[0-9A-Fa-f]{8}:[0-9A-Fa-f]{4}")
_PORT_NAME = re.compile(r"[a-z0-9]{1,15}")


class JoinError(SslaccError, ValueError):
    """A join that cannot go on: a malformed frame, a refusal, no master."""


# -- the kernel's connections -----------------------------------------------------------


def connections(text: str) -> list[tuple[tuple[str, int], tuple[str, int], str]]:
    """``(local, remote, state)`` of every socket in a ``/proc/net/tcp`` text (its first line
    is the heading); a line in another form is a :class:`JoinError`."""
    out = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if not fields:
            continue
        if len(fields) < 4 or not all(_PROC_ADDRESS.fullmatch(f) for f in fields[1:3]) \
                or not re.fullmatch(r"[0-9A-Fa-f]{2}", fields[3]):  # fmt: skip
            raise JoinError(f"not a /proc/net/tcp line: {line[:80]!r}")
        out.append((_address(fields[1]), _address(fields[2]), fields[3].upper()))
    return out


def _address(text: str) -> tuple[str, int]:
    host, port = text.split(":")
    # the address in the kernel's byte order, the port in hexadecimal
    return socket.inet_ntoa(int(host, 16).to_bytes(4, sys.byteorder)), int(port, 16)


def busy_buckets(vip: str, port: int, buckets: int, path: Path = Path("/proc/net/tcp")
                 ) -> set[int]:  # fmt: skip
    """The buckets this network namespace's kernel holds a connection of on ``vip:port``: a
    SYN answered, established (accepted or not), or closing."""
    return {bucket_of(remote[0], remote[1], buckets)
            for local, remote, state in connections(path.read_text())
            if local == (vip, port) and state not in _QUIET}  # fmt: skip


# -- frames -----------------------------------------------------------------------------


def join_frame(member: int, address: str, switch_port: str) -> dict[str, Any]:
    """The newcomer's request: its id, its cluster-LAN address and its switch port."""
    return {"type": "join", "member": member, "address": address, "switch_port": switch_port}


def joined_frame(member: int, address: str, switch_port: str, buckets: Iterable[int]
                 ) -> dict[str, Any]:  # fmt: skip
    """The master's word to every member: the newcomer, and the buckets it owns now."""
    return {**join_frame(member, address, switch_port), "type": "joined",
            "buckets": sorted(set(buckets))}  # fmt: skip


def read_newcomer(header: dict[str, Any]) -> tuple[int, str, str]:
    """``(member, address, switch port)`` of a ``join`` or ``joined`` frame."""
    member, address, port = (header.get(k) for k in ("member", "address", "switch_port"))
    if type(member) is not int or not 0 <= member < MAX_MEMBER:
        raise JoinError(f"a {str(header.get('type'))[:10]} frame without a member id")
    if not isinstance(port, str) or not _PORT_NAME.fullmatch(port):
        raise JoinError("a switch port name must be 1-15 lower-case letters or digits")
    try:
        ipaddress.IPv4Address(address if isinstance(address, str) else "")
    except ValueError:
        raise JoinError("a newcomer's address must be an IPv4 address") from None
    return member, str(address), port


def read_buckets(header: dict[str, Any], key: str = "buckets") -> list[int]:
    """The distinct buckets a ``joined`` or ``given`` frame lists."""
    buckets = header.get(key)
    if not isinstance(buckets, list) or len(buckets) > MAX_BUCKETS or any(
            type(b) is not int or not 0 <= b < MAX_BUCKETS for b in buckets) \
            or len(set(buckets)) != len(buckets):  # fmt: skip
        raise JoinError(f"{key} must list distinct bucket numbers")
    return list(buckets)


def read_count(header: dict[str, Any]) -> int:
    count = header.get("count")
    if type(count) is not int or not 0 <= count <= MAX_BUCKETS:
        raise JoinError("a give frame without a bucket count")
    return count


def ask(address: tuple[str, int], header: dict[str, Any], timeout: float = ASK_S, *,
        silent: float | None = None) -> tuple[dict[str, Any], bytes]:  # fmt: skip
    """Send one frame to a member's cluster listener and return its answer (a ``refused``
    answer, a closed link or a malformed one are a :class:`JoinError`; an unreachable member
    an :class:`OSError`). With ``silent`` (a newcomer's join), the member's :data:`WAIT`
    frames are read past, and one silent for ``silent`` seconds -- its connection included
    -- is a :class:`TimeoutError`; ``timeout`` bounds the whole wait."""
    deadline = time.monotonic() + timeout
    with socket.create_connection(address, timeout=silent or timeout) as link:
        send_frame(link, header)
        while True:
            try:
                answer = recv_frame(link)
            except MirrorError as exc:
                raise JoinError(f"member at {address[0]}: {exc}") from None
            if silent is None or answer is None or answer[0]["type"] != WAIT:
                break
            if time.monotonic() > deadline:
                raise JoinError(f"member at {address[0]} did not answer within {timeout:g} s")
    if answer is None:
        raise JoinError(f"member at {address[0]} closed the link without an answer")
    if answer[0]["type"] == "refused":
        raise JoinError(f"member at {address[0]} refused: {str(answer[0].get('reason'))[:200]}")
    return answer


@contextmanager
def beating(link: socket.socket | None, every: float = BEAT_S) -> Iterator[None]:
    """While the body runs, send a :data:`WAIT` frame on ``link`` every ``every`` seconds (the
    asker reads past them: :func:`ask` with ``silent``). None is sent after the body ends, so
    the answer that follows is the next frame. A beat the kernel cannot take at once ends the
    beats (the asker does not read: dead or hung); one it took in part breaks the link, which
    the asker reads as a malformed answer."""
    if link is None:
        yield
        return
    beat, stop = frame_bytes({"type": WAIT}), threading.Event()
    lock = threading.Lock()

    def run() -> None:
        while not stop.wait(every):
            with lock:
                if stop.is_set():
                    return
                try:
                    sent = link.send(beat, socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL)
                except OSError:  # BlockingIOError: a full buffer; a reset: gone
                    return
                if sent != len(beat):
                    link.shutdown(socket.SHUT_RDWR)
                    return

    beats = threading.Thread(target=run, name="join-beat", daemon=True)
    beats.start()
    try:
        yield
    finally:
        with lock:
            stop.set()
        beats.join()


def still_waiting(link: socket.socket) -> bool:
    """The member that asked on ``link`` still waits for its answer: no end of file and no
    reset came back on it. A newcomer killed during its join has its kernel close the link
    (one whose cable was cut first looks alive here: its successor judges it later)."""
    try:
        return link.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
    except BlockingIOError:
        return True  # nothing to read: still waiting
    except OSError:
        return False  # reset


def relay(address: tuple[str, int], frame: dict[str, Any]) -> None:
    """Pass a ``joined`` frame on to the member at ``address`` (an error is reported: the
    member may be dying, and its successor's takeover then applies the join for it)."""
    try:
        ask(address, frame, RELAY_S)
    except (OSError, JoinError) as exc:
        print(f"ERROR relay of a join to {address[0]}: {exc!r}"[:300], file=sys.stderr,
              flush=True)  # fmt: skip


def with_entry(values: tuple[str, ...], at: int, value: str) -> tuple[str, ...]:
    """``values`` with ``value`` at ``at`` (grown with empty entries if it is shorter)."""
    grown = list(values) + [""] * (at + 1 - len(values))
    grown[at] = value
    return tuple(grown)
