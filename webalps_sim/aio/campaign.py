"""The WebALPS fault campaign: a guardian killed, frozen or fed garbage while clients download.

::

    python -m webalps_sim.campaign [--trials 40] [--seed 1] [--clients 16] [--quick] [--out DIR]

Real processes on loopback (:mod:`webalps_sim.aio.testbed` helpers): a WebALPS CA, a guardian
it certified, and one WebALPS host (``python -m webalps_sim.host``) that reaches the guardian
through a relay in this process (:class:`Relay`, which can corrupt one reply).  The docroot
holds random files of several sizes whose SHA-256 the clients know.

Each trial (:func:`webalps_sim.faults.plan_trials`, all drawn from one ``random.Random(seed)``):
``--clients`` threads download files in a loop, each over a new TLS connection, in the
guardian's suites by turns (Python's ``http.client`` over ``ssl``; ``curl`` in
``--curl-clients`` of them), every download classified by :func:`webalps_sim.faults.classify`;
at a random instant one fault strikes (``kill``, ``freeze``, ``garbage``, ``garbage-reply``: see
:mod:`webalps_sim.faults`); once it is over, is the host process alive (the campaign never
restarts it), and does a fresh client download a file byte-exact within 30 s (the time to
resume counts from the fault's end)?  The clients run on briefly, then stop.

A **negative control** in the same run applies the same clients and classifier to a broken
plain-HTTP server (:class:`BrokenServer`): a body cut short of its ``Content-Length`` must be
``failed-closed``, a short body announced as whole ``accepted-partial`` (the classifier can see
a partial body), an honest one ``complete``.

Results (``--out``, default ``results/webalps_campaign``): ``fault_campaign.csv`` (one row per trial),
``fault_campaign.json`` (totals per fault kind, success fraction = complete / attempted,
accepted-partial total, host restarts, resumed fraction, the negative control, the command, the
seed and the run's provenance) and ``fault_campaign.png`` (downloads per fault kind and
outcome).  The exit status is 1 if any download was accepted partial, the host died, a trial
did not resume or the negative control failed.
"""

from __future__ import annotations

import argparse
import csv
import functools
import hashlib
import http.client
import json
import random
import shlex
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from testbed import cli, results
from tls12.suites import SUITES

from .. import codec, faults
from ..faults import OUTCOMES, Timing, TrialPlan, classify
from .host import WEBALPS_SUITES
from .testbed import _free_port, _host_cmd, _port_open, _start, _wait, certify_guardian

__all__ = ["CampaignConfig", "Relay", "BrokenServer", "download", "negative_control",
           "run_campaign", "main"]

CIPHERS = tuple(SUITES[s].openssl_name for s in WEBALPS_SUITES)
FULL_SIZES = (64 << 10, 256 << 10, 1 << 20, 4 << 20)
QUICK_SIZES = (16 << 10, 64 << 10, 256 << 10)
RETRY_PAUSE = 0.2
"""Seconds a client waits after a failed download before its next one (a failing service is
retried, not hammered: the failed-closed counts of a trial grow with its down time / this)."""
QUICK_TIMING = Timing(instant=(0.3, 1.2), restart=(0.2, 1.0), freeze=(0.5, 2.0), garbage=(0.2, 0.5))


@dataclass(frozen=True)
class CampaignConfig:
    """A campaign's parameters (seconds, bytes)."""

    trials: int = 40
    seed: int = 1
    clients: int = 16
    curl_clients: int = 2
    sizes: tuple[int, ...] = FULL_SIZES
    timing: Timing = Timing()
    settle: float = 1.0
    """Seconds the clients run on after the service resumed."""
    resume_deadline: float = 30.0
    guardian_timeout: float = 10.0
    """The host's ``--guardian-timeout``: longer than the longest freeze."""
    client_timeout: float = 30.0


