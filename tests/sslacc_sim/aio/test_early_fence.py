"""A member that judged its predecessor dead fences it before any wait (the early fence).

Three members A -> B -> C -> A (each mirrors to the next: B watches A, B's mirror is C). When B
judges A dead while its own mirror C is silent too, B's takeover waits up to
:data:`~sslacc_sim.aio.linux.service.ALONE_WAIT_S` (1 s) for C's fate
(:meth:`Member._chain_for_takeover <sslacc_sim.aio.linux.member.Member._chain_for_takeover>`):
the connections it takes over go to C first, unless C is dead too. B fences A *before* that
wait (:meth:`Backup.fence <sslacc_sim.aio.linux.backup.Backup.fence>` in ``Member._watch``).
A member wrongly judged dead -- stopped, and woken during B's wait -- finds its keepalive link
closed (B's watch ended it) and judges its mirror B after
:data:`~sslacc_sim.aio.linux.member.SILENT_WAIT_S` (0.3 s): it must find its port down and
fence itself. Fenced only when the takeover begins, A finds its port up, judges B dead and goes
on alone, unmirrored, its frames reaching the clients until B's fence comes: two owners of A's
buckets. Seen with that one-line change (the early fence removed; ``Backup.take_over`` fences
first thing): A says ``MIRROR DEAD member 1`` (12 runs of 12), 38 to 108 of its frames reach the
LAN after it woke, and B resumes A's connections from copies older than what their clients now
hold: in most runs one or two of A's downloads stall until curl gives up.

In network namespaces (root, iproute2, nftables; never skipped): 12 rate-limited 4 MiB
downloads, four in each member's buckets. 1.5 s in, the whole ring is frozen (``SIGSTOP``):
C first, A 60 ms later, B 20 ms after A. B stops last so that its heartbeat has read every
answer C sent and every keepalive A sent (so that B judges A dead the moment it wakes). (Before
the heartbeat matched answers to keepalives in order, a late answer of C's left in B's queue
counted as the answer to B's first keepalive after it woke, and C did not look silent.) After 0.5 s B is woken: A's keepalives are overdue, and so are C's
answers, so B fences A and waits. C is woken 0.15 s after B: C lives (B's own verdict on it, if
one began, waits 0.3 s, as B itself was stopped), and B's takeover waits the whole second. A
is woken 0.25 s after B, in the middle of that wait, and before C's verdict on A (0.3 s after C
woke) could judge it dead. A capture on A's switch port (what A puts on the LAN, as the bucket
campaign counts zombie frames) must hold no frame carrying data, a FIN or a reset after A woke;
A must say ``FENCED``; B must take A over; every download must arrive byte-exact.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from sslacc_sim.aio.linux.campaign_load import capture
from sslacc_sim.aio.linux.cluster import start_members
from sslacc_sim.aio.linux.failover import HOSTNAME, first_line, wait_line
from sslacc_sim.aio.linux.loadstats import zombie_frames
from sslacc_sim.aio.linux.netns import SHARED_MAC, VIP, Topology
from sslacc_sim.aio.linux.threads import normal_thread, realtime_thread

from .member_loads import arrived, four_mib_site, ports_of_members

pytestmark = [pytest.mark.interop, pytest.mark.usefixtures("namespaces"), pytest.mark.timeout(300)]

_BUCKETS = 16
_DOWNLOADS = 12
_A_AFTER_C_S = 0.06
"""A is stopped this long after C: B's heartbeat has read any late answer of C's meanwhile."""
_B_AFTER_C_S = 0.08
"""B is stopped this long after C (20 ms after A), before C's silence is overdue for B
(0.2 s)."""
_FROZEN_S = 0.5
"""How long B stays stopped: longer than a keepalive may be overdue (0.2 s)."""
_WAKE_C_S = 0.15
"""C is woken this long after B: after B judged A dead (at once) and checked C's silence,
within B's verdict on C (0.3 s)."""
_WAKE_A_S = 0.25
"""A is woken this long after B: after B's (early) fence, within B's wait for C (1 s), and
before C's verdict on A (0.3 s after C woke) could judge it dead."""


