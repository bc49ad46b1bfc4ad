"""A pool of offline-signed one-time keys, refilled in the background during idle time.

The paper's argument for online/offline signatures is economic: a server's
load varies over the day (its footnote 1), so the RSA signatures of the
offline phase can be computed while the CPU is idle and spent when a burst of
handshakes arrives.  This module is that bank account:

* :class:`SignaturePool` -- a bounded, thread-safe stock of
  :class:`~reverse_ssl.onoff.OfflineToken`; :meth:`~SignaturePool.take`
  hands out each token **once** (a token is removed before it is used, so two
  handshakes can never share a one-time key) and returns ``None`` when the
  pool is empty, counting an *exhaustion event*; the handshake then falls
  back to a plain RSA signature and reports it with :meth:`record_fallback`.
* :class:`PoolRefiller` -- a worker thread that produces tokens while the pool
  is below capacity, at most ``max_rate`` tokens per second, so that refilling
  takes idle time and does not starve the server.  It stops by itself when
  :meth:`~PoolRefiller.stop` is called or the context manager exits.

:class:`PoolMetrics` is a snapshot of the counters (size, produced, taken,
exhaustion events, fallbacks, refill rate).

The pool is not part of the sans-IO core: it owns a thread and reads the
clock (``time.monotonic``) to rate-limit itself.  Connections only call
``take()`` and ``record_fallback()``.  In CPython the refiller shares the GIL
with the server; the experiments warm the pool before measuring and
document this.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from ..onoff import OfflineToken

__all__ = ["PoolMetrics", "SignaturePool", "PoolRefiller"]


@dataclass(frozen=True)
class PoolMetrics:
    size: int
    capacity: int
    produced: int
    taken: int
    exhausted: int
    fallbacks: int
    refill_rate: float
    """Tokens produced per second of refiller running time (0 before it ran)."""


class SignaturePool:
    """A bounded stock of offline tokens; every token leaves the pool exactly once."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._tokens: deque[OfflineToken] = deque()
        self._lock = threading.Lock()
        self._produced = 0
        self._taken = 0
        self._exhausted = 0
        self._fallbacks = 0
        self._refill_seconds = 0.0

    def __len__(self) -> int:
        with self._lock:
            return len(self._tokens)

    def put(self, token: OfflineToken) -> bool:
        """Add a fresh token; False (token dropped) if the pool is full or the token was used."""
        if token.signer.used:
            return False
        with self._lock:
            if len(self._tokens) >= self.capacity:
                return False
            self._tokens.append(token)
            self._produced += 1
            return True

    def fill(self, factory: Callable[[], OfflineToken], count: int | None = None) -> int:
        """Synchronously add up to ``count`` tokens (default: until full); returns how many."""
        added = 0
        target = self.capacity if count is None else count
        while added < target and len(self) < self.capacity:
            if self.put(factory()):
                added += 1
        return added

    def take(self) -> OfflineToken | None:
        """The oldest unused token, or None (an exhaustion event) when the pool is empty."""
        with self._lock:
            if not self._tokens:
                self._exhausted += 1
                return None
            self._taken += 1
            return self._tokens.popleft()

    def record_fallback(self) -> None:
        with self._lock:
            self._fallbacks += 1

    def _record_refill_time(self, seconds: float) -> None:
        with self._lock:
            self._refill_seconds += seconds

    def metrics(self) -> PoolMetrics:
        with self._lock:
            rate = self._produced / self._refill_seconds if self._refill_seconds > 0 else 0.0
            return PoolMetrics(
                len(self._tokens), self.capacity, self._produced, self._taken,
                self._exhausted, self._fallbacks, rate,
            )


class PoolRefiller:
    """A daemon thread that keeps ``pool`` full at no more than ``max_rate`` tokens per second.

    ``poll_interval`` is how long it sleeps when the pool is full; ``niceness``
    lowers the thread's scheduling priority on Linux (the RSA signatures of
    ``cryptography`` run outside the GIL, so the kernel can prefer the server).  Use it as a
    context manager, or call :meth:`start` and :meth:`stop`; ``stop`` joins the
    thread (a token being computed is finished first, at most one RSA signature).
    """

    def __init__(
        self,
        pool: SignaturePool,
        factory: Callable[[], OfflineToken],
        *,
        max_rate: float = 200.0,
        poll_interval: float = 0.05,
        niceness: int = 10,
    ) -> None:
        if max_rate <= 0:
            raise ValueError("max_rate must be positive")
        if poll_interval <= 0:
            raise ValueError("poll_interval must be positive")
        self.pool = pool
        self.factory = factory
        self.max_rate = max_rate
        self.poll_interval = poll_interval
        self.niceness = niceness
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> PoolRefiller:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="reverse-ssl-pool-refiller", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def __enter__(self) -> PoolRefiller:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _lower_priority(self) -> None:
        """Best effort, Linux: a thread has its own nice value, so refilling yields the CPU to serving."""
        if self.niceness and hasattr(os, "setpriority"):
            try:
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self.niceness)
            except OSError:
                pass

    def _run(self) -> None:
        self._lower_priority()
        min_gap = 1.0 / self.max_rate
        while not self._stop.is_set():
            if len(self.pool) >= self.pool.capacity:
                self._stop.wait(self.poll_interval)
                continue
            start = time.monotonic()
            token = self.factory()
            elapsed = time.monotonic() - start
            self.pool.put(token)
            self.pool._record_refill_time(elapsed)
            if elapsed < min_gap:
                self._stop.wait(min_gap - elapsed)
