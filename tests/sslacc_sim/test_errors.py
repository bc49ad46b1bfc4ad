"""One exception root: every public exception SSLACC defines is a :class:`SslaccError`.

Each keeps the built-in base its callers catch (``ValueError`` for a bad delta, batch or load,
``RuntimeError`` for cluster misuse and the cluster link, ``OSError`` for a refused repair).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import sslacc_sim
from sslacc_sim.cluster import ClusterError
from sslacc_sim.delta import DeltaError
from sslacc_sim.errors import SslaccError
from sslacc_sim.model_load import LoadError
from sslacc_sim.params import CostsWarning
from sslacc_sim.updates import BatchError


def _public_exceptions() -> list[type[BaseException]]:
    found = []
    for info in pkgutil.walk_packages(sslacc_sim.__path__, "sslacc_sim."):
        module = importlib.import_module(info.name)
        found += [c for name, c in inspect.getmembers(module, inspect.isclass)
                  if issubclass(c, BaseException) and c.__module__ == module.__name__
                  and not name.startswith("_")]
    return found


def test_every_public_exception_derives_from_the_root() -> None:
    classes = _public_exceptions()
    assert len(classes) >= 7  # cluster, delta, load, batch, mirror link, repair, failover
    assert [c.__qualname__ for c in classes if not issubclass(c, SslaccError)] == []


def test_the_built_in_bases_are_kept() -> None:
    from sslacc_sim.aio.linux.failover import FailoverFailed
    from sslacc_sim.aio.linux.mirror import MirrorError
    from sslacc_sim.aio.linux.repair import RepairError

    assert issubclass(DeltaError, ValueError) and issubclass(LoadError, ValueError)
    assert issubclass(BatchError, ValueError)
    assert issubclass(ClusterError, RuntimeError) and issubclass(MirrorError, RuntimeError)
    assert issubclass(FailoverFailed, RuntimeError) and issubclass(RepairError, OSError)
    assert issubclass(CostsWarning, UserWarning)
