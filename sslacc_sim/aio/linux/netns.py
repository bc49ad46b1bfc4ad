"""The real-failover topology: a client and two accelerator nodes in Linux network namespaces.

::

                      LAN 10.88.0.0/24 (bridge br0 in its own namespace)
         client 10.88.0.2 ──┐
                            ├── br0
     node A 10.88.0.11 ─────┤        the virtual IP 10.88.0.100 starts on node A
     node B 10.88.0.12 ─────┤
     node C 10.88.0.13 ─────┘
     node A mir0 10.89.0.1 ──────── 10.89.0.2 mir0 node B    (the cluster links, direct veths:
     node B mir1 10.89.1.1 ──────── 10.89.1.2 mir0 node C     A's buddy is B, B's buddy is C)

     nodes A, B, C cl0 10.90.0.11 / .12 / .13 ── bridge cl0    (the cluster LAN: the bucket
                                                                layout's ring of mirrors)

A bucket layout of more members (``Topology(shared_vip=True, members=4)``, up to 6) adds nodes D
(10.88.0.14, cl0 10.90.0.14), E and F the same way, on both bridges.

Five namespaces named ``sacc-<tag>-client``, ``-a``, ``-b``, ``-c`` and ``-lan``; every node's LAN
interface is ``eth0`` (its peer is a port of the bridge). The nodes run with
``net.ipv4.tcp_timestamps=0`` so that a restored connection needs no timestamp offset
(:mod:`sslacc_sim.aio.linux.repair`). Nothing touches the host's own network: the traffic stays
inside the namespaces.

Use :class:`Topology` as a context manager; leaving it kills every process in the namespaces
and deletes them, also when the body raises. The name prefix :data:`PREFIX` is this module's
alone, so that :func:`testbed.linux.netns.sweep_leftovers` with it removes what a killed run
left behind and nothing else. Needs root and ``ip`` (iproute2); :class:`NamespacesUnavailable`
otherwise.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from testbed.linux.netns import (
    CommandFailed,
    Namespaces,
    NamespacesUnavailable,
    TestbedError,
    list_leftovers,
    sweep_leftovers,
)

__all__ = [
    "PREFIX",
    "NODES",
    "SERVERS",
    "ADDRESSES",
    "VIP",
    "SHARED_MAC",
    "MIRROR_ADDRESSES",
    "NEXT_MIRROR_ADDRESSES",
    "CLUSTER_ADDRESSES",
    "NamespacesUnavailable",
    "CommandFailed",
    "TestbedError",
    "Topology",
    "list_leftovers",
    "sweep_leftovers",
]

#: Every namespace of this package starts with this (``wstb-`` belongs to the link testbed).
PREFIX = "sacc-"
#: The namespaces with programs in them (the bridge has one more, ``lan``); a bucket layout
#: of more members (``Topology(members=...)``) has more: :data:`SERVERS` in order.
NODES = ("client", "a", "b", "c")
#: Every server node a topology may have, in order (A, B, C always; D to F for more members).
SERVERS = ("a", "b", "c", "d", "e", "f")
#: LAN address of each node (a /24).
ADDRESSES = {"client": "10.88.0.2", **{n: f"10.88.0.{11 + i}" for i, n in enumerate(SERVERS)}}
#: The service address the client connects to; it starts on node A.
VIP = "10.88.0.100"
#: The MAC address every node's LAN interface carries in the bucket layout (``shared_vip``):
#: locally administered, unicast; the flooding bridge delivers its frames to every node.
SHARED_MAC = "02:00:5e:00:00:64"
#: Addresses of the cluster link between A and B (a /30): ``MIRROR_ADDRESSES["b"]`` is where A's
#: buddy listens.
MIRROR_ADDRESSES = {"a": "10.89.0.1", "b": "10.89.0.2"}
#: The cluster link between B and C: ``NEXT_MIRROR_ADDRESSES["c"]`` is where B's buddy listens.
NEXT_MIRROR_ADDRESSES = {"b": "10.89.1.1", "c": "10.89.1.2"}
#: Each node's address on the cluster LAN (a /24 on a second, learning bridge, ``cl0``): any
#: node reaches any other, as the bucket layout's ring of mirrors needs
#: (:mod:`sslacc_sim.aio.linux.member`).
CLUSTER_ADDRESSES = {n: f"10.90.0.{11 + i}" for i, n in enumerate(SERVERS)}
_LAN = "lan"


@dataclass
class Topology(Namespaces):
    """The namespaces above, built on entry and removed on exit (a
    :class:`testbed.linux.netns.Namespaces`).

    ``tag`` makes the names unique (default: this process's id, so a leftover names the run
    that left it).
    """

    PREFIX = PREFIX
    NODES = (*NODES, _LAN)
    MAX_TAG = 10
    CLEANUP_HINT = (f"choose another tag or sweep them with "
                    f"testbed.linux.netns.sweep_leftovers({PREFIX!r})")

    tag: str = field(default_factory=lambda: str(os.getpid()))
    shared_vip: bool = False
    """Every node holds the virtual IP and one MAC address (:data:`SHARED_MAC`): the bucket
    layout (:mod:`sslacc_sim.aio.linux.buckets`), where each node serves the buckets it owns.
    Else the virtual IP starts on node A alone (one owner, its buddy claims it)."""
    members: int = 3
    """Server nodes (3 to 6, more than 3 only with :attr:`shared_vip`): A, B, C, then D, E, F,
    each on both LANs; the chain's direct links join A, B and C only."""
    _up: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        self._check_tag()
        if not 3 <= self.members <= len(SERVERS) or self.members > 3 and not self.shared_vip:
            raise ValueError(f"3 to {len(SERVERS)} server nodes, more than 3 only with "
                             f"shared_vip (the bucket layout), got {self.members}")  # fmt: skip

    @property
    def servers(self) -> tuple[str, ...]:
        """The server nodes, in order (``a``, ``b``, ``c``, ...)."""
        return SERVERS[: self.members]

    def nodes(self) -> tuple[str, ...]:
        return ("client", *self.servers, _LAN)

    def cut(self, node: str) -> None:
        """Take ``node``'s LAN link down (what a pulled cable or a dead NIC looks like)."""
        self.ip(node, "link", "set", "eth0", "down")

    def uncut(self, node: str) -> None:
        """Bring ``node``'s LAN link back up (a hung node that wakes with its cable in)."""
        self.ip(node, "link", "set", "eth0", "up")

    def partition(self, node: str) -> None:
        """Take ``node``'s cluster-LAN switch port down: its clients still reach it, but no
        other member hears it nor it them (each side sees the other die)."""
        self.ip(_LAN, "link", "set", f"c{node}", "down")

    def fence_args(self, node: str) -> list[str]:
        """The buddy's arguments to fence ``node``: the switch's namespace and ``node``'s port
        there (the fence takes the port down, :mod:`sslacc_sim.aio.linux.backup`)."""
        return ["--fence-netns", self.ns(_LAN), "--fence-port", f"p{node}"]

    def mac(self, node: str) -> str:
        """``node``'s LAN MAC address as 12 hex digits."""
        out = self.run(node, ["cat", "/sys/class/net/eth0/address"], check=True).stdout
        return out.strip().replace(":", "")

    def _build(self) -> None:
        lan = _LAN
        # ageing_time 0: the bridge learns no address and floods every frame to every port, so
        # the buddy hears each client segment as the owner receives it (sslacc_sim.aio.linux.sniff)
        self.ip(lan, "link", "add", "br0", "type", "bridge", "ageing_time", "0")
        self.ip(lan, "link", "set", "br0", "up")
        for node in ("client", *self.servers):
            port = f"p{node}"
            self.veth(node, "eth0", lan, port)
            self.ip(lan, "link", "set", port, "master", "br0")
            self.ip(lan, "link", "set", port, "up")
            self.ip(node, "addr", "add", f"{ADDRESSES[node]}/24", "dev", "eth0")
            self.ip(node, "link", "set", "eth0", "up")
        self.veth("a", "mir0", "b", "mir0")
        self.veth("b", "mir1", "c", "mir0")
        for node, dev, address in (("a", "mir0", MIRROR_ADDRESSES["a"]),
                                   ("b", "mir0", MIRROR_ADDRESSES["b"]),
                                   ("b", "mir1", NEXT_MIRROR_ADDRESSES["b"]),
                                   ("c", "mir0", NEXT_MIRROR_ADDRESSES["c"])):  # fmt: skip
            self.ip(node, "addr", "add", f"{address}/30", "dev", dev)
            self.ip(node, "link", "set", dev, "up")
        # the cluster LAN: an ordinary (learning) bridge, cluster traffic only
        self.ip(lan, "link", "add", "cl0", "type", "bridge")
        self.ip(lan, "link", "set", "cl0", "up")
        for node in self.servers:
            address, port = CLUSTER_ADDRESSES[node], f"c{node}"
            self.veth(node, "cl0", lan, port)
            self.ip(lan, "link", "set", port, "master", "cl0")
            self.ip(lan, "link", "set", port, "up")
            self.ip(node, "addr", "add", f"{address}/24", "dev", "cl0")
            self.ip(node, "link", "set", "cl0", "up")
        for node in self.servers:
            self.sysctl(node, "net.ipv4.tcp_timestamps", "0")
        if self.shared_vip:
            for node in self.servers:
                self.ip(node, "link", "set", "eth0", "address", SHARED_MAC)
                self.ip(node, "addr", "add", f"{VIP}/32", "dev", "eth0")
            return
        self.ip("a", "addr", "add", f"{VIP}/24", "dev", "eth0")
