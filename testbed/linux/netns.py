"""The one namespace helper of the Linux lab: named network namespaces, built, used, swept away.

Both topologies of the testbed are built on it: the link testbed
(:class:`testbed.linux.linktestbed.LinkTestbed`: client, middle and origin over shaped veths)
and SSLACC's real cluster (``sslacc_sim.aio.linux.netns.Topology``: a client and two accelerator
nodes on a bridge). A topology subclasses :class:`Namespaces`, names its namespaces
(:attr:`Namespaces.PREFIX` + tag + ``-`` + node) and writes :meth:`Namespaces._build`; this
module gives it the rest:

* :meth:`~Namespaces.up` checks the machine (:func:`check_available`), refuses to touch
  namespaces it did not create, builds, and removes what it built if the build fails;
* :meth:`~Namespaces.down` kills every process in its namespaces and deletes them (idempotent;
  deleting a namespace removes its veths and TUN devices);
* :meth:`~Namespaces.ip`, :meth:`~Namespaces.sysctl`, :meth:`~Namespaces.veth`,
  :meth:`~Namespaces.run` and :meth:`~Namespaces.popen` run things inside a node;
* :func:`sweep_leftovers` removes what a killed run left behind, by prefix; every namespace
  records the process that made it (:data:`OWNERS`), so a sweep can spare another run that is
  still going.

Everything needs root (``CAP_NET_ADMIN``) and ``ip`` from iproute2; without them
:class:`NamespacesUnavailable` says in one line what is missing. Nothing touches the host's
own network: veth ends are created directly inside the namespaces.
"""

from __future__ import annotations

import abc
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Self

__all__ = [
    "TestbedError",
    "NamespacesUnavailable",
    "CommandFailed",
    "Namespaces",
    "check_available",
    "sh",
    "list_leftovers",
    "held_by_another_run",
    "delete_namespace",
    "sweep_leftovers",
]


class TestbedError(RuntimeError):
    """Base class of the Linux lab's errors."""

    __test__ = False  # not a pytest test class despite the name


class NamespacesUnavailable(TestbedError):
    """This machine cannot run the lab (not root, no ``ip``/``tc``, or namespaces refused)."""


class CommandFailed(TestbedError):
    """A setup command (``ip``, ``tc``, a sysctl write) exited non-zero; carries its stderr."""

    def __init__(self, argv: Sequence[str], returncode: int, stderr: str) -> None:
        super().__init__(f"{' '.join(argv)!r} exited {returncode}: {stderr.strip()}")
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr


def check_available() -> None:
    """Raise :class:`NamespacesUnavailable` (one line saying why) unless this process can build
    the lab: Linux, root, ``ip`` and ``tc`` on PATH, and ``/dev/net/tun``."""
    if not sys.platform.startswith("linux"):
        raise NamespacesUnavailable(f"network namespaces need Linux, not {sys.platform}")
    if os.geteuid() != 0:
        raise NamespacesUnavailable(
            "the link testbed needs root (CAP_NET_ADMIN) to create network namespaces")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise NamespacesUnavailable(f"{tool} not found on PATH; install iproute2")
    if not os.path.exists("/dev/net/tun"):
        raise NamespacesUnavailable("/dev/net/tun is missing (needed by the delay relay)")


