"""The DoS model on the driver: real bytes, real objects vs replay, agreement with the old model.

Small keys (1024-bit server, 512-bit puzzles) keep the real handshakes fast; the service times
are the old model's test numbers (capacity 250 standard handshakes/s), not measurements, so
the results do not depend on this machine.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import simpy

from netsim.drive import Driver
from netsim.link import Duplex
from netsim.tcp import TcpConnection
from reverse_ssl.experiments import dos_driver_comparison
from reverse_ssl.model_dos import DoSParams, run_dos
from reverse_ssl.model_dos_driver import (
    MODES,
    NET,
    Endpoints,
    HandshakeCosts,
    ReplayEndpoint,
    Scripts,
    ServerCpu,
    record_scripts,
    run_driver_dos,
)
from reverse_ssl.puzzle import PuzzleParams
from reverse_ssl.server_connection import ReverseServerConnection
from tests.reverse_ssl.rssl_helpers import server_credentials
from tls12.testing import pipe

COSTS = {"cost_original": 0.004, "cost_reverse": 0.001, "cost_reject": 2e-5, "cost_issue": 5e-5,
         "solve_time": 0.3, "attack_request_cost": 5e-5}
BASE = DoSParams(**COSTS, legit_rate=75.0, duration=6.0, timeout=2.0, seed=7)


@pytest.fixture(scope="module")
def endpoints() -> Endpoints:
    return Endpoints(server_credentials(), puzzle=PuzzleParams(n_bits=512))


@pytest.fixture(scope="module")
def scripts(endpoints: Endpoints) -> Scripts:
    return record_scripts(endpoints, HandshakeCosts.from_params(BASE))


class _Counting:
    """Counts the bytes an endpoint writes (around a real object in :func:`pipe`)."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self.sent = 0

    def receive_data(self, data: bytes) -> list[Any]:
        return self.obj.receive_data(data)

    def data_to_send(self) -> bytes:
        out = self.obj.data_to_send()
        self.sent += len(out)
        return out


@pytest.mark.parametrize("mode", sorted(MODES))
def test_driver_bytes_per_handshake_equal_an_in_memory_handshake(
        mode: str, endpoints: Endpoints, scripts: Scripts) -> None:
    client = _Counting(endpoints.client(mode, 99))
    server = _Counting(ReverseServerConnection(endpoints.server_config()))
    pipe(client, server)
    assert server.obj.handshake_complete
    # recorded through netsim.drive with the real objects ...
    assert (scripts.client[mode].sent, scripts.server[mode].sent) == (client.sent, server.sent)
    # ... and replayed through it
    env = simpy.Environment()
    wire = Duplex(env, NET)
    d = Driver(env, TcpConnection(env, (wire.ab,), (wire.ba,)),
               ReplayEndpoint(scripts.client[mode]), ReplayEndpoint(scripts.server[mode]))
    env.run()
    assert d.bytes_by_direction() == {"client->server": client.sent,
                                      "server->client": server.sent}
    assert d.server.obj.handshake_complete and d.client.obj.handshake_complete


def test_server_cpu_charges_the_old_models_totals(scripts: Scripts) -> None:
    costs = HandshakeCosts.from_params(BASE)

    def total(mode: str) -> float:
        cpu, seconds = ServerCpu(costs), 0.0
        flights = dict(scripts.server[mode].flights)
        received = 0
        for _, out in scripts.client[mode].flights:   # the client's flights, in order
            received += len(out)
            seconds += sum(s for _, s in cpu.charge(out, flights.get(received, b"")))
        return seconds

    assert total("original") == pytest.approx(BASE.cost_original)
    assert total("puzzle") == pytest.approx(BASE.cost_issue + BASE.cost_reverse)
    refused = ServerCpu(costs)
    refused.charge(scripts.attack_hello["puzzle"], scripts.server["puzzle"].flights[0][1])
    assert refused.charge(scripts.bogus_reply, scripts.bogus_answer) == [
        ("reject_reply", BASE.cost_reject)]


