"""A link testbed in Linux network namespaces: real programs over kernel-shaped links.

The SimPy models in :mod:`netsim.link` and :mod:`netsim.tcp` say how long a transfer *should*
take over a slow line; this module builds such a line out of the kernel so that the real
programs (``python -m testbed.https_server``, curl, the splitting proxy, Squid) can be timed over
it and compared with the model.

Topology (three namespaces, two veth pairs, addresses fixed because namespaces are private)::

    client 10.77.1.2 ──access hop── 10.77.1.1 middle 10.77.2.1 ──server hop── 10.77.2.2 origin

``middle`` forwards IP (it is the router, and the place for a proxy or a cache); ``client`` and
``origin`` route everything through it. Names start with :data:`PREFIX` so that
:func:`sweep_leftovers` can find what a killed run left behind.

**Bandwidth.** Each direction of each hop gets a ``tbf`` qdisc on the egress of the sending
veth end: ``to_client`` traffic of the server hop is shaped on the origin's interface (like a
modem's upstream), ``to_origin`` traffic on the middle's interface, and likewise on the access
hop. A rate of ``None`` leaves that direction unshaped.

**Propagation delay** (``netem`` is not available on these machines). A small userspace stage,
the *delay relay*, runs in ``middle``: policy routing sends every packet the middle forwards into
a TUN device; the relay (``python -m testbed.linux.linktestbed relay``) reads each IPv4 packet, holds it
for the one-way delay of its direction (the access hop's plus the server hop's ``delay``) and
writes it back, and the kernel then routes it out of the right veth. It works on whole packets,
so TCP stays end to end (the handshake, the ACK clock and slow start all see the delay).

**Serialisation.** A token bucket is a rate limiter, not a wire: after an idle spell ``tbf``
lets its ``burst`` bytes through at once, where a real 160 kbit/s line (and the SimPy
:class:`~netsim.link.Link`) spends 75 ms on every full frame. Small transfers (a TLS handshake
flight) would look up to one frame time per flight faster than they are. So the relay also
serialises each frame at each shaped hop's rate (store and forward, 2 % faster than the ``tbf``
so that ``tbf`` stays the bottleneck and the one that drops); ``LinkTestbed(serialise=False)``
leaves that to ``tbf`` alone. The relay is Python: its timer adds ~0.1-0.5 ms per pass, and
it is tested up to 4 Mbit/s through it (the SINE profiles' WAN; faster paths are untested); when no direction has 0.5 ms of delay or frame time (the LAN
profile) the testbed runs without it and the path has only the veth's microseconds.

Use it as a context manager; teardown kills every process in the namespaces and deletes them,
also when the body raises::

    from sslsplit.params import ADSL_PROFILE   # a paper's profile

    with LinkTestbed(ADSL_PROFILE) as tb:
        tb.popen("origin", ["python3", "-m", "http.server", "8000"])
        tb.run("client", ["curl", "-s", f"http://{tb.address('origin')}:8000/"])
        print(measure_rtt(tb), measure_goodput(tb, "to_client"))  # TCP probes, seconds, bit/s

(a real program needs a moment to listen; ``benchmarks/bench_linktestbed.py`` waits for the
server's "listening" line.)

Everything needs root (``CAP_NET_ADMIN``) and ``ip``/``tc`` from iproute2; without them the
``up()`` (entering the ``with``) raises :class:`NamespacesUnavailable` with one line saying
what is missing.
``python -m testbed.linux.linktestbed --help`` offers the same as a command line (``up``, ``run``,
``down``, ``cleanup``); ``run --capture FILE`` records the client's link with tcpdump beside
it (:meth:`LinkTestbed.capture`, :mod:`testbed.linux.capture`).
"""

from __future__ import annotations

import argparse
import importlib
import os
import secrets
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from netsim.link import LAN as LAN_LINK
from netsim.link import LinkParams

from . import netns
from .capture import FULL, HEADERS, MAX_BYTES, Capture
from .netns import (
    CommandFailed,
    Namespaces,
    NamespacesUnavailable,
    TestbedError,
    check_available,
)
from .tundelay import HOPS, format_hops, parse_hops, run_hop_relay, run_relay

