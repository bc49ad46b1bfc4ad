"""P3b: full and resumed RSA-2048 TLS 1.2 handshakes per second, testbed.https_server vs openssl s_server.

Both servers run in their own process on loopback with the same self-signed
RSA-2048 certificate and key, TLS 1.2 only, one suite (default AES128-SHA,
RSA key exchange: the server's private-key operation is the cost the paper
era's servers paid per full handshake) and a session cache keyed by session
ID (``--session-cache`` for ours; ``openssl s_server -no_ticket``, so that
neither side resumes with tickets).  They are measured alternately in the same
run with the same load generator:

* ``openssl s_time -new`` -- a full handshake per connection;
* ``openssl s_time -reuse`` -- the first connection gets a session, every
  later one resumes it (abbreviated handshake, no RSA).

``--clients`` copies of ``s_time`` (default 4) run at once to keep the
server busy.  The client side of a handshake is cheap (an RSA *public*-key
operation) but not free: ``s_time`` spends roughly as much CPU per
connection as ``openssl s_server`` does, so on a machine with few cores the
clients, not the server, set the wall-clock rate of the faster server.  That
is why the server's own user + system CPU time is read from Linux
``/proc/<pid>/stat`` before and after each run, and two rates are printed:

* handshakes per **server CPU second** -- the cost of a handshake in each
  implementation, independent of how fast the clients are; the ratio
  tls12 / openssl of this figure is P3b (target: >= 0.5);
* handshakes per **wall second** -- what the clients saw; it equals the first
  figure only when the server was saturated (``busy`` close to 100 %).
  ``openssl s_server`` handles one connection at a time, so it is rarely
  saturated; our asyncio server overlaps connections.

Two more figures, measured in the same rounds, say where a handshake's time goes:

* ``uvloop`` -- the same server on the ``uvloop`` event loop (``--loop uvloop``, the ``fast``
  extra): what a cheaper event loop buys per connection;
* ``core`` -- the sans-IO core alone: a :class:`tls12.ServerConnection` fed the client's
  flights in memory (no sockets, no event loop), the process CPU time of the server's side
  only.  The server's figure minus this one is what the event loop, the socket calls, the
  kernel's TCP and the HTTP handler cost per connection; ``openssl s_server`` pays its whole
  handshake, kernel included, in less than our core alone on the resumed path.

Each (server, mode) is measured ``--repeats`` times (default 5), interleaved
(the servers rotate who goes first), and every figure prints as
``median (min–max, n)``; each ratio's repeat is one round's tls12 figure over
the same round's openssl figure, and the target counts as met only when the
median meets it.  Usage::

    python benchmarks/bench_handshake.py                     # 5 repeats of 2 s
    python benchmarks/bench_handshake.py --seconds 5 --repeats 7 --json results/benchmarks/handshake.json

Requires openssl (``apt-get install openssl``) and the built C extension.
"""

from __future__ import annotations

import argparse
import platform
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    REPO,
    Repeated,
    add_repeats_option,
    fail,
    repo_env,
    require_c_extension,
    require_tools,
    start_and_read_port,
    tls12_server,
    tree_cpu_seconds,
    write_json,
)

sys.path.insert(0, str(REPO))

if TYPE_CHECKING:
    from tls12.suites import SuiteParams

BENCH = "bench_handshake"
MODES = ("new", "reuse")
SERVERS = ("tls12", "uvloop", "openssl")
TARGET = 0.5
"""P3b's target for tls12 / openssl per server CPU second (the median must reach it)."""
GOALS = {"new": 1.0, "reuse": 0.7}
"""Issue 24's goals for the same ratio, per mode."""
CORE_HANDSHAKES = {"new": 300, "reuse": 2000}
"""In-memory handshakes per core measurement (per round and mode): about half a second each."""
MIN_RESUMED = 0.9
"""Fraction of ``-reuse`` connections that must really resume, or the run is wrong."""


