"""The takeover's fast steps, each on real kernels: the port fence, the standby address, the
probe no rate limit silences, the sniffer's prompt stop, the partial rebuild, the window at
the fault.

These are the pieces that bring the kill-to-next-byte gap under Linux's minimum
retransmission timeout (``docs/sslacc-cluster.md``); each test fails when its piece is undone
(the fence does not take the port down, the standby buddy answers ARP before it claims, the
probe is a plain window probe, the sniffer sleeps out its timeout).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import time
from dataclasses import replace

import pytest

from sslacc_sim.aio.linux import takeover
from sslacc_sim.aio.linux.claim import PortFence
from sslacc_sim.aio.linux.failover import node_env
from sslacc_sim.aio.linux.loadstats import CLIENT, flows_at
from sslacc_sim.aio.linux.mirror import MirrorState, join_blob
from sslacc_sim.aio.linux.netns import ADDRESSES, VIP, Topology
from sslacc_sim.aio.linux.rebuild import rebuild
from sslacc_sim.aio.linux.repair import TcpSnapshot
from sslacc_sim.aio.linux.sniff import ACK, SYN, FlowTracker, Sniffer, packet_socket


def _python(topo: Topology, node: str, code: str, timeout: float = 30.0) -> str:
    """Run ``code`` with this checkout's Python in ``node``'s namespace; its stdout."""
    out = topo.run(node, [sys.executable, "-c", textwrap.dedent(code)], env=node_env(),
                   timeout=timeout)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


def _port_up(topo: Topology, port: str) -> bool:
    out = subprocess.run(["ip", "-n", topo.ns("lan"), "-o", "link", "show", port],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    return ",UP" in out or "<UP" in out


def test_the_fence_takes_the_old_owners_switch_port_down(namespaces: object) -> None:
    with Topology(tag="tf") as topo:
        assert _port_up(topo, "pa")
        fence = PortFence(topo.ns("lan"), "pa")
        t0 = time.monotonic()
        fence.fire()
        took = time.monotonic() - t0
        assert not _port_up(topo, "pa") and _port_up(topo, "pb")
        assert took < 0.05, f"the fence took {took * 1000:.1f} ms"
        fence.close()
        with pytest.raises(OSError):
            PortFence(topo.ns("lan"), "pnope")  # armed against a port that is not there
        with pytest.raises(ValueError):
            PortFence(topo.ns("lan"), "p" * 16)


def test_a_standby_buddy_stays_silent_until_it_claims(namespaces: object) -> None:
    """Node B holds the address on standby: with A's port down, nobody answers ARP for it;
    after ``claim`` B does, and the client's pings reach it."""
    with Topology(tag="ts") as topo:
        topo.cut("a")
        # step 1: standby, then the client cannot reach the address
        _python(topo, "b", f"""
            from sslacc_sim.aio.linux.claim import StandbyAddress
            StandbyAddress({VIP!r}, "eth0")
        """)
        assert _resolved(topo) is None, "a standby buddy answered ARP for the address"
        # step 2: claim (the address, the sysctl and the ARP announcement are B's state)
        _python(topo, "b", f"""
            from sslacc_sim.aio.linux.claim import StandbyAddress
            StandbyAddress({VIP!r}, "eth0").claim()
        """)
        assert _resolved(topo) == topo.mac("b")


def test_an_owner_out_of_its_lease_cuts_itself_off(namespaces: object) -> None:
    """Self-fencing takes the node's own LAN link down before it exits: nothing it still had
    queued (a reset from its accept queue, a retransmission) leaves, even where no switch port
    fence stands behind it."""
    with Topology(tag="tsf") as topo:
        assert _link_up(topo, "a")
        out = topo.run("a", [sys.executable, "-c", textwrap.dedent("""
            from pathlib import Path
            from sslacc_sim.aio.linux.primary import Primary
            from sslacc_sim.aio.linux.docroot import Docroot
            Primary("10.88.0.100", 443, None, Docroot(Path(".")), None,
                    lan_dev="eth0").fence_self("the test's lease ran out")
            """)], env=node_env(), timeout=30)  # fmt: skip
        assert out.returncode == 75 and "FENCED the test's lease ran out" in out.stdout, out
        assert not _link_up(topo, "a") and _link_up(topo, "b")


