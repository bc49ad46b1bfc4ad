"""Commit-order checks that the failure campaign (``test_relay.py``) does not reach.

Each test here was written for a mutant of :mod:`sslacc_sim.relay` that survived the
``sslacc`` mutation group (``mutation/groups/sslacc.toml``): a change that breaks the First
Law, a takeover's restart point or the re-sealing of queued records, yet lets the client
finish in the campaign's scenarios.  The runs use the real model (cluster, relay, ``tls12``
client and server); a hook (:data:`~sslacc_sim.relay.CheckpointHook`) reads the state the
commit protocol does not report itself.

* A silent mirror whose report to the master is lost (the master dies as the report
  travels): the owner must go on waiting -- committing without the mirror's
  acknowledgement would break cluster-then-commit -- and reports the mirror once.
* A takeover from a fingered ACK (no checkpoint): the new owner's first commit acknowledges
  no client byte and starts the server's stream at 0.
* Takeovers with compact updates: the checkpoint a new owner commits names exactly the
  records it re-sealed (``rewind``) and carries the others (``raw``, ``raw_records``) so a
  second takeover can rebuild them; with pre-writes off, the records it re-seals are the
  quarter-piece reads of section 5.6; mid-record failure inside a piece of several records
  is byte-identical.
* A takeover after a partial ACK: no later checkpoint acknowledges client bytes that have
  not arrived.
* A request of several records written at once: no checkpoint carries client bytes it does
  not acknowledge; with compact updates off, no partial ACK at all.
* A node that joined after the relay started gets an RST guard when it takes over.
* ``takeover_resend``: the new owner sends its queue when its takeover commits instead of
  waiting for the dead node's 1 s retransmission timer.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from sslacc_sim import Checkpoint, Cluster, ClusterParams, Origin, Relay, RelayConn
from sslacc_sim.tcpside import RstGuard
from tls12.record import MAX_PLAINTEXT

from .helpers import BODY, Kill, Run, assert_served, client_port, kill_owner, run
from .test_relay import POST, assert_posted, kill_mid_record

MAC, BLOCK, IV = 20, 16, 16      # TLS_RSA_WITH_AES_128_CBC_SHA (the helpers' only suite)


def sealed_length(plaintext: int) -> int:
    """Wire bytes of one TLS 1.2 AES-128-CBC-SHA record of ``plaintext`` bytes: header,
    explicit IV, then plaintext + MAC + at least one padding byte, in whole blocks (true by
    construction of the record format)."""
    return 5 + IV + (plaintext + MAC + 1 + BLOCK - 1) // BLOCK * BLOCK


@dataclass(frozen=True)
class Seen:
    number: int
    label: str
    phase: str
    rcv_appack: int
    out_start: int
    stream_out: int
    rcv_nxt: int
    consumed: int
    partial: int
    mirror: int | None
    held: int | None          # the number of the checkpoint the mirror holds
    handler: int
    rx: int                   # client bytes buffered past the last record read


def watch(seen: list[Seen], also: Kill | None = None) -> Kill:
    """A hook recording every phase of every checkpoint, then calling ``also``."""

    def hook(cluster: Cluster, conn: RelayConn, cp: Checkpoint, phase: str) -> None:
        st = conn.tcp.a.seq
        mirror = cluster.mirror[conn.bucket]
        held = conn.mirrored.get(mirror) if mirror is not None else None
        seen.append(Seen(cp.number, cp.label, phase, cp.rcv_appack, cp.out_start,
                         conn.tcp.stream_out(), st.rcv_nxt - st.isn - 1, conn.consumed,
                         len(cp.partial), mirror, None if held is None else held.number,
                         conn.handler, len(conn.rx)))
        if also is not None:
            also(cluster, conn, cp, phase)

    return hook


def assert_first_law(seen: list[Seen]) -> None:
    """Before release nothing of a checkpoint is on TCP, it covers only client bytes that
    arrived, carries only client bytes it acknowledges, and at commit the mirror (if any)
    holds it."""
    for s in seen:
        if s.phase == "prepared":
            assert s.rcv_appack <= s.rcv_nxt, s
            if s.label != "takeover":           # TCP holds what the dead owner sent
                assert s.stream_out == s.out_start, s
            assert s.partial <= max(0, s.rcv_appack - s.consumed), s
        if s.phase == "committed" and s.mirror is not None:
            assert s.held == s.number, f"checkpoint {s.number} committed, mirror holds {s.held}"


# -- a silent mirror whose report is lost ---------------------------------------------------

def test_a_lost_report_never_lets_the_owner_commit_without_the_mirror() -> None:
    """The owner (node 1) finds its mirror (node 2) silent and reports it to the master
    (node 0), which dies while the report travels: nobody re-mirrors the bucket.  Every
    further ``update_timeout`` the mirror is still silent and already reported; the owner
    must keep waiting (cluster-then-commit), not commit unmirrored, and must not report
    the same mirror again.  The cluster re-sends a lost report (``report_interval``,
    test_updates.py::test_a_lost_report_of_a_silent_mirror_is_sent_again); here re-sending
    is off, so the report stays lost and the wait never ends: safety alone is checked."""
    p = ClusterParams(report_interval=math.inf)
    port = client_port(3, 1)
    muted: list[float] = []

    def mute(cluster: Cluster, conn: RelayConn, cp: Checkpoint, phase: str) -> None:
        if cp.label != "response" or phase != "prepared" or muted:
            return
        assert (conn.handler, cluster.mirror[conn.bucket], cluster.members[0]) == (1, 2, 0)
        cluster.node(2).mute_updates()
        muted.append(cluster.env.now)

        def master_dies():  # type: ignore[no-untyped-def]
            yield cluster.env.timeout(p.update_timeout - 0.01)   # just before the report
            cluster.node(0).kill()

        cluster.env.process(master_dies())

    seen: list[Seen] = []
    r = run(watch(seen, mute), p, port=port, until=5 * p.update_timeout, timeout=None)
    assert muted and r.cluster.mirror[r.conn.bucket] == 2 and r.cluster.node(2).alive
    assert [d[1] for d in r.cluster.deaths] == [0]          # the master's death was found
    assert r.cluster.mirror_faults == []                      # ... but the report was lost
    assert_first_law(seen)
    after = [s for s in seen if s.label == "response" and s.phase != "prepared"]
    assert {s.phase for s in after} <= {"sent"}, "committed without the mirror's ACK"
    (fault,) = r.relay.mirror_faults                         # reported once, this conn
    assert (fault.conn, fault.label, fault.mirror, fault.owner) == (r.conn.id, "response", 2, 1)


# -- takeovers ------------------------------------------------------------------------------

def test_fingered_takeover_commits_a_restart_from_zero() -> None:
    seen: list[Seen] = []
    r = run(watch(seen, kill_owner("client_hello", "prepared")))
    assert_served(r)
    assert [t[2] for t in r.conn.takeovers] == ["fingered ACK"]
    assert_first_law(seen)
    first = [s for s in seen if s.handler != r.conn.checkpoints[0][3]]
    assert first[0].label == "takeover"                        # the restart is committed
    assert {(s.rcv_appack, s.out_start) for s in first if s.label == "takeover"} == {(0, 0)}


def aperiodic(cluster: Cluster, relay: Relay) -> None:
    """``run(setup=...)``: the origin serves 100 KiB without a period (a SHA-256 stream)."""
    body = b"".join(hashlib.sha256(i.to_bytes(4, "big")).digest() for i in range(3200))
    relay.origin.response = Origin(body).response


def resealing_run(params: ClusterParams, kill: Kill,
                  setup: Callable[[Cluster, Relay], None] | None = None
                  ) -> tuple[list[Seen], list[Checkpoint], Run]:
    """Run with ``kill``; return the hook's log and the checkpoints the mirrors held (a
    takeover restores the one its new owner held)."""
    seen: list[Seen] = []
    restored: list[Checkpoint] = []

    def grab(cluster: Cluster, conn: RelayConn, cp: Checkpoint, phase: str) -> None:
        if cp.label == "takeover" and phase == "prepared":
            restored.append(conn.mirrored[conn.handler])
        kill(cluster, conn, cp, phase)

    r = run(watch(seen, grab), params, setup=setup)
    return seen, restored, r


@pytest.mark.parametrize("piece", [
    4 * 4096 + 1003,    # four quarter reads and a 3-byte fifth one
    4 * 4108,           # four quarter reads of 4108 bytes (4108 + MAC + 1 fills 264 blocks)
])
def test_without_prewrites_the_mirror_reseals_in_quarter_pieces(piece: int) -> None:
    """Section 5.6 without pre-writes: the new owner re-seals the queued piece in reads of
    a quarter ``response_piece`` each; its takeover checkpoint names those records and the
    bytes it releases are exactly their sealed lengths."""
    params = ClusterParams(record_size_prewrite=False, response_piece=piece)
    captured: list[Checkpoint] = []

    def keep(cluster: Cluster, conn: RelayConn, cp: Checkpoint, phase: str) -> None:
        if cp.label == "takeover":
            captured.append(cp)

    kill = kill_owner("response", "committed", 2)
    seen, restored, _ = resealing_run(params, lambda *a: (kill(*a), keep(*a)))
    (held,) = restored
    total = held.response_offset - held.plain_start
    assert total == piece and held.rewind == 2     # the owner's 16384 + the rest
    step = piece // 4
    want = [min(step, total - i) for i in range(0, total, step)]
    assert len(want) == 4 + (piece % 4 > 0) and sum(want) == total
    cp = captured[0]
    assert cp.rewind == len(want) and cp.sizes is None
    (released,) = [s for s in seen if s.label == "takeover" and s.phase == "released"]
    sent = released.stream_out - released.out_start
    assert sent == sum(sealed_length(n) for n in want) + len(held.raw)


@pytest.mark.parametrize("delay", [0.016, 0.030, 0.045])
def test_mid_record_failure_inside_a_piece_of_several_records(delay: float) -> None:
    """A piece of three records and a bit: the mirror re-reads each pre-written record from
    its own origin offset, so the one the client holds part of comes out byte-identical."""
    params = ClusterParams(response_piece=3 * MAX_PLAINTEXT + 100)
    got: list[tuple[int, int, int]] = []
    seen, restored, r = resealing_run(params, kill_mid_record(1, delay, got))
    assert_served(r)
    (start, acked, end), = got
    assert start < acked < end
    assert_first_law(seen)
    (held,) = restored
    assert held.sizes == (MAX_PLAINTEXT, MAX_PLAINTEXT, MAX_PLAINTEXT, 100)
    (take,) = [s for s in seen if s.label == "takeover" and s.phase == "released"]
    assert take.stream_out - take.out_start == sum(sealed_length(n) for n in held.sizes)


def test_a_piece_of_several_records_is_resealed_from_each_records_own_offset() -> None:
    """The owner dies with a piece of four records clustered and unsent: the mirror reads
    each pre-written record from the origin at its own offset, and the client's response is
    byte-identical.  The body has no period (the helpers' ``BODY`` repeats every 256
    bytes, so a read at a wrong multiple of 16384 would return the same bytes)."""
    params = ClusterParams(response_piece=3 * MAX_PLAINTEXT + 100)
    seen, restored, r = resealing_run(params, kill_owner("response", "committed", 1),
                                      aperiodic)
    assert_served(r)
    assert_first_law(seen)
    (held,) = restored
    assert held.sizes == (MAX_PLAINTEXT, MAX_PLAINTEXT, MAX_PLAINTEXT, 100)
    assert held.plain_start > 0                         # not the first piece


LAST_PIECE = -(-len(Origin(BODY).response) // 16384) - 1   # sealed with close_notify


def test_takeover_carries_the_close_notify_to_a_second_takeover() -> None:
    """The last piece is clustered with the close_notify after it (a raw record); the first
    new owner re-seals the piece, re-creates the alert and commits both; when it dies too,
    the third node rebuilds them from that takeover checkpoint."""
    captured: list[Checkpoint] = []
    first = kill_owner("response", "committed", LAST_PIECE)
    second = kill_owner("takeover", "committed")

    def both(cluster: Cluster, conn: RelayConn, cp: Checkpoint, phase: str) -> None:
        if cp.label == "takeover" and phase == "prepared":
            captured.append(cp)
        first(cluster, conn, cp, phase)
        second(cluster, conn, cp, phase)

    seen, restored, r = resealing_run(ClusterParams(), both)
    assert_served(r)
    assert len(r.conn.takeovers) == 2
    assert_first_law(seen)
    held = restored[0]
    assert held.raw and held.raw_records == 1 and held.raw[:1] == b"\x15"   # the alert
    cp = captured[0]
    assert (cp.rewind, cp.raw_records, cp.raw) == (held.rewind, 1, held.raw)


@pytest.mark.parametrize("phase", ["sent", "committed", "released"])
def test_after_a_partial_ack_takeover_no_checkpoint_covers_bytes_not_received(
        phase: str) -> None:
    seen: list[Seen] = []
    r = run(watch(seen, kill_owner("partial_ack", phase)), body=POST)
    assert_posted(r)
    assert len(r.conn.takeovers) == 1
    assert_first_law(seen)
    assert any(s.label == "takeover" for s in seen)


def test_takeover_resend_sends_the_queue_without_waiting_for_the_timer() -> None:
    """With ``takeover_resend`` the client's next byte follows the takeover by the import
    and one cluster round trip; without it, the fixed 1 s retransmission timer (modelled
    simulation times: the client finishes more than 0.5 s later)."""
    kill = ("response", "released", 2)
    fast = run(kill_owner(*kill))
    slow = run(kill_owner(*kill), ClusterParams(takeover_resend=False))
    assert_served(fast)
    assert_served(slow)
    assert fast.client.done_at is not None and slow.client.done_at is not None
    assert slow.client.done_at - fast.client.done_at > 0.5


# -- a request of several records -----------------------------------------------------------

BIG_POST = bytes(range(256)) * 160     # 40 KiB: three client records, written at once


@pytest.mark.parametrize("kill", [None, ("data", "committed", 1)])
def test_a_checkpoint_carries_no_client_byte_it_does_not_acknowledge(
        kill: tuple[str, str, int] | None) -> None:
    """The client writes its request in one go, so a TCP segment carries the end of one
    record and the start of the next: when a record is read, those bytes wait in the
    owner's buffer; the ``data`` checkpoint acknowledges up to the record's end and
    must not carry any of those bytes as ``partial`` data: after a takeover they would come
    twice, once from the checkpoint and once from the client's retransmission."""
    seen: list[Seen] = []
    r = run(watch(seen, None if kill is None else kill_owner(*kill)), body=BIG_POST,
            per_record=False)
    assert r.client.error is None and bytes(r.client.response) == r.origin.response
    assert len(r.conn.takeovers) == (kill is not None)
    assert_first_law(seen)
    waiting = [s for s in seen if s.label == "data" and s.phase == "prepared"
               and s.rx > 0 and s.rcv_appack == s.consumed]
    assert waiting, "no data checkpoint with the next record's bytes already buffered"
    (conn, request), = r.origin.requests             # one request (the origin answers
    assert conn == r.conn.id and request.startswith(b"POST / ")   # once the head is in)
    assert r.conn.request_offset == len(r.client.request)   # the whole body reached it


