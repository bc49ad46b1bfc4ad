"""The campaign's load and what a trial saw: the site, the clients' plan, the run, the record.

Shared by the chain's trial (:mod:`~sslacc_sim.aio.linux.campaign`) and the bucket layout's
(:mod:`~sslacc_sim.aio.linux.campaign_buckets`): the files served and the certificate
(:func:`make_site`), the mix of unmodified clients each trial runs (:func:`plan_load`), the run of
that load around a fault (:func:`run_load`, every response checked byte for byte) and the
client's record of every segment (:func:`client_capture`).
"""

from __future__ import annotations

import json
import queue
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testbed.linux.capture import Capture

from . import clients
from .failover import (
    HOSTNAME,
    file_bytes,
    first_line,
    lines_of,
    node_env,
    site_credentials,
    wait_line,
)
from .netns import MIRROR_ADDRESSES, VIP, Topology

if TYPE_CHECKING:
    from .campaign_config import CampaignConfig

__all__ = ["Site", "Trial", "make_site", "plan_load", "expected_body", "unread_lines",
           "capture", "client_capture", "run_load", "kill", "process_size", "PORT", "READY_S",
           "BASELINE"]

PORT = 443
READY_S = 30.0
_RESUME_SHARE = 0.25
_UPLOAD_SHARE = 0.2  # of the connections: POST a file (the answer is a receipt of it)
_KEEPALIVE_SHARE = 0.2  # of those not resuming: 2 or 3 requests on one connection
#: A trial's mode when nothing fails: trial 0 (it measures the load's length), and the
#: baseline trials (``--baselines``), which measure the same gaps from an instant drawn as a
#: fault's is, with no fault (:func:`_phantom`).
BASELINE = "none"


@dataclass
class Site:
    """The files, the certificate and what the nodes share, written once per campaign."""

    work: Path
    files: dict[str, bytes]
    cert: Path
    key: Path

    def node_args(self, suite: str) -> list[str]:
        return ["--docroot", str(self.work / "docroot"), "--vip", VIP, "--mirror",
                MIRROR_ADDRESSES["b"], "--port", str(PORT), "--suite", suite,
                "--cert", str(self.cert), "--key", str(self.key)]  # fmt: skip


def make_site(work: Path, sizes: tuple[int, ...]) -> Site:
    root = work / "docroot"
    root.mkdir()
    data = file_bytes(max(sizes))
    files = {}
    for i, size in enumerate(sizes):
        body = data[i * 7919 % 4096 :][:size] if size + 4096 <= len(data) else data[:size]
        (root / f"f{i}").write_bytes(body)
        files[f"/f{i}"] = body
    cert, key = site_credentials(work)
    return Site(work, files, cert, key)


@dataclass
class Trial:
    """What one trial ran and saw."""

    index: int
    mode: str
    kill_at: float | None
    rows: list[dict[str, Any]] = field(default_factory=list)
    report: dict[str, Any] | None = None
    kill: float | None = None
    woke: float | None = None
    second_after: float = 0.0
    """``double``: seconds from the first takeover's claim to the second kill."""
    first: dict[str, Any] | None = None
    """``double``: the first kill's time and takeover report."""
    victim_node: str = "a"
    victim: str = ""
    zombie_capture: list[list[Any]] | None = None
    """The frames the victim put on the LAN (its switch port's capture), when that, not the
    client's capture told apart by MAC, is where its zombie frames are counted."""
    work: Path = Path()
    said: dict[str, list[str]] = field(default_factory=dict)
    expect_takeover: bool = True
    """Whether the fault must be answered by a takeover (``join-kill``: only once the master
    admitted the newcomer)."""
    columns: dict[str, Any] = field(default_factory=dict)
    """The trial's row's own columns (the join modes')."""
    start: float = 0.0
    load_s: float = 0.0
    capture: list[list[Any]] = field(default_factory=list)
    capture_drops: list[int] = field(default_factory=list)
    """Frames the client's capture had no room for (``DROPPED`` of ``node sniff``)."""


