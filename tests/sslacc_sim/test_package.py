"""The package's names load on first use: the real cluster's nodes start without the model.

A node (``python -m sslacc_sim.aio.linux.node``) is killed at random instants by the fault
campaign, and its buddy hears of the death only once the dying kernel has freed the node's
memory: every megabyte the node holds is time added to each takeover. Loading the SimPy
model, netsim, pandas and NumPy with the package would add about 50 MB.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import sslacc_sim

MODEL = ("simpy", "pandas", "numpy", "netsim", "sslacc_sim.cluster", "sslacc_sim.state")


def test_a_node_imports_nothing_of_the_model() -> None:
    code = (f"import sys, sslacc_sim.aio.linux.node\n"
            f"print([m for m in {MODEL!r} if m in sys.modules])")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)  # fmt: skip
    assert out.stdout.strip() == "[]", out.stdout


def test_every_public_name_is_its_module_s_object() -> None:
    assert sorted(sslacc_sim.__all__) == sorted(sslacc_sim._HOME)
    for name in sslacc_sim.__all__:
        home = importlib.import_module(f"sslacc_sim.{sslacc_sim._HOME[name]}")
        assert getattr(sslacc_sim, name) is getattr(home, name), name
        assert name in dir(sslacc_sim)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nowhere'"):
        sslacc_sim.Nowhere  # noqa: B018
    from sslacc_sim import experiments  # a submodule is still found

    assert experiments.__name__ == "sslacc_sim.experiments"
