"""``python -m sslacc_sim.aio.linux.cluster``: up, serve to unmodified clients, kill, down,
cleanup (issue 22's one command to start, load and break a cluster).

In network namespaces (root and iproute2, as in CI; never skipped). A 3-node cluster serves a
file to curl and to ``openssl s_client``; the owner is killed (link cut, SIGKILL) in the
middle of a rate-limited curl download, which still ends byte-exact from B; ``down`` removes
everything, and ``cleanup`` removes what a SIGKILLed ``up`` left."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sslacc_sim.aio.linux.cluster import main
from sslacc_sim.aio.linux.failover import HOSTNAME, file_bytes, node_env, wait_line
from sslacc_sim.aio.linux.netns import PREFIX, VIP, list_leftovers

pytestmark = [pytest.mark.interop, pytest.mark.usefixtures("namespaces")]

_CLI = [sys.executable, "-m", "sslacc_sim.aio.linux.cluster"]


def _up(docroot: Path, tag: str, *extra: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([*_CLI, "up", "--docroot", str(docroot), "--tag", tag, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=node_env())  # fmt: skip
    threading.Thread(target=_relay_stderr, args=(proc, tag), daemon=True).start()
    try:
        line = wait_line(proc, f"cluster {tag} up", 90)
        fetch = wait_line(proc, "  fetch:", 5)
    except BaseException:
        proc.terminate()  # what it built goes with it
        proc.wait(timeout=30)
        raise
    nodes = extra[extra.index("--nodes") + 1] if "--nodes" in extra else "3"
    assert f"{nodes} nodes" in line
    return proc, fetch.split("--cacert ", 1)[1].split()[0]


def _relay_stderr(proc: subprocess.Popen[str], tag: str) -> None:
    """Copy what ``up`` and its nodes write to stderr into this test's stderr, which pytest
    shows with a failure (a pipe nobody reads would also stall the nodes once full)."""
    assert proc.stderr is not None
    for line in proc.stderr:
        sys.stderr.write(f"up {tag}: {line}")


def _curl(tag: str, cert: str, name: str, out: Path, *extra: str,
          env: dict[str, str] | None = None) -> subprocess.Popen[str]:  # fmt: skip
    return subprocess.Popen(["ip", "netns", "exec", f"{PREFIX}{tag}-client", "curl", "-sS",
                             "--cacert", cert, "--resolve", f"{HOSTNAME}:443:{VIP}", *extra,
                             "-o", str(out), f"https://{HOSTNAME}/{name}"],
                            stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*_CLI, *args], capture_output=True, text=True, timeout=60,
                          env=node_env())  # fmt: skip


def test_up_serves_survives_a_kill_and_down_removes_everything(tmp_path: Path) -> None:
    docroot = tmp_path / "www"
    docroot.mkdir()
    small, big = file_bytes(5000), file_bytes(12 << 20)
    (docroot / "small").write_bytes(small)
    (docroot / "big").write_bytes(big)
    proc, cert = _up(docroot, "tcu", "--keylog", str(tmp_path / "nodes.keys"))
    try:
        curl_keys = tmp_path / "curl.keys"
        got = _curl("tcu", cert, "small", tmp_path / "s",
                    env={**os.environ, "SSLKEYLOGFILE": str(curl_keys)})  # fmt: skip
        assert got.wait(timeout=30) == 0, got.stderr and got.stderr.read()
        assert (tmp_path / "s").read_bytes() == small
        # the nodes' key log holds the very line curl's OpenSSL wrote (Wireshark can decrypt)
        line = [x for x in curl_keys.read_text().splitlines() if x.startswith("CLIENT_RANDOM")]
        assert len(line) == 1 and line[0] in (tmp_path / "nodes.keys").read_text().splitlines()
        s_client = subprocess.run(
            ["ip", "netns", "exec", f"{PREFIX}tcu-client", "openssl", "s_client", "-connect",
             f"{VIP}:443", "-servername", HOSTNAME, "-CAfile", cert, "-verify_return_error",
             "-quiet"], input=f"GET /small HTTP/1.1\r\nHost: {HOSTNAME}\r\nConnection: close"
            "\r\n\r\n".encode(), capture_output=True, timeout=30)  # fmt: skip
        assert s_client.returncode == 0 and s_client.stdout.endswith(small)
        download = _curl("tcu", cert, "big", tmp_path / "b", "--limit-rate", "4M")
        time.sleep(1.0)  # about a third of the file is through
        killed = _cli("kill", "--tag", "tcu")
        assert killed.returncode == 0 and "SIGKILL" in killed.stdout, killed.stderr
        assert download.wait(timeout=60) == 0, download.stderr and download.stderr.read()
        assert hashlib.sha256((tmp_path / "b").read_bytes()).digest() == \
            hashlib.sha256(big).digest()
        wait_line(proc, "node b: RESTORED", 10)  # B took it over (A is dead: it was not A)
        done = _cli("down", "--tag", "tcu")
        assert done.returncode == 0 and "down" in done.stdout, done.stderr
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:  # a failed check above: `up` still removes what it made
            proc.terminate()
            proc.wait(timeout=30)
    assert list_leftovers(f"{PREFIX}tcu-") == []


def test_a_written_response_is_handed_off_only_once_the_client_has_it(tmp_path: Path) -> None:
    """A slow reader: much of the 3 MiB response waits in the kernel's queues when the owner is
    killed. Whatever the client's kernel had not acknowledged, the buddy must still hold
    (``done`` waits for ``SIOCOUTQ`` to reach 0) and send: the download ends byte-exact. Which
    side of that line the kill lands on depends on the buffers' autotuning, so this test catches
    an early ``done`` only sometimes; the small seeded campaign catches it every time."""
    docroot = tmp_path / "www"
    docroot.mkdir()
    body = file_bytes(3 << 20)
    (docroot / "slow").write_bytes(body)
    proc, cert = _up(docroot, "tcs", "--nodes", "2")
    try:
        download = _curl("tcs", cert, "slow", tmp_path / "out", "--limit-rate", "512K")
        time.sleep(3.0)  # the client has about half; everything else waits in the queues
        killed = _cli("kill", "--tag", "tcs")
        assert killed.returncode == 0, killed.stderr
        assert download.wait(timeout=60) == 0, download.stderr and download.stderr.read()
        assert (tmp_path / "out").read_bytes() == body
        # B answered the kill (whether the connection was still mirrored then depends on how
        # much the client's kernel had buffered: with all of it acknowledged, A was done)
        restored = json.loads(wait_line(proc, "node b: RESTORED", 10).split("RESTORED", 1)[1])
        assert restored["reason"]
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)
    assert list_leftovers(f"{PREFIX}tcs-") == []


def test_up_with_the_bucket_layout_serves_from_every_member(tmp_path: Path) -> None:
    """``--layout buckets``: three members, each serving its buckets; twelve downloads on
    new connections all arrive whole, and ``down`` removes everything."""
    docroot = tmp_path / "www"
    docroot.mkdir()
    body = file_bytes(100_000)
    (docroot / "f").write_bytes(body)
    proc, cert = _up(docroot, "tcb", "--layout", "buckets", "--nodes", "3")
    try:
        for i in range(12):
            out = tmp_path / f"out{i}"
            curl = _curl("tcb", cert, "f", out)
            assert curl.wait(timeout=30) == 0, curl.stderr and curl.stderr.read()
            assert out.read_bytes() == body
        down = _cli("down", "--tag", "tcb")
        assert down.returncode == 0, down.stderr
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)
    assert list_leftovers(f"{PREFIX}tcb-") == []


def test_join_grows_a_bucket_cluster_while_a_download_runs(tmp_path: Path) -> None:
    """``up --layout buckets --nodes 2 --spares 1``, a rate-limited download, then ``join``:
    node C joins (``up`` says so), the download arrives whole, and afterwards twelve new
    connections are served (C's buckets among them). C is killed, A takes it over, and a
    second ``join`` brings C's node back under a fresh id: twelve more are served. ``down``
    removes everything."""
    docroot = tmp_path / "www"
    docroot.mkdir()
    body = file_bytes(2_000_000)
    (docroot / "f").write_bytes(body)
    proc, cert = _up(docroot, "tcj", "--layout", "buckets", "--nodes", "2", "--spares", "1")
    try:
        curl = _curl("tcj", cert, "f", tmp_path / "long", "--limit-rate", "1M")
        time.sleep(0.5)
        asked = _cli("join", "--tag", "tcj")
        assert asked.returncode == 0 and "next spare node" in asked.stdout, asked.stderr
        wait_line(proc, "node c: joined, ready", 40)
        assert curl.wait(timeout=30) == 0, curl.stderr and curl.stderr.read()
        assert (tmp_path / "long").read_bytes() == body
        for i in range(12):
            out = tmp_path / f"out{i}"
            assert _curl("tcj", cert, "f", out).wait(timeout=30) == 0
            assert out.read_bytes() == body
        again = _cli("join", "--tag", "tcj")  # no spare left: up says so, nothing breaks
        assert again.returncode == 0
        wait_line(proc, "join: no spare node left and no member has died", 10)
        # C is killed: A takes it over; C's node joins again under a fresh id
        assert _cli("kill", "--tag", "tcj", "--node", "c").returncode == 0
        wait_line(proc, "node a: RESTORED", 20)  # C was killed before: its member is gone
        assert _cli("join", "--tag", "tcj").returncode == 0
        wait_line(proc, "node c: joining as member 3", 10)
        wait_line(proc, "node c: joined, ready", 40)
        for i in range(12):
            out = tmp_path / f"again{i}"
            assert _curl("tcj", cert, "f", out).wait(timeout=30) == 0
            assert out.read_bytes() == body
        assert _cli("down", "--tag", "tcj").returncode == 0
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)
    assert list_leftovers(f"{PREFIX}tcj-") == []


def test_cleanup_removes_what_a_killed_up_left(tmp_path: Path) -> None:
    proc, _ = _up(tmp_path, "tck")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert len(list_leftovers(f"{PREFIX}tck-")) == 5
    done = _cli("cleanup")
    assert done.returncode == 0 and f"{PREFIX}tck-a" in done.stdout, done.stderr
    assert list_leftovers(f"{PREFIX}tck-") == []


def test_commands_fail_in_one_line_without_a_cluster(tmp_path: Path) -> None:
    for args in (["kill", "--tag", "nosuch"], ["down", "--tag", "nosuch"]):
        out = _cli(*args)
        assert out.returncode == 1 and "no cluster 'nosuch'" in out.stderr
        assert "Traceback" not in out.stderr
    for bad in (["--docroot", str(tmp_path / "absent")], ["--docroot", str(tmp_path), "--tag",
                "bad-tag"], ["--docroot", str(tmp_path), "--nodes", "7"],
                ["--docroot", str(tmp_path), "--layout", "ring"]):  # fmt: skip
        with pytest.raises(SystemExit) as exit_:
            main(["up", *bad])
        assert exit_.value.code == 2
    assert main(["up", "--docroot", str(tmp_path), "--cert", "x.pem"]) == 2
    assert main(["up", "--docroot", str(tmp_path), "--nodes", "1"]) == 2  # a chain of one
    assert main(["up", "--docroot", str(tmp_path), "--nodes", "4"]) == 2  # a chain of four
    assert os.geteuid() == 0  # the namespace commands above ran as root (the fixture checks)