def plan_load(rng: random.Random, cfg: CampaignConfig, site: Site, work: Path
          ) -> list[clients.Request]:  # fmt: skip
    kinds = [clients.CLIENTS[i % len(clients.CLIENTS)] for i in range(cfg.connections)]
    rng.shuffle(kinds)
    reqs = []
    for i, kind in enumerate(kinds):
        path = rng.choice(sorted(site.files))
        resume = kind in clients.RESUMING_CLIENTS and rng.random() < _RESUME_SHARE
        upload = site.work / "docroot" / path.lstrip("/") if rng.random() < _UPLOAD_SHARE else None
        # an upload is asked once per connection (the load's choice, as in the runs so far;
        # a longer upload survives too: test_long_upload)
        alone = resume or upload is not None
        repeat = rng.choice((2, 3)) if not alone and rng.random() < _KEEPALIVE_SHARE else 1
        reqs.append(clients.Request(kind, HOSTNAME, VIP, PORT, "/upload" if upload else path,
                                    site.cert, work / f"c{i}.out", timeout=cfg.client_timeout,
                                    suite=cfg.suite, resume=resume, upload=upload,
                                    repeat=repeat))  # fmt: skip
    return reqs


def expected_body(site: Site, req: clients.Request) -> bytes:
    """The body each response of ``req`` must carry: the file, or the receipt of the upload."""
    sent = site.files["/" + req.upload.name] if req.upload is not None else site.files[req.path]
    return clients.expected_body(req, sent)


def unread_lines(proc: subprocess.Popen[str]) -> list[str]:
    """What a node printed that nobody has read yet (a takeover in a trial without a fault)."""
    out: list[str] = []
    q = lines_of(proc)
    while True:
        try:
            line = q.get_nowait()
        except queue.Empty:
            return out
        if line is None:
            q.put(None)
            return out
        out.append(line.rstrip("\n")[:2000])


@contextmanager
def capture(topo: Topology, node: str, dev: str, out: Path, *, incoming_only: bool = False,
            drops: list[int] | None = None) -> Iterator[list[list[Any]]]:  # fmt: skip
    """Every segment to and from the service heard on ``dev`` in ``node``'s namespace (``node
    sniff``): the list yielded is filled once the block ends, and ``drops`` gets the frames
    the capture's socket had no room for. A record that could not be written raises (a count
    of zero frames must mean that none came)."""
    rows: list[list[Any]] = []
    sniffer = topo.popen(node, [sys.executable, "-m", "sslacc_sim.aio.linux.node", "sniff",
                                "--dev", dev, "--src", VIP, "--port", str(PORT), "--out", str(out),
                                *(["--incoming-only"] if incoming_only else [])],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=node_env())  # fmt: skip
    wait_line(sniffer, "ready", READY_S)
    try:
        yield rows
    finally:
        sniffer.send_signal(signal.SIGTERM)
        said = first_line(sniffer, ("DROPPED",), 30)  # after the record is written
        sniffer.wait(timeout=30)
    if not out.exists():
        raise RuntimeError(f"the capture on {node}:{dev} wrote nothing (exit {sniffer.returncode})")
    rows.extend(json.loads(out.read_text()))
    dropped = re.fullmatch(r"DROPPED (\d+)", said)
    if drops is not None:
        if dropped is None:
            raise RuntimeError(f"the capture on {node}:{dev} did not say what it dropped")
        drops.append(int(dropped.group(1)))


@contextmanager
def client_capture(topo: Topology, work: Path, trial: Trial) -> Iterator[None]:
    """The client's record of every segment to and from the service, into ``trial.capture``
    once the block ends."""
    with capture(topo, "client", "eth0", work / "capture.json", drops=trial.capture_drops) as rows:
        yield
    trial.capture = rows


@contextmanager
def pcap(topo: Topology, folder: Path | None, trial: Trial) -> Iterator[None]:
    """With ``folder``: the client interface's traffic goes to ``folder/t<N>.pcap`` (headers
    only), and after it ``t<N>.json`` says when the fault came on the capture's clock (the wall
    clock: ``kill_epoch``, ``woke_epoch``). Without: nothing."""
    if folder is None:
        yield
        return
    folder.mkdir(parents=True, exist_ok=True)
    with Capture(topo, "client", "eth0", folder / f"t{trial.index}.pcap"):
        yield
    to_wall = time.time() - time.monotonic()
    (folder / f"t{trial.index}.json").write_text(json.dumps(
        {"mode": trial.mode, "kill_epoch": None if trial.kill is None else trial.kill + to_wall,
         "woke_epoch": None if trial.woke is None else trial.woke + to_wall}) + "\n")  # fmt: skip


