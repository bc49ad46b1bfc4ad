"""Two waits a takeover used to leave to the client's own timers (issue 22: "kill-to-next-byte
latency in every phase, p99 <= 150 ms, below Linux's minimum retransmission timeout").

* **A SYN the dead owner never answered.** The buddy heard it on the LAN; left alone, the
  client sends it again only after its initial retransmission timeout (1 s, RFC 6298). The new
  owner replays the heard SYN into its own stack after the claim
  (:func:`~sslacc_sim.aio.linux.takeover.replay_syns`), and its listener answers at once. Here
  the owner's kernel drops every SYN (an nftables rule in its namespace), so the client's SYN
  reaches only the buddy's sniffer; the owner is cut and killed 0.3 s after curl starts.
  With the replay curl connects well before its SYN timer; with ``--no-syn-replay`` (the
  negative control) it connects only after it.
* **Client bytes the dead owner never acknowledged.** An uploading client sends into the void
  after the owner's link is cut; the buddy heard those bytes and puts them into the restored
  receive queue. The restored socket's window probe carries their acknowledgement, but the
  client drops a probe (its sequence number is one below, on purpose) before reading its ACK,
  so without more the client waited for its retransmission timer (200 ms or more, seen in the
  campaign's captures). The new owner sends a bare ACK in the window
  (:func:`~sslacc_sim.aio.linux.takeover.acknowledge`); the gap, measured on the client's
  side as the campaign measures it (:func:`~sslacc_sim.aio.linux.loadstats.flows_at`), stays
  far below the timer.

In network namespaces (root, iproute2, nftables, as in CI; never skipped).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import zlib
from contextlib import ExitStack
from pathlib import Path

import pytest

from sslacc_sim.aio.linux.cluster import start_nodes
from sslacc_sim.aio.linux.docroot import receipt
from sslacc_sim.aio.linux.failover import (
    HOSTNAME,
    file_bytes,
    node_env,
    site_credentials,
    wait_line,
)
from sslacc_sim.aio.linux.loadstats import flows_at
from sslacc_sim.aio.linux.netns import VIP, Topology

pytestmark = [pytest.mark.interop, pytest.mark.usefixtures("namespaces"), pytest.mark.timeout(180)]

_BODY = b"a page fetched across a takeover\n" * 64
_DROP_SYNS = """
table inet test_syns {
    chain input {
        type filter hook prerouting priority -300; policy accept;
        tcp dport 443 tcp flags & (syn | ack) == syn drop
    }
}
"""


def _cluster(tmp_path: Path, stack: ExitStack, tag: str, backup_args: tuple[str, ...] = ()
             ) -> tuple[Topology, Path, dict[str, subprocess.Popen[str]]]:  # fmt: skip
    docroot = tmp_path / "www"
    docroot.mkdir()
    (docroot / "page").write_bytes(_BODY)
    cert, key = site_credentials(tmp_path)
    topo = stack.enter_context(Topology(tag=tag))
    procs = start_nodes(topo, stack, nodes=2, docroot=docroot, cert=cert, key=key,
                        backup_args=backup_args)  # fmt: skip
    return topo, cert, procs


def _kill(topo: Topology, procs: dict[str, subprocess.Popen[str]], node: str) -> float:
    """Cut ``node``'s link, then SIGKILL it (the campaign's kill); returns when (monotonic)."""
    at = time.monotonic()
    topo.cut(node)
    procs[node].kill()
    procs[node].wait(timeout=10)
    return at


def _connect_after_unanswered_syn(tmp_path: Path, tag: str, backup_args: tuple[str, ...] = ()
                                  ) -> float:  # fmt: skip
    """Seconds from curl's start to its TCP connection, when its SYN reached only the buddy
    and the owner died 0.3 s later; the body must be the page."""
    with ExitStack() as stack:
        topo, cert, procs = _cluster(tmp_path, stack, tag, backup_args)
        rules = tmp_path / "drop-syns.nft"
        rules.write_text(_DROP_SYNS)
        topo.run("a", ["nft", "-f", str(rules)], check=True)
        curl = topo.popen("client", [
            "curl", "-sS", "--cacert", str(cert), "--resolve", f"{HOSTNAME}:443:{VIP}",
            "-w", "\n%{time_connect}", "--max-time", "20", f"https://{HOSTNAME}/page"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        time.sleep(0.3)
        _kill(topo, procs, "a")
        out, err = curl.communicate(timeout=30)
        assert curl.returncode == 0, err
        body, _, connect = out.rpartition("\n")
        assert body.encode() == _BODY
        return float(connect)


def test_a_syn_the_dead_owner_never_answered_is_answered_at_once(tmp_path: Path) -> None:
    connect = _connect_after_unanswered_syn(tmp_path, "tsr")
    assert connect < 0.8, f"connected after {connect:.3f} s: the client's SYN timer, not the replay"


def test_control_without_the_replay_the_client_waits_for_its_syn_timer(tmp_path: Path) -> None:
    connect = _connect_after_unanswered_syn(tmp_path, "tsn", ("--no-syn-replay",))
    assert connect >= 0.95, f"connected after {connect:.3f} s without the replay"


def _wait_uploading(topo: Topology, curl: subprocess.Popen[str], acked: int) -> None:
    """Return once the client's connection to the service has had ``acked`` bytes
    acknowledged (``ss`` in its namespace). A fixed sleep was not enough: on a loaded machine
    curl, which reads the whole upload into memory first, sent its SYN only after the kill,
    and the fault hit no connection."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and curl.poll() is None:
        out = topo.run("client", ["ss", "-Htni", "state", "established", "dport", "= :443"]).stdout
        if any(int(f.split(":")[1]) >= acked for f in out.split() if f.startswith("bytes_acked:")):
            return
        time.sleep(0.02)
    raise AssertionError(f"the upload never had {acked} bytes acknowledged before the fault")


