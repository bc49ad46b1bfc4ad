"""Small, fast checks of the experiment functions (the full runs live in the notebook)."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from reverse_ssl import experiments as ex


def test_table3_arithmetic_from_a_given_table2() -> None:
    t2 = pd.DataFrame({
        "bits": [1024, 2048], "private_ms": [1.0, 4.0], "public_ms": [0.1, 0.2],
        "cli_private_ms": [0.9, 3.0], "cli_public_ms": [0.1, 0.1],
    })
    t3 = ex.table3(quick=True, t2=t2)
    assert t3["speedup_paper_style"].tolist() == pytest.approx([11.0, 21.0])
    assert t3["cli_speedup"].tolist() == pytest.approx([10.0, 31.0])
    assert t3["paper_speedup"].tolist() == pytest.approx([8.6 / 0.5, 51.5 / 1.5])
    assert (t3["speedup_with_ots"] < t3["speedup_paper_style"]).all()
    assert 0 < t3["ots_sign_us"].iloc[0] < 5000


def test_openssl_speed_is_parsed() -> None:
    assert shutil.which("openssl"), "the openssl command is required (apt-get install openssl)"
    result = ex.openssl_speed((1024,), seconds=1)
    private_ms, public_ms = result[1024]
    assert 0 < public_ms < private_ms < 1000


def test_server_puzzle_path_costs_are_measured() -> None:
    costs = ex.server_puzzle_path_costs(1024, reps=3)
    assert 0 < costs["issue"] < 0.5 and 0 < costs["reject"] < 0.5


def test_rsa_key_builds_512_bit_keys() -> None:
    key = ex.rsa_key(512)
    assert key.key_size == 512 and key.public_key().public_numbers().e == 65537


def test_dos_sweep_uses_the_given_costs() -> None:
    costs = {"cost_original": 0.004, "cost_reverse": 0.001, "cost_reject": 1e-5, "cost_issue": 1e-5,
             "solve_time": 0.2, "attack_request_cost": 1e-4}
    df = ex.dos_sweep(costs, quick=True)
    base = df[(~df["puzzles"]) & (df["attack_rate"] == 0)].iloc[0]
    assert base["server_utilisation"] == pytest.approx(0.3, abs=0.05)  # legitimate load = 30 % of capacity
    flood = df[df["attack_rate_x_capacity"] == 10.0].set_index("puzzles")["legit_success_rate"]
    assert flood[True] > flood[False]


def test_dos_variant_model_is_the_sweep() -> None:
    costs = {"cost_original": 0.002, "cost_reverse": 0.0005, "cost_reject": 1e-5,
             "cost_issue": 1e-5, "solve_time": 0.1, "attack_request_cost": 1e-5}
    pd.testing.assert_frame_equal(ex.dos(costs, "model"), ex.dos_sweep(costs))
    with pytest.raises(ValueError, match="variant"):
        ex.dos(costs, "measured")
