"""An upload longer than the buddy's LAN record survives the owner's death (issue 22: "downloads
and uploads").

The buddy keeps the client's bytes it hears on the LAN until the owner has consumed and
mirrored them (:meth:`~sslacc_sim.aio.linux.sniff.FlowTracker.consumed`); it holds at most
32 MiB not yet consumed. Here curl uploads 40 MiB, rate-limited, and the owner is killed after
more than 32 MiB went out: the record must have forgotten what A had consumed, or B could not
restore the connection. The answer is the server's receipt (length and CRC-32), compared with
what curl sent. In network namespaces (root; never skipped)."""

from __future__ import annotations

import json
import subprocess
import time
import zlib
from contextlib import ExitStack
from pathlib import Path

import pytest

from sslacc_sim.aio.linux.cluster import start_nodes
from sslacc_sim.aio.linux.docroot import receipt
from sslacc_sim.aio.linux.failover import HOSTNAME, file_bytes, site_credentials, wait_line
from sslacc_sim.aio.linux.netns import VIP, Topology
from sslacc_sim.aio.linux.sniff import Flow

pytestmark = [pytest.mark.interop, pytest.mark.usefixtures("namespaces")]

_SIZE = 40 << 20
_RATE = 10 << 20  # bytes/s: 34 MiB are out when the owner dies, 3.4 s in


def test_the_record_forgets_what_the_owner_consumed() -> None:
    flow = Flow(("10.0.0.9", 4000), client_isn=99)
    flow.client_bytes(100, b"abcdef")
    flow.client_bytes(110, b"klm")  # a gap: held
    assert flow.trim(4) == 4 and flow.base == 4 and bytes(flow.data) == b"ef"
    flow.client_bytes(106, b"ghij")  # fills the gap, the held segment follows
    assert flow.end == 13 and flow.data_from(6) == b"ghijklm"
    assert flow.trim(2) == 0  # already forgotten
    with pytest.raises(ValueError, match="holds client bytes 4..13"):
        flow.data_from(3)
    with pytest.raises(ValueError, match="not from 14"):
        flow.data_from(14)
    flow.client_bytes(100 + 13, b"x" * (33 << 20))  # more than 32 MiB not consumed
    assert flow.overflow
    with pytest.raises(ValueError, match="overflowed"):
        flow.data_from(13)


def test_an_upload_longer_than_the_record_survives_a_kill(tmp_path: Path) -> None:
    docroot = tmp_path / "www"
    docroot.mkdir()
    upload = tmp_path / "upload.bin"
    body = file_bytes(_SIZE)
    upload.write_bytes(body)
    cert, key = site_credentials(tmp_path)
    with ExitStack() as stack:
        topo = stack.enter_context(Topology(tag="tlu"))
        procs = start_nodes(topo, stack, nodes=2, docroot=docroot, cert=cert, key=key)
        out = tmp_path / "receipt"
        curl = topo.popen("client", [
            "curl", "-sS", "--cacert", str(cert), "--resolve", f"{HOSTNAME}:443:{VIP}",
            "--limit-rate", str(_RATE), "--data-binary", f"@{upload}",
            "-H", "Content-Type: application/octet-stream", "-H", "Expect:",
            "-o", str(out), f"https://{HOSTNAME}/upload"], stderr=subprocess.PIPE)  # fmt: skip
        time.sleep((34 << 20) / _RATE)
        assert curl.poll() is None, "the upload ended before the kill"
        topo.cut("a")
        procs["a"].kill()
        procs["a"].wait(timeout=10)
        report = json.loads(wait_line(procs["b"], "RESTORED", 10).split("RESTORED", 1)[1])
        assert report["connections"] == 1 and report["failed"] == [], report
        assert curl.wait(timeout=60) == 0, curl.stderr and curl.stderr.read()
        assert out.read_bytes() == receipt(_SIZE, zlib.crc32(body))