@dataclass
class Files:
    """The docroot ``root``: file name -> SHA-256 of random files of the given sizes."""

    root: Path
    digests: dict[str, str] = field(default_factory=dict)

    @classmethod
    def write(cls, root: Path, sizes: tuple[int, ...], rng: random.Random) -> Files:
        root.mkdir(parents=True, exist_ok=True)
        for size in sizes:
            (root / f"f{size // 1024}k.bin").write_bytes(rng.randbytes(size))
        return cls(root, {f.name: hashlib.sha256(f.read_bytes()).hexdigest()
                          for f in sorted(root.iterdir())})


@functools.cache
def _tls_context(cafile: Path, cipher: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(cafile))
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(cipher)
    return ctx


def download(client: str, port: int, path: str, *, cafile: Path | None, cipher: str = "",
             timeout: float = 30.0) -> tuple[bool, bytes]:
    """One GET of ``path`` on 127.0.0.1:``port`` (HTTPS verified against ``cafile`` with one
    suite, or plain HTTP if ``cafile`` is None): the client's verdict and the body.

    ``client`` ``python``: ``http.client``, whose verdict is status 200, a ``Content-Length``
    and a body of exactly that length with no error (a short body is ``IncompleteRead``);
    ``curl``: its exit status 0 (``--fail`` makes an HTTP error status a failure; a body short
    of its ``Content-Length`` is exit 18)."""
    if client == "curl":
        return _curl(port, path, cafile, cipher, timeout)
    conn: http.client.HTTPConnection
    if cafile is None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    else:
        conn = http.client.HTTPSConnection("localhost", port, timeout=timeout,
                                           context=_tls_context(cafile, cipher))
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        body = response.read()
        length = response.getheader("Content-Length")
        return response.status == 200 and length is not None and int(length) == len(body), body
    except (OSError, http.client.HTTPException, ValueError):
        return False, b""
    finally:
        conn.close()


def _curl(port: int, path: str, cafile: Path | None, cipher: str, timeout: float
          ) -> tuple[bool, bytes]:
    cmd = ["curl", "-sS", "--fail", "--max-time", str(timeout), "-o", "-"]
    if cafile is None:
        cmd.append(f"http://127.0.0.1:{port}{path}")
    else:
        cmd += ["--tlsv1.2", "--tls-max", "1.2", "--ciphers", cipher, "--cacert", str(cafile),
                "--resolve", f"localhost:{port}:127.0.0.1", f"https://localhost:{port}{path}"]
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=timeout + 10)
    except subprocess.TimeoutExpired:
        return False, b""
    return done.returncode == 0, done.stdout


class Clients:
    """``n`` download loops on threads until :meth:`stop`; outcome counts in :attr:`counts`."""

    def __init__(self, n: int, n_curl: int, port: int, cafile: Path, files: Files,
                 seed: int, timeout: float) -> None:
        self.counts: Counter[str] = Counter()
        self.slowest = 0.0
        """Seconds of the longest download (a frozen guardian's waiting clients show here)."""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(
            target=self._loop, args=(i, i < n_curl, port, cafile, files, seed, timeout),
            daemon=True) for i in range(n)]
        for thread in self._threads:
            thread.start()

    def _loop(self, i: int, curl: bool, port: int, cafile: Path, files: Files, seed: int,
              timeout: float) -> None:
        rng = random.Random(seed * 1000 + i)
        names = sorted(files.digests)
        while not self._stop.is_set():
            name, began = rng.choice(names), time.monotonic()
            accepted, body = download("curl" if curl else "python", port, f"/{name}",
                                      cafile=cafile, cipher=CIPHERS[i % len(CIPHERS)],
                                      timeout=timeout)
            outcome = classify(accepted, body, files.digests[name])
            with self._lock:
                self.counts[outcome] += 1
                self.slowest = max(self.slowest, time.monotonic() - began)
            if not accepted:
                time.sleep(RETRY_PAUSE)

    def stop(self) -> Counter[str]:
        """Stop after every client's current download; the counts."""
        self._stop.set()
        for thread in self._threads:
            thread.join()
        return self.counts