@dataclass(frozen=True)
class Run:
    server: str
    mode: str
    handshakes: int
    resumed: int
    wall_s: float
    server_cpu_s: float

    @property
    def per_wall_s(self) -> float:
        return self.handshakes / self.wall_s

    @property
    def per_cpu_s(self) -> float:
        return self.handshakes / max(self.server_cpu_s, 1e-9)

    @property
    def busy(self) -> float:
        """Server CPU seconds per wall second (1.0: the server was saturated)."""
        return self.server_cpu_s / self.wall_s


def s_time(openssl: str, port: int, mode: str, seconds: int, cipher: str, clients: int) -> tuple[int, int, float]:
    """Run ``clients`` copies of ``openssl s_time -<mode>`` at once: ``(connections, resumed, wall seconds)``.

    ``s_time`` prints one character per connection (``*`` full, ``r``
    resumed) and a summary ``N connections in T s``.
    """
    cmd = [
        openssl, "s_time", "-connect", f"127.0.0.1:{port}", f"-{mode}", "-time", str(seconds),
        "-cipher", cipher, "-tls1_2",
    ]  # fmt: skip
    start = time.perf_counter()
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(clients)]
    outputs = [p.communicate(timeout=seconds + 60) for p in procs]
    wall = time.perf_counter() - start
    total = resumed = 0
    for proc, (out, err) in zip(procs, outputs, strict=True):
        m = re.search(r"^(\d+) connections in [\d.]+s;", out, re.M)
        if proc.returncode != 0 or m is None:
            lines = (err or out).strip().splitlines()
            raise RuntimeError(f"s_time -{mode} failed ({proc.returncode}): {lines[-1] if lines else 'no output'}")
        total += int(m.group(1))
        resumed += sum(line.count("r") for line in out.splitlines() if line and set(line) <= {"*", "r"})
    return total, resumed, wall


def measure(server: str, pid: int, port: int, mode: str, args: argparse.Namespace, openssl: str) -> Run:
    before = tree_cpu_seconds(pid)
    handshakes, resumed, wall = s_time(openssl, port, mode, args.seconds, args.cipher, args.clients)
    after = tree_cpu_seconds(pid)
    if before is None or after is None:
        fail(BENCH, f"cannot read the CPU time of the {server} server from /proc (Linux only)")
    if mode == "reuse" and resumed < MIN_RESUMED * handshakes:
        fail(BENCH, f"{server}: only {resumed} of {handshakes} -reuse connections resumed; is its session cache on?")
    return Run(server, mode, handshakes, resumed, wall, after - before)


class CoreBench:
    """The sans-IO core alone: server-side CPU seconds per handshake, measured in this process.

    A :class:`tls12.ClientConnection` makes each handshake's flights; only the server's
    ``receive_data`` / ``data_to_send`` calls are timed (:func:`time.process_time`), so the
    figure is the core's cost per handshake on the server, with no socket, event loop or kernel.
    """

    def __init__(self, cert: Path, key: Path, suite: SuiteParams) -> None:
        from tls12 import ClientConfig, ClientConnection, ServerConfig, ServerConnection
        from tls12.certs import load_credentials
        from tls12.session import InMemorySessionStore
        from tls12.testing import pipe

        self._client, self._server = ClientConnection, ServerConnection
        suites = (suite.suite,)
        self._server_config = ServerConfig(
            credentials=load_credentials(cert, key), cipher_suites=suites, session_store=InMemorySessionStore())
        first, server = ClientConnection(ClientConfig(cipher_suites=suites)), ServerConnection(self._server_config)
        pipe(first, server)
        self._configs = {"new": ClientConfig(cipher_suites=suites),
                         "reuse": ClientConfig(cipher_suites=suites, session=first.session)}

    def handshakes_per_cpu_s(self, mode: str, count: int) -> float:
        """``count`` handshakes of ``mode`` (``new`` or ``reuse``): the server side's handshakes per CPU second."""
        spent = 0.0
        for _ in range(count):
            client, server = self._client(self._configs[mode]), self._server(self._server_config)
            data = client.data_to_send()
            while data:
                began = time.process_time()
                server.receive_data(data)
                answer = server.data_to_send()
                spent += time.process_time() - began
                client.receive_data(answer)
                data = client.data_to_send()
            if not (server.handshake_complete and client.handshake_complete) or server.resumed != (mode == "reuse"):
                raise RuntimeError(f"in-memory {mode} handshake did not complete as a {mode} handshake")
        return count / max(spent, 1e-9)


