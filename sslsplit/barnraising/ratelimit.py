"""Token buckets keyed by source address: how the broker rate-limits joins.

A join costs the broker a database commit and puts an address into DNS, so one host must not
be able to flood it (or churn the DNS answers) with joins.  Each source address owns a bucket
of ``burst`` tokens that refills at ``rate`` tokens per second; a join takes one token, and a
join that finds the bucket empty is refused with the time until the next token
(:meth:`TokenBuckets.take` returns it; the broker sends it as ``Retry-After``).

Sans-IO: the caller passes ``now`` (any monotonic clock in seconds).  Memory is bounded: at
most ``max_keys`` buckets are kept, least recently used first out -- a forgotten source
starts again with a full bucket, which is exactly what it would have after a long silence.
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["TokenBuckets"]


class TokenBuckets:
    """One token bucket per key: ``burst`` tokens, refilled at ``rate`` per second."""

    def __init__(self, rate: float, burst: float, *, max_keys: int = 65536) -> None:
        if not rate > 0:
            raise ValueError("rate must be positive")
        if not burst >= 1:
            raise ValueError("burst must be at least 1")
        if max_keys < 1:
            raise ValueError("max_keys must be positive")
        self.rate = float(rate)
        self.burst = float(burst)
        self.max_keys = max_keys
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, time

    def __len__(self) -> int:
        return len(self._buckets)

    def take(self, key: str, now: float) -> float:
        """Take a token for ``key``: 0.0 if one was there, else the seconds until one will be."""
        tokens, last = self._buckets.pop(key, (self.burst, now))
        tokens = min(self.burst, tokens + max(0.0, now - last) * self.rate)
        wait = 0.0
        if tokens >= 1.0:
            tokens -= 1.0
        else:
            wait = (1.0 - tokens) / self.rate
        self._buckets[key] = (tokens, now)
        while len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)
        return wait
