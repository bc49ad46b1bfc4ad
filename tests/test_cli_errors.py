"""Every command-line program turns bad input into one line on stderr, never a traceback.

The sweep runs each program of the testbed as a user would (``python -m PACKAGE.MODULE`` or
``python SCRIPT``) with unknown flags, missing and malformed arguments, files of the wrong kind
(a private key where a public key belongs, garbage PEM, a folder instead of a file), bad
``HOST:PORT`` syntax, busy ports and unreachable servers (a closed port on the loopback
interface).  Each case states the exit status it expects -- 2 for bad usage, as argparse does,
1 for a failure at run time such as a refused connection -- and words that the last line of
stderr must contain, so the user learns *what* was wrong.  ``--help`` exits 0 for every program.
Programs that need root (the link testbed, the SSLACC failover nodes) are given command lines
that fail before they touch a namespace, a raw socket or a bound port.

No program is forgotten: :func:`test_every_program_is_swept` finds every module of the project
packages with an ``if __name__ == "__main__":`` block (from its syntax tree) and fails unless
it is in ``MODULES`` (swept) or in ``EXEMPT`` with the reason (an entry point that only the
project itself runs, or the body of a shim that is swept under the shim's name); exempt
modules still answer ``--help``.

``--help`` runs as ``python -m PROGRAM --help`` in a fresh interpreter.  The bad command lines
(about 250) run as processes forked from one interpreter that has imported the programs'
dependencies (``cli_forkserver.py``): each still executes the program as ``__main__`` in a
process of its own, with its own exit status and stderr, but without paying a second of
interpreter start and imports each, so the sweep takes seconds on two cores.  The argument parsers of :mod:`testbed.cli` are
fuzzed in ``tests/testbed/test_cli_parsers.py``.
"""

from __future__ import annotations

import ast
import fcntl
import json
import os
import re
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

from tests.cli_fixtures import write_fixtures

REPO = Path(__file__).resolve().parent.parent
TIMEOUT = 20.0  # per program; a program that hangs on bad input fails here instead of blocking

MODULES = (
    "testbed.https_server",
    "testbed.demo",
    "sslsplit.server",
    "sslsplit.proxy",
    "sslsplit.volunteer",
    "testbed.traces",
    "sine.sign",
    "sine.server",
    "sine.fetch",
    "sine.experiments.ranges_link",
    "reverse_ssl.server",
    "reverse_ssl.client",
    "tls12.handshake_docs",
    "testbed.linux.linktestbed",
    "sslacc_sim.measure",
    "sslacc_sim.aio.linux.node",
    "sslacc_sim.aio.linux.campaign",
    "sslacc_sim.aio.linux.cluster",
    "sslacc_sim.aio.linux.spells",
    "sslsplit.barnraising.broker",
    "webalps_sim.host",
    "webalps_sim.guardian",
    "webalps_sim.ca",
    "webalps_sim.evoting",
    "webalps_sim.experiments",
    "webalps_sim.load",
    "webalps_sim.campaign",
    "webalps_sim.model_driver",
)
#: Programs with so few options that fewer than five bad command lines exist, with the reason.
FEW_CASES = {
    "tls12.handshake_docs": "one flag, no value",
    "sslacc_sim.measure": "one flag; every other command line is a measurement",
}
#: Modules with a ``__main__`` block that are not swept with bad input, each with the reason.
#: They must still answer ``--help`` (exit 0, usage on stdout).
EXEMPT = {
    "testbed.apps.demo": "the body of testbed.demo (a shim that calls it), swept under that name",
    "testbed.apps.https_cli": "the body of testbed.https_server (a shim), swept under that name",
    "sine.aio": "internal worker: sine.experiments.link.measure runs its run-plan "
                            "subcommand inside the link testbed's client namespace",
    "sine.aio.range_runner": "internal worker: sine.experiments.ranges_link runs it inside the "
                             "link testbed's client namespace with the plan it wrote",
    "webalps_sim.aio.campaign": "the body of webalps_sim.campaign (a shim that calls it), swept "
                                "under that name",
}
#: The packages whose programs the sweep must know about (see test_every_program_is_swept).
PACKAGES = ("tls12", "netsim", "testbed", "sslsplit", "sine", "reverse_ssl", "sslacc_sim", "webalps_sim")
SCRIPTS = tuple(sorted(str(p.relative_to(REPO)) for pattern in ("benchmarks/bench_*.py", "notebooks/*.py")
                       for p in REPO.glob(pattern)))
# what each module needs before argparse looks at an unknown flag
REQUIRED = {
    "testbed.https_server": "--root {docroot}",
    "sslsplit.server": "--root {docroot}",
    "sslsplit.proxy": "--server 127.0.0.1:1 --store 127.0.0.1:2",
    "sslsplit.volunteer": "barnraising://127.0.0.1:1/a/site",
    "testbed.traces": "list",
    "sine.sign": "{docroot} --key {rsa}",
    "sine.server": "{signed}",
    "sine.fetch": "http://127.0.0.1:1/",
    "reverse_ssl.client": "--port 1",
    "testbed.linux.linktestbed": "profiles",
    "sslacc_sim.aio.linux.node": "sniff --src 10.0.0.1 --out {scratch}/sniff.json",
    "sslacc_sim.aio.linux.cluster": "cleanup",
    "sslacc_sim.aio.linux.spells": "{spells_empty}",
    "webalps_sim.host": "--mode http --docroot {docroot}",
    "webalps_sim.guardian": "--state-dir {scratch}/guardian",
    "webalps_sim.ca": "init --dir {scratch}/ca",
    "webalps_sim.evoting": "setup --state-dir {scratch}/election --candidates a,b --voters {voters}",
    "webalps_sim.experiments": "table1",
    "webalps_sim.load": "http://127.0.0.1:1/",
}
FORKSERVER = REPO / "tests" / "cli_forkserver.py"