def _downloads(topo: Topology, cert: Path, tmp_path: Path) -> list[subprocess.Popen[str]]:
    """:data:`_DOWNLOADS` curl downloads of ``/f`` at 1 MB/s (about 4 s each) into
    ``tmp_path / out<i>``, download ``i`` in member ``i % 3``'s buckets; one that stalls gives
    up after 20 s."""
    return [topo.popen("client", [
        "curl", "-sS", "--cacert", str(cert), "--resolve", f"{HOSTNAME}:443:{VIP}",
        "--local-port", str(port), "--limit-rate", "1M", "-o", str(tmp_path / f"out{i}"),
        "--max-time", "20", f"https://{HOSTNAME}/f"], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE)
        for i, port in enumerate(ports_of_members(_DOWNLOADS, 3, _BUCKETS))]  # fmt: skip


def _until(t: float) -> None:
    time.sleep(max(0.0, t - time.monotonic()))


def _freeze_and_wake(procs: dict[str, subprocess.Popen[str]]) -> tuple[float, float]:
    """C stopped, then A, then B; B woken, then C, then A (module docstring). Returns when B and
    A were woken (``time.monotonic``)."""
    realtime_thread()  # a stagger of tens of milliseconds: this thread must not wait its turn
    try:
        start = time.monotonic()
        procs["c"].send_signal(signal.SIGSTOP)
        _until(start + _A_AFTER_C_S)
        procs["a"].send_signal(signal.SIGSTOP)
        _until(start + _B_AFTER_C_S)
        procs["b"].send_signal(signal.SIGSTOP)
        time.sleep(_FROZEN_S)
        procs["b"].send_signal(signal.SIGCONT)
        woke_b = time.monotonic()
        _until(woke_b + _WAKE_C_S)
        procs["c"].send_signal(signal.SIGCONT)
        _until(woke_b + _WAKE_A_S)
        procs["a"].send_signal(signal.SIGCONT)
        return woke_b, time.monotonic()
    finally:
        normal_thread()


def test_a_member_woken_during_its_heirs_wait_finds_itself_fenced(tmp_path: Path) -> None:
    """A, stopped and judged dead by B while B's mirror C was silent too, is woken during B's
    wait for C: A's port is down already, A fences itself and puts nothing more on the LAN; B
    takes A over, and no download is lost."""
    docroot, body, cert, key = four_mib_site(tmp_path)
    with ExitStack() as stack:
        topo = stack.enter_context(Topology(tag="tef", shared_vip=True))
        procs = start_members(topo, stack, members=3, docroot=docroot, cert=cert, key=key,
                              buckets=_BUCKETS, logs=tmp_path)  # fmt: skip
        with capture(topo, "lan", "pa", tmp_path / "port.json", incoming_only=True) as rows:
            curls = _downloads(topo, cert, tmp_path)
            time.sleep(1.5)  # every handshake done: a steady load
            woke_b, woke_a = _freeze_and_wake(procs)
            a_said = first_line(procs["a"], ("FENCED", "MIRROR DEAD"), 5)
            restored = wait_line(procs["b"], "RESTORED", 10)
            time.sleep(1.0)  # a woken A that went on would be heard meanwhile
        outs = [c.communicate(timeout=60) for c in curls]
    ok = arrived(curls, tmp_path, body)
    report = json.loads(restored.split(" ", 1)[1])
    zombies = zombie_frames(rows, SHARED_MAC.replace(":", ""), woke_a)
    seen = (f"A said {a_said!r}; {zombies} frames of A's after it woke; {ok.count(False)} of "
            f"{len(ok)} downloads lost ({[e.strip()[:80] for _, e in outs if e.strip()]}); "
            f"B's takeover {report['drained'] - woke_b:.3f} s after B woke")  # fmt: skip
    assert report["member"] == 0 and report["failed"] == [], seen
    # the case under test: B's takeover waited for C (which lived) until well after A woke
    assert report["drained"] > woke_a + 0.5, seen
    assert a_said.startswith("FENCED"), f"A, woken, went on: two owners of its buckets. {seen}"
    assert zombies == 0, seen
    assert all(ok), seen
