"""Measured cluster costs: the table, its line fit, and the parameters made from it."""

from __future__ import annotations

import dataclasses

import pytest

from sslacc_sim import ClusterParams
from sslacc_sim.aio.measure import measure_cluster_costs
from sslacc_sim.params import DEFAULT_CLUSTER_COSTS, ClusterCosts


def test_measured_table_times_real_messages_of_each_kind() -> None:
    costs = measure_cluster_costs(quick=True)
    assert costs.source.startswith("measured (quick")
    times = {f.name: getattr(costs, f.name) for f in dataclasses.fields(costs)
             if f.name not in ("source",) and not f.name.endswith("_bytes")}
    assert all(t > 0 for t in times.values()), times
    # the sizes are the real wire forms (+ a 32-byte HMAC-SHA256): the exported state after
    # the client's Finished is kilobytes, a Progress delta a few hundred bytes (JSON header)
    assert costs.full_bytes > 3000 > 400 > costs.compact_bytes > costs.session_bytes > 32
    # a delta covering all three handshake steps is still well under the whole state
    assert 0 < costs.delta_bytes < costs.full_bytes / 2
    fixed, per_byte = costs.message_line()
    assert fixed >= 0 and per_byte >= 0


def test_a_modelled_interrupt_replaces_the_loopback_measurement() -> None:
    costs = measure_cluster_costs(quick=True, interrupt=25e-6)
    assert costs.interrupt == 25e-6 and "interrupt modelled" in costs.source


def test_line_fit_goes_through_two_exact_points() -> None:
    # build == parse, so the mean is the cost; three points on cost = 1e-5 + 1e-9 * bytes
    def cost(n: int) -> float:
        return 1e-5 + 1e-9 * n

    costs = ClusterCosts(cost(4000), cost(4000), 4000, cost(300), cost(300), 300,
                         cost(100), cost(100), 100, 0.0, 0.0, 0.0)
    fixed, per_byte = costs.message_line()
    assert fixed == pytest.approx(1e-5) and per_byte == pytest.approx(1e-9)


def test_params_from_a_cost_table() -> None:
    costs = dataclasses.replace(DEFAULT_CLUSTER_COSTS, interrupt=1e-3, import_state=2e-3,
                                delta_make=3e-3, delta_apply=4e-3)
    p = ClusterParams.measured(costs, rsa_ops_per_s=600)
    assert (p.delta_make_cpu, p.delta_apply_cpu) == (3e-3, 4e-3)
    fixed, per_byte = costs.message_line()
    assert (p.msg_cpu, p.msg_cpu_per_byte) == (fixed, per_byte)
    assert (p.interrupt_cpu, p.import_cpu, p.rsa_ops_per_s) == (1e-3, 2e-3, 600)
    assert p.message_cpu(costs.full_bytes) > p.message_cpu(costs.compact_bytes)
    # the defaults are the frozen table's values
    assert ClusterParams.measured() == ClusterParams()


def test_cost_table_round_trips_and_rejects_nonsense() -> None:
    assert ClusterCosts.from_dict(DEFAULT_CLUSTER_COSTS.to_dict()) == DEFAULT_CLUSTER_COSTS
    with pytest.raises(ValueError, match="unknown"):
        ClusterCosts.from_dict({**DEFAULT_CLUSTER_COSTS.to_dict(), "gpu": 1.0})
    with pytest.raises(ValueError, match="interrupt"):
        dataclasses.replace(DEFAULT_CLUSTER_COSTS, interrupt=-1.0)
    with pytest.raises(ValueError, match="compact"):
        dataclasses.replace(DEFAULT_CLUSTER_COSTS, compact_bytes=10_000)
    with pytest.raises(ValueError, match="non-negative"):
        ClusterParams(msg_cpu_per_byte=-1e-9)
