"""The takeover's network steps, prepared in advance so that each costs well under a millisecond.

A takeover must fence the old owner's switch port, then (after the connections are restored)
claim the virtual IP and announce it. Run as ``ip`` commands, each step costs a process start
(3 to 15 ms measured under the campaign's load); opening a packet socket for the announcement
waits for an RCU grace period (about 25 ms). The kill-to-next-byte target (p50 30 ms) cannot
afford either, so each step is armed when the buddy starts and fired by one system call:

* :class:`PortFence`: a socket opened *inside the switch's namespace* (a short-lived thread
  enters it with ``setns``); firing clears ``IFF_UP`` on the old owner's port with
  ``SIOCSIFFLAGS``: the ioctl ``ip link set PORT down`` makes through netlink.
* :class:`StandbyAddress`: the virtual IP sits on the buddy's loopback from the start, with
  ``arp_ignore=1`` on the LAN device, so the buddy neither answers ARP for it nor sees the
  clients' frames (they carry the owner's MAC; the kernel drops frames for other hosts, even
  flooded ones). Claiming is one write of ``arp_ignore=0`` and a gratuitous ARP from a packet
  socket that only sends (protocol 0, opened in advance).
* :class:`ResetHold`: an nftables rule, loaded at start, that lets no reset leave for the
  clients in one set; a takeover puts the connections it is about to rebase in it (one
  libnftables call for all of them) and empties it after. A rebase closes the restored socket
  and restores a new one at the client's acknowledgement
  (:func:`~sslacc_sim.aio.linux.repair.rebase`): a client segment arriving in between meets
  only the listener, whose kernel would reset the connection. The segment is dropped
  instead; the client sends its data again, and a window update lost so is asked for again
  by the new socket's window probe.

Needs root (``CAP_NET_ADMIN``, ``CAP_SYS_ADMIN`` for ``setns``).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from .buckets import Nft, NftError

__all__ = ["PortFence", "StandbyAddress", "ResetHold", "HOLD_TABLE", "link_down", "socket_in_netns",
           "arp_socket", "gratuitous_arp"]

_CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
_IFREQ = struct.Struct("16sH22x")  # ifr_name, ifr_flags, the rest of struct ifreq (40 bytes)
#: The nftables table of :class:`ResetHold` (the bucket layout's own is ``buckets.TABLE``).
HOLD_TABLE = "sslacc_hold"


def socket_in_netns(netns: str) -> socket.socket:
    """A datagram socket living in the named network namespace (``/run/netns/NAME``).

    A socket keeps the namespace it was created in; only the creating thread enters it, and
    that thread ends right after, so the calling process stays where it is."""
    libc = ctypes.CDLL(None, use_errno=True)
    result: list[socket.socket | BaseException] = []

    def enter_and_open() -> None:
        try:
            fd = os.open(Path("/run/netns") / netns, os.O_RDONLY)
            try:
                if libc.setns(fd, _CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"setns into {netns!r}: {os.strerror(err)}")
            finally:
                os.close(fd)
            result.append(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            result.append(exc)

    t = threading.Thread(target=enter_and_open, name=f"setns-{netns}")
    t.start()
    t.join()
    if isinstance(result[0], BaseException):
        raise result[0]
    return result[0]


class PortFence:
    """Takes one switch port down, from a socket opened in the switch's namespace at arming.

    ``fire`` raises ``OSError`` when the port cannot be taken down (the caller reports it)."""

    def __init__(self, netns: str, port: str) -> None:
        if len(port.encode()) >= 16:
            raise ValueError(f"an interface name has at most 15 bytes: {port!r}")
        self.netns, self.port = netns, port
        self._sock = socket_in_netns(netns)
        _flags(self._sock, port)  # fails now, not at takeover, when the port does not exist

    def fire(self) -> None:
        _set_down(self._sock, self.port)

    def close(self) -> None:
        self._sock.close()


def _flags(sock: socket.socket, dev: str) -> int:
    req = _IFREQ.pack(dev.encode(), 0)
    return int(_IFREQ.unpack(fcntl.ioctl(sock.fileno(), _SIOCGIFFLAGS, req))[1])


def _set_down(sock: socket.socket, dev: str) -> None:
    flags = _flags(sock, dev)
    fcntl.ioctl(sock.fileno(), _SIOCSIFFLAGS, _IFREQ.pack(dev.encode(), flags & ~_IFF_UP))


def link_down(dev: str) -> None:
    """Take this namespace's ``dev`` down at once (one ioctl): a node whose lease ran out cuts
    itself off before anything else, so that its kernel sends no reset for the connections
    it is about to drop (those still in its accept queue, say)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        _set_down(s, dev)