__all__ = [
    "PREFIX",
    "NODES",
    "ADDRESSES",
    "TestbedError",
    "NamespacesUnavailable",
    "CommandFailed",
    "LinkShape",
    "Profile",
    "LAN",
    "PROFILES",
    "LinkTestbed",
    "GOODPUT_FRACTION",
    "measure_rtt",
    "measure_goodput",
    "check_available",
    "list_leftovers",
    "sweep_leftovers",
    "main",
]

#: Every namespace this module creates is named ``PREFIX + <tag> + "-" + <node>``.
PREFIX = "wstb-"
Node = Literal["client", "middle", "origin"]
#: The three namespaces of a testbed.
NODES: tuple[Node, ...] = ("client", "middle", "origin")
#: Addresses of the nodes (the middle's address on the client side is its first).
ADDRESSES: dict[str, str] = {"client": "10.77.1.2", "middle": "10.77.1.1", "origin": "10.77.2.2"}
_MIDDLE_ORIGIN_SIDE = "10.77.2.1"
_CLIENT_NET = "10.77.1.0/24"
_ORIGIN_NET = "10.77.2.0/24"
_ETH_FRAME = 1514          # bytes of one full-size Ethernet frame, for tbf limits
_DELAY_TABLE = "100"       # routing table that sends forwarded packets into the delay relay
_MIN_DELAY = 0.0005        # s; below this on every direction the relay is not started
_READY_TIMEOUT = 10.0      # s to wait for the relay to come up
#: The relay's serialisers run this much faster than the tbf rate, so that tbf stays the
#: bottleneck (its queue limit is the one that drops) and no standing queue forms in the relay.
_SERIALISER_HEADROOM = 1.02


# --- profiles ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class LinkShape:
    """One direction of one hop: ``rate`` in bit/s (``None`` = unshaped), one-way ``delay`` in
    seconds, ``queue`` in full-size packets (``None`` = about 100 ms at ``rate``)."""

    rate: float | None
    delay: float = 0.0
    queue: int | None = None

    def __post_init__(self) -> None:
        if self.rate is not None and self.rate <= 0:
            raise ValueError(f"rate must be positive (bit/s) or None, got {self.rate}")
        if self.delay < 0:
            raise ValueError(f"delay must be >= 0 s, got {self.delay}")
        if self.queue is not None and self.queue < 1:
            raise ValueError(f"queue must be >= 1 packet or None, got {self.queue}")

    @classmethod
    def from_params(cls, params: LinkParams) -> LinkShape:
        """The kernel twin of a SimPy :class:`~netsim.link.LinkParams` (loss is not modelled)."""
        return cls(rate=params.bandwidth, delay=params.delay, queue=params.queue)

    def tbf_args(self) -> list[str]:
        """Arguments after ``tc qdisc replace dev X root`` (empty when unshaped).

        ``burst`` is one frame plus 2 ms at ``rate`` (the bucket must hold a frame; a bigger
        bucket lets short transfers beat the rate); ``limit`` is the byte queue behind it."""
        if self.rate is None:
            return []
        burst = max(2 * _ETH_FRAME, int(self.rate / 8 * 0.002))
        if self.queue is not None:
            limit = self.queue * _ETH_FRAME
        else:
            limit = max(16 * _ETH_FRAME, int(self.rate / 8 * 0.1))
        return ["tbf", "rate", f"{int(self.rate)}bit", "burst", str(burst), "limit", str(limit)]


