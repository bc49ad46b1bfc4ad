"""A sweep removes what a killed run left and spares a run that is still going.

Every namespace records the process that made it (``testbed.linux.netns.OWNERS``); a sweep with
``spare_live_runs`` leaves alone namespaces whose maker (another process) still runs, so a
campaign can run beside the test suite. Needs root and iproute2 (``.ci/run`` provides both)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from testbed.linux.netns import (
    OWNERS,
    Namespaces,
    check_available,
    held_by_another_run,
    list_leftovers,
    sweep_leftovers,
)

REPO = Path(__file__).resolve().parents[3]


@dataclass
class _Pair(Namespaces):
    """Two bare namespaces: enough to own and sweep."""

    PREFIX = "ownt-"
    NODES = ("x", "y")

    tag: str = field(default_factory=lambda: os.urandom(3).hex())
    _up: bool = field(default=False, init=False, repr=False)

    def _build(self) -> None:
        self.veth("x", "e0", "y", "e0")


_CHILD = """
import sys, time
sys.path.insert(0, {repo!r})
from tests.testbed.linux.test_netns_owners import _Pair
with _Pair(tag={tag!r}):
    print("up", flush=True)
    time.sleep(60)
"""


@pytest.fixture
def available() -> None:
    check_available()  # fails (never skips) with the reason when namespaces cannot be made


@pytest.mark.usefixtures("available")
def test_a_live_run_is_spared_and_a_killed_one_swept() -> None:
    tag = os.urandom(3).hex()
    mine = f"{_Pair.PREFIX}{tag}-"
    child = subprocess.Popen([sys.executable, "-c", _CHILD.format(repo=str(REPO), tag=tag)],
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "up"
        names = sorted(list_leftovers(mine))
        assert names == [f"{mine}x", f"{mine}y"]
        assert all(held_by_another_run(n) for n in names)
        assert sweep_leftovers(mine, spare_live_runs=True) == []
        assert sorted(list_leftovers(mine)) == names
        assert list_leftovers(mine, spare_live_runs=True) == []
    finally:
        child.kill()
        child.wait()
    assert not any(held_by_another_run(n) for n in names)  # its maker is gone: leftovers
    assert sorted(sweep_leftovers(mine, spare_live_runs=True)) == names
    assert list_leftovers(mine) == [] and not any((OWNERS / n).exists() for n in names)


@pytest.mark.usefixtures("available")
def test_own_namespaces_and_reused_pids_are_not_another_run() -> None:
    with _Pair() as pair:
        name = pair.ns("x")
        assert not held_by_another_run(name)  # this process made it: a leftover of this run
        assert list_leftovers(name, spare_live_runs=True) == [name]
        # a record naming a live process with another start time: the pid was reused
        (OWNERS / name).write_text(f"{os.getppid()} 1\n")
        assert not held_by_another_run(name)
        (OWNERS / name).write_text(f"{os.getppid()} garbage extra\n")
        assert not held_by_another_run(name)
    assert not (OWNERS / name).exists()