def build_parser() -> argparse.ArgumentParser:
    """The command line: ``--seconds``, ``--repeats``, ``--clients``, ``--cipher``, ``--json``."""
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Rates and ratios print as median (min–max, n) over --repeats; the ratio is tls12 / openssl, "
               "pair by pair.",
    )
    parser.add_argument("--seconds", type=int, default=2, help="seconds per s_time run (default %(default)s)")
    add_repeats_option(parser)
    parser.add_argument("--clients", type=int, default=4, help="s_time processes at once (default %(default)s)")
    parser.add_argument("--cipher", default="AES128-SHA", help="OpenSSL name of the TLS 1.2 suite (default %(default)s)")
    parser.add_argument("--json", type=Path, help="also write the results and run configuration as JSON here")
    return parser


def choose_suite(parser: argparse.ArgumentParser, cipher: str) -> SuiteParams:
    """The :class:`tls12.suites` entry named ``cipher``; ``parser.error`` for an unknown or NULL suite."""
    from tls12.suites import SUITES, suite_by_name

    try:
        suite = SUITES[suite_by_name(cipher)]
    except ValueError as exc:
        parser.error(str(exc))
    if suite.cipher == "null":
        parser.error("pick an encrypting suite: openssl s_server refuses NULL suites at the default security level")
    return suite


def write_site(base: Path) -> tuple[Path, Path, Path]:
    """A one-page document root and a fresh self-signed RSA-2048 certificate under ``base``: (root, cert, key)."""
    from tls12.certs import generate_self_signed, write_credentials

    root = base / "www"
    root.mkdir()
    (root / "index.html").write_text("hello\n")
    cert, key = base / "cert.pem", base / "key.pem"
    write_credentials(generate_self_signed(key_size=2048), cert, key)
    return root, cert, key


def interleaved_runs(servers: tuple[tuple[str, int, int], ...], args: argparse.Namespace, openssl: str,
                     cipher: str, core: CoreBench) -> tuple[list[Run], dict[str, list[float]]]:
    """Warm the servers up, then ``--repeats`` rounds of both modes on every server and the core, printing each run.

    ``servers`` is ``((name, pid, port), ...)``; each round rotates the order, so bursts of
    background load do not always hit the same server.  Returns the runs and, per mode, the
    core's handshakes per CPU second of each round.
    """
    runs: list[Run] = []
    core_rates: dict[str, list[float]] = {mode: [] for mode in MODES}
    for _, _, port in servers:  # warm-up: imports, first session in the cache
        s_time(openssl, port, "reuse", 1, cipher, 1)
    for i in range(args.repeats):
        for mode in MODES:
            shift = i % len(servers)
            for name, pid, port in servers[shift:] + servers[:shift]:
                run = measure(name, pid, port, mode, args, openssl)
                runs.append(run)
                print(f"  round {i + 1} {mode:<5} {name:<7} {run.handshakes:6d} handshakes "
                      f"{run.per_wall_s:8.0f}/s wall {run.per_cpu_s:8.0f}/server-CPU-s  busy {run.busy:4.0%}",
                      flush=True)
            core_rates[mode].append(core.handshakes_per_cpu_s(mode, CORE_HANDSHAKES[mode]))
            print(f"  round {i + 1} {mode:<5} core    {CORE_HANDSHAKES[mode]:6d} handshakes "
                  f"{core_rates[mode][-1]:8.0f}/core-CPU-s (in memory, server side)", flush=True)
    return runs, core_rates