@dataclass(frozen=True)
class Profile:
    """Both hops in both directions. ``access`` is client <-> middle, ``server`` middle <-> origin;
    ``to_client`` is the direction a download takes."""

    name: str
    access_to_origin: LinkShape
    access_to_client: LinkShape
    server_to_origin: LinkShape
    server_to_client: LinkShape

    def one_way_delay(self, direction: Literal["to_client", "to_origin"]) -> float:
        """Seconds the delay relay holds a packet going that way (both hops together)."""
        if direction == "to_client":
            return self.access_to_client.delay + self.server_to_client.delay
        return self.access_to_origin.delay + self.server_to_origin.delay

    @property
    def rtt(self) -> float:
        """Round-trip propagation delay client <-> origin the profile adds, seconds."""
        return self.one_way_delay("to_client") + self.one_way_delay("to_origin")

    def rates(self, direction: Literal["to_client", "to_origin"]) -> tuple[float, ...]:
        """Shaped rates (bit/s) a packet going that way crosses, in path order."""
        if direction == "to_client":
            hops = (self.server_to_client, self.access_to_client)
        else:
            hops = (self.access_to_origin, self.server_to_origin)
        return tuple(h.rate for h in hops if h.rate is not None)

    def frame_time(self, direction: Literal["to_client", "to_origin"], nbytes: int) -> float:
        """Seconds to serialise one ``nbytes`` frame on every hop of that direction."""
        return sum(nbytes * 8 / r for r in self.rates(direction))

    def needs_relay(self, serialise: bool = True) -> bool:
        """Whether the delay relay has something to add: a one-way delay, or (with
        ``serialise``) a full frame's serialisation time, of at least 0.5 ms in a direction."""
        worst = 0.0
        for d in ("to_client", "to_origin"):
            worst = max(worst, self.one_way_delay(d),
                        self.frame_time(d, _ETH_FRAME) if serialise else 0.0)
        return worst >= _MIN_DELAY


_LAN_SHAPE = LinkShape.from_params(LAN_LINK)

#: Everything on the 100 Mbit/s LAN (0.1 ms each way: below the relay threshold, so no relay).
LAN = Profile("lan", _LAN_SHAPE, _LAN_SHAPE, _LAN_SHAPE, _LAN_SHAPE)


#: Profiles by name (the CLI's ``--profile``). A study's own profiles live in its package's
#: ``params.PROFILES``; the CLI's ``--profiles-from MODULE`` adds them (see :func:`load_profiles`).
PROFILES: dict[str, Profile] = {"lan": LAN}


def list_leftovers(prefix: str = PREFIX) -> list[str]:
    """Names of existing namespaces that start with ``prefix`` (default: this module's)."""
    return netns.list_leftovers(prefix)


def sweep_leftovers(prefix: str = PREFIX) -> list[str]:
    """Delete every namespace starting with ``prefix`` (default: this module's) and the
    processes in it; returns the names removed."""
    return netns.sweep_leftovers(prefix)


# --- the testbed ------------------------------------------------------------------------------