def test_without_compact_updates_no_keys_are_exported_and_no_partial_ack_is_sent() -> None:
    """Partial ACKs exist in compact mode only (section 5.5, module docstring): only a
    compact update carries the acknowledged part of a record as ``partial`` data.  A relay
    that exported the compact base (``conn.keys``) with compact updates off would send
    partial ACKs in full mode, and a takeover after one does not recover (seen on that
    mutant: the client timed out).  So with ``compact_updates`` off: no keys, no partial
    ACK."""
    seen: list[Seen] = []
    r = run(watch(seen), ClusterParams(compact_updates=False), body=POST)
    assert r.conn.keys is None and r.conn.keys_at == set()
    assert r.conn.partial_acks == 0
    assert "partial_ack" not in {s.label for s in seen}
    assert_first_law(seen)


def test_a_node_that_joined_after_the_relay_started_gets_its_own_rst_guard() -> None:
    """``Relay.__init__`` makes an RST guard (section 4.6) for every node it knows; a node
    added later by :meth:`~sslacc_sim.cluster.Cluster.join` gets one when it first takes a
    connection over, armed for 2MSL on that bucket.  Here the owner (node 2) dies after the
    master admitted the joined node 3 (10 ms keepalives: admitted at once) and the owner
    handed it the bucket's state (:mod:`sslacc_sim.handoff`), so node 3 inherits the
    bucket."""
    def join(cluster: Cluster, relay: Relay) -> None:
        assert 3 not in relay.guards
        cluster.join()

    r = run(kill_owner("response", "committed", 5), ClusterParams(keepalive_interval=0.01),
            port=client_port(3, 2), setup=join)
    assert_served(r)
    assert [n for _, n, _ in r.conn.takeovers] == [3]
    guard = r.relay.guards[3]
    assert isinstance(guard, RstGuard) and guard.msl == r.cluster.params.msl
