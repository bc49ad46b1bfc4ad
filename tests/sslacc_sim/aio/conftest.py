"""Shared fixtures of the Linux failover tests."""

from __future__ import annotations

import fcntl
import tempfile
from pathlib import Path

import pytest

from sslacc_sim.aio.linux.netns import PREFIX, list_leftovers, sweep_leftovers
from testbed.linux.linktestbed import check_available


@pytest.fixture
def namespaces() -> object:
    """Fail (never skip) when namespaces cannot be made here; remove ``sacc-`` leftovers of
    killed runs before, and check that this test left none after.

    The sweep removes *every* ``sacc-`` namespace, so two of these tests must never run at
    once (``pytest -n 2`` would let one worker remove the other's live cluster): an exclusive
    lock on a file shared by all workers of the machine serialises them."""
    check_available()
    with open(Path(tempfile.gettempdir()) / "websec-testbed-sacc-netns.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        sweep_leftovers(PREFIX)
        yield
        left = list_leftovers(PREFIX)
        sweep_leftovers(PREFIX)
        assert left == [], f"namespaces left behind: {left}"