@dataclass(frozen=True)
class Case:
    """One invocation: ``program`` with ``args`` (``{name}`` fields are filled from the fixture
    files), the exit status it must return and words its last stderr line must contain."""

    program: str
    args: tuple[str, ...]
    status: int
    words: tuple[str, ...]

    @property
    def id(self) -> str:
        return f"{self.program} {' '.join(self.args)}".strip()


def case(program: str, args: str, status: int, *words: str) -> Case:
    return Case(program, tuple(args.split()), status, words)


# fmt: off
CASES: tuple[Case, ...] = (
    *(case(m, f"{REQUIRED.get(m, '')} --no-such-flag", 2, "unrecognized arguments", "--no-such-flag")
      for m in MODULES),
    *(case(s, "--no-such-flag", 2) for s in SCRIPTS),  # or a required option is missing
    # testbed.https_server
    case("testbed.https_server", "", 2, "required", "--root"),
    case("testbed.https_server", "--root {missing}", 2, "--root", "not a directory"),
    case("testbed.https_server", "--root {text} --port 1", 2, "--root", "not a directory"),
    case("testbed.https_server", "--root {docroot} --port abc", 2, "--port", "abc"),
    case("testbed.https_server", "--root {docroot} --port 70000", 2, "--port", "70000"),
    case("testbed.https_server", "--root {docroot} --cert {cert}", 2, "--cert", "--key"),
    case("testbed.https_server", "--root {docroot} --cert {cert} --key {missing}", 2, "--key", "no such file"),
    case("testbed.https_server", "--root {docroot} --cert {cert} --key {pub}", 2, "--key", "private key", "public key"),
    case("testbed.https_server", "--root {docroot} --cert {garbage} --key {rsa}", 2, "--cert", "certificate"),
    case("testbed.https_server", "--root {docroot} --cert {docroot} --key {rsa}", 2, "--cert", "directory"),
    case("testbed.https_server", "--root {docroot} --cert {cert} --key {ec}", 2, "--key", "rsa"),
    case("testbed.https_server", "--root {docroot} --ciphers NO-SUCH-SUITE", 2, "no-such-suite"),
    case("testbed.https_server", "--root {docroot} --port {busy}", 1, "address already in use"),
    # testbed.demo (every case fails before the first download)
    case("testbed.demo", "--sizes abc", 2, "--sizes", "abc"),
    case("testbed.demo", "--sizes inf", 2, "--sizes", "inf"),
    case("testbed.demo", "--sizes ,", 2, "--sizes", "no size"),
    case("testbed.demo", "--suites NO-SUCH-SUITE", 2, "no-such-suite"),
    case("testbed.demo", "--out {text}", 2, "--out", "not a directory"),
    # sslsplit.server
    case("sslsplit.server", "", 2, "--root", "--upstream", "required"),
    case("sslsplit.server", "--root {missing}", 2, "--root", "not a directory"),
    case("sslsplit.server", "--root {text}", 2, "--root", "not a directory"),
    case("sslsplit.server", "--upstream no-port-here", 2, "--upstream", "host:port"),
    case("sslsplit.server", "--upstream 127.0.0.1:99999", 2, "--upstream", "host:port"),
    case("sslsplit.server", "--root {docroot} --port abc", 2, "--port", "abc"),
    case("sslsplit.server", "--root {docroot} --port 70000", 2, "--port", "70000"),
    case("sslsplit.server", "--root {docroot} --store-port -1", 2, "--store-port", "-1"),
    case("sslsplit.server", "--root {docroot} --store-max-mb -5", 2, "--store-max-mb", "-5"),
    case("sslsplit.server", "--root {docroot} --cert {cert}", 2, "--cert", "--key"),
    case("sslsplit.server", "--root {docroot} --cert {cert} --key {missing}", 2, "--key", "no such file"),
    case("sslsplit.server", "--root {docroot} --cert {cert} --key {pub}", 2, "--key", "private key", "public key"),
    case("sslsplit.server", "--root {docroot} --cert {text} --key {rsa}", 2, "--cert", "certificate"),
    case("sslsplit.server", "--root {docroot} --port {busy}", 1, "address already in use"),
    # sslsplit.proxy
    case("sslsplit.proxy", "", 2, "required", "--server", "--store"),
    case("sslsplit.proxy", "--server no-port-here --store 127.0.0.1:1", 2, "--server", "host:port"),
    case("sslsplit.proxy", "--server 127.0.0.1:1 --store 127.0.0.1:abc", 2, "--store", "host:port"),
    case("sslsplit.proxy", "--server 127.0.0.1:1 --store 127.0.0.1:2 --serve-cache 70000", 2, "--serve-cache", "70000"),
    case("sslsplit.proxy", "--server 127.0.0.1:1 --store 127.0.0.1:2 --memory-mb -1", 2, "--memory-mb", "-1"),
    case("sslsplit.proxy", "--server 127.0.0.1:1 --store 127.0.0.1:2 --disk-cache {text}", 2, "--disk-cache", "not a directory"),
    case("sslsplit.proxy", "--server 127.0.0.1:1 --store 127.0.0.1:2 --listen 127.0.0.1:{busy}", 1, "address already in use"),
    # sslsplit.volunteer
    case("sslsplit.volunteer", "", 2, "required", "URI"),
    case("sslsplit.volunteer", "ftp://broker/a/site", 2, "URI", "barnraising"),
    case("sslsplit.volunteer", "barnraising://127.0.0.1:1/a/site --listen nope", 2, "--listen", "host:port"),
    case("sslsplit.volunteer", "barnraising://127.0.0.1:1/a/site --cache-port 70000", 2, "--cache-port", "70000"),
    case("sslsplit.volunteer", "barnraising://127.0.0.1:1/a/site", 1, "cannot connect", "broker", "refused"),
    # testbed.traces
    case("testbed.traces", "", 2, "required", "command"),
    case("testbed.traces", "stats", 2, "required", "path_or_name"),
    case("testbed.traces", "stats {missing}", 2, "not found", "no-such-file"),
    case("testbed.traces", "stats {docroot}", 2, "directory"),
    case("testbed.traces", "stats {text} --chunk-lines 0", 2, "--chunk-lines", "0"),
    case("testbed.traces", "--manifest {missing} list", 2, "manifest", "not found"),
    case("testbed.traces", "--manifest {text} list", 2, "manifest", "json"),
    case("testbed.traces", "--manifest {docroot} list", 2, "manifest", "directory"),
    case("testbed.traces", "--manifest {bad_manifest} list", 2, "manifest", "filename"),
    case("testbed.traces", "fetch no-such-trace", 2, "unknown trace", "no-such-trace"),
    case("testbed.traces", "verify no-such-trace", 2, "unknown trace", "no-such-trace"),
    case("testbed.traces", "fetch EPA-HTTP --dest {scratch} --from {missing}", 2, "not found"),
    case("testbed.traces", "fetch EPA-HTTP --dest {scratch} --from http://127.0.0.1:{closed}/x", 1, "refused"),
    case("testbed.traces", "fetch EPA-HTTP --dest {scratch} --timeout 0", 2, "--timeout", "0"),
    # sine.sign (every case fails before anything is written)
    case("sine.sign", "", 2, "required", "docroot"),
    case("sine.sign", "{docroot}", 2, "required", "--key"),
    case("sine.sign", "{missing} --key {rsa}", 2, "not a directory"),
    case("sine.sign", "{docroot} --key {pub}", 2, "--key", "expected a pem private key, got a public key"),
    case("sine.sign", "{docroot} --key {cert}", 2, "--key", "expected a pem private key, got a certificate"),
    case("sine.sign", "{docroot} --key {garbage}", 2, "--key", "public key"),
    case("sine.sign", "{docroot} --key {bad_private}", 2, "--key", "malformed private key"),
    case("sine.sign", "{docroot} --key {text}", 2, "--key", "no pem data"),
    case("sine.sign", "{docroot} --key {docroot}", 2, "--key", "directory"),
    case("sine.sign", "{docroot} --key {text}/sub/key.pem", 2, "--key", "cannot create"),
    case("sine.sign", "{docroot} --key {rsa} --block-size 0", 2, "--block-size", "0"),
    case("sine.sign", "{docroot} --key {rsa} --block-size abc", 2, "--block-size", "abc"),
    case("sine.sign", "{docroot} --key {rsa} --lifetime -5", 2, "--lifetime", "-5"),
    case("sine.sign", "{docroot} --key {rsa} --hash md5", 2, "--hash", "invalid choice"),
    case("sine.sign", "{docroot} --key {rsa} --origin not-a-url", 2, "--origin", "not-a-url"),
    # sine.server
    case("sine.server", "", 2, "required", "docroot"),
    case("sine.server", "{missing}", 2, "not a directory"),
    case("sine.server", "{text}", 2, "not a directory"),
    case("sine.server", "{docroot} --no-tls", 2, "not signed", "sine.sign"),
    case("sine.server", "{signed} --port abc", 2, "--port", "abc"),
    case("sine.server", "{signed} --port 70000", 2, "--port", "70000"),
    case("sine.server", "{signed} --tls-port -1", 2, "--tls-port", "-1"),
    case("sine.server", "{signed} --duration -1", 2, "--duration", "-1"),
    case("sine.server", "{signed} --tls-cert {cert}", 2, "--tls-cert", "--tls-key"),
    case("sine.server", "{signed} --tls-cert {cert} --tls-key {missing}", 2, "--tls-key", "no such file"),
    case("sine.server", "{signed} --tls-cert {cert} --tls-key {pub}", 2, "--tls-key", "private key", "public key"),
    case("sine.server", "{signed} --tls-cert {garbage} --tls-key {rsa}", 2, "--tls-cert", "certificate"),
    case("sine.server", "{signed} --tls-cert {cert} --tls-key {ec}", 2, "--tls-key", "does not match"),
    case("sine.server", "{signed} --no-tls --port {busy}", 1, "address already in use"),
    # sine.experiments.ranges_link (every case fails before a testbed is built)
    case("sine.experiments.ranges_link", "--file-mib 0", 2, "--file-mib", "> 0"),
    case("sine.experiments.ranges_link", "--file-mib 1", 2, "--file-mib", "past the end"),
    case("sine.experiments.ranges_link", "--repeats x", 2, "--repeats", "x"),
    case("sine.experiments.ranges_link", "--out {text}", 2, "--out", "not a directory"),
    case("sine.experiments.ranges_link", "--bogus", 2, "unrecognized", "--bogus"),
    # sine.fetch
    case("sine.fetch", "", 2, "required", "url"),
    case("sine.fetch", "http://127.0.0.1:{closed}/", 2, "--key", "mode sine"),
    case("sine.fetch", "--key {rsa} http://127.0.0.1:{closed}/", 2, "--key", "expected a pem public key, got a private key"),
    case("sine.fetch", "--key {cert} http://127.0.0.1:{closed}/", 2, "--key", "expected a pem public key, got a certificate"),
    case("sine.fetch", "--key {garbage} http://127.0.0.1:{closed}/", 2, "--key", "malformed public key"),
    case("sine.fetch", "--key {text} http://127.0.0.1:{closed}/", 2, "--key", "no pem data"),
    case("sine.fetch", "--key {missing} http://127.0.0.1:{closed}/", 2, "--key", "no such file"),
    case("sine.fetch", "--key {docroot} http://127.0.0.1:{closed}/", 2, "--key", "directory"),
    case("sine.fetch", "--mode http not-a-url", 2, "url", "not-a-url"),
    case("sine.fetch", "--mode http ftp://127.0.0.1/x", 2, "url", "http://"),
    case("sine.fetch", "--mode http http://127.0.0.1:99999/", 2, "url", "port"),
    case("sine.fetch", "--mode http http://127.0.0.1:1/a http://127.0.0.1:2/b", 2, "one origin"),
    case("sine.fetch", "--mode http --proxy not-a-url http://127.0.0.1:1/", 2, "--proxy", "not-a-url"),
    case("sine.fetch", "--mode sineb http://127.0.0.1:{closed}/", 2, "--tls-origin", "--tls-ca"),
    case("sine.fetch", "--mode sineb --tls-origin https://127.0.0.1:{closed} --tls-ca {garbage} http://127.0.0.1:{closed}/", 2, "--tls-ca", "certificate"),
    case("sine.fetch", "--mode http --output {docroot} http://127.0.0.1:{closed}/", 2, "--output", "directory"),
    case("sine.fetch", "--mode http http://127.0.0.1:{closed}/", 1, "127.0.0.1:{closed}", "refused"),
    case("sine.fetch", "--mode http --proxy http://127.0.0.1:{closed} http://127.0.0.1:1/", 1, "127.0.0.1:{closed}", "refused"),
    case("sine.fetch", "--mode sineb --tls-origin https://127.0.0.1:{closed} --tls-ca {cert} http://127.0.0.1:{closed}/", 1, "refused"),
    # reverse_ssl.server
    case("reverse_ssl.server", "--host 192.0.2.1", 2, "--host", "loopback"),
    case("reverse_ssl.server", "--port abc", 2, "--port", "abc"),
    case("reverse_ssl.server", "--port 70000", 2, "--port", "70000"),
    case("reverse_ssl.server", "--modes bogus", 2, "--modes", "unknown mode"),
    case("reverse_ssl.server", "--ots bogus", 2, "--ots", "invalid choice"),
    case("reverse_ssl.server", "--pool -1", 2, "--pool", "-1"),
    case("reverse_ssl.server", "--key-bits 100", 2, "--key-bits", "100"),
    case("reverse_ssl.server", "--duration abc", 2, "--duration", "abc"),
    case("reverse_ssl.server", "--stats-json {docroot}", 2, "--stats-json", "directory"),
    case("reverse_ssl.server", "--cert {cert}", 2, "--cert", "--key"),
    case("reverse_ssl.server", "--cert {cert} --key {missing}", 2, "--key", "no such file"),
    case("reverse_ssl.server", "--cert {cert} --key {pub}", 2, "--key", "private key", "public key"),
    case("reverse_ssl.server", "--cert {garbage} --key {rsa}", 2, "--cert", "certificate"),
    case("reverse_ssl.server", "--cert {cert} --key {rsa} --port {busy} --pool 0", 1, "address already in use"),
    # reverse_ssl.client
    case("reverse_ssl.client", "", 2, "required", "--port"),
    case("reverse_ssl.client", "--port abc", 2, "--port", "abc"),
    case("reverse_ssl.client", "--port 70000", 2, "--port", "70000"),
    case("reverse_ssl.client", "--host 192.0.2.1 --port 1", 2, "--host", "loopback"),
    case("reverse_ssl.client", "--port 1 --mode bogus", 2, "--mode", "invalid choice"),
    case("reverse_ssl.client", "--port 1 --mode client-auth --key-bits 100", 2, "--key-bits", "100"),
    case("reverse_ssl.client", "--port 1 --load --concurrency 0", 2, "--concurrency", "0"),
    case("reverse_ssl.client", "--port 1 --timeout 0", 2, "--timeout", "0"),
    case("reverse_ssl.client", "--port {closed}", 1, "127.0.0.1:{closed}", "refused"),
    case("reverse_ssl.client", "--port {closed} --load --concurrency 2 --duration 0.3", 1, "127.0.0.1:{closed}", "no handshake"),
    # tls12.handshake_docs
    case("tls12.handshake_docs", "", 2, "--markdown"),
    case("tls12.handshake_docs", "--markdown extra", 2, "unrecognized arguments", "extra"),
    # sslacc_sim.measure (every case fails before the measurement)
    case("sslacc_sim.measure", "--full extra", 2, "unrecognized arguments", "extra"),
    # testbed.linux.linktestbed (no case builds a namespace: each fails on its arguments first, or is an
    # internal probe on the loopback interface)
    case("testbed.linux.linktestbed", "", 2, "required", "cmd"),
    case("testbed.linux.linktestbed", "up --profile no-such-profile", 2, "--profile", "invalid choice"),
    case("testbed.linux.linktestbed", "run --node client", 2, "run", "command"),
    case("testbed.linux.linktestbed", "run --node nowhere -- true", 2, "--node", "invalid choice"),
    case("testbed.linux.linktestbed", "relay --tun t --client-net n --to-client abc --to-origin 1", 2, "--to-client", "abc"),
    case("testbed.linux.linktestbed", "relay --tun t --client-net n --to-client 1 --to-origin 1 --hops bogus", 2, "--hops", "bogus"),
    case("testbed.linux.linktestbed", "probe-client --host 127.0.0.1 --port {closed} --mode echo", 1, "refused"),
    case("testbed.linux.linktestbed", "probe-serve --port {busy} --mode echo", 1, "address already in use"),
    # sslsplit.barnraising.broker (a database, when one is opened, goes to the scratch folder)
    case("sslsplit.barnraising.broker", "", 2, "no site", "--sites"),
    case("sslsplit.barnraising.broker", "--sites {missing}", 2, "--sites", "no such file"),
    case("sslsplit.barnraising.broker", "--sites {docroot}", 2, "--sites", "directory"),
    case("sslsplit.barnraising.broker", "--sites {text}", 2, "not toml"),
    case("sslsplit.barnraising.broker", "--site a/b", 2, "--site", "--server", "--store"),
    case("sslsplit.barnraising.broker", "--server 127.0.0.1:1", 2, "--site"),
    case("sslsplit.barnraising.broker", "--site a/b --server 127.0.0.1:1 --store 127.0.0.1:2 --param nokey", 2, "--param", "key=value"),
    case("sslsplit.barnraising.broker", "--listen nope", 2, "--listen", "host:port"),
    case("sslsplit.barnraising.broker", "--dns-port 70000", 2, "--dns-port", "70000"),
    case("sslsplit.barnraising.broker", "--lease 0", 2, "--lease", "0"),
    case("sslsplit.barnraising.broker", "--site a/b --server 127.0.0.1:1 --store 127.0.0.1:2 --db {docroot}", 1, "cannot open database"),
    case("sslsplit.barnraising.broker", "--site a/b --server 127.0.0.1:1 --store 127.0.0.1:2 --db {scratch}/broker.db --listen 127.0.0.1:{busy}", 1, "address already in use"),
    # sslacc_sim.aio.linux.node (run as root in namespaces by sslacc_sim.aio.linux.failover; every case
    # fails before the node binds, listens or opens a raw socket)
    case("sslacc_sim.aio.linux.node", "", 2, "required", "role"),
    case("sslacc_sim.aio.linux.node", "primary", 2, "required", "--vip", "--mirror"),
    case("sslacc_sim.aio.linux.node", "primary --vip 127.0.0.1 --mirror 127.0.0.1", 2, "required", "--file", "--docroot"),
    case("sslacc_sim.aio.linux.node", "primary --plain --docroot {text} --vip 127.0.0.1 --mirror 127.0.0.1", 2, "--docroot", "not a directory"),
    case("sslacc_sim.aio.linux.node", "primary --file {text} --vip 127.0.0.1 --mirror 127.0.0.1", 2, "--cert", "--plain"),
    case("sslacc_sim.aio.linux.node", "primary --plain --file {missing} --vip 127.0.0.1 --mirror 127.0.0.1", 2, "--file", "no such file"),
    case("sslacc_sim.aio.linux.node", "primary --plain --file {docroot} --vip 127.0.0.1 --mirror 127.0.0.1", 2, "--file", "not a file"),
    case("sslacc_sim.aio.linux.node", "primary --plain --file {text} --vip 127.0.0.1 --mirror 127.0.0.1 --port 70000", 2, "--port", "70000"),
    case("sslacc_sim.aio.linux.node", "primary --plain --file {text} --vip 127.0.0.1 --mirror 127.0.0.1 --die-at nowhere", 2, "--die-at", "invalid choice"),
    case("sslacc_sim.aio.linux.node", "backup --file {text} --vip 127.0.0.1 --mirror 127.0.0.1 --cert {cert} --key {pub}", 2, "--key", "private key", "public key"),
    case("sslacc_sim.aio.linux.node", "backup --file {text} --vip 127.0.0.1 --mirror 127.0.0.1 --cert {cert} --key {rsa} --suite NO-SUCH-SUITE", 2, "--suite", "no-such-suite"),
    case("sslacc_sim.aio.linux.node", "sniff --src 10.0.0.1 --out {scratch}/sniff.json --dev no-such-dev", 2, "--dev", "no such network interface"),
    case("sslacc_sim.aio.linux.node", "primary --plain --file {text} --vip 127.0.0.1 --mirror 127.0.0.1 --mirror-port {closed}", 1, "refused"),
    # webalps_sim.host
    case("webalps_sim.host", "", 2, "required", "--mode", "--docroot"),
    case("webalps_sim.host", "--mode http --docroot {missing}", 2, "--docroot", "not a directory"),
    case("webalps_sim.host", "--mode http --docroot {docroot} --port 70000", 2, "--port", "70000"),
    case("webalps_sim.host", "--mode webalps --docroot {docroot}", 2, "--guardian"),
    case("webalps_sim.host", "--mode webalps --docroot {docroot} --guardian x --cert {cert} --key {rsa}", 2, "holds no key"),
    case("webalps_sim.host", "--mode https --docroot {docroot} --cert {cert}", 2, "--cert", "--key"),
    case("webalps_sim.host", "--mode https --docroot {docroot} --cert {cert} --key {pub}", 2, "--key", "private key", "public key"),
    case("webalps_sim.host", "--mode https --docroot {docroot} --ciphers NO-SUCH-SUITE", 2, "--ciphers", "no-such-suite"),
    case("webalps_sim.host", "--mode webalps --docroot {docroot} --guardian {missing}", 1, "cannot reach the guardian"),
    case("webalps_sim.host", "--mode http --docroot {docroot} --port {busy}", 1, "address already in use"),
    # webalps_sim.guardian (state folders in the scratch folder; a 1024-bit key is the work done)
    case("webalps_sim.guardian", "", 2, "required", "--state-dir"),
    case("webalps_sim.guardian", "--state-dir {text}", 2, "--state-dir", "not a directory"),
    case("webalps_sim.guardian", "--state-dir {scratch}/g1 --key-size 100", 2, "--key-size", "100"),
    case("webalps_sim.guardian", "--state-dir {scratch}/g2 --key-size 1024 --app no-such-app --init", 2, "unknown guardian application"),
    case("webalps_sim.guardian", "--state-dir {scratch}/g3 --key-size 1024", 2, "--listen"),
    case("webalps_sim.guardian", "--state-dir {scratch}/g4 --key-size 1024 --listen {scratch}/g4.sock", 3, "no certificate yet", "webalps_sim.ca sign"),
    case("webalps_sim.guardian", "--state-dir {scratch}/g5 --max-connections 0", 2, "--max-connections", "at least 1"),
    case("webalps_sim.guardian", "--state-dir {scratch}/g5 --max-frame-bytes 5000000", 2, "--max-frame-bytes", "5000000"),
    case("webalps_sim.guardian", "--state-dir {scratch}/g5 --max-sessions 0", 2, "--max-sessions", "at least 1"),
    case("webalps_sim.guardian", "--state-dir {scratch}/g5 --session-lifetime -1", 2, "--session-lifetime", "positive"),
    # webalps_sim.ca
    case("webalps_sim.ca", "", 2, "required", "command"),
    case("webalps_sim.ca", "init", 2, "required", "--dir"),
    case("webalps_sim.ca", "init --dir {text}", 1, "file exists"),
    case("webalps_sim.ca", "sign --dir {scratch}/ca --csr {missing} --out {scratch}/chain.pem", 2, "--csr", "no such file"),
    case("webalps_sim.ca", "sign --dir {scratch}/ca --csr {cert} --out {scratch}/chain.pem", 2, "--csr", "expected a pem certificate request, got a pem certificate block"),
    case("webalps_sim.ca", "sign --dir {scratch}/ca --csr {text} --out {scratch}/chain.pem", 2, "--csr", "no pem data"),
    case("webalps_sim.ca", "sign --dir {scratch}/ca --csr {cert} --out {docroot}", 2, "--out", "directory"),
    # webalps_sim.evoting
    case("webalps_sim.evoting", "", 2, "required", "command"),
    case("webalps_sim.evoting", "setup", 2, "required", "--state-dir", "--voters"),
    case("webalps_sim.evoting", "setup --state-dir {scratch}/election --candidates a,b --voters {missing}", 2, "--voters", "no such file"),
    case("webalps_sim.evoting", "setup --state-dir {scratch}/election --candidates a,b --voters {docroot}", 2, "--voters", "directory"),
    case("webalps_sim.evoting", "setup --state-dir {scratch}/election --candidates a,b --voters {rsa}", 2, "expected name:password"),
    case("webalps_sim.evoting", "setup --state-dir {text} --candidates a,b --voters {voters}", 2, "--state-dir", "not a directory"),
    case("webalps_sim.evoting", "setup --state-dir {scratch}/election --candidates a,a --voters {voters}", 2, "duplicates"),
    case("webalps_sim.evoting", "setup --state-dir {scratch}/election --candidates a,b --voters {voters} --officer nobody", 2, "officers", "nobody"),
    # webalps_sim.experiments (every case fails before the first measurement)
    case("webalps_sim.experiments", "", 2, "required", "what"),
    case("webalps_sim.experiments", "table9", 2, "invalid choice", "table9"),
    case("webalps_sim.experiments", "table1 --seconds abc", 2, "--seconds", "abc"),
    case("webalps_sim.experiments", "table1 --seconds -1", 2, "--seconds", "-1"),
    case("webalps_sim.experiments", "table1 --out {text}", 2, "--out", "not a directory"),
    # webalps_sim.load
    case("webalps_sim.load", "", 2, "required", "urls"),
    case("webalps_sim.load", "not-a-url", 2, "url", "not-a-url"),
    case("webalps_sim.load", "http://127.0.0.1:99999/", 2, "url", "port"),
    case("webalps_sim.load", "http://127.0.0.1:1/=0", 2, "weight"),
    case("webalps_sim.load", "http://127.0.0.1:1/ --seconds 0", 2, "--seconds", "0"),
    case("webalps_sim.load", "http://127.0.0.1:1/ --clients 0", 2, "--clients", "0"),
    case("webalps_sim.load", "https://127.0.0.1:1/ --cafile {rsa}", 2, "--cafile", "expected a pem certificate, got a private key"),
    case("webalps_sim.load", "https://127.0.0.1:1/ --ciphers NO-SUCH-CIPHER", 2, "--ciphers", "no cipher"),
    case("webalps_sim.load", "http://127.0.0.1:{closed}/ --seconds 0.2", 1, "no request completed", "refused"),
    # sslacc_sim.aio.linux.campaign (every case fails before a namespace is made)
    case("sslacc_sim.aio.linux.campaign", "--trials 0", 2, "--trials", "0"),
    case("sslacc_sim.aio.linux.campaign", "--connections abc", 2, "--connections", "abc"),
    case("sslacc_sim.aio.linux.campaign", "--modes kill,explode", 2, "modes", "explode"),
    case("sslacc_sim.aio.linux.campaign", "--modes join", 2, "modes", "chain layout"),
    case("sslacc_sim.aio.linux.campaign", "--control nope", 2, "--control", "nope"),
    case("sslacc_sim.aio.linux.campaign", "--window 0.9,0.1", 2, "window"),
    case("sslacc_sim.aio.linux.campaign", "--window x", 2, "--window", "start,end"),
    case("sslacc_sim.aio.linux.campaign", "--tag-prefix 12", 2, "tag_prefix", "letters"),
    case("sslacc_sim.aio.linux.campaign", "--wake-after -1", 2, "--wake-after", "-1"),
    case("sslacc_sim.aio.linux.campaign", "--out {text}", 2, "--out", "not a directory"),
    # sslacc_sim.aio.linux.cluster (every case fails before a namespace is made)
    case("sslacc_sim.aio.linux.spells", "", 2, "required", "folder"),
    case("sslacc_sim.aio.linux.spells", "{text}", 2, "not a directory"),
    case("sslacc_sim.aio.linux.spells", "{spells_empty}", 1, "no t<N>.pcap"),
    case("sslacc_sim.aio.linux.spells", "{spells_bad_json}", 1, "not a campaign's fault record"),
    case("sslacc_sim.aio.linux.spells", "{spells_bad_pcap}", 1, "cannot read", "isn't a capture file"),
    case("sslacc_sim.aio.linux.cluster", "", 2, "required", "command"),
    case("sslacc_sim.aio.linux.cluster", "up", 2, "required", "--docroot"),
    case("sslacc_sim.aio.linux.cluster", "up --docroot {text}", 2, "--docroot", "not a directory"),
    case("sslacc_sim.aio.linux.cluster", "up --docroot {docroot} --nodes 7", 2, "--nodes", "invalid choice"),
    case("sslacc_sim.aio.linux.cluster", "up --docroot {docroot} --nodes 4", 2, "--nodes 4", "--layout buckets"),
    case("sslacc_sim.aio.linux.cluster", "up --docroot {docroot} --tag bad-tag", 2, "--tag", "bad-tag"),
    case("sslacc_sim.aio.linux.cluster", "up --docroot {docroot} --cert {cert}", 2, "--cert", "--key"),
    case("sslacc_sim.aio.linux.cluster", "up --docroot {docroot} --cert {cert} --key {pub}", 2, "--key", "private key"),
    case("sslacc_sim.aio.linux.cluster", "up --docroot {docroot} --spares 1", 2, "--spares", "--layout buckets"),
    case("sslacc_sim.aio.linux.cluster", "up --docroot {docroot} --layout buckets --nodes 4 --spares 3", 2, "add up to 6"),
    case("sslacc_sim.aio.linux.cluster", "join --tag nosuch", 1, "no cluster", "nosuch"),
    case("sslacc_sim.aio.linux.cluster", "kill --node g", 2, "--node", "invalid choice"),
    case("sslacc_sim.aio.linux.cluster", "kill --tag nosuch", 1, "no cluster", "nosuch"),
    case("sslacc_sim.aio.linux.cluster", "down --tag nosuch", 1, "no cluster", "nosuch"),
    # webalps_sim.campaign (every case fails before a process starts)
    case("webalps_sim.model_driver", "--loads 0", 2, "--loads"),
    case("webalps_sim.model_driver", "--mix 1.5", 2, "--mix"),
    case("webalps_sim.model_driver", "--kinds ftp", 2, "--kinds", "ftp"),
    case("webalps_sim.model_driver", "--seconds -1", 2, "--seconds"),
    case("webalps_sim.campaign", "--trials 0", 2, "--trials", "0"),
    case("webalps_sim.campaign", "--clients abc", 2, "--clients", "abc"),
    case("webalps_sim.campaign", "--curl-clients -1", 2, "--curl-clients", "-1"),
    case("webalps_sim.campaign", "--seed x", 2, "--seed", "x"),
    case("webalps_sim.campaign", "--out {text}", 2, "--out", "not a directory"),
)
# fmt: on


