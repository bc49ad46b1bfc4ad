"""The capture of a simulated run: real Ethernet/IPv4/TCP frames, read back by dpkt and by tshark.

The first tests parse the file with dpkt and check the headers against the model: addresses,
ports, sequence and acknowledgement numbers (wrapped at 2**32), flags, options, IP lengths
equal to the bytes on the links, checksums recomputed here, the payload of every segment
(first copies and retransmissions) equal to the bytes each end sent, one retransmitted frame
per retransmission the model counted. The ``interop`` tests hand the file to tshark (CI
installs it; never skipped): with the client's key log it decrypts the HTTP request and
response of a simulated HTTPS download and of an SSL-splitting download (the client's view),
without the key log it shows no HTTP, it finds no malformed packet and no bad checksum, and on
a lossy link it counts exactly the retransmissions the model made, in each direction.
"""

from __future__ import annotations

import importlib.util
import io
import random
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import dpkt
import pytest
import simpy

from netsim.drive import ByteSource, Driver, HttpFileServer, HttpGetClient, run_pair
from netsim.link import Duplex, LinkParams
from netsim.pcap import EPHEMERAL, PcapWriter
from netsim.tcp import TcpConnection, TcpParams
from tls12 import ClientConnection, ServerConnection
from tls12.certs import Credentials
from tls12.config import ClientConfig, ServerConfig

REPO = Path(__file__).resolve().parents[2]
BODY = b"".join(b"line %05d of a simulated page tshark must show\n" % i for i in range(1500))
TH = dpkt.tcp
#: ISNs near 2**32, so that the wire sequence numbers wrap during the transfer.
ISN = (2**32 - 3000, 2**32 - 100_000)


# -- reading a capture back ----------------------------------------------------------------

def _frames(data: bytes) -> list[tuple[float, dpkt.ethernet.Ethernet]]:
    return [(float(ts), dpkt.ethernet.Ethernet(buf)) for ts, buf in dpkt.pcap.Reader(io.BytesIO(data))]


def _sum16(data: bytes) -> int:
    """The Internet checksum's ones' complement sum (RFC 1071), computed independently of dpkt."""
    if len(data) % 2:
        data += b"\0"
    total = sum(int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2))
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def _checksums_ok(ip: dpkt.ip.IP) -> bool:
    raw = bytes(ip)
    header, segment = raw[:ip.hl * 4], raw[ip.hl * 4:ip.len]
    pseudo = ip.src + ip.dst + bytes([0, dpkt.ip.IP_PROTO_TCP]) + len(segment).to_bytes(2, "big")
    return _sum16(header) == 0xFFFF and _sum16(pseudo + segment) == 0xFFFF


def _options(tcp: dpkt.tcp.TCP) -> dict[int, bytes]:
    return {o: v for o, v in (x for x in TH.parse_opts(tcp.opts) if x) if o not in (0, 1)}


def _lossy_transfer(capture: PcapWriter | None, params: TcpParams | None = None,
                    seed: int = 5) -> tuple[TcpConnection, Duplex, Driver]:
    """Plain bytes both ways (ByteSource ends, FIN after the data) over a 5 % lossy line."""
    env = simpy.Environment()
    wire = Duplex(env, LinkParams(2e6, 0.004, loss=0.05), seed=seed)
    conn = TcpConnection(env, (wire.ab,), (wire.ba,), params or TcpParams(), isn=ISN)
    d = Driver(env, conn, ByteSource(BODY[:7000]), ByteSource(BODY), client_app=ByteSource.app,
               server_app=ByteSource.app, capture=capture, port=8080)
    env.run()
    return conn, wire, d


def _streams(frames: list[tuple[float, dpkt.ethernet.Ethernet]], port: int
             ) -> Iterator[tuple[bool, dpkt.tcp.TCP]]:
    for _, eth in frames:
        tcp = eth.data.data
        yield tcp.sport == port, tcp


# -- the headers, read back with dpkt ------------------------------------------------------

