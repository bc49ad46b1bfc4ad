"""The random-instant fault campaign, small and seeded (issue 22): every connection byte-exact.

In network namespaces (root, iproute2 and the four clients, as in CI; never skipped): a
campaign of concurrent curl, Python ``ssl``, gnutls-cli and ``openssl s_client`` downloads
against the real pair, the owner killed or hung at instants drawn uniformly over the load.
The owner stalls briefly before each accept and each read (``stall_ms``), so that the faults
find connections established but not accepted and client bytes acknowledged but not
consumed, the two cases the buddy's record of the LAN exists for.

The negative controls turn one mechanism off each and must lose connections (or let a zombie
reach a client): that is what shows the positive campaign could have failed. The full
campaign (hundreds of kills) runs from ``make benchmarks``; its numbers are in the README.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sslacc_sim.aio.linux.campaign import CampaignConfig, run_campaign
from sslacc_sim.aio.linux.netns import PREFIX, list_leftovers

pytestmark = [pytest.mark.interop, pytest.mark.usefixtures("namespaces")]

#: Small files keep a trial short; the full campaign serves up to 16 MiB.
SIZES = (1 << 10, 1 << 14, 1 << 18, 1 << 20, 1 << 22)


def test_a_small_seeded_campaign_keeps_every_connection_byte_exact(tmp_path: Path) -> None:
    cfg = CampaignConfig(trials=3, seed=7, connections=32, modes=("kill", "hang"),
                         wake_after=1.5, client_timeout=40, sizes=SIZES, stall_ms=20,
                         window=(0.05, 0.8), tag_prefix="tp")  # fmt: skip
    summary = run_campaign(cfg, tmp_path, progress=False)
    trials = (tmp_path / "trials.csv").read_text()
    assert summary["connections"] == 3 * 32 and summary["kills"] == 3
    assert summary["completed_exact"] == summary["connections"], trials
    assert summary["control_trial_ok"] and summary["silently_wrong"] == 0
    assert summary["took_over"] == 3 and summary["zombie_frames"] == 0
    # a hung owner is detected within 300 ms (the keepalive's limit is 200 ms)
    assert summary["detect_p50_s"]["hang"] < 0.3
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["completed_exact"] == summary["completed_exact"]
    assert (tmp_path / "connections.csv").read_text().count("\n") == 4 * 32 + 1


#: Each control, the fault it needs and what it must break.
CONTROLS = {
    "no-sniff-unaccepted": ("kill", "lost"),
    "no-sniff-data": ("kill", "lost"),
    "eof-only": ("hang", "lost"),
    "no-keepalive": ("hang", "lost"),
    "no-fence": ("hang", "zombie"),
}


@pytest.mark.parametrize("control", sorted(CONTROLS))
def test_each_negative_control_breaks_the_campaign(tmp_path: Path, control: str) -> None:
    mode, breaks = CONTROLS[control]
    # the hung owner of no-keepalive wakes after the clients' time limit: nobody took over
    wake, limit = (8.0, 5.0) if control == "no-keepalive" else (1.0, 10.0)
    cfg = CampaignConfig(trials=2, seed=3, connections=16, modes=(mode,), wake_after=wake,
                         client_timeout=limit, sizes=SIZES[:4], stall_ms=50,
                         window=(0.1, 0.3), control=control, tag_prefix="tn")  # fmt: skip
    summary = run_campaign(cfg, tmp_path, progress=False)
    assert summary["control_trial_ok"]  # the load alone passes: the fault did the damage
    if breaks == "lost":
        assert summary["completed_exact"] < summary["connections"]
    else:
        assert summary["zombie_frames"] > 0
    assert summary["silently_wrong"] == 0


def test_a_terminated_campaign_leaves_nothing_behind(tmp_path: Path) -> None:
    """SIGTERM mid-trial: the namespaces and every process of the run are gone."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    argv = [sys.executable, "-m", "sslacc_sim.aio.linux.campaign", "--trials", "3",
            "--connections", "8", "--tag-prefix", "tk", "--out", str(tmp_path / "out"),
            "--no-progress"]  # fmt: skip
    run = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not list_leftovers(f"{PREFIX}tk") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert list_leftovers(f"{PREFIX}tk"), "the campaign never built its namespaces"
    time.sleep(2.0)  # nodes and clients running
    run.send_signal(signal.SIGTERM)
    run.wait(timeout=60)
    assert run.returncode != 0
    assert list_leftovers(f"{PREFIX}tk") == []
    left = subprocess.run(["pgrep", "-af", str(tmp_path)], capture_output=True, text=True)
    assert left.stdout == "", left.stdout
    # SIGKILL leaves the namespaces; --cleanup removes them
    run = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not list_leftovers(f"{PREFIX}tk") and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)
    run.kill()
    run.wait(timeout=10)
    assert list_leftovers(f"{PREFIX}tk")
    done = subprocess.run([sys.executable, "-m", "sslacc_sim.aio.linux.campaign", "--cleanup",
                           "--tag-prefix", "tk"], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0 and "removed" in done.stdout
    assert list_leftovers(f"{PREFIX}tk") == []
