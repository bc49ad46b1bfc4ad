"""A node of the accelerator: ``python -m sslacc_sim.aio.linux.node {primary,backup,member,sniff}``.

``primary`` (the owner of the virtual IP, :mod:`~sslacc_sim.aio.linux.primary`) serves many
concurrent connections from ``--docroot`` (or one ``--file`` for every path), inside
:mod:`tls12` (``--suite``) or over plain TCP (``--plain``), each mirrored to the buddy before any
byte that depends on it leaves, under a lease the buddy renews. ``--die-at`` makes it stop at
one instant of a connection's life and print ``DIE <point> <position>``; the orchestrator then
cuts its link and kills it (:mod:`sslacc_sim.aio.linux.failover`). The points:

``after-server-hello-flight``
    the ServerHello ... ServerHelloDone flight is written; the client's answer will be lost;
``after-client-key-exchange``
    the client's ClientKeyExchange, ChangeCipherSpec and Finished are read and the answer is
    mirrored, not written;
``transfer``
    after the body segment that takes the written bytes past ``--die-after``;
``mid-record``
    in the segment holding byte ``--die-after``: the whole records before the one holding
    it, then half of that record.

``backup`` (the buddy, :mod:`~sslacc_sim.aio.linux.backup`) mirrors every connection, hears
the clients' bytes on the flooding bridge, declares the owner dead on any error of a cluster
link or a missed keepalive, fences it (``--fence-netns``/``--fence-port``: the switch port
goes down), restores every connection before it claims the address, and serves on. It prints
``RESTORED {json}`` with its timings (``time.monotonic()``, one clock for every namespace).

``member`` is one node of the bucket layout (:mod:`~sslacc_sim.aio.linux.member`): it serves
the buckets the table gives member ``--index`` of ``--members``, each connection mirrored to
the next member (``--mirror``), and mirrors the previous one's (``--listen``).

``sniff`` records, in the client's namespace, every TCP segment from the service (arrival
time, source MAC, client port, sequence number, length, flags) and writes them as JSON when
stopped with SIGTERM (:mod:`~sslacc_sim.aio.linux.probe`), then prints ``DROPPED n``, the
frames its socket had no room for: the orchestrator finds each client's first byte after a
kill there, and any frame from a fenced node. On a switch port with ``--incoming-only`` it records what the
node behind that port put on the LAN (the bucket layout's zombie count: every member carries
one MAC, so only the port tells a woken member's frames apart).
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import sys
from pathlib import Path

from testbed import cli
from tls12 import ServerConfig
from tls12.certs import load_credentials
from tls12.suites import SUITES, suite_by_name

from .backup import Backup, Controls
from .docroot import Docroot
from .member import Member, run_member
from .primary import Primary, run_primary
from .probe import packet_drops, record_frames
from .service import DiePoint
from .sessions import SharedSessionStore
from .sniff import packet_socket
from .threads import ahead_of_other_work

__all__ = ["POINTS", "main"]

_SWITCH_INTERVAL_S = 0.0005

#: Instants at which ``--die-at`` stops the primary (module docstring).
POINTS = ("after-server-hello-flight", "after-client-key-exchange", "transfer", "mid-record")


def _config(args: argparse.Namespace) -> ServerConfig | None:
    if args.plain:
        return None
    suite = suite_by_name(args.suite)
    # a connection a buddy took over goes on from exported state and logs nothing again: its
    # line is in the log of the node that made its keys (every node may share one file)
    # one session table per node, shared by its connection threads; the buddy fills its own
    # from the owner's updates (sessions module), so a client resumes on whichever node owns
    # the address
    store = None if args.no_sessions else SharedSessionStore()
    return ServerConfig(credentials=load_credentials(args.cert, args.key), cipher_suites=(suite,),
                        keylog=cli.keylog_arg(args.keylog), session_store=store)  # fmt: skip


def _docroot(args: argparse.Namespace) -> Docroot:
    return Docroot(Path(args.docroot or args.file))


def _primary(args: argparse.Namespace) -> int:
    die = DiePoint(args.die_at, args.die_after) if args.die_at else None
    buddy = None if args.standalone else (args.mirror, args.mirror_port)
    node = Primary(args.vip, args.port, buddy, _docroot(args),
                   _config(args), die=die, keepalive=not args.no_keepalive,
                   self_fence=not args.no_self_fence, stall=args.stall_ms / 1000,
                   lan_dev=None if args.standalone else args.dev)  # fmt: skip
    return run_primary(node)


def _backup(args: argparse.Namespace) -> int:
    fence = None
    if args.fence_netns and args.fence_port:
        fence = (args.fence_netns, args.fence_port)
    controls = Controls(any_error_is_death=not args.only_eof_is_death,
                        keepalive=not args.no_keepalive, fence=not args.no_fence,
                        sniff_data=not args.no_sniff_data,
                        sniff_unaccepted=not args.no_sniff_unaccepted,
                        share_sessions=not args.no_shared_sessions,
                        replay_syns=not args.no_syn_replay)  # fmt: skip
    node = Backup(args.vip, args.port, (args.mirror, args.mirror_port), args.dev,
                  _docroot(args), _config(args), fence_port=fence, controls=controls,
                  resume_at_ack=not args.no_resume_at_ack,
                  next_buddy=(args.next_mirror, args.mirror_port) if args.next_mirror else None)  # fmt: skip
    return node.run()


def _sniff(args: argparse.Namespace) -> int:
    stop = False

    def _stop(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    with packet_socket(args.dev, 1 << 27, outgoing=True) as s:
        print("ready", flush=True)
        seen = record_frames(s, (args.src, args.port), lambda: stop,
                             incoming_only=args.incoming_only)  # fmt: skip
        dropped = packet_drops(s)
    Path(args.out).write_text(json.dumps(seen))
    print(f"DROPPED {dropped}", flush=True)  # frames the socket had no room for
    return 0


def _primary_arguments(r: argparse.ArgumentParser) -> None:
    """The options only the owner takes."""
    r.add_argument("--die-at", choices=POINTS, help="stop here and wait to be killed")
    r.add_argument("--die-after", type=cli.non_negative_int, default=4 << 20,
                   help="bytes written before transfer / mid-record (default 4 MiB)")
    r.add_argument("--stall-ms", type=cli.non_negative_float, default=0.0,
                   help="wait this long before each accept and each read: a loaded "
                   "server, whose queues a fault then finds full (default 0)")
    r.add_argument("--standalone", action="store_true",
                   help="no buddy: serve without mirroring (the benchmarks' reference)")
    r.add_argument("--dev", default="eth0",
                   help="the LAN interface, taken down when the lease runs out")
    r.add_argument("--no-self-fence", action="store_true",
                   help="negative control: a node whose lease ran out writes on")


def _service_arguments(r: argparse.ArgumentParser) -> None:
    """What every serving node takes: the files, the address, TLS."""
    what = r.add_mutually_exclusive_group(required=True)
    what.add_argument("--file", help="one file, served for every path")
    what.add_argument("--docroot", help="a directory: /NAME serves its file NAME")
    r.add_argument("--vip", required=True, help="the virtual IP")
    r.add_argument("--port", type=cli.port, default=443)
    r.add_argument("--plain", action="store_true", help="HTTP over plain TCP, no TLS")
    r.add_argument("--suite", default="AES128-SHA",
                   help="one suite (OpenSSL name), e.g. " + ", ".join(
                       s.openssl_name for s in list(SUITES.values())[:3]))
    r.add_argument("--cert", help="PEM certificate (TLS)")
    r.add_argument("--key", help="PEM RSA key (TLS)")
    cli.add_keylog_option(r)
    r.add_argument("--no-sessions", action="store_true",
                   help="no session table: no session IDs, every handshake is a full one")


def _member(args: argparse.Namespace) -> int:
    if args.index >= args.members:
        raise cli.UsageError(f"--index {args.index}: must be below --members {args.members}")
    if args.join and not (args.listen and args.ring and args.switch_ports and args.index > 0):
        raise cli.UsageError("--join needs --listen, --ring, --switch-ports and an --index "
                             "above 0 (a lower member is asked to let it in)")  # fmt: skip
    if args.members > 1 and not (args.listen and (args.mirror or args.join)):
        raise cli.UsageError("--listen and --mirror are needed with more than one member")
    for option, value in (("--ring", args.ring), ("--switch-ports", args.switch_ports)):
        if value and len(value.split(",")) != args.members:
            raise cli.UsageError(f"{option} needs one entry per member ({args.members})")
    member = Member(args.index, args.members, args.buckets, args.vip, args.port,
                    (args.listen or "0.0.0.0", args.mirror_port),
                    (args.mirror, args.mirror_port) if args.members > 1 and args.mirror else None,
                    _docroot(args), _config(args), dev=args.dev,
                    fence_port=(args.fence_netns, args.fence_port)
                    if args.fence_netns and args.fence_port else None,
                    takeover=not args.no_takeover,
                    ring=tuple(args.ring.split(",")) if args.ring else (),
                    switch_ports=tuple(args.switch_ports.split(",")) if args.switch_ports else (),
                    stall=args.stall_ms / 1000, fence=not args.no_fence,
                    joining=args.join)  # fmt: skip
    return run_member(member)


def _member_arguments(m: argparse.ArgumentParser) -> None:
    """The options of a bucket-layout member."""
    _service_arguments(m)
    m.add_argument("--index", type=cli.non_negative_int, required=True,
                   help="this member's number, 0 .. --members - 1")
    m.add_argument("--members", type=cli.positive_int, required=True, help="how many members")
    m.add_argument("--buckets", type=cli.positive_int, default=64,
                   help="buckets of the table (default 64)")
    m.add_argument("--listen", help="this member's cluster-LAN address (its predecessor's "
                   "links arrive there; needed with more than one member)")
    m.add_argument("--mirror", help="the next member's cluster-LAN address (the mirror of "
                   "this member's buckets; needed with more than one member)")
    m.add_argument("--mirror-port", type=cli.remote_port, default=7400)
    m.add_argument("--dev", default="eth0", help="the LAN interface (taken down on a fence)")
    m.add_argument("--fence-netns", help="the switch's namespace (for the fence)")
    m.add_argument("--fence-port", help="the previous member's port on the switch: taken down "
                   "before its buckets are taken over")
    m.add_argument("--join", action="store_true",
                   help="join a running ring: ask its members (--ring, this member's address "
                   "last) to let it in; the master gives it idle buckets")
    m.add_argument("--no-takeover", action="store_true",
                   help="negative control: a dead member's buckets are not taken over")
    m.add_argument("--ring", help="every member's cluster-LAN address by index, comma-separated: "
                   "the ring re-forms after a death (needed to take a death over with three "
                   "members)")
    m.add_argument("--switch-ports", help="every member's port on the switch by index, "
                   "comma-separated (with --ring and --fence-netns: the fence of whichever "
                   "member becomes this one's predecessor)")
    m.add_argument("--no-fence", action="store_true",
                   help="negative control: a dead member's switch port is not taken down, "
                   "and a member whose lease ran out does not take its own link down (a woken "
                   "member is then not kept off the wire)")
    m.add_argument("--stall-ms", type=cli.non_negative_float, default=0.0,
                   help="wait this long before each read of a connection, its own or one taken "
                   "over: a loaded member, whose receive queues a fault then finds full "
                   "(default 0)")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=cli.program_name("sslacc_sim.aio.linux.node"), description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Run by sslacc_sim.aio.linux.failover as root inside its "
                                "network namespaces; the options name what each node needs.")
    sub = p.add_subparsers(dest="role", required=True)
    _member_arguments(sub.add_parser("member", help="run one member of the bucket layout (every "
                                      "node serves its buckets, mirrored to the next member)"))
    for role in ("primary", "backup"):
        r = sub.add_parser(role, help=f"run node {'A' if role == 'primary' else 'B'}")
        _service_arguments(r)
        r.add_argument("--mirror", required=True, help="the backup's cluster-link address")
        r.add_argument("--mirror-port", type=cli.remote_port, default=7400)
        r.add_argument("--no-keepalive", action="store_true",
                       help="negative control: no keepalives, no lease (a hung owner is never "
                       "detected)")
        if role == "primary":
            _primary_arguments(r)
        else:
            r.add_argument("--dev", default="eth0", help="the LAN interface to take the VIP on")
            r.add_argument("--no-resume-at-ack", action="store_true",
                           help="leave the resend to the kernel's retransmission timer")
            r.add_argument("--next-mirror", help="this node's own buddy (cluster-link address) "
                           "once it owns the address: the connections it takes over are "
                           "mirrored there before it writes (a chain A -> B -> C)")
            r.add_argument("--fence-netns", help="the switch's namespace (for the fence)")
            r.add_argument("--fence-port", help="the owner's port on the switch: taken down "
                           "before the takeover")
            for flag, what_off in (
                    ("--only-eof-is-death", "a reset or a bad frame on a cluster link ends "
                     "this node instead of starting a takeover"),
                    ("--no-fence", "the old owner's port stays up"),
                    ("--no-sniff-data", "client bytes the owner had not consumed are "
                     "forgotten"),
                    ("--no-sniff-unaccepted", "connections the owner never mirrored are not "
                     "restored"),
                    ("--no-shared-sessions", "the sessions the owner's updates carry are "
                     "dropped: a resumption after a takeover is a full handshake"),
                    ("--no-syn-replay", "SYNs the owner never answered are not replayed "
                     "after the claim: their clients wait for their own SYN timer (1 s)")):
                r.add_argument(flag, action="store_true", help=f"negative control: {what_off}")
    s = sub.add_parser("sniff", help="record the server's data segments seen by the client")
    s.add_argument("--dev", default="eth0")
    s.add_argument("--src", required=True, help="the server address (the virtual IP)")
    s.add_argument("--port", type=cli.port, default=443)
    s.add_argument("--out", required=True, help="JSON file written on SIGTERM")
    s.add_argument("--incoming-only", action="store_true",
                   help="only the frames the interface receives (on a switch port: what the "
                   "node behind it sent, not what the switch sends it)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point; see the module docstring."""
    parser = _parser()

    def body(args: argparse.Namespace) -> int:
        # what the node needs is checked before it binds, connects or opens a raw socket, so
        # that a wrong command line is one line naming the option (status 2), never a traceback
        if args.role in ("primary", "backup", "member"):
            if not args.plain and not (args.cert and args.key):
                raise cli.UsageError("--cert and --key are needed unless --plain")
            if not args.plain:
                try:
                    suite_by_name(args.suite)
                except ValueError as exc:
                    raise cli.UsageError(f"--suite: {exc}") from None
                cli.load_credentials_arg(args.cert, args.key)
            if args.file and not Path(args.file).is_file():
                raise cli.UsageError(f"--file {args.file}: no such file" if not
                                     Path(args.file).exists() else f"--file {args.file}: not a file")
            if args.docroot and not Path(args.docroot).is_dir():
                raise cli.UsageError(f"--docroot {args.docroot}: not a directory")
        else:
            try:
                socket.if_nametoindex(args.dev)
            except OSError:
                raise cli.UsageError(f"--dev {args.dev}: no such network interface") from None
        if args.role in ("primary", "backup", "member"):
            # The keepalive thread must run within tens of milliseconds however many
            # connection threads want the interpreter lock: with the default 5 ms switch
            # interval, thirty busy threads can hold it from the keepalive for 150 ms, the
            # owner's whole lease (seen in campaign trials: a healthy owner fenced itself).
            sys.setswitchinterval(_SWITCH_INTERVAL_S)
            # and the thread holding the lock must not wait for the CPU behind the clients
            # (threads.NODE_NICE): every thread running now, and all started later
            ahead_of_other_work()
        handler = {"primary": _primary, "backup": _backup, "member": _member,
                   "sniff": _sniff}[args.role]
        try:
            return handler(args)
        except RuntimeError as exc:  # MirrorError, a takeover without a connection: one line
            raise cli.CLIError(str(exc)) from None

    return cli.run_main(parser, body, argv)


if __name__ == "__main__":
    sys.exit(main())