@dataclass(frozen=True)
class Outcome:
    status: int
    stdout: str
    stderr: str
    seconds: float


def _python_m(program: str, args: list[str], env: dict[str, str]) -> Outcome:
    """``python -m PROGRAM ARGS`` in a fresh interpreter, exactly as a user types it."""
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-m", program, *args], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=TIMEOUT,
                         stdin=subprocess.DEVNULL)
    return Outcome(out.returncode, out.stdout, out.stderr, time.monotonic() - start)


def _forked(runs: dict[str, tuple[str, list[str]]], env: dict[str, str]) -> dict[str, Outcome]:
    """Every run as its own process forked from one interpreter that imported the programs'
    dependencies once (see ``cli_forkserver.py``): the same code path as ``python -m``."""
    request = [{"key": k, "target": prog, "argv": argv} for k, (prog, argv) in runs.items()]
    out = subprocess.run([sys.executable, str(FORKSERVER)], input=json.dumps(request),
                         cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=TIMEOUT * len(runs))
    assert out.returncode == 0, out.stderr
    return {r["key"]: Outcome(r["status"], r["stdout"], r["stderr"], r["seconds"])
            for r in json.loads(out.stdout)}


@dataclass(frozen=True)
class Sweep:
    fields: dict[str, str]
    outcomes: dict[str, Outcome]


