"""The shared session table's parts without namespaces: the store, the session an update
carries, the ``sessions`` frame, and their parsers under Hypothesis (anything malformed is a
:class:`~sslacc_sim.aio.linux.mirror.MirrorError`, to the buddy a death of the owner); and a
member's gossip of its own new sessions to the other members, over loopback."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sslacc_sim.aio.linux.mirror import (
    ACK,
    MirrorError,
    MirrorState,
    join_blob,
    read_session,
    recv_frame,
)
from sslacc_sim.aio.linux.repair import TcpSnapshot
from sslacc_sim.aio.linux.sessions import (
    SessionGossip,
    SharedSessionStore,
    read_sessions_frame,
    sessions_frame,
)
from sslacc_sim.sessions import encode_session
from tls12.session import Session

sessions_st = st.builds(
    Session, st.binary(min_size=1, max_size=32), st.binary(min_size=48, max_size=48),
    st.integers(0, 0xFFFF), st.booleans(), st.one_of(st.none(), st.text(max_size=40)))  # fmt: skip


def _session(i: int) -> Session:
    return Session(i.to_bytes(32, "big"), bytes([i % 256]) * 48, 0x002F, True, "sacc.test")


def test_the_store_is_a_bounded_lru() -> None:
    store = SharedSessionStore(max_entries=3)
    for i in range(4):
        store.put(_session(i))
    assert len(store) == 3 and store.get(_session(0).session_id) is None
    assert store.get(_session(1).session_id) == _session(1)  # now the most recent
    store.put(_session(4))
    assert [s.session_id for s in store.snapshot()] == [_session(i).session_id for i in (3, 1, 4)]
    store.remove(_session(3).session_id)
    assert len(store) == 2
    with pytest.raises(ValueError, match="without an ID"):
        store.put(Session(b"", b"\0" * 48, 0x002F, True))
    with pytest.raises(ValueError, match="positive"):
        SharedSessionStore(max_entries=0)


def test_the_store_takes_many_threads_at_once() -> None:
    store = SharedSessionStore(max_entries=50)
    errors: list[BaseException] = []

    def work(base: int) -> None:
        try:
            for i in range(base, base + 2000):
                store.put(_session(i))
                store.get(_session(max(i - 7, 0)).session_id)
                if i % 5 == 0:
                    store.remove(_session(i + 3).session_id)
                store.snapshot() if i % 97 == 0 else None
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k * 10_000,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(store) <= 50


def _tcp_frame() -> tuple[dict[str, object], bytes]:
    snap = TcpSnapshot("10.9.0.100", ("10.9.0.9", 40000), 5001, 1001, 1460, 7, 9, True,
                       65535, 65535, 65535)  # fmt: skip
    return {"type": "tcp", "tcp": snap.to_json()}, b""


def test_an_update_carries_the_session_and_an_adopt_frame_hands_it_on() -> None:
    state = MirrorState()
    state.apply(*_tcp_frame())
    assert state.session is None and not state.new_session
    lengths, blob = join_blob({"raw": b"finished", "session": encode_session(_session(9))})
    state.apply({"type": "update", "rcv_pos": 300, "snd_pos": 8, "una_pos": 0,
                 "app": {"phase": "request", "offset": 0},
                 "seg": {"pos": 0, "length": 8, "raw": True}, "parts": lengths}, blob)  # fmt: skip
    assert state.session == _session(9) and state.new_session
    lengths, blob = join_blob({})
    state.apply({"type": "update", "rcv_pos": 400, "snd_pos": 8, "una_pos": 8,
                 "app": {"phase": "request", "offset": 0}, "parts": lengths}, blob)  # fmt: skip
    assert state.session == _session(9) and not state.new_session  # stored once
    header, blob = state.adopt_frame()
    copy = MirrorState()
    copy.apply(json.loads(json.dumps(header)), blob)
    assert copy.session == _session(9) and copy.new_session


def test_a_sessions_frame_round_trips_and_refuses_what_is_cut_or_padded() -> None:
    table = [_session(i) for i in range(5)]
    header, blob = sessions_frame(table)
    assert read_sessions_frame(json.loads(json.dumps(header)), blob) == table
    assert read_sessions_frame(*sessions_frame([])) == []
    for bad_header, bad_blob in ((header, blob[:-1]), (header, blob + b"\0"),
                                 ({**header, "count": 6}, blob), ({**header, "count": -1}, blob),
                                 ({**header, "count": "5"}, blob), ({"type": "update"}, blob)):  # fmt: skip
        with pytest.raises(MirrorError):
            read_sessions_frame(bad_header, bad_blob)


def test_a_session_with_a_field_out_of_range_is_refused() -> None:
    good = json.loads(encode_session(_session(1)))
    for key, value in (("ms", "00" * 47), ("id", ""), ("id", "00" * 33), ("suite", "47"),
                       ("ems", 1), ("sni", 5), ("ms", "zz")):  # fmt: skip
        with pytest.raises(MirrorError, match="malformed session"):
            read_session(json.dumps({**good, key: value}).encode())


@settings(max_examples=200, deadline=None)
@given(st.lists(sessions_st, max_size=6))
def test_any_table_round_trips(table: list[Session]) -> None:
    assert read_sessions_frame(*sessions_frame(table)) == table


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=300), st.text(max_size=300).map(str.encode),
                 st.dictionaries(st.sampled_from(["id", "ms", "suite", "ems", "sni"]),
                                 st.one_of(st.none(), st.integers(), st.booleans(),
                                           st.text(max_size=100), st.lists(st.integers(), max_size=2)),
                                 max_size=5).map(lambda d: json.dumps(d).encode())))  # fmt: skip
def test_the_session_parser_raises_only_mirror_errors(data: bytes) -> None:
    try:
        read_session(data)
    except MirrorError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["type", "count"]),
                       st.one_of(st.none(), st.integers(-2, 8), st.text(max_size=8),
                                 st.just("sessions"))),
       st.binary(max_size=400))  # fmt: skip
def test_the_sessions_frame_parser_raises_only_mirror_errors(header: dict[str, object],
                                                             blob: bytes) -> None:  # fmt: skip
    try:
        read_sessions_frame(header, blob)
    except MirrorError:
        pass


def test_a_garbled_takeover_report_costs_the_trial_its_timings_not_the_campaign() -> None:
    """Two report lines that interleaved (a ``SESSIONS`` line inside ``RESTORED {json}``, as
    the full campaign once saw before the buddy wrote its lines whole) are skipped with a
    warning; a whole report is read."""
    import subprocess
    import sys

    from sslacc_sim.aio.linux.campaign import _report

    def node(*lines: str) -> subprocess.Popen[str]:
        script = "".join(f"print({line!r})\n" for line in lines)
        return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip

    garbled = node('RESTORED {"reason": "x"}SESSIONS 3 handed', 'RESUMED {"connections": []}')
    assert _report(garbled, 10) is None
    whole = node('RESTORED {"reason": "x"}', 'SESSIONS 3 handed', 'RESUMED {"connections": [1]}')
    assert _report(whole, 10) == {"reason": "x", "resumed": [1]}
    for proc in (garbled, whole):
        proc.wait(timeout=10)


# --- a member's new sessions go to every other member ----------------------------------------


def _listener(got: list[Session]) -> tuple[socket.socket, threading.Thread]:
    """A cluster listener on loopback that stores each ``sessions`` frame and acknowledges it."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                link, _ = server.accept()
            except OSError:
                return
            with link:
                frame = recv_frame(link)
                assert frame is not None
                got.extend(read_sessions_frame(*frame))
                link.sendall(ACK)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return server, thread


def test_own_sessions_reach_every_peer_and_others_sessions_go_nowhere() -> None:
    first: list[Session] = []
    second: list[Session] = []
    a, _ = _listener(first)
    b, _ = _listener(second)
    closed = socket.create_server(("127.0.0.1", 0))
    dead = closed.getsockname()
    closed.close()  # a member that died: refused
    with a, b:
        gossip = SessionGossip(lambda: [a.getsockname(), dead, b.getsockname()]).start()
        store = SharedSessionStore()
        store.on_put = gossip.offer
        store.put(_session(1))  # this node's own handshake
        store.keep(_session(2))  # another node's (from an update): not passed on
        store.put_all([_session(3)])  # from a sessions frame: not passed on
        deadline = time.monotonic() + 5
        while gossip.failed < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        store.put(_session(4))
        while len(second) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert first == second == [_session(1), _session(4)]
    assert gossip.sent == 4 and gossip.failed == 2
    assert len(store) == 4
