"""The SimPy driver runs real tls12 objects: byte counts equal a loopback run's, time a closed form."""

from __future__ import annotations

import random
import selectors
import socket
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from netsim.cpu import DEFAULT_COSTS, ZERO_COSTS, CostTable, Tls12Cpu
from netsim.drive import ByteSource, Driver, HttpFileServer, HttpGetClient, run_pair
from netsim.host import Host, HostParams
from netsim.link import Duplex, LinkParams
from netsim.relay import Forward, Relay, tls_records
from netsim.tcp import TcpConnection, TcpParams, wire_bytes
from tls12 import ClientConnection, ServerConnection
from tls12.certs import Credentials, generate_self_signed
from tls12.config import ClientConfig, ServerConfig
from tls12.events import ApplicationData, ConnectionClosed, HandshakeComplete
from tls12.suites import CipherSuite

RSA = CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA
ECDHE = CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256
BODY = bytes(range(256)) * 16          # 4 KiB
ADSL = 160e3                           # bit/s
D = 0.020                              # one-way delay, s


@lru_cache(maxsize=1)
def creds() -> Credentials:
    return generate_self_signed(key_size=2048)


def seeded(seed: int) -> Callable[[int], bytes]:
    r = random.Random(seed)
    return r.randbytes


def pair(suite: CipherSuite, seed: int = 1) -> tuple[ClientConnection, ServerConnection]:
    client = ClientConnection(ClientConfig(cipher_suites=(suite,), rng=seeded(seed)))
    server = ServerConnection(ServerConfig(credentials=creds(), cipher_suites=(suite,),
                                           rng=seeded(seed + 1000)))
    return client, server


class _LoopSide:
    """The driver's Side, over a real socket: same step, same application callbacks."""

    def __init__(self, name: str, obj: Any, sock: socket.socket, app: Any) -> None:
        self.name, self.obj, self.sock, self.app = name, obj, sock, app
        self.bytes_sent = 0
        self.flights: list[int] = []
        self.finished = False
        self._shutdown = False
        self._fin_sent = False

    def shutdown(self) -> None:
        self._shutdown = True

    def step(self, chunk: bytes | None) -> None:
        events = []
        if chunk is not None:
            events = self.obj.receive_data(chunk)
            self.finished = not chunk
        for event in events:
            self.app(self, event)
        out = self.obj.data_to_send()
        if out and not self._fin_sent:
            self.sock.sendall(out)
            self.bytes_sent += len(out)
            self.flights.append(len(out))
        if self._shutdown and not self._fin_sent:
            self.sock.shutdown(socket.SHUT_WR)
            self._fin_sent = True


