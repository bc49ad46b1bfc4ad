"""Figure 12 model: latency vs size for HTTP, HTTPS, cold SSL splitting over ADSL."""

from __future__ import annotations

import pytest

from sslsplit.model_latency import AdslTestbed, request_latency
from sslsplit.params import ADSL_UP


def test_ordering_and_closeness() -> None:
    for size in (100, 3_000, 30_000, 300_000):
        http = request_latency("http", size)
        https = request_latency("https", size)
        split = request_latency("split_cold", size)
        assert http < https
        assert abs(split / https - 1) < 0.15      # paper: within ~10 %


def test_large_transfer_is_bandwidth_bound() -> None:
    size = 1_000_000
    t = request_latency("http", size)
    assert t == pytest.approx(size * 8 / ADSL_UP.bandwidth, rel=0.08)
    assert request_latency("http", 2 * size) > 1.9 * t


def test_rsa_time_counts_once_and_errors() -> None:
    fast = request_latency("https", 1000, AdslTestbed(rsa_seconds=0.0))
    slow = request_latency("https", 1000, AdslTestbed(rsa_seconds=0.5))
    assert slow - fast == pytest.approx(0.5, abs=0.01)   # idle time also drains queues
    with pytest.raises(ValueError):
        request_latency("ftp", 10)
    with pytest.raises(ValueError):
        request_latency("http", -1)
