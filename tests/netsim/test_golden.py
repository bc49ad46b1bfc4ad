"""Golden outputs of the SimPy layer: simulated times, packets and capture bytes, pinned.

SimPy's advice (its ``docs/conftest.py``): small example runs with fixed seeds double as
golden-output tests. These pin what the model computes -- the driver on scripted endpoints
with CPU charged on shared hosts, the byte-accurate TCP under loss, drop-tail queues, an ACK
limit, a link outage and a reset, and the pcap the capture writes -- so that work on the
model's speed cannot move a result: every figure below was computed by the model before its
per-segment path was optimised (issue 24) and must stay exactly equal (floats compared with
``==``: the same simulated times to the last bit, the same bytes).

No TLS here: key material is random per run, so a real handshake's bytes (and times) are not
reproducible across runs; :mod:`tests.netsim.test_drive` checks the real objects against
closed forms and a loopback run instead.
"""

from __future__ import annotations

import hashlib
import io
import random
from typing import Any

import simpy
from simpy.events import ProcessGenerator
from simpy.resources.resource import Release, Request

from netsim.drive import Driver, Side, Started
from netsim.host import Host, HostParams
from netsim.link import Duplex, Link, LinkParams
from netsim.pcap import PcapWriter
from netsim.tcp import TcpConnection, TcpParams


class Script:
    """A sans-IO endpoint that answers each complete request with the next scripted reply.

    ``turns``: ``(bytes to wait for, bytes to send then)`` pairs, in order; the first pair may
    wait for 0 bytes (this side speaks first).
    """

    def __init__(self, turns: list[tuple[int, int]], seed: int) -> None:
        self.turns = list(turns)
        self.rng = random.Random(seed)
        self.got = 0
        self.out = bytearray()
        self.eof = False

    def receive_data(self, data: bytes) -> list[Any]:
        self.got += len(data)
        self.eof = self.eof or not data
        self._advance()
        return [len(data)]

    def _advance(self) -> None:
        while self.turns and self.got >= self.turns[0][0]:
            self.got -= self.turns[0][0]
            self.out += self.rng.randbytes(self.turns.pop(0)[1])

    def data_to_send(self) -> bytes:
        self._advance()
        out, self.out = bytes(self.out), bytearray()
        return out


def app(side: Side, event: Any) -> None:
    """Close once the script is done (FIN after the last reply) or at the peer's FIN."""
    obj = side.obj
    assert isinstance(obj, Script)
    if (not obj.turns and not isinstance(event, Started)) or obj.eof:
        side.shutdown()


class LinearCpu:
    """A CPU model: two fixed costs per step (a tie: the job takes the first one's name) plus
    a cost per byte received and sent."""

    def charge(self, received: bytes, sent: bytes) -> list[tuple[str, float]]:
        return [("step", 3.75e-5), ("frame", 3.75e-5),
                ("bytes", (len(received) + len(sent)) * 3.3e-9)]


_CPU_EVENTS = (Request, Release)


class TracingEnvironment(simpy.Environment):
    """An environment that keeps the schedule it processed: (time, priority, whether it is a
    CPU request or release) of every event that had something to do (callbacks), in order.

    The model's speed work (issue 24) replaced generator processes with callbacks under one
    rule: schedule exactly the events the processes did, at the same instants, in the same
    order. Simulated *results* rarely show a change of order (it takes two events at the same
    float instant that interact), so this schedule is pinned as well.
    """

    def __init__(self) -> None:
        super().__init__()
        self.schedule_log: list[tuple[float, int, bool]] = []

    def step(self) -> None:
        queue = self._queue  # SimPy's heap: (time, priority, id, event)
        if queue and queue[0][3].callbacks:
            when, priority, _, event = queue[0]
            self.schedule_log.append((when, int(priority), isinstance(event, _CPU_EVENTS)))
        super().step()


