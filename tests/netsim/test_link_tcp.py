"""SimPy link and TCP models against closed-form results."""

from __future__ import annotations

import math

import pytest
import simpy

from netsim.link import Duplex, Link, LinkParams, Packet, send_on
from netsim.tcp import HalfConnection, TcpConnection, TcpParams, TcpStateError, wire_bytes
from sslsplit.params import ADSL_UP

B = 1e6      # bit/s
D = 0.010    # one-way delay, s


def test_back_to_back_packets_arrive_at_closed_form_times() -> None:
    env = simpy.Environment()
    link = Link(env, LinkParams(B, D))
    arrivals: list[float] = []

    def got(pkt: Packet) -> None:
        arrivals.append(env.now)

    for _ in range(5):
        send_on((link,), 1000, got)
    env.run()
    assert arrivals == pytest.approx([D + i * 1000 * 8 / B for i in range(1, 6)])
    assert link.bytes_sent == 5000 and link.log_event.count("sent") == 5


def test_drop_tail_queue_and_seeded_loss() -> None:
    env = simpy.Environment()
    link = Link(env, LinkParams(B, D, queue=2))
    got: list[int] = []
    ok = [send_on((link,), 100, lambda p: got.append(p.payload), i) for i in range(5)]
    env.run()
    # the first packet goes straight to the transmitter; two wait; the rest are dropped
    assert ok == [True, True, True, False, False] and got == [0, 1, 2] and link.drops == 2

    def lossy(seed: int) -> list[int]:
        env = simpy.Environment()
        ln = Link(env, LinkParams(B, D, loss=0.3), seed=seed)
        out: list[int] = []
        for i in range(200):
            send_on((ln,), 100, lambda p: out.append(p.payload), i)
        env.run()
        return out

    a, b = lossy(7), lossy(7)
    assert a == b and 100 < len(a) < 180


def test_multi_hop_route() -> None:
    env = simpy.Environment()
    fast = Link(env, LinkParams(100e6, 0.001))
    slow = Link(env, LinkParams(1e6, 0.02))
    t: list[float] = []
    send_on((fast, slow), 1250, lambda p: t.append(env.now))
    env.run()
    assert t[0] == pytest.approx(1250 * 8 / 100e6 + 0.001 + 1250 * 8 / 1e6 + 0.02)


def _run(env: simpy.Environment, gen) -> dict[str, float]:  # type: ignore[no-untyped-def]
    out: dict[str, float] = {}
    env.process(gen(out))
    env.run()
    return out


def test_transfer_time_is_rtts_plus_size_over_bandwidth() -> None:
    env = simpy.Environment()
    fwd, rev = Link(env, LinkParams(B, D)), Link(env, LinkParams(1e9, D))
    p = TcpParams(init_cwnd=1000, rwnd=1000)      # window larger than the transfer
    conn = TcpConnection(env, (fwd,), (rev,), p)
    n = 100_000

    def gen(out):  # type: ignore[no-untyped-def]
        yield conn.open()
        out["open"] = env.now
        yield conn.a.send(n)
        out["done"] = env.now

    out = _run(env, gen)
    assert out["open"] == pytest.approx(2 * D + p.syn_size * 8 / B + p.syn_size * 8 / 1e9)
    assert out["done"] - out["open"] == pytest.approx(D + wire_bytes(n, p) * 8 / B)


def test_slow_start_round_trips() -> None:
    env = simpy.Environment()
    fwd, rev = Link(env, LinkParams(1e12, D)), Link(env, LinkParams(1e12, D))
    p = TcpParams(init_cwnd=2, ssthresh=1e9, rwnd=1e9)
    conn = TcpConnection(env, (fwd,), (rev,), p)
    k = 100

    def gen(out):  # type: ignore[no-untyped-def]
        yield conn.a.send(k * p.mss)
        out["t"] = env.now

    windows = math.ceil(math.log2(k / p.init_cwnd + 1))
    assert _run(env, gen)["t"] == pytest.approx((windows - 0.5) * 2 * D, rel=1e-3)