def sh(argv: Sequence[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a setup command (30 s limit); :class:`CommandFailed` if it fails and ``check``."""
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise CommandFailed(argv, proc.returncode, proc.stderr)
    return proc


#: Where :meth:`Namespaces.up` records which process made each namespace (one file per
#: namespace: the pid and its start time, so that a reused pid does not pass for the owner).
OWNERS = Path("/run/websec-testbed/netns-owners")


def _start_time(pid: int) -> str | None:
    """Field 22 of ``/proc/<pid>/stat`` (start time in clock ticks), ``None`` if no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _record_owner(name: str) -> None:
    OWNERS.mkdir(parents=True, exist_ok=True)
    (OWNERS / name).write_text(f"{os.getpid()} {_start_time(os.getpid())}\n")


def held_by_another_run(name: str) -> bool:
    """Namespace ``name`` was made by a process other than this one that still runs (a live
    campaign or test run next to this one: not a leftover)."""
    try:
        pid, start = (OWNERS / name).read_text().split()
    except (OSError, ValueError):
        return False
    return int(pid) != os.getpid() and _start_time(int(pid)) == start


def list_leftovers(prefix: str, spare_live_runs: bool = False) -> list[str]:
    """Names of existing namespaces that start with ``prefix``; with ``spare_live_runs``, not
    those another running process made (:func:`held_by_another_run`)."""
    out = sh(["ip", "netns", "list"], check=False).stdout
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    return [n for n in names if n.startswith(prefix)
            and not (spare_live_runs and held_by_another_run(n))]


def delete_namespace(name: str, attempts: int = 3) -> None:
    """Kill every process in namespace ``name``, then delete it (missing is fine). A process
    that entered it between the listing and the deletion (a program started at that instant)
    can make ``ip netns del`` fail: the whole is tried again, up to ``attempts`` times."""
    for attempt in range(attempts):
        pids = sh(["ip", "netns", "pids", name], check=False).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        if sh(["ip", "netns", "del", name], check=False).returncode == 0 or name not in (
                list_leftovers(name)):  # fmt: skip
            break
        time.sleep(0.05 * (attempt + 1))
    (OWNERS / name).unlink(missing_ok=True)


def sweep_leftovers(prefix: str, spare_live_runs: bool = False) -> list[str]:
    """Delete every namespace starting with ``prefix`` (what a killed run left behind) and the
    processes in it; returns the names removed. With ``spare_live_runs`` a namespace another
    running process made stays (a campaign next to a test run keeps its cluster)."""
    names = list_leftovers(prefix, spare_live_runs)
    for name in names:
        delete_namespace(name)
    return names


class Namespaces(abc.ABC):
    """A set of network namespaces named ``PREFIX + tag + "-" + node``, one per :attr:`NODES`.

    A subclass (a dataclass with a ``tag`` field) sets :attr:`PREFIX`, :attr:`NODES` and
    :attr:`MAX_TAG`, and writes :meth:`_build`; :meth:`_stop` is its hook for what must stop
    before the namespaces go (a relay it started). Use it as a context manager."""

    #: The first characters of every namespace of this kind (one prefix per topology, so that a
    #: sweep by prefix removes one kind's leftovers and nothing else).
    PREFIX: ClassVar[str] = "ns-"
    #: Every namespace of the topology, programs' and plumbing's alike.
    NODES: ClassVar[tuple[str, ...]] = ()
    #: Longest tag allowed (namespace and interface names are short).
    MAX_TAG: ClassVar[int] = 12
    #: What the refusal to reuse namespaces suggests.
    CLEANUP_HINT: ClassVar[str] = "choose another tag"

    tag: str
    _up: bool

    def _check_tag(self) -> None:
        if not self.tag.isalnum() or len(self.tag) > self.MAX_TAG:
            raise ValueError(f"tag must be 1-{self.MAX_TAG} letters/digits, got {self.tag!r}")

    def nodes(self) -> tuple[str, ...]:
        """This topology's nodes: :attr:`NODES` (a subclass whose size is chosen per instance
        says otherwise)."""
        return self.NODES

    def ns(self, node: str) -> str:
        """The namespace name of ``node``."""
        if node not in self.nodes():
            raise ValueError(f"node must be one of {self.nodes()}, got {node!r}")
        return f"{self.PREFIX}{self.tag}-{node}"

    # -- lifecycle --

    def __enter__(self) -> Self:
        self.up()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.down()

    def up(self) -> Self:
        """Build everything; on any failure remove what was built before re-raising. Never
        tears down namespaces this object did not create."""
        check_available()
        if self._up:
            return self
        mine = {self.ns(n) for n in self.nodes()}
        taken = [n for n in list_leftovers(f"{self.PREFIX}{self.tag}-") if n in mine]
        if taken:
            raise TestbedError(f"namespaces {taken} exist already; {self.CLEANUP_HINT}")
        self._up = True
        try:
            self._create()
            self._build()
        except BaseException:
            self.down()
            raise
        return self

    def down(self) -> None:
        """Stop what :meth:`_stop` stops, kill every process in the namespaces and delete them
        (idempotent)."""
        self._stop()
        for node in self.nodes():
            delete_namespace(self.ns(node))
        self._up = False

    def _create(self) -> None:
        for node in self.nodes():
            try:
                sh(["ip", "netns", "add", self.ns(node)])
            except CommandFailed as exc:  # e.g. a container without CAP_SYS_ADMIN
                raise NamespacesUnavailable(
                    f"cannot create network namespaces here: {exc.stderr.strip()}") from exc
            _record_owner(self.ns(node))
            self.ip(node, "link", "set", "lo", "up")

    @abc.abstractmethod
    def _build(self) -> None:
        """Links, addresses, routes: the subclass's topology, built in its fresh namespaces."""

    def _stop(self) -> None:
        """Stop helpers started by :meth:`_build` (a topology without helpers has nothing to
        stop: this default does nothing)."""
        return None

    def _require_up(self) -> None:
        if not self._up:
            raise TestbedError("the testbed is not up; use it as a context manager or call up()")

    # -- inside a node --

    def ip(self, node: str, *args: str) -> None:
        """``ip -n <namespace of node> args...``; :class:`CommandFailed` on error."""
        sh(["ip", "-n", self.ns(node), *args])

    def veth(self, a: str, a_dev: str, b: str, b_dev: str) -> None:
        """A veth pair with end ``a_dev`` in ``a`` and ``b_dev`` in ``b`` (nothing on the host)."""
        sh(["ip", "link", "add", a_dev, "netns", self.ns(a), "type", "veth",
            "peer", "name", b_dev, "netns", self.ns(b)])

    def sysctl(self, node: str, key: str, value: str) -> None:
        """Write ``/proc/sys/<key>`` inside ``node`` without procps: ``/proc/sys/net`` shows the
        namespace of the process reading it, so a shell inside the namespace writes it."""
        path = "/proc/sys/" + key.replace(".", "/")
        sh(["ip", "netns", "exec", self.ns(node), "sh", "-c", f"echo {value} > {path}"])

    def command(self, node: str, argv: Sequence[str]) -> list[str]:
        """``argv`` prefixed so that it runs in ``node``'s namespace."""
        return ["ip", "netns", "exec", self.ns(node), *argv]

    def run(self, node: str, argv: Sequence[str], **kwargs: Any
            ) -> subprocess.CompletedProcess[str]:
        """:func:`subprocess.run` of ``argv`` inside ``node`` (text mode, output captured unless
        ``kwargs`` say otherwise)."""
        self._require_up()
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        # text mode unless the caller overrides it, as the return type says
        done: subprocess.CompletedProcess[str] = subprocess.run(self.command(node, argv), **kwargs)
        return done

    def popen(self, node: str, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[str]:
        """:class:`subprocess.Popen` of ``argv`` inside ``node`` (text mode); :meth:`down`
        kills it if the caller has not."""
        self._require_up()
        kwargs.setdefault("text", True)
        proc: subprocess.Popen[str] = subprocess.Popen(self.command(node, argv), **kwargs)
        return proc