def loopback(client: Any, server: Any, client_app: Any, server_app: Any) -> list[_LoopSide]:
    """Run the two objects over a real TCP connection on 127.0.0.1 (one thread, select)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        csock = socket.create_connection(listener.getsockname())
        ssock, _ = listener.accept()
    sides = [_LoopSide("client", client, csock, client_app),
             _LoopSide("server", server, ssock, server_app)]
    with selectors.DefaultSelector() as sel, csock, ssock:
        for side in sides:
            sel.register(side.sock, selectors.EVENT_READ, side)
            side.step(None)
        while not all(side.finished for side in sides):
            ready = sel.select(timeout=10)
            assert ready, "loopback run stalled"
            for key, _ in ready:
                side = key.data
                chunk = side.sock.recv(65536)
                side.step(chunk)
                if not chunk:
                    sel.unregister(side.sock)
    return sides


@pytest.mark.parametrize("suite", [RSA, ECDHE], ids=["rsa", "ecdhe"])
def test_simulated_bytes_equal_a_loopback_run(suite: CipherSuite) -> None:
    client, server = pair(suite)
    get = HttpGetClient("/file.bin")
    sim = run_pair(client, server, client_app=get, server_app=HttpFileServer(BODY),
                   up=LinkParams(ADSL, D), client_cpu=Tls12Cpu(), server_cpu=Tls12Cpu())
    assert get.body == BODY and sim.client.error is None and sim.server.error is None

    client, server = pair(suite)
    real_get = HttpGetClient("/file.bin")
    real = loopback(client, server, real_get, HttpFileServer(BODY))
    assert real_get.body == BODY
    assert sim.bytes_by_direction() == {"client->server": real[0].bytes_sent,
                                        "server->client": real[1].bytes_sent}
    for side, loop in zip(("client", "server"), real, strict=True):
        assert [f.nbytes for f in sim.flights if f.side == side] == loop.flights
    # TCP delivered exactly what the objects wrote, FIN after it
    conn = sim.conn
    assert conn.a.delivered == sim.client.bytes_sent == sim.server.bytes_received
    assert conn.b.delivered == sim.server.bytes_sent == sim.client.bytes_received
    assert conn.a.seq.fin_received and conn.b.seq.fin_received
    assert sim.client.cpu_seconds > 0 and sim.server.cpu_seconds > 0
    frame = sim.flights_frame()
    assert frame.groupby("side")["nbytes"].sum().to_dict() == {
        "client": real[0].bytes_sent, "server": real[1].bytes_sent}
    assert frame["time"].is_monotonic_increasing


def handshake_over_adsl(suite: CipherSuite, costs: CostTable) -> tuple[Driver, float]:
    client, server = pair(suite)
    p = TcpParams(init_cwnd=10)
    d = run_pair(client, server, client_app=HttpGetClient(), server_app=HttpFileServer(BODY),
                 up=LinkParams(ADSL, D), tcp=p, client_cpu=Tls12Cpu(costs),
                 server_cpu=Tls12Cpu(costs))
    done = d.first_event(HandshakeComplete, "client")
    assert done is not None
    return d, done.time


@pytest.mark.parametrize("suite", [RSA, ECDHE], ids=["rsa", "ecdhe"])
def test_handshake_time_is_serialisation_plus_delays(suite: CipherSuite) -> None:
    """Closed form: set-up + per flight (delay + wire bytes / bandwidth) + the ACK it queues behind.

    Each flight after the first leaves the receiver right behind the 52-byte ACK of the flight
    before (same link, same instant). Tolerance: 1 µs (floating point), CPU time excluded.
    """
    p = TcpParams(init_cwnd=10)
    d, t = handshake_over_adsl(suite, ZERO_COSTS)
    flights = [f.nbytes for f in d.flights if f.time < t]
    assert len(flights) == 4          # ClientHello; server hello flight; client and server Finished
    closed = 2 * (D + p.syn_size * 8 / ADSL)
    closed += sum(D + wire_bytes(n, p) * 8 / ADSL for n in flights)
    closed += (len(flights) - 1) * p.header * 8 / ADSL
    assert t == pytest.approx(closed, abs=1e-6)
    # With CPU costs each flight leaves after the step's CPU job or the ACK, whichever ends last
    # (the job and the ACK's serialisation overlap). The job producing a flight ends at its time.
    d2, t2 = handshake_over_adsl(suite, DEFAULT_COSTS)
    sent = [f for f in d2.flights if f.time < t2]
    assert [f.nbytes for f in sent] == flights
    hosts = {"client": d2.client.host.jobs_frame(), "server": d2.server.host.jobs_frame()}
    cpu = []
    for f in sent:
        jobs = hosts[f.side]
        job = jobs[(jobs.finished - f.time).abs() < 1e-12]
        assert len(job) == 1
        cpu.append(float(job.finished.iloc[0] - job.started.iloc[0]))
    assert max(cpu) >= DEFAULT_COSTS.rsa_private
    ack = p.header * 8 / ADSL
    with_cpu = 2 * (D + p.syn_size * 8 / ADSL) + cpu[0]
    with_cpu += sum(D + wire_bytes(n, p) * 8 / ADSL for n in flights)
    with_cpu += sum(max(c, ack) for c in cpu[1:])
    assert t2 == pytest.approx(with_cpu, abs=1e-6)
    assert t2 > t


def test_two_connections_queue_for_one_server_cpu() -> None:
    rsa = 0.05
    costs = CostTable(rsa_private=rsa)

    def run(cores: int) -> tuple[list[float], Host]:
        env = simpy.Environment()
        server_host = Host(env, "server", HostParams(cores=cores))
        drivers = []
        for i in range(2):
            wire = Duplex(env, LinkParams(10e6, 0.005), seed=2 * i)
            conn = TcpConnection(env, (wire.ab,), (wire.ba,))
            client, server = pair(RSA, seed=10 + i)
            drivers.append(Driver(env, conn, client, server, client_app=HttpGetClient(),
                                  server_app=HttpFileServer(BODY), server_host=server_host,
                                  server_cpu=Tls12Cpu(costs)))
        env.run()
        times = []
        for d in drivers:
            done = d.first_event(HandshakeComplete, "client")
            assert done is not None
            times.append(done.time)
        return times, server_host

    (a, b), host = run(cores=1)
    jobs = host.jobs_frame()
    assert sorted(jobs["wait"]) == pytest.approx([0.0, rsa])
    assert abs(b - a) == pytest.approx(rsa)
    assert host.busy_time == pytest.approx(2 * rsa)
    (a2, b2), host2 = run(cores=2)
    assert a2 == pytest.approx(b2) and host2.jobs_frame()["wait"].max() == 0.0
    assert max(a, b) == pytest.approx(a2 + rsa)


def test_remote_error_fails_closed_and_is_recorded() -> None:
    client, _ = pair(RSA)
    server = ServerConnection(ServerConfig(credentials=creds(), cipher_suites=(ECDHE,)))
    d = run_pair(client, server, client_app=HttpGetClient(), server_app=HttpFileServer(BODY))
    assert d.server.error is not None          # no shared cipher suite: handshake_failure
    closed = d.first_event(ConnectionClosed, "client")
    assert closed is not None and not closed.event.clean
    assert d.first_event(ApplicationData) is None
    assert d.conn.a.seq.fin_received and d.conn.b.seq.fin_received


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=20_000), cuts=st.lists(st.integers(0, 20_000), max_size=12),
       loss=st.sampled_from([0.0, 0.05, 0.2]), seed=st.integers(0, 2**16),
       gaps=st.lists(st.floats(0.0, 0.5), min_size=13, max_size=13))
def test_tcp_delivers_exactly_the_bytes_in_order(data: bytes, cuts: list[int], loss: float,
                                                 seed: int, gaps: list[float]) -> None:
    """Any chunking of the writes, any loss (data and ACKs): the receiver gets the stream, then EOF."""
    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    chunks = [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    env = simpy.Environment()
    wire = Duplex(env, LinkParams(1e6, 0.01, loss=loss), seed=seed)
    conn = TcpConnection(env, (wire.ab,), (wire.ba,), TcpParams(mss=536), isn=(seed, 7))
    got: list[bytes] = []
    conn.a.on_data = got.append

    def writer():  # type: ignore[no-untyped-def]
        for chunk, gap in zip(chunks, gaps, strict=False):
            conn.a.send(chunk)
            yield env.timeout(gap)
        yield conn.a.close()

    env.process(writer())
    env.run()
    assert got and got[-1] == b"" and b"" not in got[:-1]
    assert b"".join(got) == data
    assert conn.a.seq.rcv_nxt == conn.a.seq.snd_una == seed + 1 + len(data) + 1
    if loss == 0.0:
        assert conn.a.retransmits == 0


@pytest.mark.parametrize("module", ["netsim.drive", "netsim.relay"])
def test_docstring_example(module: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0


# --- the relay (a middlebox that terminates one connection and opens another) ---------------

class Echo:
    """A sans-IO echo server: sends back what it receives, FIN after the client's FIN."""

    def __init__(self) -> None:
        self._out = bytearray()
        self.eof = False

    def receive_data(self, data: bytes) -> list[Any]:
        self._out += data
        self.eof = self.eof or not data
        return [data]

    def data_to_send(self) -> bytes:
        out = bytes(self._out)
        self._out.clear()
        return out