def test_two_flows_share_a_fifo_bottleneck() -> None:
    env = simpy.Environment()
    fwd, rev = Link(env, LinkParams(B, D)), Link(env, LinkParams(1e9, D))
    p = TcpParams(init_cwnd=1000, rwnd=1000)
    c1 = TcpConnection(env, (fwd,), (rev,), p)
    c2 = TcpConnection(env, (fwd,), (rev,), p)
    n = 50_000

    def gen(out):  # type: ignore[no-untyped-def]
        e1, e2 = c1.a.send(n), c2.a.send(n)
        yield e1
        out["first"] = env.now
        yield e2
        out["second"] = env.now

    out = _run(env, gen)
    # FIFO: the first flow's window was queued first; the second waits behind it
    assert out["first"] == pytest.approx(D + wire_bytes(n, p) * 8 / B)
    assert out["second"] == pytest.approx(D + 2 * wire_bytes(n, p) * 8 / B)


def test_slow_start_flows_interleave_and_finish_near_2n_over_b() -> None:
    env = simpy.Environment()
    fwd, rev = Link(env, LinkParams(B, D)), Link(env, LinkParams(1e9, D))
    c1 = TcpConnection(env, (fwd,), (rev,))
    c2 = TcpConnection(env, (fwd,), (rev,))
    n = 200_000

    def gen(out):  # type: ignore[no-untyped-def]
        e1, e2 = c1.a.send(n), c2.a.send(n)
        yield e1 & e2
        out["both"] = env.now
        out["first"] = min(e1.value, e2.value)

    out = _run(env, gen)
    ideal = 2 * wire_bytes(n) * 8 / B
    assert ideal < out["both"] < ideal * 1.15
    assert out["first"] > 0.8 * ideal        # they shared the link rather than taking turns


def test_lossy_transfer_completes_with_retransmissions() -> None:
    env = simpy.Environment()
    d = Duplex(env, LinkParams(B, D, loss=0.02), LinkParams(1e9, D), seed=3)
    conn = TcpConnection(env, (d.ab,), (d.ba,))

    def gen(out):  # type: ignore[no-untyped-def]
        yield conn.a.send(300_000)
        out["t"] = env.now

    t = _run(env, gen)["t"]
    assert conn.a.timeouts > 0 and conn.a.retransmits > 0
    assert t > wire_bytes(300_000) * 8 / B
    assert conn.b.expected == 0 and conn.a.expected == math.ceil(300_000 / 1448)


def test_parameter_validation() -> None:
    with pytest.raises(ValueError):
        LinkParams(0)
    with pytest.raises(ValueError):
        LinkParams(1e6, loss=1.0)
    with pytest.raises(ValueError):
        TcpParams(init_cwnd=0)
    assert ADSL_UP.bandwidth == 160e3


def test_link_outage_drops_and_tcp_recovers() -> None:
    def transfer(outage: float | None) -> tuple[float, TcpConnection, Link]:
        env = simpy.Environment()
        fwd, rev = Link(env, LinkParams(B, D, queue=50)), Link(env, LinkParams(1e9, D))
        conn = TcpConnection(env, (fwd,), (rev,))
        out: dict[str, float] = {}

        def gen(o):  # type: ignore[no-untyped-def]
            yield conn.a.send(200_000)
            o["t"] = env.now

        def breaker(env):  # type: ignore[no-untyped-def]
            yield env.timeout(0.5)
            yield fwd.fail(outage)

        env.process(gen(out))
        if outage is not None:
            env.process(breaker(env))
        env.run()
        return out["t"], conn, fwd

    base, _, _ = transfer(None)
    t, conn, link = transfer(2.0)
    assert t > base + 2.0
    assert conn.a.timeouts >= 1
    assert "down" in link.log_event and "up" in link.log_event
    assert link.log_event.count("drop_down") == link.drops > 0
    with pytest.raises(ValueError):
        link.fail(-1)


# -- the byte-accurate model under the size-only API -------------------------------------------


def _timed_transfer(payload: bytes | int, p: TcpParams, fwd_bw: float = B) -> tuple[float, bytes]:
    env = simpy.Environment()
    fwd, rev = Link(env, LinkParams(fwd_bw, D)), Link(env, LinkParams(1e12, D))
    conn = TcpConnection(env, (fwd,), (rev,), p)
    got = bytearray()
    conn.a.on_data = got.extend
    out: dict[str, float] = {}

    def gen(o):  # type: ignore[no-untyped-def]
        yield conn.open()
        o["open"] = env.now
        yield conn.a.send(payload)
        o["done"] = env.now

    env.process(gen(out))
    env.run()
    return out["done"] - out["open"], bytes(got)


