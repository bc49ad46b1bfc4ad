"""The SimPy DoS model: fixed-seed example runs double as golden-behaviour tests."""

from __future__ import annotations

import dataclasses

import pytest

from reverse_ssl.experiments import calibrated_dos_params
from reverse_ssl.model_dos import DoSParams, run_dos, sweep_attack_rates

# capacity 250 handshakes/s without puzzles; legitimate load 30 % of it
BASE = DoSParams(cost_original=0.004, cost_reverse=0.001, solve_time=0.3, legit_rate=75.0,
                 timeout=2.0, duration=12.0, seed=7)


def test_no_attack_serves_everyone_at_the_expected_utilisation() -> None:
    r = run_dos(BASE)
    assert r["legit_success_rate"] == 1.0
    assert r["server_utilisation"] == pytest.approx(75 * 0.004, rel=0.2)
    with_puzzles = run_dos(dataclasses.replace(BASE, puzzles=True))
    assert with_puzzles["legit_success_rate"] == 1.0
    assert with_puzzles["legit_mean_latency_s"] >= 0.3  # solving is on the client's clock
    assert with_puzzles["server_utilisation"] < r["server_utilisation"]


def test_flood_without_puzzles_starves_legitimate_clients() -> None:
    r = run_dos(dataclasses.replace(BASE, attack_rate=5 * 250))
    assert r["server_utilisation"] > 0.95
    assert r["legit_success_rate"] < 0.5
    assert r["attacker_cpu_per_accepted_s"] < 0.01  # garbage is cheap for the attacker


def test_puzzles_bound_the_attacker_to_its_solving_rate() -> None:
    p = dataclasses.replace(BASE, attack_rate=5 * 250, puzzles=True, attacker_cores=4)
    r = run_dos(p)
    assert r["legit_success_rate"] > 0.95
    # accepted attack handshakes cannot exceed what 4 cores solve in the run
    assert r["attack_handshakes"] <= 4 / 0.3 * p.duration + 4
    assert r["attacker_cpu_per_accepted_s"] >= 0.3


def test_same_seed_same_result_and_sweep_shape() -> None:
    p = dataclasses.replace(BASE, attack_rate=100.0, duration=6.0)
    assert run_dos(p) == run_dos(p)
    rows = sweep_attack_rates(dataclasses.replace(BASE, duration=6.0), [0.0, 500.0])
    assert [(r["puzzles"], r["attack_rate"]) for r in rows] == [(0.0, 0.0), (0.0, 500.0), (1.0, 0.0), (1.0, 500.0)]


def test_invalid_parameters_fail_at_construction() -> None:
    with pytest.raises(ValueError):
        DoSParams(cost_original=0)
    with pytest.raises(ValueError):
        DoSParams(legit_rate=-1)
    with pytest.raises(ValueError):
        run_dos(DoSParams(duration=1.0, timeout=5.0))


def test_calibration_maps_measured_costs() -> None:
    costs = {"cost_original": 0.002, "cost_reverse": 0.0015, "cost_reject": 1e-5, "cost_issue": 1e-5,
             "solve_time": 0.4, "attack_request_cost": 1e-4}
    p = calibrated_dos_params(costs, legit_rate=10.0)
    assert (p.cost_original, p.solve_time, p.legit_rate) == (0.002, 0.4, 10.0)