def digest(*parts: object) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def scripted_clients(clients: int, ties: bool, cores: int = 2, delay: float = 0.010
                     ) -> dict[str, Any]:
    """``clients`` scripted exchanges against one server host, captured.

    ``ties``: every client starts at 0 on an equal line, so many events fall on one instant
    and only SimPy's order of scheduling decides which comes first (with ``delay=0`` and one
    core, whose job the server's CPU takes next).
    """
    env = TracingEnvironment()
    server = Host(env, "server", HostParams(cores=cores, speed=1.25))
    buf = io.BytesIO()
    cap = PcapWriter(buf)
    drivers, links = [], []
    for i in range(clients):
        wire = Duplex(env, LinkParams(160e3, delay), LinkParams(1e6, delay, queue=20),
                      name=f"w{i}", seed=i)
        conn = TcpConnection(env, (wire.ab,), (wire.ba,), isn=(1000 * i, 7777 * i))
        client = Script([(0, 300), (9000 + 100 * i, 120), (20000, 0)], seed=i)
        srv = Script([(300, 9000 + 100 * i), (120, 20000)], seed=100 + i)
        drivers.append(Driver(env, conn, client, srv, client_app=app, server_app=app,
                              server_host=server, client_cpu=LinearCpu(),
                              server_cpu=LinearCpu(), start=0.0 if ties else 0.0031 * i,
                              capture=cap))
        links += [wire.ab, wire.ba]
    env.run()
    cap.close()
    return {
        "now": env.now,
        "finished": [d.finished_at for d in drivers],
        "flights": digest([[(f.time, f.side, f.nbytes) for f in d.flights] for d in drivers]),
        "events": sum(len(d.events) for d in drivers),
        "packets": sum(len(ln.log_time) for ln in links),
        "links": digest([(ln.log_time, ln.log_size, ln.log_event) for ln in links]),
        "jobs": digest(server.job_label, server.job_queued, server.job_started,
                       server.job_finished),
        "busy": server.busy_time,
        "pcap": hashlib.sha256(buf.getvalue()).hexdigest()[:16],
        "frames": cap.packets,
        "schedule": (len(env.schedule_log), digest(env.schedule_log)),
    }


def tcp_under_stress(seed: int) -> dict[str, Any]:
    """Three flows on one lossy drop-tail link, an ACK limit lifted late, an outage, a RST."""
    env = TracingEnvironment()
    rng = random.Random(seed)
    shared = Link(env, LinkParams(1.544e6, 0.01, queue=4, loss=0.02), "shared", seed)
    back = Link(env, LinkParams(5e6, 0.01, loss=0.01), "back", seed + 1)
    buf = io.BytesIO()
    cap = PcapWriter(buf)
    conns, received, closed = [], [], []
    for i in range(3):
        conn = TcpConnection(env, (shared,), (back,), TcpParams(init_cwnd=4, rto=0.3),
                             name=f"t{i}", isn=(i * 100, i * 200))
        cap.attach(conn, f"c{i}", "s")
        data = rng.randbytes(20000 + 3000 * i)
        got = bytearray()
        conn.a.on_data = got.extend
        conns.append(conn)
        received.append((got, data))

        def flow(conn: TcpConnection = conn, data: bytes = data, i: int = i) -> ProcessGenerator:
            yield conn.open()
            conn.a.send(data[:5000])
            yield env.timeout(0.01 * i)
            if i == 1:
                conn.a.set_ack_limit(conn.a.seq.rcv_nxt + 100)
            conn.a.send(data[5000:])
            conn.a.send(777)                           # a phantom payload
            yield conn.a.close()
            closed.append((i, env.now))

        env.process(flow())

    def trouble() -> ProcessGenerator:
        yield env.timeout(0.2)
        conns[1].a.set_ack_limit(None)
        yield shared.fail(0.15)
        yield env.timeout(0.1)
        conns[2].b.send(b"x" * 3000)
        conns[2].b.abort()

    env.process(trouble())
    env.run()
    cap.close()
    halves = [h for c in conns for h in (c.a, c.b)]
    return {
        "now": env.now,
        "closed": closed,
        "delivered": [len(got) for got, _ in received],
        "intact": all(bytes(got[: len(data)]) == data[: len(got)] for got, data in received),
        "counters": [(h.packets_sent, h.retransmits, h.timeouts, h.payload_sent, h.expected)
                     for h in halves],
        "cwnd": [h.cwnd for h in halves],
        "links": digest([(ln.log_time, ln.log_size, ln.log_event, ln.drops)
                         for ln in (shared, back)]),
        "pcap": hashlib.sha256(buf.getvalue()).hexdigest()[:16],
        "schedule": (len(env.schedule_log), digest(env.schedule_log)),
    }



