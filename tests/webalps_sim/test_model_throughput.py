"""The SimPy Figure 4 model against closed-form queueing results."""

from __future__ import annotations

import pytest

from webalps_sim.model_throughput import ServerParams, simulate, sweep

BASE = dict(http_cpu_s=1e-3, https_cpu_s=8e-3, webalps_host_cpu_s=2e-3, card_s=0.05,
            http_latency_s=0.5e-3, https_latency_s=2e-3, webalps_latency_s=3e-3)


def test_one_client_is_the_sum_of_its_delays() -> None:
    params = ServerParams(**BASE, secure_fraction=1.0)
    run = simulate(params, clients=1, secure="webalps", seconds=30, warmup=0)
    per_request = BASE["webalps_host_cpu_s"] + BASE["card_s"] + BASE["webalps_latency_s"]
    assert run.rps == pytest.approx(1 / per_request, rel=0.01)
    https = simulate(params, clients=1, secure="https", seconds=30, warmup=0)
    assert https.rps == pytest.approx(1 / (BASE["https_cpu_s"] + BASE["https_latency_s"]),
                                      rel=0.01)


def test_many_clients_saturate_the_card_or_the_cores() -> None:
    params = ServerParams(**BASE, secure_fraction=1.0, cores=2)
    card_bound = simulate(params, clients=30, secure="webalps", seconds=30)
    assert card_bound.rps == pytest.approx(1 / BASE["card_s"], rel=0.02)
    assert card_bound.card_busy > 0.95
    cpu_bound = simulate(params, clients=30, secure="https", seconds=30)
    assert cpu_bound.rps == pytest.approx(2 / BASE["https_cpu_s"], rel=0.02)
    assert cpu_bound.cpu_busy > 0.95


def test_the_mix_follows_the_secure_fraction_and_the_seed() -> None:
    params = ServerParams(**BASE)
    run = simulate(params, clients=4, secure="webalps", seconds=20, seed=3)
    share = run.secure_done / (run.http + run.secure_done)
    assert 0.03 < share < 0.15  # the card is slow, so secure requests complete less often
    again = simulate(params, clients=4, secure="webalps", seconds=20, seed=3)
    assert again == run
    assert simulate(params, clients=4, secure="webalps", seconds=20, seed=4) != run


def test_sweep_webalps_never_beats_https_and_grows_with_load() -> None:
    params = ServerParams(**BASE)
    df = sweep(params, [1, 4, 12], seconds=20)
    pivot = df.pivot(index="clients", columns="host", values="rps")
    assert (pivot["webalps"] <= pivot["https"] * 1.01).all()
    assert pivot["https"].is_monotonic_increasing


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="card_s"):
        ServerParams(**{**BASE, "card_s": -1})
    with pytest.raises(ValueError, match="cores"):
        ServerParams(**BASE, cores=0)
    with pytest.raises(ValueError, match="secure"):
        simulate(ServerParams(**BASE), clients=1, secure="http")


def test_on_loopback_the_load_generator_competes_for_the_cores_and_its_lock() -> None:
    client = dict(http_client_cpu_s=2e-3, https_client_cpu_s=2e-3, webalps_client_cpu_s=2e-3)
    shared = ServerParams(**BASE, **client, secure_fraction=0.0, loopback=True)
    remote = ServerParams(**BASE, **client, secure_fraction=0.0, loopback=False)
    one = simulate(shared, clients=1, secure="https", seconds=20, warmup=0)
    assert one.rps == pytest.approx(1 / (2e-3 + BASE["http_cpu_s"] + BASE["http_latency_s"]),
                                    rel=0.01)
    many = simulate(shared, clients=20, secure="https", seconds=20)
    assert many.rps <= 1 / 2e-3 * 1.01  # one interpreter lock: at most 500 requests/s
    assert simulate(remote, clients=20, secure="https", seconds=20).rps > 1.9 / BASE["http_cpu_s"]
