"""Packet captures inside a namespace: ``tcpdump`` beside a run, bounded, always stopped.

A :class:`Capture` records what one interface of one node of a
:class:`~testbed.linux.netns.Namespaces` topology (the link testbed's ``client``/``veth0``,
say) sees while the ``with`` body runs, into a pcap file that Wireshark and ``tshark`` read::

    with LinkTestbed(ADSL_PROFILE) as tb, tb.capture("client", "veth0", "run.pcap"):
        curl(tb, url)

It runs ``tcpdump -i DEV -w FILE -U --immediate-mode -s SNAPLEN -Z root`` in the node
(``-U``: every packet is written as it arrives, so the file is a valid pcap at any moment;
``-Z root``: tcpdump started as root would otherwise drop to its own user, who may not write
``FILE``). Entering returns once tcpdump prints "listening on" (its socket is open, so the
body's first packet is in the file); leaving sends SIGINT and waits, so tcpdump writes its
last packets and its counts (:attr:`Capture.captured`, :attr:`Capture.dropped`). No tcpdump
outlives the ``with``, also when the body raises (SIGKILL after :data:`STOP_TIMEOUT`).

**Bounds.** ``snaplen`` keeps the first 128 bytes of each frame by default (Ethernet, IP and
TCP headers with options and the start of a TLS record; ``tshark`` still reads ``tcp.len``
from the IP header), :data:`FULL` keeps whole packets. ``max_bytes`` (default 64 MiB) caps the
file: a watcher stops tcpdump once the file is that big (it may overrun by what arrives in
0.1 s) and sets :attr:`Capture.truncated`; the file stays a valid pcap.

Needs ``tcpdump`` on PATH (Debian package ``tcpdump``) besides what the topology needs.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Self

from .netns import Namespaces, TestbedError

__all__ = ["HEADERS", "FULL", "MAX_BYTES", "START_TIMEOUT", "STOP_TIMEOUT", "CaptureFailed",
           "Capture"]

#: Default snap length: the headers of a frame (Ethernet 14, IP 20, TCP up to 60) and a little.
HEADERS = 128
#: Snap length for whole packets (tcpdump's own maximum).
FULL = 262144
#: Default size cap of one capture file, bytes.
MAX_BYTES = 64 * 2**20
#: Seconds tcpdump has to start listening, and to exit after SIGINT before it is killed.
START_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0
_POLL = 0.1  # s between two looks at the file size


class CaptureFailed(TestbedError):
    """tcpdump is missing, or did not start capturing; carries its stderr."""


class Capture:
    """``with Capture(topology, node, dev, path):`` -- tcpdump on ``dev`` in ``node`` into ``path``.

    ``snaplen`` bytes of each frame (:data:`HEADERS` by default, :data:`FULL` for whole
    packets); at most about ``max_bytes`` of file. After the ``with``, :attr:`captured` and
    :attr:`dropped` are tcpdump's own counts (``None`` if it did not say) and
    :attr:`truncated` tells whether the size cap stopped it early."""

    def __init__(self, topology: Namespaces, node: str, dev: str, path: str | os.PathLike[str],
                 *, snaplen: int = HEADERS, max_bytes: int = MAX_BYTES) -> None:
        if not 0 < snaplen <= FULL:
            raise ValueError(f"snaplen must be 1..{FULL} bytes, got {snaplen}")
        if max_bytes < 4096:
            raise ValueError(f"max_bytes must be at least 4096, got {max_bytes}")
        self.topology, self.node, self.dev = topology, node, dev
        self.path = Path(path).absolute()
        self.snaplen, self.max_bytes = snaplen, max_bytes
        self.captured: int | None = None
        self.dropped: int | None = None
        self.truncated = False
        self._proc: subprocess.Popen[str] | None = None
        self._done = threading.Event()
        self._watcher: threading.Thread | None = None

    def argv(self) -> list[str]:
        """The tcpdump command run in the node."""
        return ["tcpdump", "-i", self.dev, "-w", str(self.path), "-U", "--immediate-mode",
                "-s", str(self.snaplen), "-n", "-Z", "root"]

    def start(self) -> Self:
        """Start tcpdump and return once it is listening; :class:`CaptureFailed` if it exits
        or stays silent for :data:`START_TIMEOUT` seconds (it is killed then)."""
        if shutil.which("tcpdump") is None:
            raise CaptureFailed("tcpdump not found on PATH; install tcpdump")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.unlink(missing_ok=True)
        proc = self._proc = self.topology.popen(self.node, self.argv(), stdout=subprocess.DEVNULL,
                                                stderr=subprocess.PIPE)
        assert proc.stderr is not None  # stderr=PIPE
        fd, text = proc.stderr.fileno(), ""
        deadline = time.monotonic() + START_TIMEOUT
        try:
            while "listening on" not in text:
                ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
                chunk = os.read(fd, 4096).decode(errors="replace") if ready else ""
                if not chunk:
                    what = "exited" if ready else f"was silent for {START_TIMEOUT:g} s"
                    raise CaptureFailed(f"tcpdump on {self.dev} in {self.node} {what}: "
                                        f"{text.strip() or 'no output'}")
                text += chunk
        except BaseException:
            self._kill()
            raise
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watcher.start()
        return self

    def _watch(self) -> None:
        """Stop tcpdump (SIGINT) once the file reaches :attr:`max_bytes`."""
        while not self._done.wait(_POLL):
            try:
                size = self.path.stat().st_size
            except OSError:
                continue
            if size >= self.max_bytes and self._proc is not None:
                self.truncated = True
                self._signal(signal.SIGINT)
                return

    def _signal(self, sig: int) -> None:
        if self._proc is not None and self._proc.poll() is None:
            try:
                self._proc.send_signal(sig)
            except ProcessLookupError:
                pass

    def _kill(self) -> None:
        if self._proc is not None:
            self._signal(signal.SIGKILL)
            self._proc.communicate()

    def stop(self) -> None:
        """SIGINT tcpdump and wait for it (SIGKILL after :data:`STOP_TIMEOUT`); read its
        counts. Idempotent."""
        self._done.set()
        if self._watcher is not None:
            self._watcher.join()
            self._watcher = None
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        self.captured = _count(err, "captured")
        self.dropped = _count(err, "dropped by kernel")

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def _count(stderr: str | None, what: str) -> int | None:
    """tcpdump's final ``N packets <what>`` count from its stderr."""
    m = re.search(rf"(\d+) packets? {re.escape(what)}", stderr or "")
    return int(m.group(1)) if m else None
