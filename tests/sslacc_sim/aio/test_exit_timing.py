"""When a killed node's process had exited, beside when its heir noticed the death.

A kill's detection comes from the dead process's links closing, which happens in the dying
process's own teardown: on a loaded machine that teardown waits for the CPU too. The campaign
records both (``exited_s``, ``detect_s``, from the kill) and lists the kills noticed late
(``slow_detections`` in the summary), so that a late detection can be told apart: the exit was
late as well (the victim's teardown), or only the heir was.

How each node ended is recorded too (``exits``), and a death by a signal the campaign never
sends is named (``crashed``): a member that dies inside a C library prints nothing.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from functools import partial

import pandas as pd

from sslacc_sim.aio.linux.campaign_load import Trial, kill, record_exits
from sslacc_sim.aio.linux.loadstats import SLOW_DETECTION_S, _slow_detections


def test_a_kill_records_when_the_process_had_exited() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], text=True)
    trial = Trial(0, "kill", 0.5)
    time.sleep(0.3)  # the interpreter is up
    trial.kill = time.monotonic()
    kill(trial, proc)
    deadline = time.monotonic() + 5
    while "exited_s" not in trial.columns and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.returncode == -9
    assert 0 <= trial.columns["exited_s"] < 1.0, trial.columns


def test_only_kills_noticed_late_are_listed_with_their_exit() -> None:
    late = SLOW_DETECTION_S + 0.05
    faults = pd.DataFrame([
        {"trial": 1, "mode": "kill", "kill_at_s": 0.1, "detect_s": late, "exited_s": 0.12,
         "second_exited_s": None},
        {"trial": 2, "mode": "kill", "kill_at_s": 3.0, "detect_s": 0.01, "exited_s": 0.004,
         "second_exited_s": None},
        {"trial": 3, "mode": "hang", "kill_at_s": 2.0, "detect_s": 0.2, "exited_s": None,
         "second_exited_s": None},  # a hang is noticed by the keepalive timeout: not listed
        {"trial": 4, "mode": "double", "kill_at_s": 1.0, "detect_s": late, "exited_s": 0.003,
         "second_exited_s": 0.002},  # the detection is of the second kill
    ])
    slow = _slow_detections(faults)
    assert [s["trial"] for s in slow] == [1, 4]
    assert slow[0]["exited_s"] == 0.12 and slow[1]["exited_s"] == 0.002
    assert _slow_detections(faults.drop(columns=["exited_s"])) == []  # a run before the column


def test_how_each_node_ended_names_a_crash_and_not_a_kill() -> None:
    """A node killed by the campaign (SIGKILL), one that crashed (SIGSEGV, SIGABRT), one that
    exited by itself and one still running: only the crashes are ``crashed``."""
    def start(code: str) -> subprocess.Popen[str]:
        no_core = partial(resource.setrlimit, resource.RLIMIT_CORE, (0, 0))  # no core file here
        return subprocess.Popen([sys.executable, "-c", code], text=True, preexec_fn=no_core)

    sleeper = "import time; time.sleep(60)"
    procs = {"a": start(sleeper), "b": start("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"),
             "c": start("import os; os.abort()"), "d": start("raise SystemExit(3)"),
             "e": start(sleeper)}  # fmt: skip
    try:
        trial = Trial(0, "kill", 0.5)
        trial.kill = time.monotonic()
        kill(trial, procs["a"])
        for name in "bcd":
            procs[name].wait(timeout=30)
        record_exits(trial, procs)
        assert trial.columns["exits"] == "a:SIGKILL b:SIGSEGV c:SIGABRT d:exit 3 e:running"
        assert trial.columns["crashed"] == "b:SIGSEGV c:SIGABRT"
        del procs["b"], procs["c"]
        record_exits(trial, procs)
        assert trial.columns["crashed"] is None
    finally:
        procs["e"].kill()
        procs["e"].wait()