@dataclass
class LinkTestbed(Namespaces):
    """Three namespaces joined by shaped veth pairs, built on :meth:`up`, removed on :meth:`down`.

    ``tag`` makes the namespace names unique (default: random hex), so several testbeds can
    exist at once. Use as a context manager; :meth:`down` is idempotent.

    ``hop_by_hop=True`` is for a proxy or cache *in* ``middle``: by default only forwarded
    packets cross the relay (a program in ``middle`` sees the ``tbf`` rates, not the delays or
    the serialisation); with it the middle's own packets do too, carrying the round trip of
    their hop (:func:`testbed.linux.tundelay.hop_path`; packets *to* the middle are shaped by ``tbf``
    alone)."""

    profile: Profile = field(default_factory=lambda: LAN)
    tag: str = field(default_factory=lambda: secrets.token_hex(3))
    serialise: bool = True
    hop_by_hop: bool = False
    _relay: subprocess.Popen[str] | None = field(default=None, init=False, repr=False)
    _up: bool = field(default=False, init=False, repr=False)

    PREFIX = PREFIX
    NODES = NODES
    MAX_TAG = 12
    CLEANUP_HINT = "choose another tag or run `python -m testbed.linux.linktestbed cleanup`"

    def __post_init__(self) -> None:
        self._check_tag()

    def address(self, node: str) -> str:
        """The IPv4 address other nodes use to reach ``node``."""
        self.ns(node)
        return ADDRESSES[node]

    def capture(self, node: str, dev: str, path: str | os.PathLike[str], *,
                snaplen: int = HEADERS, max_bytes: int = MAX_BYTES) -> Capture:
        """``with tb.capture("client", "veth0", "run.pcap"):`` -- tcpdump on ``dev`` of
        ``node`` into ``path`` while the body runs (:class:`~testbed.linux.capture.Capture`:
        headers only and 64 MiB at most by default). Devices: ``veth0`` in ``client`` and
        ``origin``; ``vc`` (client side) and ``vo`` (origin side) in ``middle``."""
        self.ns(node)
        return Capture(self, node, dev, path, snaplen=snaplen, max_bytes=max_bytes)

    # -- lifecycle --

    def _stop(self) -> None:
        """Stop the delay relay (before the namespaces go)."""
        if self._relay is not None:
            self._relay.kill()
            self._relay.wait()
            self._relay = None

    def _build(self) -> None:
        # veth ends created directly inside the namespaces: nothing appears on the host.
        self.veth("client", "veth0", "middle", "vc")
        self.veth("middle", "vo", "origin", "veth0")
        self.ip("client", "addr", "add", f"{ADDRESSES['client']}/24", "dev", "veth0")
        self.ip("middle", "addr", "add", f"{ADDRESSES['middle']}/24", "dev", "vc")
        self.ip("middle", "addr", "add", f"{_MIDDLE_ORIGIN_SIDE}/24", "dev", "vo")
        self.ip("origin", "addr", "add", f"{ADDRESSES['origin']}/24", "dev", "veth0")
        for node, dev in (("client", "veth0"), ("middle", "vc"), ("middle", "vo"),
                          ("origin", "veth0")):
            self.ip(node, "link", "set", dev, "up")
        self.ip("client", "route", "add", "default", "via", ADDRESSES["middle"])
        self.ip("origin", "route", "add", "default", "via", _MIDDLE_ORIGIN_SIDE)
        self.sysctl("middle", "net.ipv4.ip_forward", "1")
        p = self.profile
        for node, dev, shape in (("client", "veth0", p.access_to_origin),
                                 ("middle", "vc", p.access_to_client),
                                 ("middle", "vo", p.server_to_origin),
                                 ("origin", "veth0", p.server_to_client)):
            if shape.rate is not None:
                netns.sh(["tc", "-n", self.ns(node), "qdisc", "replace", "dev", dev, "root",
                          *shape.tbf_args()])
        if p.needs_relay(self.serialise):
            self._start_relay()

    def _start_relay(self) -> None:
        p = self.profile
        for key in ("all", "default", "vc", "vo"):
            self.sysctl("middle", f"net.ipv4.conf.{key}.rp_filter", "0")
        self.ip("middle", "tuntap", "add", "dev", "dly0", "mode", "tun")
        self.sysctl("middle", "net.ipv4.conf.dly0.rp_filter", "0")
        self.ip("middle", "link", "set", "dly0", "mtu", "1500", "up")
        self.ip("middle", "route", "add", "default", "dev", "dly0", "table", _DELAY_TABLE)
        if self.hop_by_hop:
            self._hop_rules()
        else:
            for dev in ("vc", "vo"):
                # packets arriving from a veth for another host go through the relay (the
                # middle's own addresses match the local table first); what the relay writes
                # back arrives on dly0 and is routed by the main table.
                self.ip("middle", "rule", "add", "iif", dev, "lookup", _DELAY_TABLE)
        argv = ["ip", "netns", "exec", self.ns("middle"), sys.executable, "-m",
                "testbed.linux.linktestbed", "relay", "--tun", "dly0", "--client-net", _CLIENT_NET,
                "--to-client", repr(p.one_way_delay("to_client")),
                "--to-origin", repr(p.one_way_delay("to_origin"))]
        if self.hop_by_hop:
            hops = [(getattr(p, h).rate, getattr(p, h).delay) for h in HOPS]
            argv += ["--middle", f"{ADDRESSES['middle']},{_MIDDLE_ORIGIN_SIDE}", "--hops",
                     format_hops(hops, _SERIALISER_HEADROOM if self.serialise else None)]
        elif self.serialise:
            for d in ("to_client", "to_origin"):
                rates = ",".join(repr(r * _SERIALISER_HEADROOM) for r in p.rates(d))
                argv += [f"--{d.replace('_', '-')}-rates", rates or "none"]
        self._relay = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True, cwd=_package_root())
        assert self._relay.stdout is not None  # stdout=PIPE
        ready, _, _ = select.select([self._relay.stdout], [], [], _READY_TIMEOUT)
        line = self._relay.stdout.readline() if ready and self._relay.stdout else ""
        if line.strip() != "ready":
            self._relay.kill()
            _, err = self._relay.communicate()
            raise TestbedError(f"delay relay did not start: {err.strip() or line.strip()}")

    def _hop_rules(self) -> None:
        """Routing for :attr:`hop_by_hop`: forwarded packets as usual, and what the middle
        itself sends (``iif lo``, after the local table) into dly0, with the source address
        of the side it goes to; the relay writes it back and the main table routes it."""
        self.sysctl("middle", "net.ipv4.conf.dly0.accept_local", "1")  # the middle's own packets
        for net, src in ((_CLIENT_NET, ADDRESSES["middle"]), (_ORIGIN_NET, _MIDDLE_ORIGIN_SIDE)):
            self.ip("middle", "route", "add", net, "dev", "dly0", "src", src,
                     "table", _DELAY_TABLE)
        for rule in (("iif", "vc"), ("iif", "vo"), ("iif", "lo")):
            self.ip("middle", "rule", "add", *rule, "lookup", _DELAY_TABLE)