def test_frames_carry_the_models_sequence_numbers_flags_options_and_checksums() -> None:
    buf = io.BytesIO()
    cap = PcapWriter(buf)
    conn, wire, d = _lossy_transfer(cap)
    assert conn.a.retransmits > 0 and conn.b.retransmits > 0      # the seed loses in both ways
    frames = _frames(buf.getvalue())
    assert len(frames) == cap.packets
    for from_server, half in ((False, conn.a), (True, conn.b)):   # data, FIN, retransmissions
        sent = [t for s, t in _streams(frames, 8080) if s == from_server
                and (t.data or t.flags & (TH.TH_FIN | TH.TH_RST))]
        assert len(sent) == half.packets_sent
    syn, synack = frames[0][1].data, frames[1][1].data
    assert (syn.src, syn.dst) == (bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]))
    assert (syn.data.sport, syn.data.dport) == (EPHEMERAL, 8080)
    assert (syn.data.flags, syn.data.seq, syn.data.ack) == (TH.TH_SYN, ISN[0], 0)
    assert (synack.data.flags, synack.data.seq) == (TH.TH_SYN | TH.TH_ACK, ISN[1])
    assert synack.data.ack == ISN[0] + 1
    for ip in (syn, synack):
        opts = _options(ip.data)
        assert opts[TH.TCP_OPT_MSS] == (1448).to_bytes(2, "big") and TH.TCP_OPT_WSCALE not in opts
        assert ip.len == TcpParams().syn_size and TH.TCP_OPT_TIMESTAMP in opts
    assert all(_checksums_ok(eth.data) for _, eth in frames)
    assert all(eth.data.df and eth.data.ttl == 64 for _, eth in frames)
    times = [t for t, _ in frames]
    assert times == sorted(times) and times[0] == 0.0
    # every non-SYN frame is the model's header plus payload; the IP bytes are the link's
    p = TcpParams()
    assert all(eth.data.len == p.header + len(eth.data.data.data) for _, eth in frames[2:])
    up = sum(eth.data.len for _, eth in frames if eth.data.data.dport == 8080)
    down = sum(eth.data.len for _, eth in frames if eth.data.data.sport == 8080)
    assert (up, down) == (wire.ab.bytes_sent, wire.ba.bytes_sent)


def test_payloads_and_retransmissions_are_the_bytes_each_end_sent() -> None:
    buf = io.BytesIO()
    conn, _, _ = _lossy_transfer(PcapWriter(buf))
    frames = _frames(buf.getvalue())
    for from_server, isn, sent, half in ((False, ISN[0], BODY[:7000], conn.a),
                                         (True, ISN[1], BODY, conn.b)):
        stream = bytearray(len(sent))
        seen: set[int] = set()
        retransmitted = 0
        for server, tcp in _streams(frames, 8080):
            if server != from_server or not tcp.data:
                continue
            offset = (tcp.seq - isn - 1) % 2**32          # the wire value wrapped at 2**32
            if offset in seen:
                retransmitted += 1
                assert stream[offset:offset + len(tcp.data)] == tcp.data
            seen.add(offset)
            stream[offset:offset + len(tcp.data)] = tcp.data
            assert tcp.flags & TH.TH_ACK and not tcp.flags & (TH.TH_SYN | TH.TH_RST)
        assert bytes(stream) == sent
        fins = [t for s, t in _streams(frames, 8080) if s == from_server and t.flags & TH.TH_FIN]
        assert {f.seq for f in fins} == {(isn + 1 + len(sent)) % 2**32}
        assert retransmitted + len(fins) - 1 == half.retransmits


