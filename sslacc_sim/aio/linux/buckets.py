"""Buckets on Linux: every node holds the virtual IP, each serves only the buckets it owns.

The paper's nodes share a hub: every packet reaches every node, and a node handles a packet
only if the bucket its 4-tuple hashes to is one it owns (SSLACC §4; the table's rules are
:class:`sslacc_sim.buckets.BucketTable`). Here:

* every node holds the virtual IP and one shared MAC address on its LAN interface
  (:class:`~sslacc_sim.aio.linux.netns.Topology` with ``shared_vip``); the bridge floods every frame to every port (``ageing_time 0``), so every node
  receives every client segment and the client's ARP gets the same answer from each;
* in each node's namespace, an nftables rule before connection tracking (``prerouting``,
  priority ``raw``) hashes the client's address and port with the kernel's ``jhash`` into
  ``buckets`` buckets and drops a segment whose bucket is not in the node's set ``owned``
  (:func:`ruleset`); the service's segments are not tracked (``notrack``: a connection moved to
  another node leaves no stale conntrack entry behind), and no reset leaves the virtual IP's
  port (a segment that reached a node without the connection's socket, during a move, must not
  be answered by a RST that would kill the connection on the client);
* moving a bucket is one set element deleted on the old owner and added on the new one. In the
  node's own process this is one libnftables call (:class:`LibNft`, tens of microseconds); from
  outside, the ``nft`` command in the namespace (:class:`NftCommand`, about 10 ms).

:func:`bucket_of` computes in Python the bucket the kernel computes (nftables' ``jhash``
expression: Bob Jenkins' lookup3 ``jhash`` over the client's address and port, padded to a
multiple of 4 bytes, seeded, then scaled into ``buckets`` without a division), so a node knows
which bucket each connection lies in: which of its connections a move concerns, which buckets
are busy. It is a twin of a kernel function, not a primitive: a test compares it with the
kernel's choice over many connections.

Order of a move (the kernel resets what reaches a node without a socket): the old owner stops
taking the bucket, hands its connections over, then the new owner restores them and only then
adds the bucket. Needs root, Debian's ``nftables`` (the ``nft`` command and ``libnftables``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import socket
import subprocess
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from ...errors import SslaccError

__all__ = [
    "DEFAULT_SEED", "TABLE", "LibNft", "Nft", "NftCommand", "NftError",
    "BucketFilter", "bucket_of", "jhash", "ruleset",
]  # fmt: skip

#: The nftables table every node's rules live in.
TABLE = "sslacc"
#: The hash seed every node uses (nftables would draw a random one per node without it).
DEFAULT_SEED = 0x5EED

_M = 0xFFFFFFFF


class NftError(SslaccError, RuntimeError):
    """nftables refused a command (its message), or is not installed here."""


def _rol(x: int, k: int) -> int:
    return ((x << k) | (x >> (32 - k))) & _M


def _mix(a: int, b: int, c: int) -> tuple[int, int, int]:
    a = (a - c) & _M
    a ^= _rol(c, 4)
    c = (c + b) & _M
    b = (b - a) & _M
    b ^= _rol(a, 6)
    a = (a + c) & _M
    c = (c - b) & _M
    c ^= _rol(b, 8)
    b = (b + a) & _M
    a = (a - c) & _M
    a ^= _rol(c, 16)
    c = (c + b) & _M
    b = (b - a) & _M
    b ^= _rol(a, 19)
    a = (a + c) & _M
    c = (c - b) & _M
    c ^= _rol(b, 4)
    b = (b + a) & _M
    return a, b, c


def _final(a: int, b: int, c: int) -> int:
    c ^= b
    c = (c - _rol(b, 14)) & _M
    a ^= c
    a = (a - _rol(c, 11)) & _M
    b ^= a
    b = (b - _rol(a, 25)) & _M
    c ^= b
    c = (c - _rol(b, 16)) & _M
    a ^= c
    a = (a - _rol(c, 4)) & _M
    b ^= a
    b = (b - _rol(a, 14)) & _M
    c ^= b
    c = (c - _rol(b, 24)) & _M
    return c


def jhash(key: bytes, seed: int) -> int:
    """The Linux kernel's ``jhash(key, len(key), seed)`` (``include/linux/jhash.h``; words
    read in this machine's byte order, as the kernel reads them)."""
    order = sys.byteorder
    n = len(key)
    a = b = c = (0xDEADBEEF + n + seed) & _M
    while n > 12:
        a = (a + int.from_bytes(key[0:4], order)) & _M
        b = (b + int.from_bytes(key[4:8], order)) & _M
        c = (c + int.from_bytes(key[8:12], order)) & _M
        a, b, c = _mix(a, b, c)
        key, n = key[12:], n - 12
    if n == 0:
        return c
    key = key + bytes(12 - n)
    a = (a + int.from_bytes(key[0:4], order)) & _M
    b = (b + int.from_bytes(key[4:8], order)) & _M
    c = (c + int.from_bytes(key[8:12], order)) & _M
    return _final(a, b, c)


def bucket_of(address: str, port: int, buckets: int, seed: int = DEFAULT_SEED) -> int:
    """The bucket nftables' ``jhash ip saddr . tcp sport mod buckets seed seed`` gives a
    client's segment: the hash over the address (4 bytes) and port (2 bytes, padded to 4, as
    every part of an nftables concatenation is), scaled by ``(h * buckets) >> 32``."""
    if buckets < 1:
        raise ValueError("buckets must be positive")
    key = socket.inet_aton(address) + port.to_bytes(2, "big") + b"\0\0"
    return (jhash(key, seed) * buckets) >> 32


