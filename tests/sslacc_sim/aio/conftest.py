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

    The sweep spares namespaces another live process made (a campaign running beside the
    tests). Two of these tests still never run at once: both would time failovers on a shared
    2-core machine, so an exclusive lock on a file shared by all workers serialises them."""
    check_available()
    with open(Path(tempfile.gettempdir()) / "websec-testbed-sacc-netns.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        sweep_leftovers(PREFIX, spare_live_runs=True)
        yield
        left = list_leftovers(PREFIX, spare_live_runs=True)
        sweep_leftovers(PREFIX, spare_live_runs=True)
        assert left == [], f"namespaces left behind: {left}"
