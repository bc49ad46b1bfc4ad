"""The guardian's cost chargers: they make each operation take the 4758's modelled time.

:class:`NullCostModel` (``--cost-model off``) charges nothing but counts; :class:`CoprocessorCostModel`
(``--cost-model 4758``) sleeps each operation's modelled card time
(:class:`webalps_sim.costmodel.Card4758`).  The card is one device: a lock serialises the sleeps,
so concurrent connections queue for it as they would for the real card (the SimPy model in
:mod:`webalps_sim.model_throughput` makes the same assumption).  With the environment variable
``WEBALPS_COST_STATS`` set to a path, the counters (:class:`webalps_sim.costmodel.CostAccount`)
are written there as JSON (atomically, at most every 0.2 s, and at exit).

Both satisfy :class:`webalps_sim.app.CostCharger`; the guardian finds them by name through
:func:`make_cost_model` (:func:`webalps_sim.app.load_cost_model`).
"""

from __future__ import annotations

import atexit
import json
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from ..costmodel import OPS, Card4758, CostAccount, CostModelError

__all__ = ["NullCostModel", "CoprocessorCostModel", "make_cost_model"]


class NullCostModel:
    """``--cost-model off``: native speed; still counts, so the call profile is measurable."""

    name = "off"

    def __init__(self, stats_path: str | os.PathLike[str] | None = None) -> None:
        self.account = CostAccount()
        self._lock = threading.Lock()
        self._stats_path = Path(stats_path) if stats_path else None
        self._last_write = 0.0
        if self._stats_path is not None:
            atexit.register(self.write_stats)

    def modelled_seconds(self, op: str, nbytes: int) -> float:
        if op not in OPS:
            raise CostModelError(f"unknown operation {op!r}; expected one of {', '.join(OPS)}")
        return 0.0

    def charge(self, op: str, nbytes: int) -> float:
        """Account for one operation and stand still for its modelled time; returns that time."""
        seconds = self.modelled_seconds(op, nbytes)
        with self._lock:  # one card: operations do not overlap
            if seconds:
                time.sleep(seconds)
            self.account.add(op, nbytes, seconds)
            if self._stats_path is not None and time.monotonic() - self._last_write > 0.2:
                self._write_locked()
        return seconds

    def write_stats(self) -> None:
        """Write the counters to ``WEBALPS_COST_STATS`` now (also done at exit)."""
        if self._stats_path is not None:
            with self._lock:
                self._write_locked()

    def _write_locked(self) -> None:
        assert self._stats_path is not None
        tmp = self._stats_path.with_name(f".{self._stats_path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"model": self.name, "ops": self.account.snapshot()}))
        os.replace(tmp, self._stats_path)
        self._last_write = time.monotonic()


class CoprocessorCostModel(NullCostModel):
    """``--cost-model 4758``: sleeps each operation's modelled card time (see :class:`Card4758`)."""

    name = "4758"

    def __init__(self, card: Card4758 | None = None,
                 stats_path: str | os.PathLike[str] | None = None) -> None:
        super().__init__(stats_path)
        self.card = card or Card4758()

    def modelled_seconds(self, op: str, nbytes: int) -> float:
        return self.card.seconds(op, nbytes)


def make_cost_model(name: str, *, environ: Mapping[str, str] | None = None) -> NullCostModel:
    """The cost model called ``name`` ("off" or "4758"), counters to ``WEBALPS_COST_STATS``."""
    stats = (os.environ if environ is None else environ).get("WEBALPS_COST_STATS") or None
    if name == "off":
        return NullCostModel(stats)
    if name == "4758":
        return CoprocessorCostModel(Card4758(), stats)
    raise CostModelError(f"unknown cost model {name!r}; expected 'off' or '4758'")