def _shut(*socks: socket.socket) -> None:
    """End both directions of each socket (its pump thread then sees EOF and ends too)."""
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _pump(src: socket.socket, dst: socket.socket, limit: int | None = None) -> None:
    """Copy ``src`` to ``dst`` (at most ``limit`` bytes), then end both."""
    sent = 0
    try:
        while (limit is None or sent < limit) and (data := src.recv(codec.RECV_SIZE)):
            data = data if limit is None else data[: limit - sent]
            dst.sendall(data)
            sent += len(data)
    except OSError:
        pass
    _shut(src, dst)
    if limit is not None:
        src.close()
        dst.close()


class Relay:
    """A Unix-socket relay host -> ``upstream`` guardian that can corrupt one reply frame.

    :meth:`arm` makes the next guardian frame be corrupted
    (:func:`webalps_sim.faults.corrupt_frame`): ``payload`` flips one random bit after the
    header, ``header`` sets an unknown frame type."""

    def __init__(self, path: Path, upstream: Path, rng: random.Random) -> None:
        self.path, self.upstream, self._rng = path, upstream, rng
        self._armed: str | None = None
        self.corrupted = threading.Event()
        self._lock = threading.Lock()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(path))
        self._listener.listen(16)
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, variant: str | None) -> None:
        """Corrupt the next reply (``payload`` or ``header``); ``None`` disarms."""
        with self._lock:
            self.corrupted.clear()
            self._armed = variant

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                down, _ = self._listener.accept()
            except OSError:
                return
            up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                up.connect(str(self.upstream))
            except OSError:  # the guardian is down: so is the channel
                up.close()
                down.close()
                continue
            threading.Thread(target=_pump, args=(down, up), daemon=True).start()
            threading.Thread(target=self._replies, args=(up, down), daemon=True).start()

    def _replies(self, up: socket.socket, down: socket.socket) -> None:
        buffer = bytearray()
        try:
            while data := up.recv(codec.RECV_SIZE):
                buffer += data
                down.sendall(b"".join(self._corrupt(f) for f in faults.cut_frames(buffer)))
        except OSError:
            pass
        _shut(up, down)
        up.close()
        down.close()

    def _corrupt(self, frame: bytes) -> bytes:
        with self._lock:
            variant, self._armed = self._armed, None
        if variant is None:
            return frame
        self.corrupted.set()
        return faults.corrupt_frame(frame, variant, self._rng)


def _recv(s: socket.socket) -> bytes | None:
    """What the peer sent next (``b""``: it closed), or None if nothing within the timeout."""
    try:
        return s.recv(1 << 16)
    except TimeoutError:
        return None
    except OSError:
        return b""


def rogue_host(sock: Path, variant: str, seconds: float, rng: random.Random) -> str:
    """Connect to the guardian as a rogue host, send garbage, listen for ``seconds``; what the
    guardian did (its reply, and whether it closed the connection)."""
    data = faults.garbage(variant, rng)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(seconds)
        s.connect(str(sock))
        try:
            s.sendall(data)
        except OSError as exc:
            return f"guardian refused the bytes: {type(exc).__name__}"
        reply = _recv(s)
        closed = reply == b"" or (reply is not None and _recv(s) == b"")
    return faults.describe_reply(reply, closed)


