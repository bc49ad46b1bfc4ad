"""Buckets, fingered ISNs, port choice and the RST guard of the cluster's TCP side."""

from __future__ import annotations

import simpy

from sslacc_sim.tcpside import (
    FINGER_SHIFT,
    FourTuple,
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
