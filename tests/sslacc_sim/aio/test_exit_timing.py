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

from sslacc_sim.aio.linux.campaign_load import Trial, kill, process_size, record_exits
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
    # what the teardown had to free, read before the kill: an interpreter's few MB, one thread
    assert 1 < trial.columns["rss_mb"] < 200 and trial.columns["threads"] == 1, trial.columns
    assert process_size(proc.pid) == (None, None)  # reaped: nothing to read


def test_a_process_s_size_is_its_resident_memory_and_threads() -> None:
    """Touching 64 MB more shows as about 64 MB more resident; four sleeping threads as four."""
    code = ("import sys, threading, time; b = bytearray(64 << 20) if sys.argv[1] == 'big' else b''"
            "; [b.__setitem__(i, 1) for i in range(0, len(b), 4096)]"
            "; [threading.Thread(target=time.sleep, args=(60,), daemon=True).start() for _ in range(4)]"
            "; print('ready', flush=True); time.sleep(60)")  # fmt: skip
    sizes = {}
    for which in ("small", "big"):
        proc = subprocess.Popen([sys.executable, "-c", code, which], stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
            sizes[which] = process_size(proc.pid)
        finally:
            proc.kill()
            proc.wait()
    assert sizes["small"][1] == sizes["big"][1] == 5, sizes
    grown = sizes["big"][0] - sizes["small"][0]
    assert 60 < grown < 70, sizes


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
    assert slow[0]["rss_mb"] is None  # a run before the size columns
    faults["rss_mb"], faults["threads"] = [90.0, 80.0, None, 70.0], [33, 30, None, 31]
    faults["second_rss_mb"], faults["second_threads"] = [None, None, None, 60.0], [None] * 3 + [29]
    slow = _slow_detections(faults)
    assert (slow[0]["rss_mb"], slow[0]["threads"]) == (90.0, 33)
    assert (slow[1]["rss_mb"], slow[1]["threads"]) == (60.0, 29)  # the second victim's
    assert slow[0]["woke_s"] is None  # a run before the watch's own stamp
    faults["woke_s"] = [0.004, 0.003, None, 0.009]
    assert [s["woke_s"] for s in _slow_detections(faults)] == [0.004, 0.009]
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
