"""Packet captures on the link testbed (testbed.linux.capture): complete, bounded, never left behind.

A real download (``python -m http.server`` in ``origin``, curl in ``client``) crosses a shaped
link with the delay relay while tcpdump records the client's veth; ``tshark`` then reads the
pcap: one TCP conversation, the payload bytes each way equal to what curl counted (body plus
HTTP header down, request up; retransmissions not counted), nothing malformed. Other tests:
a body that raises leaves no tcpdump and a valid file, the size cap stops tcpdump, the command
line's ``run --capture``, and :func:`testbed.linux.linkruns.run_capture` off and on.

The tests in namespaces need root, iproute2, ``/dev/net/tun``, tcpdump and tshark (CI has
them); they are never skipped: the ``netns_available`` fixture fails with the reason.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.linux.capture import FULL, HEADERS, Capture, CaptureFailed
from testbed.linux.linkruns import run_capture, start_listening, stop
from testbed.linux.linktestbed import (
    ADDRESSES,
    LAN,
    LinkShape,
    LinkTestbed,
    Profile,
    check_available,
    main,
)

_SHAPE = LinkShape(4e6, 0.005)
#: 4 Mbit/s and 5 ms on every hop and direction: tbf shapes, the delay relay runs.
SHAPED = Profile("capture-4m", _SHAPE, _SHAPE, _SHAPE, _SHAPE)
_PORT = 8080
_SIZE = 300_000


@pytest.fixture
def netns_available() -> None:
    """Fail (never skip) with the one-line reason when namespaces or the tools are missing."""
    check_available()
    for tool in ("tcpdump", "tshark"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"{tool} not found on PATH")


needs_netns = pytest.mark.usefixtures("netns_available")


def _tshark(pcap: Path, *args: str) -> str:
    out = subprocess.run(["tshark", "-n", "-r", str(pcap), *args], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _payload(pcap: Path, src: str) -> int:
    """TCP payload bytes ``src`` sent, retransmissions left out."""
    out = _tshark(pcap, "-Y", f"ip.src == {src} && !tcp.analysis.retransmission", "-T",
                  "fields", "-e", "tcp.len")
    return sum(int(x) for x in out.split())


def _tcpdumps(tb: LinkTestbed, node: str) -> list[str]:
    """Pids of tcpdump processes in ``node``."""
    pids = subprocess.run(["ip", "netns", "pids", tb.ns(node)], capture_output=True,
                          text=True).stdout.split()
    return [p for p in pids if Path(f"/proc/{p}/comm").exists()
            and Path(f"/proc/{p}/comm").read_text().strip() == "tcpdump"]


def _serve(tb: LinkTestbed, root: Path) -> subprocess.Popen[str]:
    root.mkdir()
    (root / "blob.bin").write_bytes(random.Random(0).randbytes(_SIZE))
    return start_listening(tb, "origin", [sys.executable, "-u", "-m", "http.server", "--bind",
                                          ADDRESSES["origin"], str(_PORT), "-d", str(root)],
                           "Serving HTTP", timeout=60)


# --- no root needed -----------------------------------------------------------------------------


def test_capture_arguments_are_bounded() -> None:
    cap = Capture(LinkTestbed(LAN), "client", "veth0", "x.pcap")
    argv = cap.argv()
    assert argv[:3] == ["tcpdump", "-i", "veth0"] and "-U" in argv and "--immediate-mode" in argv
    assert argv[argv.index("-s") + 1] == str(HEADERS) and argv[argv.index("-Z") + 1] == "root"
    assert Path(argv[argv.index("-w") + 1]).is_absolute()
    with pytest.raises(ValueError, match="snaplen"):
        Capture(LinkTestbed(LAN), "client", "veth0", "x.pcap", snaplen=FULL + 1)
    with pytest.raises(ValueError, match="max_bytes"):
        Capture(LinkTestbed(LAN), "client", "veth0", "x.pcap", max_bytes=10)
    with pytest.raises(ValueError, match="node"):
        LinkTestbed(LAN).capture("router", "veth0", "x.pcap")


# --- in namespaces ------------------------------------------------------------------------------


@needs_netns
def test_capture_of_a_shaped_download_matches_what_curl_counted(tmp_path: Path) -> None:
    pcap = tmp_path / "captures" / "download.pcap"
    with LinkTestbed(SHAPED) as tb:
        server = _serve(tb, tmp_path / "site")
        try:
            with tb.capture("client", "veth0", pcap) as cap:
                out = tb.run("client", [
                    "curl", "-s", "-S", "-o", "/dev/null", "-w",
                    "%{size_download} %{size_header} %{size_request}",
                    f"http://{ADDRESSES['origin']}:{_PORT}/blob.bin"], timeout=120)
        finally:
            stop(server)
        assert not _tcpdumps(tb, "client")
    assert out.returncode == 0, out.stderr
    body, header, request = (int(x) for x in out.stdout.split())
    assert body == _SIZE
    assert cap.captured is not None and cap.captured > _SIZE // 1500
    assert cap.dropped == 0 and not cap.truncated
    convs = [ln for ln in _tshark(pcap, "-q", "-z", "conv,tcp").splitlines() if "<->" in ln]
    assert len(convs) == 1
    assert ADDRESSES["client"] in convs[0] and f"{ADDRESSES['origin']}:{_PORT}" in convs[0]
    assert _payload(pcap, ADDRESSES["origin"]) == body + header
    assert _payload(pcap, ADDRESSES["client"]) == request
    assert _tshark(pcap, "-Y", "_ws.malformed").strip() == ""


@needs_netns
def test_an_exception_or_a_bad_device_leaves_no_tcpdump_and_a_valid_pcap(tmp_path: Path) -> None:
    pcap = tmp_path / "failed.pcap"
    with LinkTestbed(LAN) as tb:
        with pytest.raises(RuntimeError, match="the run failed"):
            with tb.capture("client", "veth0", pcap) as cap:
                assert cap._proc is not None
                pid = cap._proc.pid
                assert _tcpdumps(tb, "client") == [str(pid)]
                tb.run("client", ["curl", "-s", "--max-time", "5",
                                  f"http://{ADDRESSES['origin']}:9/"])  # refused: SYN, RST
                raise RuntimeError("the run failed")
        assert not _tcpdumps(tb, "client")
        assert not os.path.exists(f"/proc/{pid}")
        with pytest.raises(CaptureFailed, match="nosuchdev"):
            with tb.capture("client", "nosuchdev", tmp_path / "never.pcap"):
                raise AssertionError("the body must not run")
        assert not _tcpdumps(tb, "client")
    assert cap.captured is not None and cap.captured >= 2
    lines = _tshark(pcap, "-Y", "tcp").splitlines()
    assert len(lines) >= 2 and any("RST" in ln for ln in lines)
    assert _tshark(pcap, "-Y", "_ws.malformed").strip() == ""


@needs_netns
def test_the_size_cap_stops_tcpdump_and_keeps_the_file_valid(tmp_path: Path) -> None:
    pcap = tmp_path / "capped.pcap"
    with LinkTestbed(LAN) as tb:
        server = _serve(tb, tmp_path / "site")
        try:
            with tb.capture("client", "veth0", pcap, snaplen=FULL, max_bytes=64 * 1024) as cap:
                for _ in range(5):
                    tb.run("client", ["curl", "-s", "-o", "/dev/null",
                                      f"http://{ADDRESSES['origin']}:{_PORT}/blob.bin"])
        finally:
            stop(server)
        assert not _tcpdumps(tb, "client")
    assert cap.truncated
    assert pcap.stat().st_size < 5 * _SIZE  # stopped early: the downloads were 1.5 MB
    assert _tshark(pcap, "-Y", "tcp").strip()


@needs_netns
def test_run_capture_is_off_by_default_and_the_command_line_captures(tmp_path: Path) -> None:
    with LinkTestbed(LAN) as tb:
        with run_capture(tb, None, "nothing") as cap:
            assert cap is None and not _tcpdumps(tb, "client")
        with run_capture(tb, tmp_path / "captures", "run1") as cap:
            assert cap is not None and _tcpdumps(tb, "client")
    assert (tmp_path / "captures" / "run1.pcap").exists()
    pcap = tmp_path / "cli.pcap"
    code = main(["run", "--capture", str(pcap), "--", "curl", "-s", "--max-time", "5",
                 f"http://{ADDRESSES['origin']}:9/"])
    assert code != 0  # curl: connection refused, but the packets are there
    assert any("RST" in ln for ln in _tshark(pcap, "-Y", "tcp").splitlines())