def measure_runs(openssl: str, suite: SuiteParams, args: argparse.Namespace) -> tuple[list[Run], dict[str, list[float]]]:
    """Start our server (asyncio and uvloop) and ``openssl s_server`` on one certificate; measure all, interleaved."""
    with tempfile.TemporaryDirectory(prefix="bench-handshake-") as tmp:
        base = Path(tmp)
        root, cert, key = write_site(base)
        ours_cmd = tls12_server(root, cert, key, suite.openssl_name, "--session-cache")
        openssl_cmd = [
            openssl, "s_server", "-accept", "127.0.0.1:0", "-cert", str(cert), "-key", str(key),
            "-tls1_2", "-cipher", suite.openssl_name, "-no_ticket", "-www",
        ]  # fmt: skip
        print(f"RSA-2048, TLS 1.2 {suite.openssl_name}, {args.clients} s_time clients x {args.seconds} s, "
              f"{args.repeats} interleaved repeats", flush=True)
        listening = r"listening on https://[^\s:]+:(\d+)"
        with start_and_read_port(ours_cmd, listening, env=repo_env()) as (ours_port, ours_pid), \
                start_and_read_port([*ours_cmd, "--loop", "uvloop"], listening, env=repo_env()) as (uv_port, uv_pid), \
                start_and_read_port(openssl_cmd, r"^ACCEPT .*:(\d+)$", cwd=base) as (ossl_port, ossl_pid):
            servers = (("tls12", ours_pid, ours_port), ("uvloop", uv_pid, uv_port), ("openssl", ossl_pid, ossl_port))
            return interleaved_runs(servers, args, openssl, suite.openssl_name, CoreBench(cert, key, suite))


def summarise(runs: list[Run], repeats: int) -> dict[str, dict[str, Repeated]]:
    """Per ``{server}_{mode}``: wall rate, server-CPU rate and busy fraction over the repeats, printed."""
    summary: dict[str, dict[str, Repeated]] = {}
    print(f"\nmedian (min–max, n) of {repeats} interleaved repeats (measured)")
    for mode in MODES:
        for name in SERVERS:
            mine = [r for r in runs if r.server == name and r.mode == mode]  # in round order
            summary[f"{name}_{mode}"] = {
                "per_wall_s": Repeated.of(r.per_wall_s for r in mine),
                "per_cpu_s": Repeated.of(r.per_cpu_s for r in mine),
                "busy": Repeated.of(r.busy for r in mine),
            }
            row = summary[f"{name}_{mode}"]
            print(f"{mode:<6} {name:<8} {row['per_wall_s'].text('.0f')} per wall s, "
                  f"{row['per_cpu_s'].text('.0f')} per server CPU s, busy {row['busy'].median:.0%}")
    return summary


def tls12_over_openssl(summary: dict[str, dict[str, Repeated]], server: str = "tls12") -> dict[str, dict[str, Repeated]]:
    """Per mode, the ``server`` / openssl ratios (pair by pair, same round) of both rates, printed with the verdicts."""
    ratios: dict[str, dict[str, Repeated]] = {}
    for mode in MODES:
        ours, ref = summary[f"{server}_{mode}"], summary[f"openssl_{mode}"]
        ratios[mode] = {k: ours[k].over(ref[k]) for k in ("per_cpu_s", "per_wall_s")}  # pair by pair, same round
        label = "full (s_time -new)" if mode == "new" else "resumed (s_time -reuse)"
        median = ratios[mode]["per_cpu_s"].median
        verdict = "met" if median >= TARGET else "NOT met"
        goal = "met" if median >= GOALS[mode] else "NOT met"
        print(f"{label:<24} {server} / openssl: {ratios[mode]['per_cpu_s'].text()} per server CPU second "
              f"(P3b >= {TARGET}: {verdict}; issue-24 goal >= {GOALS[mode]}: {goal}), "
              f"{ratios[mode]['per_wall_s'].text()} per wall second")
    return ratios


