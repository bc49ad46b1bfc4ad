"""The sniffer's socket filter: the kernel keeps only what a node's record of the LAN needs.

On the cluster's flooding bridge (:mod:`~sslacc_sim.aio.linux.sniff`) every member's packet
socket receives every frame on the LAN: the clients' segments, which the record needs whole
(their bytes are what a takeover puts back), and every member's responses, of which it needs
only the TCP header (sequence number, flags, window, and the payload's length, which the IP
header gives). Without a filter each member copies every response byte into its own process
and parses it: with three members, three copies of the cluster's whole output.

:func:`service_filter` is a classic BPF program (``SO_ATTACH_FILTER``, as ``tcpdump -d`` prints
them) that accepts a TCP segment *to* the service whole, cuts a segment *from* the service to
its first :data:`HEAD` bytes (a filter's return value is the length of the frame to keep), and
drops everything else: other protocols and addresses, and IP fragments other than the first.
:func:`attach` puts it on a socket. :func:`~sslacc_sim.aio.linux.sniff.parse_frame` reads a cut
frame's payload length from the IP header (:attr:`TcpFrame.size
<sslacc_sim.aio.linux.sniff.TcpFrame.size>`).
"""

from __future__ import annotations

import ctypes
import socket
import struct

__all__ = ["HEAD", "WHOLE", "service_filter", "attach"]

#: Bytes kept of the service's own frames: Ethernet (14), the longest IPv4 header (60) and the
#: longest TCP header (60).
HEAD = 14 + 60 + 60
#: What a filter keeps of a frame to the service: all of it (beyond any frame a veth delivers,
#: a 64 KiB GSO segment included).
WHOLE = 1 << 18
_SO_ATTACH_FILTER = 26

# classic BPF opcodes (linux/filter.h)
_LD_W_ABS, _LD_H_ABS, _LD_B_ABS = 0x20, 0x28, 0x30
_LD_H_IND = 0x48
_LDX_B_MSH = 0xB1
_JEQ_K, _JSET_K = 0x15, 0x45
_RET_K = 0x06


def service_filter(service: tuple[str, int], head: int = HEAD) -> bytes:
    """The program (``struct sock_filter`` instructions, native byte order) for the segments
    of ``service`` (an IPv4 address and a TCP port) on an Ethernet device."""
    vip = struct.unpack(">I", socket.inet_aton(service[0]))[0]
    port = service[1]
    # (code, jump if true, jump if false, k): a jump skips that many instructions
    program = [
        (_LD_H_ABS, 0, 0, 12),          # 0: ethertype
        (_JEQ_K, 0, 15, 0x0800),        # 1: IPv4, else drop
        (_LD_B_ABS, 0, 0, 23),          # 2: IP protocol
        (_JEQ_K, 0, 13, 6),             # 3: TCP, else drop
        (_LD_H_ABS, 0, 0, 20),          # 4: flags and fragment offset
        (_JSET_K, 11, 0, 0x1FFF),       # 5: a later fragment: drop
        (_LDX_B_MSH, 0, 0, 14),         # 6: X = the IP header's length
        (_LD_W_ABS, 0, 0, 26),          # 7: source address
        (_JEQ_K, 0, 2, vip),            # 8: from the service's address? else 11
        (_LD_H_IND, 0, 0, 14),          # 9: source port
        (_JEQ_K, 5, 0, port),           # 10: from the service: keep its head (16)
        (_LD_W_ABS, 0, 0, 30),          # 11: destination address
        (_JEQ_K, 0, 4, vip),            # 12: to the service's address? else drop
        (_LD_H_IND, 0, 0, 16),          # 13: destination port
        (_JEQ_K, 0, 2, port),           # 14: to the service, else drop
        (_RET_K, 0, 0, WHOLE),          # 15: keep it whole
        (_RET_K, 0, 0, head),           # 16: keep the head
        (_RET_K, 0, 0, 0),              # 17: drop
    ]  # fmt: skip
    return b"".join(struct.pack("=HBBI", *insn) for insn in program)


def attach(sock: socket.socket, program: bytes) -> None:
    """Put ``program`` on ``sock`` (``SO_ATTACH_FILTER``: the kernel copies it)."""
    code = ctypes.create_string_buffer(program, len(program))
    fprog = struct.pack("HL", len(program) // 8, ctypes.addressof(code))
    sock.setsockopt(socket.SOL_SOCKET, _SO_ATTACH_FILTER, fprog)