def _echo_app(side: Any, event: Any) -> None:
    if event == b"":
        side.shutdown()


def echo_through_relay(data: bytes, app: Any, lan: LinkParams, wan: LinkParams
                       ) -> tuple[Relay, ByteSource, Echo]:
    env = simpy.Environment()
    near, far = Duplex(env, lan), Duplex(env, wan)
    front = TcpConnection(env, (near.ab,), (near.ba,))
    back = TcpConnection(env, (far.ab,), (far.ba,))
    source, echo = ByteSource(data), Echo()
    relay = Relay(env, front, back, source, echo, app, client_app=ByteSource.app,
                  server_app=_echo_app)
    env.run()
    return relay, source, echo


@pytest.mark.parametrize("unit", [None, tls_records], ids=["cut-through", "store-and-forward"])
def test_echo_through_relay_returns_every_byte_and_both_fins(unit: Any) -> None:
    records = b"".join(bytes((23, 3, 3, n >> 8, n & 0xFF)) + bytes([n % 251]) * n
                       for n in (100, 3000, 1, 16384, 0, 777))
    relay, source, echo = echo_through_relay(records, Forward(unit), LinkParams(1e7, 0.001),
                                             LinkParams(1e6, 0.010))
    assert bytes(source.received) == records and source.eof and echo.eof
    back = relay.back
    assert back is not None and relay.finished_at is not None
    # every byte crossed both legs once in each direction, FINs passed through
    assert relay.front.bytes_by_direction() == {"client->server": len(records),
                                                "server->client": len(records)}
    assert back.bytes_by_direction() == {"client->server": len(records),
                                         "server->client": len(records)}
    assert back.conn.a.seq.fin_received and relay.front.conn.b.seq.fin_received
    relay_flights = [f.nbytes for f in back.flights if f.side == "relay"]
    if unit is tls_records:
        # store and forward: the relay writes whole records only
        cuts = 0
        for n in relay_flights:
            cuts += n
            assert tls_records(records[:cuts]) == cuts
    else:
        assert sum(relay_flights) == len(records)