def test_an_uploading_client_is_acknowledged_at_once_after_a_kill(tmp_path: Path) -> None:
    """The owner's link is cut 20 ms before it is killed (the buddy hears of the death only
    at the kill): meanwhile the client fills the window the owner last announced, into the
    void, and stops, waiting for acknowledgements. Its retransmission timer (200 ms after the
    owner's last ACK) would end the wait ~180 ms after the kill; the new owner's bare ACK ends
    it right after the takeover."""
    size = 96 << 20  # bytes: unthrottled, the upload is still going well after 4 MiB are in
    upload = tmp_path / "upload.bin"
    body = file_bytes(size)
    upload.write_bytes(body)
    with ExitStack() as stack:
        topo, cert, procs = _cluster(tmp_path, stack, "tua")
        capture = tmp_path / "capture.json"
        sniffer = topo.popen("client", [sys.executable, "-m", "sslacc_sim.aio.linux.node",
                                        "sniff", "--src", VIP, "--port", "443",
                                        "--out", str(capture)],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=node_env())  # fmt: skip
        stack.callback(sniffer.kill)
        wait_line(sniffer, "ready", 30)
        curl = topo.popen("client", [
            "curl", "-sS", "--cacert", str(cert), "--resolve", f"{HOSTNAME}:443:{VIP}",
            "--data-binary", f"@{upload}", "--max-time", "60",
            "-H", "Content-Type: application/octet-stream", "-H", "Expect:",
            f"https://{HOSTNAME}/upload"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        _wait_uploading(topo, curl, 4 << 20)
        assert curl.poll() is None, "the upload ended before the fault"
        mac_a = topo.mac("a")
        topo.cut("a")
        time.sleep(0.02)
        killed = time.monotonic()
        procs["a"].kill()
        procs["a"].wait(timeout=10)
        out, err = curl.communicate(timeout=60)
        assert curl.returncode == 0, err
        assert out.encode() == receipt(len(body), zlib.crc32(body))
        sniffer.send_signal(signal.SIGTERM)
        sniffer.wait(timeout=30)
        rows = json.loads(capture.read_text())
    flows = flows_at(rows, killed, mac_a)
    assert len(flows) == 1
    (flow,) = flows.values()
    assert flow.phase == "handshake" and flow.gap_s is not None  # 935-odd server bytes, then the upload
    assert flow.gap_s < 0.1, f"the client waited {flow.gap_s:.3f} s for an acknowledgement"