def _run_sweep(root: Path) -> Sweep:
    """Run every case (and ``--help`` of every program); outcomes by case id."""
    fields = write_fixtures(root)
    closed = socket.socket()  # bound but not listening: connecting to it is refused
    closed.bind(("127.0.0.1", 0))
    busy = socket.socket()  # listening: binding it again fails with "address already in use"
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    fields["closed"] = str(closed.getsockname()[1])
    fields["busy"] = str(busy.getsockname()[1])
    env = {**os.environ, "XDG_CACHE_HOME": str(root / "cache"), "TRACES_DIR": str(root / "traces")}
    env.pop("TESTBED_TRACEBACK", None)
    runs = {c.id: (c.program, [a.format(**fields) for a in c.args]) for c in CASES}
    runs.update({f"{p} --help": (p, ["--help"]) for p in SCRIPTS})
    try:
        with ThreadPoolExecutor(max_workers=3) as pool:  # --help: real interpreters
            helps = {m: pool.submit(_python_m, m, ["--help"], env) for m in (*MODULES, *EXEMPT)}
            outcomes = _forked(runs, env)
            outcomes.update({f"{m} --help": f.result() for m, f in helps.items()})
    finally:
        closed.close()
        busy.close()
    return Sweep(fields, outcomes)


@pytest.fixture(scope="session")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Sweep:
    """The sweep, run once per test session: under pytest-xdist the first worker runs it and
    the others read its outcomes from the run's shared temporary folder."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return _run_sweep(tmp_path_factory.mktemp("cli"))
    shared = tmp_path_factory.getbasetemp().parent  # one folder per run, common to the workers
    saved = shared / "cli-sweep.json"
    with open(shared / "cli-sweep.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not saved.is_file():
            root = shared / "cli-sweep"
            root.mkdir()
            result = _run_sweep(root)
            saved.write_text(json.dumps({"fields": result.fields, "outcomes": {
                k: asdict(o) for k, o in result.outcomes.items()}}))
    data = json.loads(saved.read_text())
    return Sweep(data["fields"], {k: Outcome(**o) for k, o in data["outcomes"].items()})


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_bad_input_gives_one_clear_line(sweep: Sweep, c: Case) -> None:
    out = sweep.outcomes[c.id]
    assert "Traceback" not in out.stderr, out.stderr
    assert "internal error" not in out.stderr, out.stderr
    assert out.status == c.status, out.stderr
    last = _last_line(out.stderr)
    assert ": error: " in last, out.stderr
    for word in c.words:
        assert word.format(**sweep.fields).lower() in last.lower(), out.stderr


def _has_main_block(source: str) -> bool:
    """Whether the module's top level has ``if __name__ == "__main__":`` (either way round);
    read from the syntax tree, so the words in a docstring or a comment do not count."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            test = node.test
            sides = [test.left, *test.comparators]
            if (len(sides) == 2 and isinstance(test.ops[0], ast.Eq)
                    and any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides)
                    and any(isinstance(x, ast.Constant) and x.value == "__main__" for x in sides)):
                return True
    return False


