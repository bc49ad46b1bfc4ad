"""Buckets, fingered ISNs, port choice and the RST guard of the cluster's TCP side."""

from __future__ import annotations

import simpy

from netsim.link import Duplex, LinkParams
from sslacc_sim.tcpside import (
    FINGER_SHIFT,
    ClusterTcpConnection,
    FourTuple,
    Gate,
    RstGuard,
    ack_is_fingered,
    bucket_of,
    fingered_isn,
    relay_port,
)

T = FourTuple("192.0.2.7", 40123, "198.51.100.1", 443)


def test_bucket_is_the_same_in_both_directions() -> None:
    back = FourTuple(T.dst, T.dport, T.src, T.sport)
    assert bucket_of(T) == bucket_of(back)
    buckets = {bucket_of(FourTuple(T.src, p, T.dst, T.dport)) for p in range(40000, 42000)}
    assert len(buckets) > 800        # 2000 ports spread over most of the 1024 buckets


def test_finger_marks_isn_bits_3_to_20_only() -> None:
    for base in (0, 2**32 - 1, 0x12345678):
        isn = fingered_isn(b"secret", T, base)
        assert isn & 0b111 == base & 0b111
        assert isn >> 21 == base >> 21
        assert ack_is_fingered(b"secret", T, isn + 1)
    isn = fingered_isn(b"secret", T, 0)
    assert isn >> FINGER_SHIFT != 0
    assert not ack_is_fingered(b"other secret", T, isn + 1)
    assert not ack_is_fingered(b"secret", FourTuple(T.src, T.sport + 1, T.dst, T.dport), isn + 1)
    assert not ack_is_fingered(b"secret", T, isn + 1 + 1448)   # data moved the ACK on


def test_relay_port_keeps_both_connections_in_one_bucket() -> None:
    port = relay_port(T, "10.1.0.1", "10.2.0.80", 80)
    assert bucket_of(FourTuple("10.1.0.1", port, "10.2.0.80", 80)) == bucket_of(T)
    assert all(bucket_of(FourTuple("10.1.0.1", p, "10.2.0.80", 80)) != bucket_of(T)
               for p in range(1024, port))


def test_rst_guard_is_silent_for_two_msl_after_takeover() -> None:
    env = simpy.Environment()
    guard = RstGuard(env, msl=30.0)
    assert guard.may_reset(5)
    guard.took_over(5)
    env.run(until=59.0)
    assert not guard.may_reset(5) and guard.may_reset(6)
    env.run(until=60.0)
    assert guard.may_reset(5)
    assert guard.suppressed == 1


def _lost_then_taken_over(resend: bool) -> tuple[float, float]:
    """Cluster -> client bytes sent while the owner is dead (lost at the gate); the node
    comes back at 0.1 s (a takeover with nothing to re-create).  Returns (time the client
    has every byte, time of the client's first byte)."""
    env = simpy.Environment()
    alive = [True]
    wire = Duplex(env, LinkParams(100e6, 0.0005))
    gate_in = Gate(env, lambda: alive[0], "in")
    gate_out = Gate(env, lambda: alive[0], "out")
    tcp = ClusterTcpConnection(env, (wire.ab, gate_in), (gate_out, wire.ba), isn=(100, 5000))
    seen: list[tuple[float, int]] = []
    tcp.b.on_data = lambda chunk: seen.append((env.now, len(chunk)))

    def run():  # type: ignore[no-untyped-def]
        alive[0] = False
        tcp.b.send(b"x" * 5000)
        yield env.timeout(0.1)
        alive[0] = True
        tcp.take_over(0, 5000)
        if resend:
            tcp.announce()
            assert tcp.b.resend_now() == 2          # the initial window was in flight, lost

    env.process(run())
    env.run(until=5)
    assert sum(n for _, n in seen) == 5000
    return seen[-1][0], seen[0][0]


def test_resend_now_does_not_wait_for_the_retransmission_timer() -> None:
    now_done, now_first = _lost_then_taken_over(resend=True)
    timer_done, timer_first = _lost_then_taken_over(resend=False)
    assert 0.1 < now_first < now_done < 0.11          # a path delay after the takeover
    assert timer_first >= 1.0                         # the fixed 1 s RTO of netsim.tcp
    assert timer_done > now_done + 0.8