def test_store_and_forward_costs_the_first_hop_per_unit() -> None:
    """One large record: cut through overlaps the two hops, store and forward cannot."""
    record = bytes((23, 3, 3, 0x40, 0x00)) + bytes(16384)
    lan, wan = LinkParams(1e6, 0.001), LinkParams(1e6, 0.001)
    cut, _, _ = echo_through_relay(record, Forward(), lan, wan)
    held, _, _ = echo_through_relay(record, Forward(tls_records), lan, wan)
    assert cut.finished_at is not None and held.finished_at is not None
    first_to_server = {
        name: min(f.time for f in r.back.flights if f.side == "relay")  # type: ignore[union-attr]
        for name, r in (("cut", cut), ("held", held))}
    # cut through sends the first segment on as soon as it arrives; store and forward waits
    # for the whole record: at least its serialisation time on the first hop (16 KiB at 1 Mbit/s)
    assert first_to_server["held"] - first_to_server["cut"] > 16384 * 8 / 1e6 * 0.9
    assert held.finished_at > cut.finished_at


def test_real_tls_through_a_relay_with_cpu_on_the_relay_host() -> None:
    env = simpy.Environment()
    near, far = Duplex(env, LinkParams(1e8, 0.0001)), Duplex(env, LinkParams(ADSL, D))
    front = TcpConnection(env, (near.ab,), (near.ba,))
    back = TcpConnection(env, (far.ab,), (far.ba,))
    client, server = pair(RSA)
    get = HttpGetClient("/file.bin")
    relay_host = Host(env, "proxy")
    relay = Relay(env, front, back, client, server, Forward(tls_records), client_app=get,
                  server_app=HttpFileServer(BODY), relay_host=relay_host,
                  front_cpu=Tls12Cpu(DEFAULT_COSTS), back_cpu=Tls12Cpu(DEFAULT_COSTS))
    env.run()
    assert get.body == BODY
    assert relay.front.client.error is None and relay.back is not None
    assert relay.back.server.error is None
    # the relay's records were priced on its own host
    jobs = relay_host.jobs_frame()
    assert len(jobs) > 0 and relay.front.server.cpu_seconds > 0
    assert relay.back.client.cpu_seconds > 0