def _programs() -> list[str]:
    """Every module of the project packages that runs as ``python -m``, by dotted name."""
    found = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if _has_main_block(path.read_text(encoding="utf-8")):
                parts = path.relative_to(REPO).with_suffix("").parts
                found.append(".".join(parts[:-1] if parts[-1] == "__main__" else parts))
    return found


def test_main_block_detection() -> None:
    assert _has_main_block('import sys\nif __name__ == "__main__":\n    sys.exit(0)\n')
    assert _has_main_block("if '__main__' == __name__:\n    pass\n")
    assert not _has_main_block('"""Run it under ``if __name__ == \\"__main__\\":``."""\n')
    assert not _has_main_block('def f():\n    if __name__ == "__main__":\n        pass\n')


def test_every_program_is_swept() -> None:
    """A new program (a module with a ``__main__`` block) is either in MODULES, so that its bad
    input is swept, or in EXEMPT with the reason; and neither list names a module that is gone."""
    programs = _programs()
    assert "testbed.https_server" in programs and "testbed.sweep" not in programs  # sanity
    missing = sorted(set(programs) - set(MODULES) - set(EXEMPT))
    assert not missing, f"add to MODULES (with CASES) or to EXEMPT (with a reason): {missing}"
    stale = sorted((set(MODULES) | set(EXEMPT)) - set(programs))
    assert not stale, f"no __main__ block any more: {stale}"
    assert not set(MODULES) & set(EXEMPT)


@pytest.mark.parametrize("program", [*MODULES, *EXEMPT, *SCRIPTS])
def test_help_exits_zero(sweep: Sweep, program: str) -> None:
    out = sweep.outcomes[f"{program} --help"]
    assert out.status == 0, out.stderr
    assert out.stdout.startswith("usage: ") and "--help" in out.stdout
    assert out.stderr == ""


@pytest.mark.parametrize("program", MODULES)
def test_module_errors_are_prefixed_with_the_program(sweep: Sweep, program: str) -> None:
    """Usage and run-time errors alike start with ``python -m PROGRAM: error:`` (or
    ``python -m PROGRAM SUBCOMMAND: error:`` for a subcommand's arguments, as argparse has it)."""
    outs = [sweep.outcomes[c.id] for c in CASES if c.program == program]
    assert len(outs) >= (2 if program in FEW_CASES else 5)
    prefix = re.compile(rf"python -m {re.escape(program)}( [a-z]+)?: error: ")
    for out in outs:
        assert prefix.match(_last_line(out.stderr)), out.stderr
