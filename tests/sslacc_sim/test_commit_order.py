"""The First Law as an invariant: no byte leaves, and no client byte is acknowledged, before the
mirror holds the checkpoint that covers it.

The failure tests (``test_relay.py``) kill the owner at chosen points and check that the client
finishes; a relay that released a checkpoint's output *before* the mirror's acknowledgement
(with the update already on the LAN) would pass them, because the update still arrives.  Here
the relay's ``hook`` watches every checkpoint of a normal run and reads the state that the
commit protocol does not itself report: the client-facing TCP's queued output
(:meth:`~sslacc_sim.tcpside.ClusterTcpConnection.stream_out`), the ACK limit it gives the
client, and the update the mirror has applied (``RelayConn.mirrored``).  At every phase before
``released`` nothing of the checkpoint's output is on TCP and the ACK limit has not moved to
its ``rcv_appack`` (which never exceeds the client bytes received); at ``committed`` the mirror holds exactly this checkpoint, and for a
response piece the record sizes pre-written in it (section 5.6) are the sizes of the records
the owner then writes.
"""

from __future__ import annotations

from dataclasses import dataclass

from sslacc_sim import Checkpoint, Cluster, ClusterParams, RelayConn
from tls12.record import MAX_PLAINTEXT

from .helpers import BODY, assert_served, run


@dataclass(frozen=True)
class Seen:
    number: int
    label: str
    phase: str
    out_start: int
    rcv_appack: int
    stream_out: int
    ack_limit: int | None
    rcv_nxt: int
    mirrored: int | None
    sizes: tuple[int, ...] | None


def _watch(params: ClusterParams | None = None) -> tuple[list[Seen], object]:
    seen: list[Seen] = []

    def hook(cluster: Cluster, conn: RelayConn, cp: Checkpoint, phase: str) -> None:
        st = conn.tcp.a.seq
        mirror = cluster.mirror[conn.bucket]
        held = conn.mirrored.get(mirror) if mirror is not None else None
        seen.append(Seen(cp.number, cp.label, phase, cp.out_start, cp.rcv_appack,
                         conn.tcp.stream_out(),
                         None if st.ack_limit is None else st.ack_limit - st.isn - 1,
                         st.rcv_nxt - st.isn - 1,
                         None if held is None else held.number,
                         None if held is None else held.sizes))

    r = run(hook, params)
    assert_served(r)
    return seen, r


def _check(seen: list[Seen]) -> None:
    numbers = sorted({s.number for s in seen})
    assert len(numbers) > 10
    released_ack = 0
    for n in numbers:
        phases = {s.phase: s for s in seen if s.number == n}
        assert list(phases) == ["prepared", "sent", "committed", "released"], phases
        for phase in ("prepared", "sent", "committed"):
            s = phases[phase]
            assert s.rcv_appack <= s.rcv_nxt, f"checkpoint {n} covers client bytes not received"
            assert s.stream_out == s.out_start, f"checkpoint {n} output on TCP at {phase}"
            assert s.ack_limit is not None and s.ack_limit <= released_ack, (
                f"checkpoint {n}: client bytes acknowledged at {phase} before the commit")
        committed = phases["committed"]
        assert committed.mirrored == n, f"checkpoint {n} acknowledged, not held by the mirror"
        done = phases["released"]
        assert done.stream_out >= done.out_start and done.ack_limit == done.rcv_appack
        released_ack = done.rcv_appack


def test_nothing_is_released_or_acknowledged_before_the_mirror_holds_the_checkpoint() -> None:
    seen, _ = _watch()
    _check(seen)
    out = {s.number: s.stream_out - s.out_start for s in seen if s.phase == "released"}
    assert sum(1 for v in out.values() if v > 0) >= 5  # flights and response pieces went out


def test_the_same_holds_without_deltas_or_compact_updates() -> None:
    seen, _ = _watch(ClusterParams(delta_updates=False, compact_updates=False))
    _check(seen)


def test_the_mirror_holds_the_record_sizes_the_owner_then_writes() -> None:
    params = ClusterParams(response_piece=3 * MAX_PLAINTEXT + 100)
    seen, r = _watch(params)
    response = len(r.origin.response)  # type: ignore[attr-defined]
    assert response > len(BODY)  # the body and the origin's HTTP head
    pieces = [s for s in seen if s.label == "response" and s.phase == "committed"]
    assert len(pieces) == -(-response // params.response_piece) >= 2
    total = 0
    for s in pieces:
        assert s.sizes is not None and s.sizes, "no record-size pre-write at the mirror"
        want = min(params.response_piece, response - total)
        expected = tuple(min(MAX_PLAINTEXT, want - i) for i in range(0, want, MAX_PLAINTEXT))
        assert s.sizes == expected  # one record per MAX_PLAINTEXT bytes of the piece
        total += sum(s.sizes)
    assert total == response