class Guardian:
    """The guardian process of a campaign: started, killed, restarted, frozen."""

    def __init__(self, stack: ExitStack, state: Path, sock: Path, logs: Path) -> None:
        self.stack, self.state, self.sock, self.logs = stack, state, sock, logs
        self.runs = 0
        self.proc = self.start()

    def start(self) -> subprocess.Popen[bytes]:
        self.runs += 1
        log = self.logs / f"guardian-{self.runs}.log"
        cmd = [sys.executable, "-m", "webalps_sim.guardian", "--state-dir", str(self.state),
               "--listen", str(self.sock), "--app", "null"]
        self.proc = _start(self.stack, cmd, log)
        _wait(lambda: "guardian listening" in log.read_text(errors="replace"), self.proc,
              "guardian", log)
        return self.proc

    def inject(self, plan: TrialPlan, relay: Relay, rng: random.Random) -> str:
        """The fault of ``plan``; returns once it is over (the guardian is back), with a note."""
        if plan.fault == "kill":
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)
            time.sleep(plan.duration)
            self.start()
            return f"killed, restarted as run {self.runs}"
        if plan.fault == "freeze":
            self.proc.send_signal(signal.SIGSTOP)
            time.sleep(plan.duration)
            self.proc.send_signal(signal.SIGCONT)
            return "stopped, continued"
        if plan.fault == "garbage":
            return f"{plan.variant}: {rogue_host(self.sock, plan.variant, plan.duration, rng)}"
        relay.arm(plan.variant)
        hit = relay.corrupted.wait(10.0)
        if not hit:
            relay.arm(None)
        return f"{plan.variant} of one reply corrupted" if hit else "no reply in 10 s"


def _resume(port: int, cafile: Path, files: Files, deadline: float) -> float | None:
    """Seconds until a fresh client downloads the smallest file byte-exact, or None."""
    name = min(files.digests, key=lambda n: (files.root / n).stat().st_size)
    start = time.monotonic()
    while time.monotonic() - start < deadline:
        accepted, body = download("python", port, f"/{name}", cafile=cafile, cipher=CIPHERS[0],
                                  timeout=deadline)
        if classify(accepted, body, files.digests[name]) == "complete":
            return time.monotonic() - start
        time.sleep(0.1)
    return None


@dataclass
class _Bed:
    port: int
    cafile: Path
    files: Files
    host: subprocess.Popen[bytes]
    guardian: Guardian
    relay: Relay


def _trial(bed: _Bed, plan: TrialPlan, cfg: CampaignConfig) -> dict[str, Any]:
    rng = random.Random(plan.seed)
    clients = Clients(cfg.clients, cfg.curl_clients, bed.port, bed.cafile, bed.files, plan.seed,
                      cfg.client_timeout)
    start = time.monotonic()
    try:
        time.sleep(plan.instant)
        detail = bed.guardian.inject(plan, bed.relay, rng)
        duration = time.monotonic() - start - plan.instant
        resume = _resume(bed.port, bed.cafile, bed.files, cfg.resume_deadline)
        time.sleep(cfg.settle)
    finally:
        counts = clients.stop()
    return {"trial": plan.index, "seed": plan.seed, "fault": plan.fault, "variant": plan.variant,
            "instant_s": plan.instant, "duration_s": round(duration, 3),
            "downloads": sum(counts.values()), **{o: counts[o] for o in OUTCOMES},
            "slowest_download_s": round(clients.slowest, 3),
            "host_alive": bed.host.poll() is None, "resumed": resume is not None,
            "time_to_resume_s": None if resume is None else round(resume, 3), "detail": detail}


def _start_bed(stack: ExitStack, work: Path, cfg: CampaignConfig, rng: random.Random) -> _Bed:
    state = work / "guardian"
    cafile = certify_guardian(state, work / "ca")
    files = Files.write(work / "docroot", cfg.sizes, rng)
    guardian = Guardian(stack, state, state / "guardian.sock", work)
    relay = Relay(work / "relay.sock", guardian.sock, random.Random(rng.getrandbits(32)))
    stack.callback(relay.close)
    port = _free_port()
    log = work / "host.log"
    host = _start(stack, _host_cmd("webalps", port, files.root, "--guardian", str(relay.path),
                                   "--guardian-timeout", str(cfg.guardian_timeout)), log)
    _wait(lambda: _port_open(port), host, "host", log)
    return _Bed(port, cafile, files, host, guardian, relay)