def _link_up(topo: Topology, node: str) -> bool:
    out = subprocess.run(["ip", "-n", topo.ns(node), "-o", "link", "show", "eth0"],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    return ",UP" in out or "<UP" in out


def _resolved(topo: Topology) -> str | None:
    """The MAC the client's kernel resolves the address to (12 hex digits) after trying to
    reach it, or ``None`` when nobody answered its ARP request."""
    _python(topo, "client", f"""
        import socket
        try:
            socket.create_connection(({VIP!r}, 9), timeout=1.5).close()
        except OSError:
            pass  # refused (someone has the address) or timed out (nobody)
    """)
    neigh = topo.run("client", ["ip", "neigh", "show", VIP]).stdout
    if "lladdr" not in neigh:
        return None
    return neigh.split("lladdr")[1].split()[0].replace(":", "")


def test_an_old_byte_probe_is_answered_every_time(namespaces: object) -> None:
    """A window probe is answered once per 500 ms; a byte the peer already holds, each time."""
    with Topology(tag="tp") as topo:
        out = _python(topo, "a", f"""
            import socket, struct, time
            from sslacc_sim.aio.linux import repair
            server = socket.create_server(({ADDRESSES["a"]!r}, 4433))
            client = socket.create_connection(({ADDRESSES["a"]!r}, 4433))
            s, _ = server.accept()
            s.sendall(b"x" * 10); client.recv(10); time.sleep(0.05)
            def segs_in():
                info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 144)
                return struct.unpack_from("=I", info, 140)[0]
            snd_nxt = repair.snapshot(s).snd_nxt
            counts = [segs_in()]
            for _ in range(2):  # window probes: leaving repair mode sends one
                s.setsockopt(socket.IPPROTO_TCP, repair.TCP_REPAIR, 1)
                s.setsockopt(socket.IPPROTO_TCP, repair.TCP_REPAIR, 0)
                time.sleep(0.02); counts.append(segs_in())
            for _ in range(3):
                repair.old_byte_probe(s.getsockname(), s.getpeername(), snd_nxt - 2)
                time.sleep(0.02); counts.append(segs_in())
            client.sendall(b"ok"); assert s.recv(10) == b"ok"
            s.sendall(b"more"); assert client.recv(10) == b"more"
            print(*counts)
        """)
        c = [int(x) for x in out.split()]
        assert c[1] == c[0] + 1 and c[2] == c[1], f"window probes: {c[:3]} (the second is rate-limited)"
        assert c[3:] == [c[2] + 1, c[2] + 2, c[2] + 3], f"old-byte probes: {c}"


def test_no_reset_leaves_for_a_held_client_between_a_rebase_s_close_and_restore(
        namespaces: object) -> None:
    """A rebase closes the restored socket and restores a new one; a client segment in
    between meets only the listener. With the client held (``ResetHold``) the segment is
    dropped without a reset, the client sends it again to the new socket and reads what that
    socket writes; without (the control, same run) the client is reset."""
    with Topology(tag="th") as topo:
        out = _python(topo, "b", f"""
            import socket, subprocess, time
            from sslacc_sim.aio.linux import repair
            from sslacc_sim.aio.linux.buckets import LibNft
            from sslacc_sim.aio.linux.claim import ResetHold
            subprocess.run(["ip", "addr", "add", "{VIP}/32", "dev", "lo"], check=True)
            listener = socket.create_server(("{VIP}", 443))
            hold = ResetHold(LibNft(), "{VIP}", 443)
            def gap(held):
                client = socket.create_connection(("{VIP}", 443),
                                                  source_address=({ADDRESSES["b"]!r}, 0))
                old, _ = listener.accept()
                snap = repair.snapshot(old)
                key = [client.getsockname()] if held else []
                with hold.held(key):
                    old.setsockopt(socket.IPPROTO_TCP, repair.TCP_REPAIR, 1)
                    old.close()  # in repair mode: nothing is sent
                    client.sendall(b"request")  # meets the listener alone
                    time.sleep(0.05)
                    new = repair.restore(snap, b"")
                    repair.leave_repair(new)
                client.settimeout(3)
                try:
                    new.sendall(b"answer")
                    got = client.recv(100)
                except OSError as exc:
                    return type(exc).__name__
                new.settimeout(3)
                return got.decode() + "+" + new.recv(100).decode()
            print(gap(True), gap(False))
            hold.close()
        """)
        held, unheld = out.split()
        assert held == "answer+request", out
        assert unheld == "ConnectionResetError", out


def test_a_window_update_lost_in_a_rebase_s_gap_is_asked_for_again_at_once(
        namespaces: object) -> None:
    """A client whose window was closed opens it while the rebase has no socket: its window
    update meets the listener and is dropped (the reset it draws is held). The fresh socket
    still believes the window closed; leaving repair mode with a window probe asks the client
    again, so new bytes reach it in milliseconds, not after the persist timer (at least 200 ms,
    and a restored socket's first is longer)."""
    with Topology(tag="tw") as topo:
        out = _python(topo, "b", f"""
            import socket, subprocess, time
            from sslacc_sim.aio.linux import repair
            from sslacc_sim.aio.linux.buckets import LibNft
            from sslacc_sim.aio.linux.claim import ResetHold
            from sslacc_sim.aio.linux.service import outq
            from dataclasses import replace
            subprocess.run(["ip", "addr", "add", "{VIP}/32", "dev", "lo"], check=True)
            listener = socket.create_server(("{VIP}", 443))
            hold = ResetHold(LibNft(), "{VIP}", 443)
            client = socket.socket()
            client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            client.bind(({ADDRESSES["b"]!r}, 0))
            client.connect(("{VIP}", 443))
            old, _ = listener.accept()
            snap = repair.snapshot(old)
            old.setblocking(False)
            sent = 0
            try:
                while sent < 1 << 20:
                    sent += old.send(b"x" * 65536)
            except BlockingIOError:
                pass
            time.sleep(0.5)  # the client's window closes; what it holds is acknowledged
            acked = sent - outq(old)
            snap = replace(snap, snd_nxt=repair.seq_add(snap.snd_nxt, acked))
            restore = repair.restore
            def gap_then_restore(*args, **kwargs):
                client.setblocking(False)
                got = 0
                try:
                    while True:
                        got += len(client.recv(65536))
                except BlockingIOError:
                    pass
                time.sleep(0.05)  # the window update meets the listener alone
                gap_then_restore.got = got
                return restore(*args, **kwargs)
            repair.restore = gap_then_restore
            with hold.held([client.getsockname()]):
                fresh = repair.rebase(old, snap)
            assert gap_then_restore.got == acked, (gap_then_restore.got, acked)
            client.setblocking(True)
            client.settimeout(5)
            t0 = time.monotonic()
            fresh.sendall(b"more")
            got = client.recv(100)
            print(got.decode(), acked < sent, time.monotonic() - t0)
            hold.close()
        """)
        got, closed, took = out.split()
        assert got == "more" and closed == "True", out
        assert float(took) < 0.1, f"the new bytes came after {float(took) * 1000:.0f} ms"


def test_the_sniffer_stops_at_once_and_keeps_every_byte() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        tracker = FlowTracker(("127.0.0.1", port))
        sniffer = Sniffer(packet_socket("lo"), tracker).start()
        client = socket.create_connection(("127.0.0.1", port))
        peer, _ = server.accept()
        client.sendall(b"hello, buddy")
        assert peer.recv(100) == b"hello, buddy"
        time.sleep(0.1)  # the sniffer now sleeps in poll(): a stop must wake it
        t0 = time.monotonic()
        sniffer.stop()
        took = time.monotonic() - t0
        with client, peer:
            flow = tracker.flows[client.getsockname()]
        assert bytes(flow.data) == b"hello, buddy" and flow.established
        assert took < 0.015, f"the stop took {took * 1000:.1f} ms"


def _raw_state() -> MirrorState:
    state = MirrorState()
    snap = TcpSnapshot(VIP_PORT, ("10.88.0.2", 40000), 5001, 1001, 1460, 7, 9, True,
                       65535, 65535, 65535)  # fmt: skip
    state.apply({"type": "tcp", "tcp": snap.to_json()}, b"")
    pos = 0
    for chunk in (b"abcdef", b"ghij", b"klmnopq"):
        lengths, blob = join_blob({"raw": chunk})
        state.apply({"type": "update", "rcv_pos": 10, "snd_pos": pos + len(chunk), "una_pos": 0,
                     "app": {"phase": "request", "offset": 0},
                     "seg": {"pos": pos, "length": len(chunk), "raw": True}, "parts": lengths},
                    blob)  # fmt: skip
        pos += len(chunk)
    return state


VIP_PORT = (VIP, 443)


def test_a_partial_rebuild_is_the_slice_of_the_whole() -> None:
    state = _raw_state()
    whole = rebuild(state, None, None)[1]
    assert whole == b"abcdefghijklmnopq"
    for lo in range(len(whole) + 1):
        for hi in range(lo, len(whole) + 2):
            assert rebuild(state, None, None, lo, hi) == (lo, whole[lo:hi]), (lo, hi)


def test_the_tail_comes_in_pieces_after_what_was_left_to_resend(monkeypatch: pytest.MonkeyPatch) -> None:
    """The never-sent tail is rebuilt a piece at a time, after the rest of ``resend``."""
    state = _raw_state()
    assert state.tcp is not None
    monkeypatch.setattr(takeover, "TAIL_PIECE", 5)
    r = takeover.Restored(("10.88.0.2", 40000), socket.socket(), state, state.tcp, False,
                          resend=b"RESEND", tail_from=3)  # fmt: skip
    with r.sock:
        assert list(takeover.tail(r, None, None)) == [b"defgh", b"ijklm", b"nopq"]
        pieces = takeover.tail(r, None, None, sent=4)
        assert next(pieces) == b"ND"  # what a rebase left to write comes first
        assert list(pieces) == [b"defgh", b"ijklm", b"nopq"]
        assert list(takeover.tail(replace(r, tail_from=17), None, None)) == []


def test_the_window_at_the_fault_comes_from_the_clients_last_segment() -> None:
    a, b = "aa", "bb"
    rows = [
        (0.0, a, 1, 100, 0, SYN | ACK, 0), (0.1, a, 1, 101, 1000, ACK, 0),
        (0.2, CLIENT, 1, 1101, 0, ACK, 0),  # all acknowledged, window closed
        (0.0, a, 2, 500, 0, SYN | ACK, 0), (0.1, a, 2, 501, 3000, ACK, 0),
        (0.2, CLIENT, 2, 1501, 0, ACK, 4000),  # 1000 acknowledged, 4000 more allowed
        (1.5, CLIENT, 2, 3501, 0, ACK, 0),  # after the fault: not counted
        (1.2, b, 2, 3501, 100, ACK, 0),
    ]  # fmt: skip
    at = flows_at(rows, 1.0, a)
    assert at[1].room == 0 and at[2].room == 1000 + 4000 - 3000
    assert at[2].gap_s == pytest.approx(0.2)


def test_the_probe_checksum_is_rfc_1071s() -> None:
    """The raw probe is built without the kernel's help: a wrong checksum and the peer drops
    it silently (the namespace test above would then see no answer)."""
    from sslacc_sim.aio.linux.repair import _checksum

    assert _checksum(bytes.fromhex("0001f203f4f5f6f7")) == (~0xDDF2) & 0xFFFF  # RFC 1071 §3
    assert _checksum(b"\x01") == (~0x0100) & 0xFFFF  # an odd length is padded with a zero
