"""Trace replay through the cost model; caches."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from netsim.cache import InfiniteCache, LRUCache
from sslsplit.costmodel import LinearCost, Protocol, SplittingCostModel
from sslsplit.replay import hits_lru, hits_unbounded, replay


def _unit_model() -> SplittingCostModel:
    """Toy model: HTTP = size, HTTPS = size + 10, miss = size + 20, hit = 1 per request."""
    lc = {Protocol.HTTP: LinearCost((0,), (0.0,), (1.0,)),
          Protocol.HTTPS: LinearCost((0,), (10.0,), (1.0,)),
          Protocol.SPLIT_MISS: LinearCost((0,), (20.0,), (1.0,)),
          Protocol.SPLIT_HIT: LinearCost((0,), (1.0,), (0.0,))}
    return SplittingCostModel(lc, {p: 1 for p in Protocol})


WORK = pd.DataFrame({"time": np.arange(6), "url": [0, 1, 0, 2, 1, 0],
                     "size": [100, 200, 100, 50, 200, 100], "obj": [0, 1, 0, 2, 1, 0]})


def test_replay_by_hand() -> None:
    r = replay(WORK, _unit_model(), preload=WORK.iloc[:2]).set_index("protocol")
    assert r.loc["http", "server_bytes"] == 750
    assert r.loc["https", "server_bytes"] == 750 + 60
    # cold: misses for the first request of objects 0, 1, 2 → 120+220+70, hits 3 × 1
    assert r.loc["split_cold", "server_bytes"] == 120 + 220 + 70 + 3
    assert r.loc["split_cold", "hit_fraction"] == pytest.approx(0.5)
    assert r.loc["split_warm", "server_bytes"] == 6
    # preload holds objects 0 and 1: only object 2 misses
    assert r.loc["split_preload", "server_bytes"] == 70 + 5
    assert r.loc["ideal", "server_bytes"] == 350
    assert r.loc["ideal", "ratio"] == pytest.approx(350 / 750)
    assert r.loc["http", "vs_http"] == 1.0


def test_lru_equals_unbounded_when_large_and_misses_when_zero() -> None:
    rng = np.random.default_rng(5)
    obj = rng.integers(0, 50, 2000)
    sizes = (obj + 1) * 10
    np.testing.assert_array_equal(hits_lru(obj, sizes, 10**9), hits_unbounded(obj))
    assert not hits_lru(obj, sizes, 0).any()
    small = hits_lru(obj, sizes, 2000)
    assert 0 < small.sum() < hits_unbounded(obj).sum()
    big = replay(WORK, _unit_model(), cache_bytes=10**6).set_index("protocol")
    ref = replay(WORK, _unit_model()).set_index("protocol")
    assert big.loc["split_cold", "server_bytes"] == ref.loc["split_cold", "server_bytes"]


def test_lru_cache_evicts_least_recent() -> None:
    c = LRUCache(capacity=300)
    for key in "abc":
        assert not c.request(key, 100)
    assert c.request("a", 100)          # refresh a; b is now least recent
    assert not c.request("d", 100)      # evicts b
    assert "b" not in c and "a" in c and "c" in c and c.used == 300
    c.insert("huge", 1000)              # larger than the cache: not stored
    assert "huge" not in c
    assert c.stats.hits == 1 and c.stats.misses == 4
    assert c.stats.byte_hit_rate == pytest.approx(0.2)
    with pytest.raises(ValueError):
        LRUCache(-1)


def test_infinite_cache() -> None:
    c = InfiniteCache()
    assert [c.request(k, 10) for k in "abab"] == [False, False, True, True]
    c.insert("z", 5)
    assert "z" in c and len(c) == 3 and c.used == 25
