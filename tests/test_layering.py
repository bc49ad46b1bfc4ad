"""Every file in its layer, checked from the source (``ast``), never by importing it.

Three rules from the architecture (shared building blocks below, paper packages above):

(a) **Sans-IO cores do no I/O and read no clock.** The protocol cores of ``tls12``,
    ``sslsplit``, ``sine`` and ``reverse_ssl`` take bytes (and ``now``) and return events and
    bytes, so they import none of asyncio, socket, selectors, time, threading or subprocess,
    nor the global ``random`` (an RNG is injected). The SimPy models run in simulated time and
    obey the same rule, except that they own one seeded ``random.Random``. Every module of
    these packages is listed below as a core, a model or an excluded adapter / CLI /
    application / experiment with the reason, so a new module forces a decision.
(b) **No arrow from the shared layers to a paper.** ``tls12`` and ``netsim`` import no
    protocol package (sslsplit, sine, reverse_ssl, sslacc_sim, webalps_sim), and no paper
    package imports another paper's.
(c) **netsim sits above tls12, and only two of its modules know TLS.** ``tls12`` imports
    nothing from ``netsim``; inside ``netsim`` only the driver (``netsim/drive.py``: it
    recognises tls12's events) and the CPU cost table (``netsim/cpu.py``: it times the real
    tls12 operations) import ``tls12``; links, TCP, hosts, caches and workloads stay
    protocol-agnostic.

A failure names the file, the line and the offending import.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Modules nothing above the shared layers may depend on from below.
PROTOCOL_PACKAGES = ("sslsplit", "sine", "reverse_ssl", "sslacc_sim", "webalps_sim")
SHARED_PACKAGES = ("tls12", "netsim", "testbed")
#: What a core may not import (top-level module names).
IO_AND_CLOCK = frozenset({"asyncio", "socket", "selectors", "time", "threading", "subprocess"})
CORE_FORBIDDEN = IO_AND_CLOCK | {"random"}
MODEL_FORBIDDEN = IO_AND_CLOCK  # a SimPy model owns one random.Random(seed)

#: Sans-IO protocol cores, per package (paths relative to the repository root).
CORES: dict[str, tuple[str, ...]] = {
    "tls12": (
        "__init__.py", "_recordcrypto_py.py", "aead.py", "buffer.py", "certs.py",
        "client_connection.py", "config.py", "connection.py", "context.py", "delegate.py", "ecdhe.py",
        "errors.py", "keyjson.py", "events.py", "handshake_docs.py", "handshake_table.py", "keys.py",
        "messages.py", "prf.py", "record.py", "recordcrypto.py", "server_connection.py",
        "session.py", "state.py", "suites.py", "testing.py",
    ),
    "sslsplit": (
        "__init__.py", "cache.py", "costmodel.py", "paper_points.py", "replay.py",
        "splicer.py", "store.py", "wire.py", "writer.py", "barnraising/uri.py",
        "barnraising/__init__.py", "barnraising/protocol.py", "barnraising/ratelimit.py",
        "barnraising/zone.py", "barnraising/ring.py", "barnraising/feedback.py",
        "barnraising/errors.py", "barnraising/service.py", "barnraising/peers.py",
        "params.py", "synth.py",
    ),
    "sine": (
        "__init__.py", "algorithms.py", "cache_status.py", "errors.py", "format.py", "links.py",
        "tag.py", "verifier.py", "params.py",
    ),
    "reverse_ssl": (
        "__init__.py", "client_connection.py", "config.py", "errors.py", "messages.py",
        "onoff.py", "ots.py", "primes.py", "puzzle.py", "server_connection.py",
    ),
    "sslacc_sim": (),  # all SimPy models, see MODELS
    "webalps_sim": ("__init__.py", "app.py", "protocol.py", "router.py", "service.py"),
}  # fmt: skip

#: SimPy models (simulated time only).
MODELS: dict[str, tuple[str, ...]] = {
    "sslsplit": ("latency.py", "simulate.py", "barnraising/model.py"),
    "reverse_ssl": ("dos.py", "simulate.py"),
    "sine": ("simulate.py",),
    "webalps_sim": ("model.py",),
    "sslacc_sim": ("__init__.py", "checkpoint.py", "cluster.py", "endpoints.py", "params.py",
                   "relay.py", "sessions.py", "tcpside.py", "updates.py", "load.py",
                   "delta.py"),
}

#: Modules that are not cores, with the reason. ``apps/`` folders are excluded as a whole.
EXCLUDED: dict[str, dict[str, str]] = {
    "sslacc_sim": {
        "measure.py": "times the real code (perf_counter, a loopback UDP socket pair)",
        "experiments.py": "experiments: sweeps of the model (testbed.sweep, Dask) to DataFrames",
        "linux/": "real failover adapters: namespaces, TCP_REPAIR sockets, node processes",
    },
    "webalps_sim": {
        "costmodel.py": "coprocessor cost model: sleeps the modelled time, writes counters",
        "evoting.py": "guardian application: password directory and sealed tally (file I/O, lock)",
        "experiments.py": "experiments: start host and guardian processes, time real runs",
        "load.py": "closed-loop load generator: sockets, threads, wall-clock timing",
        "sealed.py": "sealed storage: AES-GCM blobs and a rollback counter on disk (fsync)",
        "ca.py": "WebALPS CA and its command line: keys and certificates on disk",
        "guardian.py": "guardian process: asyncio Unix-socket server, state directory, CLI",
        "host.py": "untrusted host: asyncio HTTP/HTTPS/WebALPS servers and their CLI",
        "measure.py": "measures the guardian program: reads and hashes its source files",
        "remote.py": "host end of the guardian channel: a blocking Unix socket",
    },
    "tls12": {
        "aio.py": "asyncio adapter around the sans-IO connections",
    },
    "sslsplit": {
        "aio.py": "asyncio adapter (connections, background loop, payload client)",
        "cli.py": "command line of the server and proxy",
        "proxy.py": "asyncio proxy: sockets around the splicer",
        "server.py": "asyncio SSL-splitting server: sockets around the writer",
        "server_upstream.py": "asyncio client of the origin the server fronts",
        "testbed.py": "loopback testbed: real servers, proxies and clients on sockets",
        "experiments.py": "experiments: drive the testbed and time real runs",
        "calibration.py": "experiments: fit and compare the measured tables (from experiments.py)",
        "trace_experiments.py": "experiments: load traces from disk, run the models",
        "linkexperiments.py": "experiments: real programs timed on the namespace link testbed",
        "barnraising/registry.py": "Barnraising volunteer database in SQLite (file I/O)",
        "barnraising/broker.py": "command line of the broker (a shim around barnraising/aio/broker.py)",
        "barnraising/aio/": "asyncio adapters: sockets around the service, zone, peers and feedback cores",
        "barnraising/cli.py": "command-line start-up shared by the broker and the volunteer",
        "barnraising/client.py": "asyncio join-protocol client of the broker",
        "volunteer.py": "asyncio Barnraising volunteer and its command line",
        "barnraising/experiments.py": "experiments: load traces from disk, run the model",
    },
    "sine": {
        "client.py": "asyncio verifying client",
        "server.py": "asyncio origin server",
        "fetch.py": "command line: fetch and verify documents",
        "sign.py": "command line: sign a document root",
        "site.py": "signs a document root on disk (file I/O)",
        "model.py": "SimPy model plus measure_costs, which times the real code",
        "experiments.py": "experiments: real loopback runs and timings",
        "linkexperiments.py": "experiments: real programs timed on the namespace link testbed",
        "aio.py": "asyncio runner of the SINE client for the link experiments, its command line",
    },
    "reverse_ssl": {
        "aio.py": "asyncio adapter",
        "client.py": "asyncio client and load generator",
        "server.py": "asyncio server",
        "pool.py": "offline-signing pool refilled by a background thread",
        "experiments.py": "experiments: timings, subprocess servers",
    },
}


@dataclass(frozen=True)
class Import:
    """One import statement's target, resolved to an absolute module name."""

    path: Path
    line: int
    module: str
    type_checking: bool

    def __str__(self) -> str:
        where = " (under TYPE_CHECKING)" if self.type_checking else ""
        return f"{self.path.relative_to(ROOT)}:{self.line} imports {self.module}{where}"