def run_campaign(cfg: CampaignConfig, workdir: Path | None = None,
                 progress: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    """Run the campaign; ``{"rows": [...], "summary": {...}}`` (see the module docstring)."""
    rng = random.Random(cfg.seed)
    plans = faults.plan_trials(rng, cfg.trials, cfg.timing)
    with ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="campaign-")))
        workdir.mkdir(parents=True, exist_ok=True)
        bed = _start_bed(stack, workdir, cfg, rng)
        host_pid, rows = bed.host.pid, []
        progress(f"host pid {host_pid} on port {bed.port}; {len(plans)} trials, "
                 f"{cfg.clients} clients, files {sorted(bed.files.digests)}")
        for plan in plans:
            row = _trial(bed, plan, cfg)
            rows.append(row)
            progress(f"trial {plan.index + 1}/{len(plans)} {faults.describe(row)}")
            if not row["host_alive"]:
                progress("the host died: campaign stopped")
                break
        control = negative_control(bed.files, bed.port, bed.cafile, cfg.client_timeout)
        summary = {**faults.summarize(rows), "host_restarts": 0,
                   "host_pid_unchanged_and_alive": bed.host.poll() is None
                   and bed.host.pid == host_pid,
                   "guardian_runs": bed.guardian.runs, "negative_control": control}
    summary["accepted_partial_total"] = summary["total"]["accepted-partial"]
    return {"rows": rows, "summary": summary}


