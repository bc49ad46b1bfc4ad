"""The real-failover topology: a client and two accelerator nodes in Linux network namespaces.

::

                      LAN 10.88.0.0/24 (bridge br0 in its own namespace)
         client 10.88.0.2 ──┐
                            ├── br0
     node A 10.88.0.11 ─────┤        the virtual IP 10.88.0.100 starts on node A
     node B 10.88.0.12 ─────┘
     node A mir0 10.89.0.1 ──────── 10.89.0.2 mir0 node B    (the cluster link, a direct veth)

Four namespaces named ``sacc-<tag>-client``, ``-a``, ``-b`` and ``-lan``; every node's LAN
interface is ``eth0`` (its peer is a port of the bridge). Both nodes run with
``net.ipv4.tcp_timestamps=0`` so that a restored connection needs no timestamp offset
(:mod:`sslacc_sim.linux.repair`). Nothing touches the host's own network: the traffic stays
inside the namespaces.

Use :class:`Topology` as a context manager; leaving it kills every process in the namespaces
and deletes them, also when the body raises. The name prefix :data:`PREFIX` is this module's
alone, so that :func:`netsim.linktestbed.sweep_leftovers` with it removes what a killed run
left behind and nothing else. Needs root and ``ip`` (iproute2); :class:`NamespacesUnavailable`
otherwise.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType

from netsim.linktestbed import (
    CommandFailed,
    NamespacesUnavailable,
    TestbedError,
    check_available,
    list_leftovers,
    sweep_leftovers,
)

__all__ = [
    "PREFIX",
    "NODES",
    "ADDRESSES",
    "VIP",
    "MIRROR_ADDRESSES",
    "NamespacesUnavailable",
    "CommandFailed",
    "TestbedError",
    "Topology",
    "list_leftovers",
    "sweep_leftovers",
]

#: Every namespace of this package starts with this (``wstb-`` belongs to the link testbed).
PREFIX = "sacc-"
#: The three namespaces with programs in them (the bridge has one more, ``lan``).
NODES = ("client", "a", "b")
#: LAN address of each node (a /24).
ADDRESSES = {"client": "10.88.0.2", "a": "10.88.0.11", "b": "10.88.0.12"}
#: The service address the client connects to; it starts on node A.
VIP = "10.88.0.100"
#: Addresses of the cluster link between the two nodes (a /30).
MIRROR_ADDRESSES = {"a": "10.89.0.1", "b": "10.89.0.2"}
_LAN = "lan"


def _sh(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise CommandFailed(argv, proc.returncode, proc.stderr)
    return proc


@dataclass
class Topology:
    """The namespaces above, built on entry and removed on exit.

    ``tag`` makes the names unique (default: this process's id, so a leftover names the run
    that left it).
    """

    tag: str = field(default_factory=lambda: str(os.getpid()))
    _up: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.tag.isalnum() or len(self.tag) > 10:
            raise ValueError(f"tag must be 1-10 letters/digits, got {self.tag!r}")

    def ns(self, node: str) -> str:
        """The namespace name of ``node`` (``client``, ``a``, ``b`` or ``lan``)."""
        if node not in (*NODES, _LAN):
            raise ValueError(f"node must be one of {(*NODES, _LAN)}, got {node!r}")
        return f"{PREFIX}{self.tag}-{node}"

    def __enter__(self) -> Topology:
        self.up()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:  # fmt: skip
        self.down()

    def up(self) -> Topology:
        """Build everything; on any failure remove what was built before re-raising."""
        check_available()
        if self._up:
            return self
        taken = list_leftovers(f"{PREFIX}{self.tag}-")
        if taken:
            raise TestbedError(f"namespaces {taken} exist already; choose another tag or sweep "
                               f"them with netsim.linktestbed.sweep_leftovers({PREFIX!r})")
        self._up = True
        try:
            self._build()
        except BaseException:
            self.down()
            raise
        return self

    def down(self) -> None:
        """Kill every process in the namespaces and delete them (idempotent)."""
        sweep_leftovers(f"{PREFIX}{self.tag}-")
        self._up = False

    def ip(self, node: str, *args: str) -> None:
        """``ip -n <namespace of node> args...``; :class:`CommandFailed` on error."""
        _sh(["ip", "-n", self.ns(node), *args])

    def sysctl(self, node: str, key: str, value: str) -> None:
        """Write ``/proc/sys/<key>`` inside ``node`` (it shows the reader's namespace)."""
        path = "/proc/sys/" + key.replace(".", "/")
        _sh(["ip", "netns", "exec", self.ns(node), "sh", "-c", f"echo {value} > {path}"])

    def command(self, node: str, argv: Sequence[str]) -> list[str]:
        """``argv`` wrapped to run inside ``node``."""
        return ["ip", "netns", "exec", self.ns(node), *argv]

    def popen(self, node: str, argv: Sequence[str], **kwargs: object) -> subprocess.Popen[str]:
        """:class:`subprocess.Popen` inside ``node`` (text mode); :meth:`down` kills it if the
        caller has not."""
        kwargs.setdefault("text", True)
        return subprocess.Popen(self.command(node, argv), **kwargs)  # type: ignore[call-overload]

    def cut(self, node: str) -> None:
        """Take ``node``'s LAN link down (what a pulled cable or a dead NIC looks like)."""
        self.ip(node, "link", "set", "eth0", "down")

    def _build(self) -> None:
        for node in (_LAN, *NODES):
            try:
                _sh(["ip", "netns", "add", self.ns(node)])
            except CommandFailed as exc:
                raise NamespacesUnavailable(
                    f"cannot create network namespaces here: {exc.stderr.strip()}") from exc
            self.ip(node, "link", "set", "lo", "up")
        lan = self.ns(_LAN)
        self.ip(_LAN, "link", "add", "br0", "type", "bridge")
        self.ip(_LAN, "link", "set", "br0", "up")
        for node in NODES:
            port = f"p{node}"
            _sh(["ip", "link", "add", "eth0", "netns", self.ns(node), "type", "veth",
                 "peer", "name", port, "netns", lan])  # fmt: skip
            self.ip(_LAN, "link", "set", port, "master", "br0")
            self.ip(_LAN, "link", "set", port, "up")
            self.ip(node, "addr", "add", f"{ADDRESSES[node]}/24", "dev", "eth0")
            self.ip(node, "link", "set", "eth0", "up")
        _sh(["ip", "link", "add", "mir0", "netns", self.ns("a"), "type", "veth",
             "peer", "name", "mir0", "netns", self.ns("b")])  # fmt: skip
        for node in ("a", "b"):
            self.ip(node, "addr", "add", f"{MIRROR_ADDRESSES[node]}/30", "dev", "mir0")
            self.ip(node, "link", "set", "mir0", "up")
            self.sysctl(node, "net.ipv4.tcp_timestamps", "0")
        self.ip("a", "addr", "add", f"{VIP}/24", "dev", "eth0")
