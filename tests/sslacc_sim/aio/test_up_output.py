"""``up`` relays every node's report lines, from one thread per node, onto its one stdout.

The orchestrators (the tests, a researcher's script) find a takeover by a line that *starts*
with ``node b: RESTORED``. ``print`` writes a line's text and its newline separately, so two
relaying threads could run two lines into one: ``node a: exited (-9)node b: RESTORED {...}``,
when A's exit and B's takeover are reported in the same instant. A line longer than the text
layer's chunk (8 KiB: a ``RESUMED`` report of a few dozen connections) goes to the file at once,
and the interpreter lock is free while it does. Every line must arrive whole and on its own."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from sslacc_sim.aio.linux.cluster import _echo
from sslacc_sim.aio.linux.failover import FailoverFailed, wait_line

_LINES = 300
_PAD = 12_000  # characters of a line: more than the 8 KiB chunk


def _chatty(word: str) -> subprocess.Popen[str]:
    """A stand-in for a node process: ``_LINES`` report lines as fast as it can print them."""
    return subprocess.Popen([sys.executable, "-c", f"for i in range({_LINES}): "
                             f"print('{word} ' + str(i) + ' ' + 'x' * {_PAD}, flush=True)"],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip


def test_two_nodes_relayed_at_once_keep_every_line_whole(capfd: pytest.CaptureFixture[str]) -> None:
    procs = {"a": _chatty("EXITING"), "b": _chatty("RESTORED")}
    threads = [threading.Thread(target=_echo, args=(name, p)) for name, p in procs.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    out = capfd.readouterr().out.splitlines()
    for name, word in (("a", "EXITING"), ("b", "RESTORED")):
        mine = [line for line in out if line.startswith(f"node {name}: ")]
        assert mine == [f"node {name}: {word} {i} {'x' * _PAD}" for i in range(_LINES)] + \
            [f"node {name}: exited (0)"]
    assert len(out) == 2 * (_LINES + 1)  # nothing else: no two lines run into one


def test_a_line_that_never_comes_is_reported_with_the_lines_that_came_instead() -> None:
    """A missed ``RESTORED`` in CI must say what the cluster printed instead."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; print('node a: ready'); "
                             "print('node b: exited (1)', flush=True); time.sleep(30)"],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        with pytest.raises(FailoverFailed) as caught:
            wait_line(proc, "node b: RESTORED", 2)
    finally:
        proc.kill()
        proc.wait()
    assert str(caught.value).endswith("its last lines:\nnode a: ready\nnode b: exited (1)")