def _package_root() -> str:
    """The directory that holds the ``netsim`` package (so ``-m testbed.linux.linktestbed`` imports)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# --- measurements: TCP probes run inside the namespaces --------------------------------------

#: TCP payload per full-size frame on these links: 1500 MTU - 20 IP - 32 TCP (with timestamps);
#: tbf counts the 14-byte Ethernet header too, so a bulk transfer's goodput is
#: ``rate * GOODPUT_FRACTION``.
GOODPUT_FRACTION = 1448 / _ETH_FRAME
_PROBE_PORT = 5099


def _probe_serve(port: int, mode: str, nbytes: int) -> None:
    """One connection: ``echo`` bytes back until EOF, or ``send`` ``nbytes`` then close."""
    import socket

    with socket.create_server(("0.0.0.0", port)) as srv:
        print("ready", flush=True)
        conn, _ = srv.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if mode == "send":
                conn.sendall(b"x" * nbytes)
                return
            while data := conn.recv(65536):
                conn.sendall(data)


def _probe_client(host: str, port: int, mode: str, count: int) -> None:
    """``echo``: print ``count`` one-byte round-trip times; ``recv``: read to EOF and print
    ``bytes first_byte_time last_byte_time`` (monotonic seconds)."""
    import socket

    with socket.create_connection((host, port), timeout=120) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if mode == "echo":
            for _ in range(count):
                t0 = time.monotonic()
                s.sendall(b"p")
                s.recv(1)
                print(time.monotonic() - t0)
            return
        first = last = 0.0
        total = 0
        while data := s.recv(65536):
            last = time.monotonic()
            if not total:
                first = last
                total_first = len(data)
            total += len(data)
        print(total, total_first, first, last)


def _probe(tb: LinkTestbed, server: str, client: str, mode: str, nbytes: int,
           count: int) -> list[str]:
    exe = [sys.executable, "-m", "testbed.linux.linktestbed"]
    srv = tb.popen(server, [*exe, "probe-serve", "--mode", "send" if mode == "recv" else "echo",
                            "--bytes", str(nbytes)],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=_package_root())
    try:
        assert srv.stdout is not None  # stdout=PIPE
        ready, _, _ = select.select([srv.stdout], [], [], _READY_TIMEOUT)
        if not ready or srv.stdout.readline().strip() != "ready":

            raise TestbedError(f"probe server did not start in {server}")
        out = tb.run(client, [*exe, "probe-client", "--host", tb.address(server), "--mode", mode,
                              "--count", str(count)], cwd=_package_root(), timeout=600)
        if out.returncode != 0:
            raise TestbedError(f"probe client failed: {out.stderr.strip()}")
        return out.stdout.split()
    finally:
        srv.kill()
        srv.communicate()


def measure_rtt(tb: LinkTestbed, count: int = 20) -> list[float]:
    """Round-trip times (s) of ``count`` one-byte TCP echoes client -> origin -> client (a
    TCP ``ping``: ``ping`` itself may be missing). Includes serialisation of the small packets."""
    return [float(x) for x in _probe(tb, "origin", "client", "echo", 0, count)]


def measure_goodput(tb: LinkTestbed, direction: Literal["to_client", "to_origin"] = "to_client",
                    nbytes: int = 200_000) -> float:
    """Goodput (bit/s) of one bulk TCP transfer of ``nbytes`` in ``direction``, as the receiver
    sees it: bytes after the first read over the time from the first read to the last (so the
    handshake and the first round trip do not count). Compare with
    ``rate * GOODPUT_FRACTION`` of the slowest hop in that direction."""
    server, client = ("origin", "client") if direction == "to_client" else ("client", "origin")
    total, first_chunk, first, last = _probe(tb, server, client, "recv", nbytes, 0)
    if float(last) <= float(first):
        raise TestbedError("bulk transfer arrived in one read; use more bytes")
    return (int(total) - int(first_chunk)) * 8 / (float(last) - float(first))


# --- command line -----------------------------------------------------------------------------


def _rates(text: str) -> tuple[float, ...]:
    return () if text == "none" else tuple(float(x) for x in text.split(","))


def build_parser() -> argparse.ArgumentParser:
    """``python -m testbed.linux.linktestbed`` (``--help`` lists the subcommands)."""
    from testbed.cli import program_name  # only the command line needs it

    parser = argparse.ArgumentParser(
        prog=program_name("testbed.linux.linktestbed"),
        description="Client/middle/origin network namespaces joined by tc-shaped veth links.",
    )
    parser.add_argument("--profiles-from", action="append", default=[], metavar="MODULE",
                        help="also offer the PROFILES of this module (repeatable), e.g. "
                             "sslsplit.params (adsl) or sine.params (sine-128k ...)")
    sub = parser.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="create a testbed and leave it running (prints its tag)")
    up.add_argument("--profile", default="lan", help="a profile name (see 'profiles')")
    up.add_argument("--tag", help="name part of the namespaces (default: random)")
    down = sub.add_parser("down", help="remove the testbed with this tag")
    down.add_argument("tag")
    run = sub.add_parser("run", help="build a testbed, run a command in one node, tear down")
    run.add_argument("--profile", default="lan", help="a profile name (see 'profiles')")
    run.add_argument("--node", choices=NODES, default="client")
    run.add_argument("--tag", help="name part of the namespaces (default: random)")
    run.add_argument("--capture", metavar="FILE", help="record the client's veth0 with tcpdump "
                     "into this pcap while the command runs (headers only, 64 MiB at most)")
    run.add_argument("--capture-full", action="store_true",
                     help="with --capture: whole packets, not only their headers")
    run.add_argument("argv", nargs=argparse.REMAINDER, help="command (after --)")
    sub.add_parser("cleanup", help=f"remove every namespace named {PREFIX}* (a killed run's)")
    sub.add_parser("profiles", help="list the profiles")
    ps = sub.add_parser("probe-serve", help="(internal) TCP probe server")
    ps.add_argument("--port", type=int, default=_PROBE_PORT)
    ps.add_argument("--mode", choices=("echo", "send"), required=True)
    ps.add_argument("--bytes", type=int, default=0)
    pc = sub.add_parser("probe-client", help="(internal) TCP probe client")
    pc.add_argument("--host", required=True)
    pc.add_argument("--port", type=int, default=_PROBE_PORT)
    pc.add_argument("--mode", choices=("echo", "recv"), required=True)
    pc.add_argument("--count", type=int, default=20)
    relay = sub.add_parser("relay", help="(internal) the delay relay run inside 'middle'")
    relay.add_argument("--tun", required=True)
    relay.add_argument("--client-net", required=True)
    relay.add_argument("--to-client", type=float, required=True, help="seconds")
    relay.add_argument("--to-origin", type=float, required=True, help="seconds")
    relay.add_argument("--to-client-rates", type=_rates, default=(), help="bit/s,bit/s or none")
    relay.add_argument("--to-origin-rates", type=_rates, default=(), help="bit/s,bit/s or none")
    relay.add_argument("--middle", help="the middle's addresses a,b (with --hops)")
    relay.add_argument("--hops", type=parse_hops, help="hop by hop: rate:delay for "
                       + ", ".join(HOPS) + " (rate bit/s or none, delay s)")
    return parser


def load_profiles(modules: Sequence[str]) -> dict[str, Profile]:
    """:data:`PROFILES` plus the ``PROFILES`` dict of each named module (a paper's
    ``params``): the lab knows no paper, a paper lends it its links by name."""
    profiles = dict(PROFILES)
    for name in modules:
        try:
            extra = importlib.import_module(name).PROFILES
        except (ImportError, AttributeError) as exc:
            raise TestbedError(f"--profiles-from {name}: no PROFILES there ({exc})") from exc
        profiles.update(extra)
    return profiles


def main(argv: list[str] | None = None) -> int:
    """Entry point; a missing prerequisite or a failed command is one line on stderr, exit 1
    (``python -m testbed.linux.linktestbed: error: ...``); bad usage exits 2, as argparse does."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.cmd == "run" and not (args.argv[1:] if args.argv[:1] == ["--"] else args.argv):
        parser.error("run: give a command after --")
    try:
        profiles = load_profiles(args.profiles_from)
        if getattr(args, "profile", None) is not None and args.profile not in profiles:
            parser.error(f"argument --profile: invalid choice: {args.profile!r} (choose from "
                         f"{', '.join(sorted(profiles))}; papers' profiles with --profiles-from, "
                         "e.g. sslsplit.params)")
        if args.cmd == "relay" and args.hops is not None:
            run_hop_relay(args.tun, args.client_net, args.middle.split(","), args.hops)
        elif args.cmd == "relay":
            run_relay(args.tun, args.client_net, args.to_client, args.to_origin,
                      args.to_client_rates, args.to_origin_rates)
        elif args.cmd == "probe-serve":
            _probe_serve(args.port, args.mode, args.bytes)
        elif args.cmd == "probe-client":
            _probe_client(args.host, args.port, args.mode, args.count)
        elif args.cmd == "profiles":
            for name, p in profiles.items():
                rates = [s.rate for s in (p.access_to_origin, p.access_to_client,
                                          p.server_to_origin, p.server_to_client)]
                print(f"{name:12} rates bit/s (access up/down, server up/down) {rates} "
                      f"rtt {p.rtt * 1e3:g} ms")
        elif args.cmd == "cleanup":
            check_available()
            for name in sweep_leftovers():
                print(f"removed {name}")
        elif args.cmd == "up":
            tb = LinkTestbed(profiles[args.profile], **({"tag": args.tag} if args.tag else {}))
            tb.up()  # not torn down: `down TAG` (or `cleanup`) removes it
            print(tb.tag)
            for node in NODES:
                print(f"{node:7} {tb.ns(node)} {ADDRESSES[node]}")
        elif args.cmd == "down":
            LinkTestbed(tag=args.tag).down()
        elif args.cmd == "run":
            cmd = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
            # SIGTERM unwinds through the context manager like Ctrl-C, so the testbed goes too
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
            tag = {"tag": args.tag} if args.tag else {}
            with LinkTestbed(profiles[args.profile], **tag) as tb:
                if args.capture is None:
                    return tb.run(args.node, cmd, capture_output=False).returncode
                with tb.capture("client", "veth0", args.capture,
                                snaplen=FULL if args.capture_full else HEADERS):
                    return tb.run(args.node, cmd, capture_output=False).returncode
    except (TestbedError, OSError) as exc:  # OSError: a probe's refused connection, a busy port
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