def split(summary: dict[str, dict[str, Repeated]], core_rates: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    """Per mode, microseconds of server CPU per handshake: each server, the core alone, and the rest, printed.

    The rest (server minus core, medians) is what the event loop, the socket calls, the kernel's
    TCP and the HTTP handler cost per connection.
    """
    out: dict[str, dict[str, float]] = {}
    print("\nserver CPU per handshake, medians (µs): where the time goes")
    for mode in MODES:
        us = {name: 1e6 / summary[f"{name}_{mode}"]["per_cpu_s"].median for name in SERVERS}
        us["core"] = 1e6 / Repeated.of(core_rates[mode]).median
        us["rest_asyncio"], us["rest_uvloop"] = us["tls12"] - us["core"], us["uvloop"] - us["core"]
        out[mode] = us
        print(f"{mode:<6} tls12 {us['tls12']:6.0f} = core {us['core']:5.0f} + rest {us['rest_asyncio']:5.0f};  "
              f"uvloop {us['uvloop']:6.0f} = core {us['core']:5.0f} + rest {us['rest_uvloop']:5.0f};  "
              f"openssl s_server {us['openssl']:6.0f} (all of it)")
    return out


def write_results(path: Path, openssl: str, suite: SuiteParams, args: argparse.Namespace, runs: list[Run],
                  summary: dict[str, dict[str, Repeated]], ratios: dict[str, dict[str, dict[str, Repeated]]],
                  core: dict[str, Repeated], where: dict[str, dict[str, float]], wall: float) -> None:
    """The JSON: configuration, repeated figures, ratios (asyncio and uvloop), targets, the core and the split, every run."""
    version = subprocess.run([openssl, "version"], capture_output=True, text=True, check=False).stdout.strip()
    config = {
        "suite": suite.openssl_name, "key": "RSA-2048", "seconds": args.seconds,
        "clients": args.clients, "python": platform.python_version(), "machine": platform.machine(),
        "openssl": version,
    }  # fmt: skip
    runs_json = [{**asdict(r), "per_wall_s": r.per_wall_s, "per_cpu_s": r.per_cpu_s} for r in runs]
    write_json(path, {
        "config": config,
        "figures": {k: {f: v.to_json() for f, v in row.items()} for k, row in summary.items()},
        "ratio": {m: {f: v.to_json() for f, v in row.items()} for m, row in ratios["tls12"].items()},
        "ratio_uvloop": {m: {f: v.to_json() for f, v in row.items()} for m, row in ratios["uvloop"].items()},
        "core_per_cpu_s": {m: v.to_json() for m, v in core.items()},
        "core_handshakes": CORE_HANDSHAKES,
        "us_per_handshake": where,
        "target": TARGET,
        "target_met": {m: ratios["tls12"][m]["per_cpu_s"].median >= TARGET for m in MODES},
        "goals": GOALS,
        "goals_met": {m: ratios["tls12"][m]["per_cpu_s"].median >= GOALS[m] for m in MODES},
        "runs": runs_json,
    }, repeats=args.repeats, wall_s=wall)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.seconds < 1 or args.clients < 1:
        parser.error("--seconds and --clients must be positive")
    openssl = require_tools(BENCH, {"openssl": "openssl"})["openssl"]
    began = time.perf_counter()
    require_c_extension(BENCH)
    suite = choose_suite(parser, args.cipher)

    runs, core_rates = measure_runs(openssl, suite, args)
    summary = summarise(runs, args.repeats)
    ratios = {server: tls12_over_openssl(summary, server) for server in ("tls12", "uvloop")}
    core = {mode: Repeated.of(core_rates[mode]) for mode in MODES}
    for mode in MODES:
        print(f"{mode:<6} core alone (in memory, server side): {core[mode].text('.0f')} handshakes per CPU s")
    where = split(summary, core_rates)
    wall = time.perf_counter() - began
    print(f"wall time {wall:.0f} s")

    if args.json:
        write_results(args.json, openssl, suite, args, runs, summary, ratios, core, where, wall)
    return 0


if __name__ == "__main__":
    sys.exit(main())