class StandbyAddress:
    """The virtual IP held on standby by a buddy, claimed in one write (module docstring)."""

    def __init__(self, vip: str, dev: str) -> None:
        self.vip, self.dev = vip, dev
        self._arp_ignore = Path("/proc/sys/net/ipv4/conf") / dev / "arp_ignore"
        (Path("/proc/sys/net/ipv4/conf") / dev / "arp_announce").write_text("2")
        self._arp_ignore.write_text("1")
        subprocess.run(["ip", "addr", "replace", f"{vip}/32", "dev", "lo"], check=True,
                       capture_output=True)  # fmt: skip
        self._arp = arp_socket(dev)

    def claim(self) -> None:
        """Answer ARP for the address from now on and announce it."""
        self._arp_ignore.write_text("0")
        gratuitous_arp(self._arp, self.vip)


def arp_socket(dev: str) -> socket.socket:
    """A packet socket on ``dev`` that only sends (protocol 0: no receive hook, so that neither
    opening nor closing it waits for an RCU grace period)."""
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    s.bind((dev, 0))
    return s


def gratuitous_arp(sock: socket.socket, address: str, count: int = 3) -> None:
    """Broadcast ``count`` ARP requests for ``address`` from ``sock``'s device and MAC
    (:func:`arp_socket`; sender = target = ``address``): neighbours move their entry for it
    to this host at once."""
    mac = sock.getsockname()[4]
    ip = socket.inet_aton(address)
    arp = struct.pack(">HHBBH", 1, 0x0800, 6, 4, 1) + mac + ip + b"\0" * 6 + ip
    frame = b"\xff" * 6 + mac + b"\x08\x06" + arp
    for _ in range(count):
        sock.send(frame)


class ResetHold:
    """No reset leaves this node's ``vip``:``port`` for the clients :meth:`held` names
    (module docstring). The rule is loaded at construction, off the takeover's path."""

    def __init__(self, nft: Nft, vip: str, port: int) -> None:
        self._nft = nft
        self.clients_held = 0
        """How many clients :meth:`held` has named in all (a takeover's report)."""
        t = HOLD_TABLE
        nft.run(f"table ip {t}\ndelete table ip {t}\n"  # idempotent: replace any earlier one
                f"table ip {t} {{\n"
                f"  set clients {{ type ipv4_addr . inet_service; }}\n"
                f"  chain out {{\n"
                f"    type filter hook output priority raw; policy accept;\n"
                f"    ip saddr {vip} tcp sport {port} tcp flags rst "
                f"ip daddr . tcp dport @clients drop\n"
                f"  }}\n"
                f"}}\n")  # fmt: skip

    @contextlib.contextmanager
    def held(self, clients: Iterable[tuple[str, int]]) -> Iterator[None]:
        """No reset reaches these clients (address, port) inside the block. A takeover must
        go on whatever happens: an nftables error is reported on stderr, not raised."""
        clients = list(clients)
        if not clients:
            yield
            return
        self.clients_held += len(clients)
        elements = ", ".join(f"{address} . {port}" for address, port in clients)
        _report(self._nft, f"add element ip {HOLD_TABLE} clients {{ {elements} }}")
        try:
            yield
        finally:
            _report(self._nft, f"flush set ip {HOLD_TABLE} clients")

    def close(self) -> None:
        """Remove the rule (the namespace's removal removes it too)."""
        self._nft.run(f"delete table ip {HOLD_TABLE}")


def _report(nft: Nft, script: str) -> None:
    try:
        nft.run(script)
    except NftError as exc:
        print(f"ERROR reset hold: {exc}", file=sys.stderr, flush=True)