def test_scripted_clients_on_a_shared_host_staggered() -> None:
    assert scripted_clients(3, ties=False) == {
        "now": 1.36492399,
        "finished": [0.3597839900000001, 0.3636839900000001, 0.36758399000000014],
        "flights": "3b8f15bfce15e430",
        "events": 75,
        "packets": 156,
        "links": "3cb1bf56cedbf4a0",
        "jobs": "39fd3db3b82efa55",
        "busy": 0.0009537983999999998,
        "pcap": "f9056243bc21e5b1",
        "frames": 156,
        "schedule": (1151, "2f2193aa89f65af8"),
    }


def test_scripted_clients_starting_together() -> None:
    """Equal links, equal start: every tie is broken in the same order as before."""
    assert scripted_clients(3, ties=True) == {
        "now": 1.35872399,
        "finished": [0.3597839900000001, 0.36058399000000013, 0.3613839900000001],
        "flights": "f75c8484ed40fcca",
        "events": 75,
        "packets": 156,
        "links": "3b2f1f97108b64e7",
        "jobs": "d6f1cc08cd348db4",
        "busy": 0.0009537983999999998,
        "pcap": "bf89a9121f389837",
        "frames": 156,
        "schedule": (1149, "80b15e9e0984d150"),
    }


def test_scripted_clients_tied_on_one_core() -> None:
    """No propagation delay and one core: the order of simultaneous events decides."""
    assert scripted_clients(4, ties=True, cores=1, delay=0.0) == {
        "now": 1.27892399,
        "finished": [0.27918399000000005, 0.27998399000000007, 0.2807839900000001,
                     0.28158399000000006],
        "flights": "c4b3ff5e68892ad7",
        "events": 100,
        "packets": 208,
        "links": "1806687aa214c39e",
        "jobs": "43b91e31c903010b",
        "busy": 0.0012722591999999996,
        "pcap": "0b1832bcad176293",
        "frames": 208,
        "schedule": (1528, "795671d453e93c90"),
    }


def test_tcp_under_loss_queueing_outage_and_reset() -> None:
    assert tcp_under_stress(0) == {
        "now": 1.3439557554404145,
        "closed": [(0, 0.5106616621761657), (1, 1.034141985492228)],
        "delivered": [20777, 23777, 0],
        "intact": True,
        "counters": [(24, 7, 1, 27866, 17), (0, 0, 0, 0, 0), (31, 12, 2, 37418, 19),
                     (0, 0, 0, 0, 0), (5, 1, 1, 6448, 0), (1, 0, 0, 0, 0)],
        "cwnd": [6377.775658453603, 5792, 6377.775658453603, 5792, 1448.0, 5792],
        "links": "56571371393d25f6",
        "pcap": "c4209ca80116b231",
        "schedule": (371, "0d9066df72dc8d96"),
    }
    assert tcp_under_stress(1) == {
        "now": 0.9914781761658034,
        "closed": [(0, 0.5028896414507772), (1, 0.6816644062176168)],
        "delivered": [20777, 23777, 0],
        "intact": True,
        "counters": [(25, 8, 1, 29314, 17), (0, 0, 0, 0, 0), (24, 5, 1, 30225, 19),
                     (0, 0, 0, 0, 0), (5, 1, 1, 6448, 0), (1, 0, 0, 0, 0)],
        "cwnd": [6706.527265955015, 5792, 9360.71388984126, 5792, 1448.0, 5792],
        "links": "000e48c2d23340f3",
        "pcap": "e83c396c7d0dac64",
        "schedule": (341, "47afd879b5994756"),
    }