def ruleset(vip: str, port: int, buckets: int, owned: Iterable[int], *,
            seed: int = DEFAULT_SEED) -> str:  # fmt: skip
    """The nftables script that makes a node serve only ``owned`` (module docstring)."""
    owned = sorted(set(owned))
    if any(not 0 <= b < buckets for b in owned):
        raise ValueError(f"a bucket outside 0..{buckets - 1}")
    service = f"ip daddr {vip} tcp dport {port}"
    elements = f"add element ip {TABLE} owned {{ {', '.join(map(str, owned))} }}\n" if owned else ""
    return (
        f"table ip {TABLE}\ndelete table ip {TABLE}\n"  # idempotent: replace any earlier one
        f"table ip {TABLE} {{\n"
        f"  set owned {{ type mark; }}\n"
        f"  chain pre {{\n"
        f"    type filter hook prerouting priority raw; policy accept;\n"
        f"    {service} meta mark set jhash ip saddr . tcp sport mod {buckets} seed {seed:#x} "
        f"meta mark != @owned drop\n"
        f"    {service} meta mark set 0 notrack\n"
        f"  }}\n"
        f"  chain out {{\n"
        f"    type filter hook output priority raw; policy accept;\n"
        f"    ip saddr {vip} tcp sport {port} tcp flags rst drop\n"
        f"    ip saddr {vip} tcp sport {port} notrack\n"
        f"  }}\n"
        f"}}\n" + elements
    )


class Nft(Protocol):
    """Something that runs an nftables script (as ``nft -f`` would) or raises :class:`NftError`."""

    def run(self, script: str) -> None: ...


class LibNft:
    """nftables in this process (``libnftables``, the library behind the ``nft`` command): the
    rules of the network namespace the process lives in.

    One libnftables context is not safe to use from two threads at once, and ctypes releases
    the interpreter lock during the call: a member's takeover and a join's ``give`` on a link
    thread once met inside it and the process died of a segmentation fault. Every call (the
    command and the read of its error message) therefore holds one lock.
    """

    def __init__(self) -> None:
        name = ctypes.util.find_library("nftables") or "libnftables.so.1"
        try:
            lib = ctypes.CDLL(name)
        except OSError as exc:
            raise NftError(f"libnftables not found ({exc}); install Debian's nftables") from None
        lib.nft_ctx_new.restype = ctypes.c_void_p
        lib.nft_ctx_new.argtypes = [ctypes.c_uint32]
        lib.nft_ctx_buffer_error.argtypes = [ctypes.c_void_p]
        lib.nft_ctx_get_error_buffer.restype = ctypes.c_char_p
        lib.nft_ctx_get_error_buffer.argtypes = [ctypes.c_void_p]
        lib.nft_run_cmd_from_buffer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        lib.nft_ctx_free.argtypes = [ctypes.c_void_p]
        self._lib = lib
        self._lock = threading.Lock()
        self._ctx = lib.nft_ctx_new(0)
        lib.nft_ctx_buffer_error(self._ctx)

    def run(self, script: str) -> None:
        with self._lock:
            if not self._ctx:
                raise NftError("this libnftables context is closed")
            if self._lib.nft_run_cmd_from_buffer(self._ctx, script.encode()) == 0:
                return
            message = self._lib.nft_ctx_get_error_buffer(self._ctx) or b""
        raise NftError(message.decode(errors="replace").strip()[:500])

    def close(self) -> None:
        with self._lock:
            if self._ctx:
                self._lib.nft_ctx_free(self._ctx)
                self._ctx = None


@dataclass(frozen=True)
class NftCommand:
    """The ``nft`` command inside network namespace ``netns`` (``None``: this one)."""

    netns: str | None = None

    def run(self, script: str) -> None:
        argv = ["nft", "-f", "-"]
        if self.netns is not None:
            argv = ["ip", "netns", "exec", self.netns, *argv]
        try:
            done = subprocess.run(argv, input=script, capture_output=True, text=True, timeout=30)
        except FileNotFoundError:
            raise NftError("the nft command is missing; install Debian's nftables") from None
        if done.returncode != 0:
            raise NftError(done.stderr.strip()[:500] or f"nft exited with {done.returncode}")


@dataclass
class BucketFilter:
    """One node's side of the bucket dispatch: install the rules, take and give up buckets."""

    nft: Nft
    vip: str
    port: int
    buckets: int
    seed: int = DEFAULT_SEED

    def install(self, owned: Iterable[int]) -> None:
        """Replace this node's rules: it serves ``owned`` and drops every other bucket."""
        self.nft.run(ruleset(self.vip, self.port, self.buckets, owned, seed=self.seed))

    def own(self, buckets: Iterable[int]) -> None:
        """Start serving ``buckets`` (one transaction)."""
        self._elements("add", buckets)

    def disown(self, buckets: Iterable[int]) -> None:
        """Stop serving ``buckets`` (one transaction): their segments are dropped from now on."""
        self._elements("delete", buckets)

    def remove(self) -> None:
        """Take the rules away (the node serves every bucket again)."""
        self.nft.run(f"table ip {TABLE}\ndelete table ip {TABLE}\n")

    def _elements(self, verb: str, buckets: Iterable[int]) -> None:
        chosen = sorted(set(buckets))
        if any(not 0 <= b < self.buckets for b in chosen):
            raise ValueError(f"a bucket outside 0..{self.buckets - 1}")
        if chosen:
            self.nft.run(f"{verb} element ip {TABLE} owned {{ {', '.join(map(str, chosen))} }}\n")