class BrokenServer:
    """The negative control's servers on threads (:data:`webalps_sim.faults.CONTROL_EXPECTED`):
    plain HTTP serving ``/MODE/NAME`` from ``files`` (:attr:`port`), and a relay to the WebALPS
    host at ``tls_port`` that passes half of the largest file's size of each response, then
    closes (:attr:`cut_port`)."""

    def __init__(self, files: Files, tls_port: int) -> None:
        self.files, self.tls_port = files, tls_port
        self.limit = max((files.root / n).stat().st_size for n in files.digests) // 2
        self._plain = socket.create_server(("127.0.0.1", 0))
        self._cut = socket.create_server(("127.0.0.1", 0))
        self.port, self.cut_port = (s.getsockname()[1] for s in (self._plain, self._cut))
        for listener in (self._plain, self._cut):
            threading.Thread(target=self._serve, args=(listener,), daemon=True).start()

    def _serve(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            if listener is self._cut:
                up = socket.create_connection(("127.0.0.1", self.tls_port))
                threading.Thread(target=_pump, args=(conn, up), daemon=True).start()
                threading.Thread(target=_pump, args=(up, conn, self.limit), daemon=True).start()
                continue
            with conn:
                mode, name = conn.recv(4096).decode("latin-1").split(" ")[1][1:].split("/", 1)
                conn.sendall(faults.broken_response(mode, (self.files.root / name).read_bytes()))

    def close(self) -> None:
        self._plain.close()
        self._cut.close()


def negative_control(files: Files, tls_port: int, cafile: Path, timeout: float,
                     repeats: int = 4) -> dict[str, Any]:
    """The outcome counts of the broken servers' downloads (Python and curl clients, the
    ``tls-cut`` ones in the guardian's suites by turns); ``ok`` if each gave only its expected
    outcome (:func:`webalps_sim.faults.control_summary`)."""
    server = BrokenServer(files, tls_port)
    counts: dict[str, Counter[str]] = {m: Counter() for m in faults.CONTROL_EXPECTED}
    largest = max(files.digests, key=lambda n: (files.root / n).stat().st_size)
    try:
        for mode in counts:
            for k, name in enumerate(sorted(files.digests)[:repeats]):
                for client in ("python", "curl"):
                    if mode == "tls-cut":
                        got = download(client, server.cut_port, f"/{largest}", cafile=cafile,
                                       cipher=CIPHERS[k % len(CIPHERS)], timeout=timeout)
                        name = largest
                    else:
                        got = download(client, server.port, f"/{mode}/{name}", cafile=None,
                                       timeout=timeout)
                    counts[mode][classify(*got, files.digests[name])] += 1
    finally:
        server.close()
    return faults.control_summary({m: dict(c) for m, c in counts.items()})


def write_results(out: Path, result: dict[str, Any], config: dict[str, Any]) -> list[Path]:
    """``fault_campaign.csv``, ``.json`` and ``.png`` in ``out``; their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "fault_campaign.csv", out / "fault_campaign.json", out / "fault_campaign.png"]
    with open(paths[0], "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=faults.COLUMNS)
        writer.writeheader()
        writer.writerows(result["rows"])
    summary = {**result["summary"], "config": config,
               "run": results.run_metadata(config, quick=config["quick"])}
    paths[1].write_text(json.dumps(summary, indent=1, default=str) + "\n")
    _plot(paths[2], result["summary"]["per_fault"], config)
    return paths


def _plot(path: Path, per_fault: dict[str, dict[str, Any]], config: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("agg")
    import matplotlib.pyplot as plt

    kinds = list(per_fault)
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.27
    for k, (outcome, colour) in enumerate(zip(OUTCOMES, ("tab:green", "tab:orange", "tab:red"),
                                              strict=True)):
        xs = [i + (k - 1) * width for i in range(len(kinds))]
        values = [per_fault[f][outcome] for f in kinds]
        bars = ax.bar(xs, values, width, label=outcome, color=colour)
        ax.bar_label(bars, fontsize=7)
    ax.set_xticks(range(len(kinds)),
                  [f"{f}\n({per_fault[f]['trials']} trials)" for f in kinds])
    ax.set_ylabel("downloads (count)")
    ax.set_title(f"WebALPS fault campaign: {config['clients']} clients, seed {config['seed']}")
    ax.legend(title="download outcome")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=cli.program_name("webalps_sim.campaign"),
        description="Fault campaign: kill, freeze or feed garbage to the guardian at random "
        "instants while clients download through a WebALPS host; counts per outcome.")
    parser.add_argument("--trials", type=cli.positive_int, help="trials (default 40, quick 6)")
    parser.add_argument("--seed", type=int, default=1, help="seed of every random choice")
    parser.add_argument("--clients", type=cli.positive_int, default=16,
                        help="concurrent downloading clients (default 16)")
    parser.add_argument("--curl-clients", type=cli.non_negative_int, default=2,
                        help="how many of the clients are curl (default 2)")
    parser.add_argument("--quick", action="store_true",
                        help="small files (16-256 KiB), short faults, 6 trials")
    parser.add_argument("--out", type=cli.directory, help="results folder (default results/webalps_campaign)")
    return parser


def _config(args: argparse.Namespace) -> tuple[CampaignConfig, dict[str, Any]]:
    quick = args.quick
    timing = QUICK_TIMING if quick else Timing()
    cfg = CampaignConfig(trials=args.trials or (6 if quick else 40), seed=args.seed,
                         clients=args.clients, curl_clients=min(args.curl_clients, args.clients),
                         sizes=QUICK_SIZES if quick else FULL_SIZES, timing=timing,
                         settle=0.5 if quick else 1.0)
    command = shlex.join(["python", "-m", "webalps_sim.campaign", *sys.argv[1:]])
    return cfg, {**asdict(cfg), "quick": quick, "command": command}


def _main(args: argparse.Namespace) -> int:
    cfg, config = _config(args)
    out = args.out or results.results_dir("webalps_campaign")
    result = run_campaign(cfg, progress=lambda line: print(line, flush=True))
    paths = write_results(out, result, config)
    s = result["summary"]
    t = s["total"]
    print(f"{t['attempted']} downloads: {t['complete']} complete, {t['failed-closed']} "
          f"failed-closed, {t['accepted-partial']} accepted-partial; success fraction "
          f"{t['success_fraction']}; resumed {t['resumed']}/{t['trials']}; negative control "
          f"{'ok' if s['negative_control']['ok'] else 'FAILED'}; wrote "
          + ", ".join(str(p) for p in paths))
    good = (t["accepted-partial"] == 0 and s["host_pid_unchanged_and_alive"]
            and t["resumed"] == t["trials"] and s["negative_control"]["ok"])
    return 0 if good else 1


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m webalps_sim.campaign``."""
    return cli.run_main(build_parser(), _main, argv)


if __name__ == "__main__":
    sys.exit(main())