@pytest.mark.parametrize("n", [0, 1, 1448, 1449, 100_000])
def test_phantom_and_real_payloads_take_the_same_time(n: int) -> None:
    """The size-only API (an int) is the byte model with a phantom payload: same closed forms."""
    big = TcpParams(init_cwnd=1000, rwnd=1000)
    data = bytes(range(256)) * (n // 256) + bytes(n % 256)
    t_size, zeros = _timed_transfer(n, big)
    t_real, got = _timed_transfer(data, big)
    assert t_size == t_real
    assert got == data and zeros == bytes(n)
    if n:
        assert t_real == pytest.approx(D + wire_bytes(n, big) * 8 / B)
    # slow start (unlimited bandwidth): R - 1/2 round trips, as for the size-only model
    ss = TcpParams(init_cwnd=2, ssthresh=1e9, rwnd=1e9)
    t_size, _ = _timed_transfer(n, ss, 1e12)
    t_real, _ = _timed_transfer(data, ss, 1e12)
    assert t_size == t_real
    if n:
        k = math.ceil(n / ss.mss)
        windows = math.ceil(math.log2(k / ss.init_cwnd + 1))
        assert t_real == pytest.approx((windows - 0.5) * 2 * D, rel=1e-3)


def test_sequence_numbers_fin_and_seeded_isn() -> None:
    env = simpy.Environment()
    d = Duplex(env, LinkParams(B, D))
    conn = TcpConnection(env, (d.ab,), (d.ba,), isn=(1000, 2**32 - 10))
    conn.b.seed_isn(5)
    assert conn.b.seq.isn == 5 and conn.b.seq.snd_nxt == 6
    got: list[bytes] = []
    conn.a.on_data = got.append
    conn.a.send(b"hello ")
    conn.a.send(b"world")
    fin = conn.a.close()
    env.run()
    st = conn.a.seq
    assert fin.triggered and got == [b"hello ", b"world", b""]
    assert st.fin_sent and st.fin_received and st.stream_offset == 11
    assert st.snd_una == st.snd_nxt == st.rcv_nxt == 1000 + 1 + 11 + 1 and st.in_flight == 0
    with pytest.raises(TcpStateError):
        conn.a.send(b"late")
    with pytest.raises(TcpStateError):
        conn.a.seed_isn(0)


def test_withheld_ack_keeps_bytes_unacknowledged_until_released() -> None:
    env = simpy.Environment()
    d = Duplex(env, LinkParams(B, D))
    conn = TcpConnection(env, (d.ab,), (d.ba,), TcpParams(rto=5.0))
    st = conn.a.seq
    st.ack_limit = st.isn + 1 + 100        # the application commits only the first 100 bytes
    conn.a.send(bytes(1000))
    env.run(until=1.0)
    assert st.rcv_nxt == st.isn + 1001 and st.snd_una == st.isn + 101 and st.in_flight == 900
    conn.a.set_ack_limit(None)             # commit the rest: an ACK goes out at once
    env.run(until=1.5)
    assert st.snd_una == st.rcv_nxt and conn.a.timeouts == 0


def test_rst_ends_the_stream_and_can_be_suppressed() -> None:
    def run(send_rst: bool) -> tuple[list[str], HalfConnection]:
        env = simpy.Environment()
        d = Duplex(env, LinkParams(B, D))
        conn = TcpConnection(env, (d.ab,), (d.ba,))
        seen: list[str] = []
        conn.a.on_reset = lambda: seen.append("reset")
        conn.a.send_rst = send_rst
        conn.a.send(bytes(10_000))
        env.run(until=0.03)
        conn.a.abort()
        env.run()
        return seen, conn.a

    seen, half = run(True)
    assert seen == ["reset"] and half.seq.rst_sent and half.seq.rst_received
    assert half.delivered < 10_000
    with pytest.raises(TcpStateError):
        half.send(b"x")
    seen, half = run(False)
    assert seen == [] and half.seq.rst_sent and not half.seq.rst_received
    assert half.delivered < 10_000 and half.seq.reset


def test_rst_stops_the_other_direction_too() -> None:
    env = simpy.Environment()
    d = Duplex(env, LinkParams(B, D))
    conn = TcpConnection(env, (d.ab,), (d.ba,))
    conn.b.send(bytes(50_000))               # b streams to a ...
    env.run(until=0.05)
    conn.a.abort()                            # ... a resets
    env.run()
    assert conn.a.seq.rst_received and conn.b.seq.rst_received
    assert conn.b.delivered < 50_000 and conn.b.seq.snd_una < conn.b.seq.snd_end
    assert conn.b.timeouts == 0              # b stopped rather than retransmitting forever