def _phantom(trial: Trial) -> None:
    """A baseline trial's instant: nothing fails, but the gap to each client's next byte is
    measured from it as from a fault's (what the load alone makes a client wait)."""
    assert trial.kill_at is not None
    time.sleep(max(0.0, trial.start + trial.kill_at - time.monotonic()))
    trial.kill = time.monotonic()


def run_load(site: Site, cfg: CampaignConfig, trial: Trial, rng: random.Random, work: Path,
             topo: Topology, procs: dict[str, subprocess.Popen[str]],
             fail: Callable[[], threading.Thread | None]) -> None:  # fmt: skip
    """The trial's load from the client's namespace, ``fail`` called at once when the trial
    has a fault (it sleeps until the instant itself); every response checked: ``trial.rows``,
    and what the nodes said that nobody read, ``trial.said``."""
    reqs = plan_load(random.Random(rng.random()), cfg, site, work)
    trial.start = time.monotonic()
    running = [clients.start(r, wrap=lambda argv: topo.command("client", argv)) for r in reqs]
    if trial.mode == BASELINE and trial.kill_at is not None:
        fail = partial(_phantom, trial)
    waker = fail() if trial.kill_at is not None else None
    outcomes = [clients.finish(p, r, expected_body(site, r))
                for p, r in zip(running, reqs, strict=True)]  # fmt: skip
    trial.load_s = time.monotonic() - trial.start
    if waker is not None:
        waker.join()
    trial.said = {n: unread_lines(p) for n, p in procs.items()}
    trial.rows = [{"trial": trial.index, "mode": trial.mode, **asdict(o), "resume": r.resume,
                   "upload": r.upload is not None, "repeat": r.repeat,
                   "size": r.upload.stat().st_size if r.upload else len(site.files[r.path]),
                   "ok": o.ok}
                  for o, r in zip(outcomes, reqs, strict=True)]  # fmt: skip


def kill(trial: Trial, proc: subprocess.Popen[str], column: str = "exited_s") -> None:
    """SIGKILL ``proc`` (its link cut already) at ``trial.kill``, and record in ``column`` when
    the kernel had torn it down (seconds from ``trial.kill``; its links closed before it can
    be reaped): how much of a late detection was the dying process's own exit, which waits
    for the CPU like any other work on a loaded machine. Also records what that teardown had
    to free, read just before the kill: the victim's resident memory in MB and its threads
    (``rss_mb`` and ``threads``, ``second_rss_mb``... for the column ``second_exited_s``)."""
    killed = trial.kill
    prefix = column.removesuffix("exited_s")
    trial.columns[prefix + "rss_mb"], trial.columns[prefix + "threads"] = process_size(proc.pid)
    proc.kill()

    def reap() -> None:
        proc.wait()
        if killed is not None:
            trial.columns[column] = round(time.monotonic() - killed, 4)

    threading.Thread(target=reap, name="reap", daemon=True).start()


def process_size(pid: int) -> tuple[float | None, int | None]:
    """A process's resident memory (MB, ``VmRSS``) and thread count, or ``None`` for each when
    it is gone (a killed process's kernel frees its memory before it closes its sockets, so
    the first delays the death's detection: ``docs/sslacc-cluster.md``)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None, None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    try:
        return int(fields["VmRSS"].split()[0]) / 1024, int(fields["Threads"])
    except (KeyError, ValueError, IndexError):
        return None, None  # a zombie has no VmRSS


def record_exits(trial: Trial, procs: dict[str, subprocess.Popen[str]]) -> None:
    """Each node's state at the trial's end, in column ``exits`` (``a:SIGKILL b:running
    c:exit 1``), and in ``crashed`` the nodes that died of a signal the campaign never sends
    (a segmentation fault, an abort): a death no rule of the cluster explains, which its own
    process printed nothing about. A killed node the reaper is still waiting for is given a
    moment to be reaped."""
    states, crashed = [], []
    for name, proc in sorted(procs.items()):
        try:
            code: int | None = proc.wait(timeout=0.05)
        except subprocess.TimeoutExpired:
            code = None
        if code is None:
            states.append(f"{name}:running")
        elif code < 0:
            sig = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            states.append(f"{name}:{sig}")
            if -code != signal.SIGKILL:
                crashed.append(f"{name}:{sig}")
        else:
            states.append(f"{name}:exit {code}")
    trial.columns["exits"] = " ".join(states)
    trial.columns["crashed"] = " ".join(crashed) or None