def test_timestamps_echo_and_windows_scale_when_the_receive_window_is_large() -> None:
    buf = io.BytesIO()
    p = TcpParams(rwnd=1000.0)                           # 1,448,000 bytes: needs a shift of 5
    _lossy_transfer(PcapWriter(buf), p)
    frames = _frames(buf.getvalue())
    syn, synack = (eth.data.data for _, eth in frames[:2])
    assert _options(syn)[TH.TCP_OPT_WSCALE] == _options(synack)[TH.TCP_OPT_WSCALE] == bytes([5])
    assert syn.win == 0xFFFF                             # a SYN's window is never scaled
    later = [eth.data.data for _, eth in frames[2:]]
    assert {t.win for t in later} == {-(-1_448_000 // 32)}
    sent_ts = {}
    for t, eth in frames:
        tcp = eth.data.data
        tsval, tsecr = (int.from_bytes(v, "big") for v in
                        (_options(tcp)[TH.TCP_OPT_TIMESTAMP][:4], _options(tcp)[TH.TCP_OPT_TIMESTAMP][4:]))
        assert abs(tsval - t * 1000) <= 1                # the sender's clock in ms
        if tcp.flags & TH.TH_ACK:                        # echoes a TSval the peer sent before
            assert tsecr in sent_ts.get(tcp.dport, set())
        sent_ts.setdefault(tcp.sport, set()).add(tsval)


def test_the_capture_changes_nothing_and_is_off_by_default() -> None:
    conn, wire, d = _lossy_transfer(None)
    assert conn.a.tap is None and conn.b.tap is None
    _, wire2, d2 = _lossy_transfer(PcapWriter(io.BytesIO()))
    assert d.flights == d2.flights and d.finished_at == d2.finished_at
    assert wire.ab.log_time == wire2.ab.log_time and wire.ba.log_event == wire2.ba.log_event


def test_the_writer_refuses_bad_use(tmp_path: Path) -> None:
    env = simpy.Environment()
    wire = Duplex(env, LinkParams(1e6))
    conn = TcpConnection(env, (wire.ab,), (wire.ba,))
    cap = PcapWriter(tmp_path / "x.pcap")
    with pytest.raises(ValueError, match="port"):
        cap.attach(conn, port=0)
    with pytest.raises(ValueError, match="two hosts"):
        cap.attach(conn, "h", "h")
    big = TcpConnection(env, (wire.ab,), (wire.ba,), TcpParams(mss=70_000))
    with pytest.raises(ValueError, match="IPv4"):
        cap.attach(big)
    cap.close()
    with pytest.raises(ValueError, match="closed"):
        cap.attach(conn)
    assert (tmp_path / "x.pcap").read_bytes()[:4] == bytes.fromhex("4d3cb2a1")  # nanosecond pcap


def test_docstring_example() -> None:
    import doctest

    import netsim.pcap

    result = doctest.testmod(netsim.pcap)
    assert result.attempted > 0 and result.failed == 0


# -- tshark ---------------------------------------------------------------------------------

def _tshark(*args: str) -> str:
    if shutil.which("tshark") is None:
        pytest.fail("tshark is required by this test (apt-get install tshark)")
    out = subprocess.run(["tshark", *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _https_download(tmp_path: Path, creds: Credentials, link: LinkParams, seed: int
                    ) -> tuple[Path, Path, Driver]:
    """A simulated HTTPS GET of BODY through :func:`run_pair`, captured, with the client's key log."""
    rng = random.Random(seed)
    lines: list[str] = []
    client = ClientConnection(ClientConfig(rng=rng.randbytes, keylog=lines.append))
    server = ServerConnection(ServerConfig(credentials=creds, rng=rng.randbytes))
    get = HttpGetClient("/page.txt")
    cap, keys = tmp_path / "https.pcap", tmp_path / "client.keys"
    d = run_pair(client, server, client_app=get, server_app=HttpFileServer(BODY), up=link,
                 seed=seed, pcap=cap)
    keys.write_text("".join(line + "\n" for line in lines))
    assert get.body == BODY and len(lines) == 1
    return cap, keys, d


HTTP_FIELDS = ("-Y", "http", "-T", "fields", "-e", "http.request.uri", "-e", "http.response.code")


def _check_decrypts(cap: Path, keys: Path, uri: str, stream: int = 0) -> None:
    only = ("-Y", f"http && tcp.stream == {stream}") + HTTP_FIELDS[2:]
    decrypted = _tshark("-r", str(cap), "-o", f"tls.keylog_file:{keys}", *only)
    assert decrypted.split() == [uri, "200"], decrypted
    follow = _tshark("-r", str(cap), "-o", f"tls.keylog_file:{keys}", "-q", "-z",
                     f"follow,tls,ascii,{stream}")
    assert f"GET {uri} HTTP/1." in follow
    assert b"line 01499 of a simulated page tshark must show" in follow.encode()
    # the negative control: without the key log, no HTTP on the TLS connections
    assert _tshark("-r", str(cap), "-Y", "http && tcp.port == 443").strip() == ""
    checks = ("-o", "tcp.check_checksum:TRUE", "-o", "ip.check_checksum:TRUE")
    bad = "_ws.malformed || tcp.checksum.status != 1 || ip.checksum.status != 1"
    assert _tshark("-r", str(cap), *checks, "-Y", bad).strip() == ""
    # everything the model sent is in the file: no gap before a segment, no ACK of an unseen one
    gaps = "tcp.analysis.lost_segment || tcp.analysis.ack_lost_segment"
    assert _tshark("-r", str(cap), "-Y", gaps).strip() == ""


@pytest.mark.interop
def test_tshark_decrypts_a_simulated_https_download(tmp_path: Path,
                                                    credentials: Credentials) -> None:
    cap, keys, _ = _https_download(tmp_path, credentials, LinkParams(10e6, 0.005), seed=0)
    _check_decrypts(cap, keys, "/page.txt")
    # a clean run: TCP analysis flags nothing (no loss, no gap, no retransmission)
    assert _tshark("-r", str(cap), "-Y", "tcp.analysis.flags").strip() == ""


@pytest.mark.interop
def test_tshark_counts_the_retransmissions_the_model_made(tmp_path: Path,
                                                          credentials: Credentials) -> None:
    cap, keys, d = _https_download(tmp_path, credentials, LinkParams(10e6, 0.005, loss=0.05),
                                   seed=7)
    _check_retransmissions(cap, d.conn, 443)
    _check_decrypts(cap, keys, "/page.txt")
    # plain bytes both ways; this seed has an ACK arrive after a timeout and cover a segment
    # the sender had rewound but not yet sent again: it is not a retransmission
    with PcapWriter(tmp_path / "bytes.pcap") as writer:
        conn, _, _ = _lossy_transfer(writer)
    _check_retransmissions(tmp_path / "bytes.pcap", conn, 8080)


def _check_retransmissions(cap: Path, conn: TcpConnection, port: int) -> None:
    up, down = conn.a.retransmits, conn.b.retransmits
    assert up > 0 and down > 0
    for field, expected in (("dstport", up), ("srcport", down)):
        rows = _tshark("-r", str(cap), "-Y", f"tcp.analysis.retransmission && tcp.{field} == {port}")
        assert len(rows.splitlines()) == expected, rows


@pytest.mark.interop
def test_tshark_decrypts_the_clients_view_of_an_ssl_splitting_download(tmp_path: Path) -> None:
    from sslsplit.model_driver import simulate_download

    lines: list[str] = []
    cap, keys = tmp_path / "split.pcap", tmp_path / "client.keys"
    d = simulate_download("split_cold", BODY, pcap=cap, keylog=lines.append, seed=3)
    keys.write_text("".join(line + "\n" for line in lines))
    assert d.body_ok and d.misses > 0
    # stream 0: client -- proxy (what the client sees); 1: proxy -- origin (stubs); 2: the
    # proxy's cache-miss fetches in plain HTTP on port 80
    _check_decrypts(cap, keys, "/file", stream=0)
    assert _tshark("-r", str(cap), "-Y", "tcp.analysis.flags").strip() == ""   # no loss here
    conversations = _tshark("-r", str(cap), "-q", "-z", "conv,tcp")
    assert "10.0.0.1:49152" in conversations and "10.0.0.3:80" in conversations


@pytest.mark.interop
def test_bench_drive_writes_its_check_run(tmp_path: Path, credentials: Credentials) -> None:
    """``bench_drive.py --pcap FILE --keylog FILE``: the function it calls, without timing."""
    spec = importlib.util.spec_from_file_location("bench_drive_under_test",
                                                  REPO / "benchmarks" / "bench_drive.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    lines: list[str] = []
    cap, keys = tmp_path / "get.pcap", tmp_path / "get.keys"
    bench.driver_run(credentials, BODY, seed=0, cpu=False, pcap=cap, keylog=lines.append)
    keys.write_text("".join(line + "\n" for line in lines))
    decrypted = _tshark("-r", str(cap), "-o", f"tls.keylog_file:{keys}", *HTTP_FIELDS)
    assert decrypted.split() == ["/file", "200"], decrypted
    assert _tshark("-r", str(cap), "-Y", "_ws.malformed || tcp.analysis.flags").strip() == ""