def _package_of(path: Path) -> list[str]:
    """Dotted package of a module file, e.g. ``testbed/apps/x.py`` -> ``["tls12", "apps"]``."""
    return list(path.relative_to(ROOT).parent.parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(path: Path, source: str | None = None) -> list[Import]:
    """Every import in ``path`` (top level, in functions, in ``if`` blocks), relative ones
    resolved against the file's package; ``source`` stands in for the file's text."""
    text = path.read_text() if source is None else source
    tree = ast.parse(text, filename=str(path))
    found: list[Import] = []

    def visit(node: ast.AST, type_checking: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, type_checking)
            return
        if isinstance(node, ast.Import):
            found.extend(Import(path, node.lineno, a.name, type_checking) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = _package_of(path)
                base = package[: len(package) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.append(Import(path, node.lineno, module, type_checking))
        for child in ast.iter_child_nodes(node):
            visit(child, type_checking)

    visit(tree, False)
    return found


def _top(module: str) -> str:
    return module.split(".")[0]


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", sorted(CORES))
def test_every_module_is_classified(package: str) -> None:
    listed = set(CORES[package]) | set(MODELS.get(package, ())) | set(EXCLUDED[package])
    unlisted = []
    for path in _modules(package):
        rel = path.relative_to(ROOT / package).as_posix()
        if rel not in listed and not any(rel.startswith(d) for d in listed if d.endswith("/")):
            unlisted.append(rel)
    missing = [m for m in listed if not (ROOT / package / m).exists()]
    assert not unlisted, (
        f"{package}: classify {unlisted} in tests/test_layering.py as a core, a model or an "
        "excluded adapter/CLI/application with the reason"
    )
    assert not missing, f"{package}: {missing} listed in tests/test_layering.py but absent"


@pytest.mark.parametrize("package", sorted(CORES))
def test_cores_and_models_do_no_io_and_read_no_clock(package: str) -> None:
    offenders = []
    for names, forbidden in ((CORES[package], CORE_FORBIDDEN),
                             (MODELS.get(package, ()), MODEL_FORBIDDEN)):
        for name in names:
            offenders += [str(i) for i in imports(ROOT / package / name)
                          if _top(i.module) in forbidden]
    assert not offenders, "sans-IO core or model does I/O or reads a clock:\n" + "\n".join(
        offenders
    )


def test_shared_layers_never_import_a_protocol_package() -> None:
    offenders = [str(i) for package in SHARED_PACKAGES for path in _modules(package)
                 for i in imports(path) if _top(i.module) in PROTOCOL_PACKAGES]
    assert not offenders, "a shared layer depends on a paper's package:\n" + "\n".join(offenders)


def test_no_paper_package_imports_another() -> None:
    offenders = []
    for package in PROTOCOL_PACKAGES:
        for path in _modules(package) if (ROOT / package).is_dir() else ():
            offenders += [str(i) for i in imports(path)
                          if _top(i.module) in PROTOCOL_PACKAGES and _top(i.module) != package]
    assert not offenders, "one paper's package imports another's:\n" + "\n".join(offenders)


#: The netsim modules that may import tls12, each with the reason.
NETSIM_KNOWS_TLS = {
    "drive.py": "moves the bytes of tls12 connections and recognises their events",
    "cpu.py": "measures the per-operation CPU costs of the real tls12 code",
}


def test_only_the_driver_and_cpu_costs_in_netsim_import_tls12() -> None:
    offenders = []
    for path in _modules("netsim"):
        if path.parent.name == "netsim" and path.name in NETSIM_KNOWS_TLS:
            continue
        offenders += [str(i) for i in imports(path) if _top(i.module) == "tls12"]
    assert not offenders, (
        "only " + ", ".join(f"netsim/{n}" for n in NETSIM_KNOWS_TLS)
        + " may import tls12:\n" + "\n".join(offenders)
    )


def test_tls12_and_netsim_do_not_import_the_testbed_floor() -> None:
    """``testbed`` (programs, run tooling, traces, the Linux lab) sits above both."""
    offenders = [str(i) for package in ("tls12", "netsim") for path in _modules(package)
                 for i in imports(path) if _top(i.module) == "testbed"]
    assert not offenders, "tls12 and netsim are below testbed:\n" + "\n".join(offenders)


def test_tls12_does_not_import_netsim() -> None:
    offenders = [
        str(i) for path in _modules("tls12") for i in imports(path) if _top(i.module) == "netsim"
    ]
    assert not offenders, "tls12 is below netsim and must not import it:\n" + "\n".join(offenders)


def test_the_scanner_sees_relative_type_checking_and_function_imports() -> None:
    """The checks above are only as good as :func:`imports`: exercise it on known source."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "from .tcp import TcpConnection\n"
        "from . import link\n"
        "if TYPE_CHECKING:\n"
        "    from tls12 import ClientConnection\n"
        "else:\n"
        "    import socket\n"
        "def f():\n"
        "    import time\n"
    )
    found = imports(ROOT / "netsim" / "sample.py", source)
    assert [(i.module, i.line, i.type_checking) for i in found] == [
        ("typing", 1, False), ("netsim.tcp", 2, False), ("netsim", 3, False),
        ("tls12", 5, True), ("socket", 7, False), ("time", 9, False),
    ]
    assert str(found[3]) == "netsim/sample.py:5 imports tls12 (under TYPE_CHECKING)"
