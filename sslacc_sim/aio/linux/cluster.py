"""A running SSLACC cluster to serve from and break by hand:
``python -m sslacc_sim.aio.linux.cluster {up,kill,wake,leave,down,cleanup}`` (root).

``up --docroot DIR``
    builds the namespaces of :mod:`sslacc_sim.aio.linux.netns` (tag ``--tag``), makes a fresh
    self-signed certificate for :data:`~sslacc_sim.aio.linux.failover.HOSTNAME` (or takes
    ``--cert``/``--key``), and starts the nodes: with ``--nodes 3`` (the default) C, then B (A's
    buddy, with C as its own), then A, the owner of the virtual IP; with ``--nodes 2`` only B
    and A. It prints how to reach the service from the client's namespace, then stays in the
    foreground and prints what the nodes report (a takeover: ``RESTORED {json}``) until Ctrl-C,
    SIGTERM or ``down``, and removes everything on the way out.
``kill --tag T [--node a] [--hang]``
    breaks a node as the campaign does: its LAN link is cut, then every process in its
    namespace gets SIGKILL (``--hang``: SIGSTOP, a hung node that ``wake`` brings back).
``wake --tag T [--node a]``
    SIGCONT and the link back up: the woken node finds its switch port fenced, and nothing it
    sends reaches a client.
``leave --tag T --node d``
    a bucket-layout member leaves on purpose (SIGUSR1): it silences its client sockets, takes
    its link down and exits; its successor takes its buckets and connections over.
``join --tag T``
    the next spare node of a bucket-layout cluster started with ``up --spares N`` joins the
    ring (:mod:`~sslacc_sim.aio.linux.join`: the master gives it idle buckets, its
    predecessor hands it its running connections); ``up`` starts it and prints what it says.
    With no spare left, a node whose member died (``kill``) joins again, under a fresh id.
``down --tag T``
    stops the ``up`` that made cluster ``T`` (SIGTERM) and removes whatever it leaves.
``cleanup``
    removes the ``sacc-`` namespaces (and their processes) that killed runs left; a run still
    going keeps its own.

A session, with ``/srv/files`` holding ``big``::

    python -m sslacc_sim.aio.linux.cluster up --docroot /srv/files --tag demo &
    ip netns exec sacc-demo-client curl --cacert CERT --resolve sacc.test:443:10.88.0.100 \\
        --limit-rate 4M -o big https://sacc.test/big &
    python -m sslacc_sim.aio.linux.cluster kill --tag demo     # the download goes on, from B
    python -m sslacc_sim.aio.linux.cluster down --tag demo

(``up`` prints the exact command with the certificate's path.) Two layouts: ``--layout chain``
(the default: A owns every connection, B and C are a chain of buddies; survives a kill, a hang
and a second kill) and ``--layout buckets`` (:mod:`~sslacc_sim.aio.linux.member`: every member
serves the connections of its buckets, mirrored to the next; ``--nodes`` 1 to 6, nodes D, E,
F beyond the three; any member survives its death, and a second death after it; ``--spares``
nodes wait idle for a ``join``). What the cluster does not do yet is said in
``docs/sslacc-cluster.md``.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from testbed import cli
from testbed.linux.netns import OWNERS, delete_namespace, sh

from .buckets import BucketFilter, NftCommand
from .failover import HOSTNAME, lines_of, node_env, site_credentials, wait_line
from .netns import (
    CLUSTER_ADDRESSES,
    MIRROR_ADDRESSES,
    NEXT_MIRROR_ADDRESSES,
    PREFIX,
    SERVERS,
    VIP,
    TestbedError,
    Topology,
    list_leftovers,
    sweep_leftovers,
)
from .report import say

__all__ = ["main", "start_nodes", "start_members", "join_member", "revive"]

_READY_S = 30.0
_DOWN_S = 20.0
_ADMITTING = threading.Lock()


def start_nodes(topo: Topology, stack: ExitStack, *, nodes: int, docroot: Path, cert: Path,
                key: Path, port: int = 443, suite: str = "AES128-SHA",
                keylog: Path | None = None, node_args: Sequence[str] = (),
                backup_args: Sequence[str] = ()) -> dict[str, subprocess.Popen[str]]:  # fmt: skip
    """Start the cluster's node processes in ``topo``, each once the one before said
    ``ready``: C (if ``nodes`` is 3), B, then the owner A. Their stderr goes to the terminal;
    ``stack`` stops them. ``keylog``: every node appends its connections' NSS key-log lines
    there (:mod:`tls12.keylog`). ``node_args`` go to every node, ``backup_args`` to B and C
    (e.g. a negative control of :mod:`~sslacc_sim.aio.linux.node`)."""
    common = ["--docroot", str(docroot), "--vip", VIP, "--port", str(port), "--suite", suite,
              "--cert", str(cert), "--key", str(key),
              *(["--keylog", str(keylog.resolve())] if keylog else []), *node_args]  # fmt: skip
    node = [sys.executable, "-m", "sslacc_sim.aio.linux.node"]
    procs: dict[str, subprocess.Popen[str]] = {}

    def start(name: str, argv: list[str]) -> None:
        proc = topo.popen(name, [*node, *argv], stdout=subprocess.PIPE, env=node_env())
        stack.callback(_stop, proc)
        procs[name] = proc
        wait_line(proc, "ready", _READY_S)

    chain: list[str] = []
    if nodes == 3:
        start("c", ["backup", *common, "--mirror", NEXT_MIRROR_ADDRESSES["c"],
                    *topo.fence_args("b"), *backup_args])  # fmt: skip
        chain = ["--next-mirror", NEXT_MIRROR_ADDRESSES["c"]]
    start("b", ["backup", *common, "--mirror", MIRROR_ADDRESSES["b"], *topo.fence_args("a"),
                *chain, *backup_args])  # fmt: skip
    start("a", ["primary", *common, "--mirror", MIRROR_ADDRESSES["b"]])
    return procs


def start_members(topo: Topology, stack: ExitStack, *, members: int, docroot: Path, cert: Path,
                  key: Path, port: int = 443, suite: str = "AES128-SHA", buckets: int = 64,
                  keylog: Path | None = None, member_args: Sequence[str] = (),
                  ring: bool = True, logs: Path | None = None
                  ) -> dict[str, subprocess.Popen[str]]:  # fmt: skip
    """Start the bucket layout (:mod:`~sslacc_sim.aio.linux.member`) in ``topo``, which must
    be built with ``shared_vip=True``: ``members`` member processes (1 to the topology's
    :attr:`~sslacc_sim.aio.linux.netns.Topology.members`) on nodes A, B, C, ..., all started at once (each waits for its mirror's listener), then every one's ``ready``
    awaited. ``stack`` stops them. ``ring=False`` leaves out ``--ring`` (a negative control:
    with three members the ring does not re-form after a death). ``logs``: a folder for each
    member's standard error (``<node>.stderr``; else it goes where this process's goes)."""
    if not topo.shared_vip:
        raise ValueError("the bucket layout needs Topology(shared_vip=True)")
    if not 1 <= members <= topo.members:
        raise ValueError(f"1 to {topo.members} members in this topology, got {members}")
    names = topo.servers[:members]
    for idle in topo.servers[members:]:
        # it holds the virtual IP too (the topology gives it to every node): without a filter
        # that owns nothing, its kernel would reset every connection it hears
        BucketFilter(NftCommand(topo.ns(idle)), VIP, port, buckets).install([])
    common = _member_common(docroot, cert, key, port, suite, buckets, keylog)
    procs: dict[str, subprocess.Popen[str]] = {}
    for i, name in enumerate(names):
        neighbours: list[str] = []
        if members > 1:
            neighbours = ["--listen", CLUSTER_ADDRESSES[name],
                    "--mirror", CLUSTER_ADDRESSES[names[(i + 1) % members]],
                    *(_ring_args(names) if ring else []),
                    *topo.fence_args(names[i - 1]), *member_args]
        procs[name] = _start_member(topo, stack, name, [*common, "--members", str(members),
                                                        "--index", str(i), *neighbours], logs)
    for proc in procs.values():
        wait_line(proc, "ready", _READY_S)
    return procs


def join_member(topo: Topology, stack: ExitStack, name: str, *, docroot: Path, cert: Path,
                key: Path, port: int = 443, suite: str = "AES128-SHA", buckets: int = 64,
                keylog: Path | None = None, member_args: Sequence[str] = (),
                logs: Path | None = None, ring: Sequence[str] | None = None,
                ready: bool = True) -> subprocess.Popen[str]:  # fmt: skip
    """Start a member on node ``name`` that joins the running ring
    (:mod:`~sslacc_sim.aio.linux.join`): it asks the members before it to let it in, and the
    master gives it idle buckets. Returns once it says ``ready`` (at once with ``ready=False``:
    a campaign that kills it during its join); ``stack`` stops it.

    Its id is its place in ``ring`` (the node of each member id so far, this one last; default:
    the topology's servers up to ``name``, for a node :func:`start_members` left idle). A node
    whose member died joins again under a fresh id (an id never comes back), the ring naming
    it twice: :func:`revive` it first."""
    names = list(ring) if ring is not None else list(topo.servers[:topo.servers.index(name) + 1])
    index = len(names) - 1
    if index == 0 or names[-1] != name:
        raise ValueError("a member that joins asks a lower one, and comes last in its ring")
    argv = [*_member_common(docroot, cert, key, port, suite, buckets, keylog),
            "--members", str(index + 1), "--index", str(index), "--join",
            "--listen", CLUSTER_ADDRESSES[name], *_ring_args(names),
            *topo.fence_args(names[index - 1]), *member_args]  # fmt: skip
    proc = _start_member(topo, stack, name, argv, logs)
    if ready:
        wait_line(proc, "ready", _READY_S)
    return proc


def revive(topo: Topology, name: str, *, port: int = 443, buckets: int = 64) -> None:
    """Make node ``name``, whose member died (killed, or fenced and exited), fit to join again,
    in this order: every TCP socket the dead member left destroyed (``ss -K``: a killed
    server's connections linger as orphans in FIN-WAIT-1 with their unsent bytes, which they
    would send, FIN last, to clients the heir serves now; and they hold the service's port); a
    filter that owns no bucket (the dead member's still owned some: the heir's now); then its
    link and its switch port up (a cut, and its successor's fence, took them down). A reset
    the destruction sends goes nowhere: the link is down and the filter drops the service's
    resets."""
    topo.run(name, ["ss", "-K", "-t", "-a"], check=True)
    BucketFilter(NftCommand(topo.ns(name)), VIP, port, buckets).install([])
    topo.uncut(name)
    topo.ip("lan", "link", "set", f"p{name}", "up")


def _member_common(docroot: Path, cert: Path, key: Path, port: int, suite: str, buckets: int,
                   keylog: Path | None) -> list[str]:  # fmt: skip
    return ["--docroot", str(docroot), "--vip", VIP, "--port", str(port), "--suite", suite,
            "--cert", str(cert), "--key", str(key), "--buckets", str(buckets),
            *(["--keylog", str(keylog.resolve())] if keylog else [])]  # fmt: skip


def _ring_args(names: Sequence[str]) -> list[str]:
    return ["--ring", ",".join(CLUSTER_ADDRESSES[n] for n in names),
            "--switch-ports", ",".join(f"p{n}" for n in names)]  # fmt: skip


def _start_member(topo: Topology, stack: ExitStack, name: str, argv: list[str],
                  logs: Path | None) -> subprocess.Popen[str]:  # fmt: skip
    err = stack.enter_context(open(logs / f"{name}.stderr", "w")) if logs else None
    proc = topo.popen(name, [sys.executable, "-m", "sslacc_sim.aio.linux.node", "member", *argv],
                      stdout=subprocess.PIPE, stderr=err, env=node_env())  # fmt: skip
    stack.callback(_stop, proc)
    return proc


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGCONT)  # a node stopped by `kill --hang` must see the TERM
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _echo(name: str, proc: subprocess.Popen[str]) -> None:
    """Print every line ``proc`` prints, prefixed with its node's name, until it exits. One
    thread per node does this: each line is written whole (:func:`~.report.say`), as ``print``
    would not (its text and newline are two writes, and a long line's text is written at once
    with the interpreter lock free: another node's line could run into it)."""
    q = lines_of(proc)
    while (line := q.get()) is not None:
        say(f"node {name}: {line.rstrip()}")
    say(f"node {name}: exited ({proc.wait()})")


def _up(args: argparse.Namespace) -> int:
    if args.layout == "chain" and args.nodes == 1:
        raise cli.UsageError("--nodes 1 needs --layout buckets: a chain has an owner and a buddy")
    if args.spares and (args.layout != "buckets" or args.nodes < 2):
        raise cli.UsageError("--spares needs --layout buckets and --nodes 2 or more (a member "
                             "that joins asks a running ring)")  # fmt: skip
    if args.nodes + args.spares > len(SERVERS):
        raise cli.UsageError(f"--nodes and --spares add up to {len(SERVERS)} at most, got "
                             f"{args.nodes + args.spares}")  # fmt: skip
    if args.layout == "chain" and args.nodes > 3:
        raise cli.UsageError(f"--nodes {args.nodes} needs --layout buckets: a chain has at most "
                             "three nodes (owner, buddy, the buddy's buddy)")  # fmt: skip
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # `down` unwinds like Ctrl-C
    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="sacc-cluster-")))
        work.chmod(0o755)
        if args.cert:
            cert, key = Path(args.cert).resolve(), Path(args.key).resolve()
        else:
            cert, key = site_credentials(work)
        buckets = args.layout == "buckets"
        topo = stack.enter_context(Topology(tag=args.tag, shared_vip=buckets,
                                            members=max(3, args.nodes + args.spares)))  # fmt: skip
        try:
            if buckets:
                procs = start_members(topo, stack, members=args.nodes,
                                      docroot=args.docroot.resolve(), cert=cert, key=key,
                                      port=args.port, suite=args.suite, keylog=args.keylog)  # fmt: skip
            else:
                procs = start_nodes(topo, stack, nodes=args.nodes, docroot=args.docroot.resolve(),
                                    cert=cert, key=key, port=args.port, suite=args.suite,
                                    keylog=args.keylog)  # fmt: skip
        except RuntimeError as exc:
            raise cli.CLIError(f"a node did not start: {exc}") from None
        for name, proc in procs.items():
            threading.Thread(target=_echo, args=(name, proc), daemon=True).start()
        spares = _take_joins(args, topo, stack, cert, key, procs)
        host = HOSTNAME if args.port == 443 else f"{HOSTNAME}:{args.port}"
        say(f"cluster {args.tag} up: {args.nodes} nodes ({args.layout} layout), "
              f"https://{host}/NAME serves "
              f"{args.docroot}/NAME at {VIP}\n"
              f"  fetch:  ip netns exec {topo.ns('client')} curl --cacert {cert} "
              f"--resolve {HOSTNAME}:{args.port}:{VIP} https://{host}/NAME\n"
              f"  break:  python -m sslacc_sim.aio.linux.cluster kill --tag {args.tag} "
              f"[--node {'|'.join(procs)}] [--hang]\n"
              + (f"  grow:   python -m sslacc_sim.aio.linux.cluster join --tag {args.tag} "
                 f"({len(spares)} spare nodes: {', '.join(spares)})\n" if spares else "")
              + f"  stop:   Ctrl-C, or python -m sslacc_sim.aio.linux.cluster down --tag "
              f"{args.tag}")  # fmt: skip
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            say(f"cluster {args.tag}: stopping")
    return 0


def _take_joins(args: argparse.Namespace, topo: Topology, stack: ExitStack, cert: Path,
                key: Path, procs: dict[str, subprocess.Popen[str]]) -> list[str]:  # fmt: skip
    """From now on ``join`` (SIGUSR2) admits a member (:func:`_admit_spare`); the spare nodes."""
    spares = list(topo.servers[args.nodes:args.nodes + args.spares])
    member = {"docroot": args.docroot.resolve(), "cert": cert, "key": key, "port": args.port,
              "suite": args.suite, "keylog": args.keylog}  # fmt: skip
    ring = list(topo.servers[:args.nodes + args.spares])  # each member id's node
    signal.signal(signal.SIGUSR2, lambda *_: threading.Thread(
        target=_admit_spare, args=(topo, stack, spares, member, ring, procs),
        daemon=True).start())  # fmt: skip
    return spares


def _admit_spare(topo: Topology, stack: ExitStack, spares: list[str], member: dict[str, Any],
                 ring: list[str], procs: dict[str, subprocess.Popen[str]]) -> None:  # fmt: skip
    """``up``'s answer to ``join`` (SIGUSR2): start the next spare node as a member that joins
    (its id: its place among the nodes); with no spare left, a node whose member died joins
    again under a fresh id (:func:`revive`). ``ring`` names the node of each member id so far,
    ``procs`` each node's member."""
    with _ADMITTING:  # one join at a time
        name = _admit_next(topo, stack, spares, member, ring, procs)
    if name is not None:
        _echo(name, procs[name])


def _admit_next(topo: Topology, stack: ExitStack, spares: list[str], member: dict[str, Any],
                ring: list[str], procs: dict[str, subprocess.Popen[str]]) -> str | None:
    """Start the member :func:`_admit_spare` says; its node, or ``None`` if none joined."""
    if spares:
        name = spares.pop(0)
        ids = ring[:ring.index(name) + 1]
    else:
        dead = [n for n in dict.fromkeys(ring) if procs[n].poll() is not None]
        if not dead:
            say("join: no spare node left and no member has died (start up with --spares N)")
            return None
        name = dead[0]
        revive(topo, name, port=member["port"])
        ring.append(name)
        ids = list(ring)
    say(f"node {name}: joining as member {len(ids) - 1}")
    try:
        procs[name] = join_member(topo, stack, name, ring=ids, **member)
    except (RuntimeError, OSError) as exc:
        say(f"node {name}: did not join: {exc}")
        return None
    say(f"node {name}: joined, ready")
    return name


def _signal_up(tag: str, sig: signal.Signals) -> int | None:
    """Send ``sig`` to the ``up`` that made cluster ``tag`` (its pid: the namespaces' owner
    record); that pid, or ``None`` when that ``up`` is gone."""
    mine = f"{PREFIX}{tag}-"
    if not list_leftovers(mine):
        raise cli.CLIError(f"no cluster {tag!r} here")
    try:
        pid = int((OWNERS / f"{mine}a").read_text().split()[0])
        os.kill(pid, sig)
    except (OSError, ValueError, IndexError):
        return None
    return pid


def _join(args: argparse.Namespace) -> int:
    if _signal_up(args.tag, signal.SIGUSR2) is None:
        raise cli.CLIError(f"the up of cluster {args.tag!r} is gone: nothing can join")
    print(f"cluster {args.tag}: asked to admit its next spare node (see the output of up)")
    return 0


def _node_ns(args: argparse.Namespace) -> str:
    ns = f"{PREFIX}{args.tag}-{args.node}"
    if ns not in list_leftovers(ns):
        raise cli.CLIError(f"no cluster {args.tag!r} here (namespace {ns} does not exist)")
    return ns


def _signal_all(ns: str, sig: signal.Signals) -> int:
    pids = [int(p) for p in sh(["ip", "netns", "pids", ns], check=False).stdout.split()]
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    return len(pids)


def _kill(args: argparse.Namespace) -> int:
    ns = _node_ns(args)
    sh(["ip", "-n", ns, "link", "set", "eth0", "down"])  # cut first: nothing leaves after
    sig = signal.SIGSTOP if args.hang else signal.SIGKILL
    n = _signal_all(ns, sig)
    print(f"node {args.node} of {args.tag}: link cut, {sig.name} sent to {n} processes")
    return 0


def _leave(args: argparse.Namespace) -> int:
    ns = _node_ns(args)
    n = _signal_all(ns, signal.SIGUSR1)
    print(f"node {args.node} of {args.tag}: asked to leave (SIGUSR1 to {n} processes)")
    return 0


def _wake(args: argparse.Namespace) -> int:
    ns = _node_ns(args)
    n = _signal_all(ns, signal.SIGCONT)
    sh(["ip", "-n", ns, "link", "set", "eth0", "up"])
    print(f"node {args.node} of {args.tag}: SIGCONT sent to {n} processes, link up")
    return 0


def _down(args: argparse.Namespace) -> int:
    mine = f"{PREFIX}{args.tag}-"
    pid = _signal_up(args.tag, signal.SIGTERM)  # None: its `up` is gone, the rest swept below
    deadline = time.monotonic() + _DOWN_S
    while list_leftovers(mine) and time.monotonic() < deadline:
        time.sleep(0.2)
    for name in list_leftovers(mine):
        delete_namespace(name)
    print(f"cluster {args.tag} down" + (f" (stopped process {pid})" if pid else ""))
    return 0


def _cleanup(args: argparse.Namespace) -> int:
    removed = sweep_leftovers(PREFIX, spare_live_runs=True)
    print(f"removed {len(removed)} namespaces" + (f": {' '.join(removed)}" if removed else ""))
    return 0


def _tag(text: str) -> str:
    if not text.isalnum() or len(text) > Topology.MAX_TAG:
        raise argparse.ArgumentTypeError(f"1-{Topology.MAX_TAG} letters or digits, got {text!r}")
    return text


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=cli.program_name("sslacc_sim.aio.linux.cluster"),
                                description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start a cluster and serve until stopped")
    up.add_argument("--docroot", type=cli.existing_directory, required=True,
                    help="a directory: https://sacc.test/NAME serves its file NAME")
    up.add_argument("--nodes", type=int, choices=range(1, len(SERVERS) + 1), default=3,
                    help="chain layout: 2 (owner A and buddy B) or 3 (also C, B's buddy); "
                    f"bucket layout: 1 to {len(SERVERS)} members (default 3)")
    up.add_argument("--spares", type=cli.non_negative_int, default=0,
                    help="bucket layout: nodes built beside the members, idle until `join` "
                    "(default 0)")
    up.add_argument("--layout", choices=("chain", "buckets"), default="chain",
                    help="chain: A owns every connection, B and C are a chain of buddies "
                    "(survives kills and hangs); buckets: every member serves its buckets, "
                    "mirrored to the next (with 2 members either survives the other's death) "
                    "(default chain)")
    up.add_argument("--tag", type=_tag, default="cl", help="namespaces are sacc-TAG-* (default cl)")
    up.add_argument("--port", type=cli.port, default=443)
    up.add_argument("--suite", default="AES128-SHA", help="one TLS 1.2 suite (OpenSSL name)")
    up.add_argument("--cert", help="PEM certificate (default: a fresh self-signed one)")
    up.add_argument("--key", help="PEM RSA key of --cert")
    cli.add_keylog_option(up, "every node appends to one file; ")
    for name, what in (("kill", "cut a node's link and SIGKILL it (--hang: SIGSTOP)"),
                       ("wake", "SIGCONT a hung node and bring its link back"),
                       ("leave", "a bucket-layout member leaves on purpose: its successor "
                        "takes its buckets and connections over"),
                       ("join", "the next spare node of a bucket-layout cluster joins its ring"),
                       ("down", "stop a cluster and remove it")):
        s = sub.add_parser(name, help=what)
        s.add_argument("--tag", type=_tag, default="cl", help="the cluster's tag (default cl)")
        if name not in ("down", "join"):
            s.add_argument("--node", choices=SERVERS, default="a",
                           help="which node (default a, the first owner)")
        if name == "kill":
            s.add_argument("--hang", action="store_true", help="SIGSTOP instead of SIGKILL")
    sub.add_parser("cleanup", help="remove what killed runs left (sacc- namespaces)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point; see the module docstring."""
    parser = _parser()

    def body(args: argparse.Namespace) -> int:
        if args.command == "up" and bool(args.cert) != bool(args.key):
            raise cli.UsageError("--cert and --key go together")
        if args.command == "up" and args.cert:
            cli.load_credentials_arg(args.cert, args.key)
        if args.command == "up" and args.keylog:
            cli.keylog_arg(args.keylog)  # an unwritable file is refused before anything starts
        handler = {"up": _up, "kill": _kill, "wake": _wake, "leave": _leave, "join": _join,
                   "down": _down, "cleanup": _cleanup}[args.command]  # fmt: skip
        try:
            return handler(args)
        except TestbedError as exc:  # no namespaces here, or this tag's exist already
            raise cli.CLIError(str(exc).replace(
                "sweep them with testbed.linux.netns.sweep_leftovers('sacc-')",
                "remove them: python -m sslacc_sim.aio.linux.cluster down --tag TAG, or cleanup"
            )) from None

    return cli.run_main(parser, body, argv)


if __name__ == "__main__":
    sys.exit(main())
