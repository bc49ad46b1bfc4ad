"""A member's notice that another died (``dead`` frames), without namespaces.

With four or more members, a member that judged a death tells every other member
(:meth:`Member._tell_dead <sslacc_sim.aio.linux.member.Member._tell_dead>`), on a link of its
own to each one's listener, where the owner's links arrive too. So a frame from another member
must never read as the owner's death: a garbled ``dead`` or ``sessions`` frame ends its own link
and nothing else (before, a garbled ``sessions`` frame made the watch take a healthy owner
over). The parser is fuzzed with Hypothesis: a member id, or a
:class:`~sslacc_sim.aio.linux.mirror.MirrorError`.
"""

from __future__ import annotations

import socket
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sslacc_sim.aio.linux.mirror import (
    ACK,
    MirrorError,
    dead_frame,
    read_dead_frame,
    send_frame,
)

from .test_sniff_takeover import _buddy, _link_pair

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8)  # fmt: skip


@given(st.integers(0, (1 << 16) - 1))
def test_a_dead_frame_names_its_member(member: int) -> None:
    assert read_dead_frame(dead_frame(member)) == member


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=4))
def test_the_dead_frame_parser_raises_only_mirror_errors(header: dict[str, object]) -> None:
    try:
        member = read_dead_frame(header)
    except MirrorError:
        return
    assert type(member) is int and header == {**header, "type": "dead", "member": member}


def _serve_one_link(frames: list[tuple[dict[str, object], bytes]]) -> tuple[bytes, list[int], bool]:
    """A watch takes one link carrying ``frames``: what came back on it, the members its
    ``on_dead`` was told of, and whether it judged its owner dead."""
    node = _buddy()
    told: list[int] = []
    node.on_dead = told.append
    peer, end = _link_pair()
    worker = threading.Thread(target=node._link, args=(end,))
    worker.start()
    for header, blob in frames:
        send_frame(peer, header, blob)
    peer.shutdown(socket.SHUT_WR)
    peer.settimeout(5.0)
    answer = peer.recv(16)
    worker.join(5.0)
    peer.close()
    return answer, told, node.death.is_set()


def test_a_dead_frame_is_applied_and_acknowledged() -> None:
    assert _serve_one_link([(dead_frame(3), b"")]) == (ACK, [3], False)


@pytest.mark.parametrize("frame", [
    ({"type": "dead", "member": -1}, b""),
    ({"type": "dead", "member": "b"}, b""),
    ({"type": "sessions", "count": 2}, b"\x00\x05abc"),
])  # fmt: skip
def test_a_garbled_frame_of_another_member_is_no_death_of_the_owner(
        frame: tuple[dict[str, object], bytes]) -> None:  # fmt: skip
    answer, told, dead = _serve_one_link([frame])
    assert (answer, told, dead) == (b"", [], False)


def test_control_a_garbled_frame_on_the_owners_link_is_a_death() -> None:
    """The owner's links keep the any-error-is-death rule: a connection link whose first
    frame is not its ``tcp`` snapshot makes the watch judge the owner dead."""
    answer, told, dead = _serve_one_link([({"type": "update"}, b"")])
    assert (answer, told, dead) == (b"", [], True)
