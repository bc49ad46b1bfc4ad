"""A connection handed to a new mirror while an update's acknowledgement is still unread
(:meth:`~sslacc_sim.aio.linux.service.Service.readopt` during a join's retarget).

The pipelined commit leaves an acknowledgement unread while the owner writes the segment before
(:class:`~sslacc_sim.aio.linux.service.Service`): a join that retargets the connection then
finds that byte waiting on the old link. The ``adopt`` on the new link covers the update; the
old link must still end cleanly, with ``moved`` and a FIN. Closed with the byte unread, the
owner's kernel would reset the link instead, and the old mirror, which lives, would read a reset
where it should read a hand-off. Real TCP links on loopback; the two mirrors are this test.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sslacc_sim.aio.linux.docroot import Docroot
from sslacc_sim.aio.linux.mirror import ACK, MOVED, MirrorState, recv_frame
from sslacc_sim.aio.linux.service import Lease, Service

from .test_sniff_takeover import _state_with_segments


@contextmanager
def _tcp_pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A connected TCP pair on loopback: (owner's end, mirror's end)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        owner = socket.create_connection(server.getsockname(), timeout=10)
        mirror, _ = server.accept()
    mirror.settimeout(10)
    try:
        yield owner, mirror
    finally:
        owner.close()
        mirror.close()


def _new_mirror(link: socket.socket, got: list[MirrorState]) -> None:
    """The new mirror: read the ``adopt``, apply it, acknowledge it."""
    frame = recv_frame(link)
    assert frame is not None
    state = MirrorState()
    state.apply(*frame)
    got.append(state)
    link.sendall(ACK)


def _readopt_with_an_unread_ack(tmp_path: Path) -> tuple[list[object], MirrorState, bool]:
    """The old mirror's view of its link after the hand-off, the new mirror's state, and
    ``readopt``'s answer."""
    shadow = _state_with_segments()
    with _tcp_pair() as (old, old_mirror), _tcp_pair() as (new, new_mirror), \
            socket.socket() as client:
        svc = Service(client, Docroot(tmp_path), None, mirror=old, shadow=shadow)
        svc._ack_on = old  # an update went out on the old link ...
        old_mirror.sendall(ACK)  # ... and its acknowledgement waits there, unread
        got: list[MirrorState] = []
        answer = threading.Thread(target=_new_mirror, args=(new_mirror, got))
        answer.start()
        taken = svc.readopt(new, Lease(1.0), threading.Event(), tell_old=True)
        answer.join(10)
        assert svc.mirror is new and svc._ack_on is None
        seen: list[object] = []
        try:
            frame = recv_frame(old_mirror)
            seen.append(None if frame is None else frame[0]["type"])
            seen.append(old_mirror.recv(1))  # b"": a FIN
        except OSError as exc:
            seen.append(type(exc).__name__)
    return seen, got[0], taken


def test_a_hand_off_with_an_ack_unread_ends_the_old_link_with_moved_and_a_fin(tmp_path: Path) -> None:
    seen, adopted, taken = _readopt_with_an_unread_ack(tmp_path)
    assert taken
    assert adopted == _state_with_segments()  # the new mirror holds the whole state
    assert seen == [MOVED, b""]  # not a ConnectionResetError