@pytest.mark.parametrize("puzzles", [False, True])
def test_real_objects_and_replay_run_identically(puzzles: bool, endpoints: Endpoints,
                                                 scripts: Scripts) -> None:
    p = dataclasses.replace(BASE, legit_rate=6.0, attack_rate=400.0, duration=3.0, timeout=1.0,
                            puzzles=puzzles)
    real = run_driver_dos(p, scripts, endpoints=endpoints, real=True)
    replay = run_driver_dos(p, scripts)
    assert real["legit_arrivals"] >= 5
    assert real == replay


def test_agreement_with_the_old_model() -> None:
    """Stated tolerance: where the old model's server is not saturated (utilisation < 0.99)
    both give the same success rate within 0.02, utilisation within 3 % and attack handshakes
    within 5 %.  Saturated, the driver is never more optimistic (+0.02) and puzzles still
    help: legitimate handshakes need two queue passes on the driver (ClientHello, then
    ClientKeyExchange or PuzzleReply) and each can find the backlog full or time out."""
    scripts = record_scripts(Endpoints(server_credentials(), puzzle=PuzzleParams(n_bits=512)),
                             HandshakeCosts.from_params(BASE))
    df = dos_driver_comparison(COSTS, quick=True, seed=7, scripts=scripts)
    assert len(df) == 24 and set(df["model"]) == {"old", "driver"}
    wide = df.pivot_table(index=["puzzles", "attack_rate_x_capacity"], columns="model",
                          values=["legit_success_rate", "server_utilisation",
                                  "attack_handshakes"])
    calm = wide[wide[("server_utilisation", "old")] < 0.99]
    assert len(calm) >= 5
    ok, util, atk = (calm[c] for c in ("legit_success_rate", "server_utilisation",
                                       "attack_handshakes"))
    assert ((ok["driver"] - ok["old"]).abs() <= 0.02).all()
    assert ((util["driver"] / util["old"] - 1).abs() <= 0.03).all()
    assert ((atk["driver"] - atk["old"]).abs() <= 0.05 * atk["old"] + 2).all()
    busy = wide[wide[("server_utilisation", "old")] >= 0.99]
    assert len(busy) >= 3
    assert (busy[("legit_success_rate", "driver")]
            <= busy[("legit_success_rate", "old")] + 0.02).all()
    at_5x = df[(df["attack_rate_x_capacity"] == 5.0) & (df["model"] == "driver")]
    rate = at_5x.set_index("puzzles")["legit_success_rate"]
    assert rate[True] > rate[False] + 0.3
    assert (df["conn_per_wall_s"] > 0).all()


def test_bad_parameters_are_refused(scripts: Scripts) -> None:
    with pytest.raises(ValueError, match="cost_original"):
        HandshakeCosts.from_params(dataclasses.replace(BASE, cost_issue=0.01))
    with pytest.raises(ValueError, match="endpoints"):
        run_driver_dos(BASE, scripts, real=True)
    with pytest.raises(ValueError, match="duration"):
        run_driver_dos(dataclasses.replace(BASE, duration=2.0), scripts)



def test_with_puzzles_the_gap_under_overload_is_the_backlog(scripts: Scripts) -> None:
    """The old model's puzzle attacker submits its hello and its reply as two jobs at once and
    the second is refused when the backlog is full; the driver's pipelines them as one job.
    With a backlog that never fills, the two models agree under overload too."""
    p = dataclasses.replace(BASE, puzzles=True, attack_rate=100 * 250.0, duration=2.5,
                            timeout=0.7)
    unbounded = dataclasses.replace(p, backlog=10**9)
    old, new = run_dos(unbounded), run_driver_dos(unbounded, scripts)
    assert old["server_utilisation"] > 0.99
    assert abs(new["legit_success_rate"] - old["legit_success_rate"]) <= 0.03
    assert run_driver_dos(p, scripts)["legit_success_rate"] < run_dos(p)["legit_success_rate"] - 0.1
