"""What cluster-then-commit costs on Linux: the mirrored pair against the same server alone.

The real SSLACC pair (:mod:`sslacc_sim.aio.linux`: the owner mirrors every connection to its
buddy before any byte that depends on it leaves) against the same node program with
``--standalone`` (no buddy: no mirroring, no keepalive, no lease), in the same namespaces, in
interleaved rounds. A load generator in the client's namespace (Python's ``ssl``, standard
library only, one thread per connection) measures:

``MB/s``
    ``--streams`` threads downloading a 16 MiB file, each again and again for ``--seconds``
    (one download lasts about half a second: a round of one each was too short to tell the
    pair from the node alone), total response bytes over the wall time of the slowest
    (goodput: pair / standalone, the issue's target is >= 0.9). The generator reads into one
    buffer (since 9f4ce57): a fresh 128 KiB object per read cost an mmap and munmap of glibc's
    for every 16 KiB record, CPU the two cores' other processes then lacked;
``handshakes/s``
    ``--streams`` threads fetching a 1 KiB file on a new TLS connection each (full RSA-2048
    handshake, no resumption) for ``--seconds``; completed requests per second;
``replication bytes per payload byte``
    bytes the owner sent on the cluster links (``mir0``'s transmit counter) during the download
    round, over the response bytes the clients received.

Every response is checked (status 200 and its length); a round with an error stops the
benchmark. Each figure is ``median (min–max)`` over ``--repeats`` rounds (default 5), and the
ratios are formed round by round.

The same load runs against the **bucket layout** (:mod:`sslacc_sim.aio.linux.member`) with 1, 2
and 3 members: every member serves the connections of its buckets, mirrored to the next member
on the cluster LAN (replication: the bytes all members sent on ``cl0``). One member owns every
bucket and mirrors nothing. The machine has two cores, which three members and the load
generator share: the ratio says what the layout gains here, not what three machines would.
Needs root and iproute2; without them it stops with one line and exit status 1.

Usage::

    python benchmarks/bench_sslacc_cluster.py --json results/benchmarks/sslacc_cluster.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks._common import (  # noqa: E402
    Repeated,
    add_repeats_option,
    fail,
    repo_env,
    require_c_extension,
    rounds,
    write_json,
)
from sslacc_sim.aio.linux.threads import NODE_NICE  # noqa: E402

BENCH = "bench_sslacc_cluster"
#: What each round measures: the node alone, the pair (chain layout: one owner and its buddy),
#: and the bucket layout with 1, 2 and 3 members (every member serves its buckets).
WHO = ("standalone", "pair", "members1", "members2", "members3")
BIG, SMALL = 16 << 20, 1 << 10

#: The load generator runs at the nodes' priority (``threads.NODE_NICE``; every node program,
#: the node alone included, runs its threads there): on two shared cores neither the clients
#: nor the servers are favoured, and the ratio measures what mirroring costs, not the
#: scheduler's choice. (The fault campaign favours the nodes instead, so that its co-located
#: clients cannot starve a healthy node into a false death; favouring them here as well cut
#: the pair's goodput from 0.93 to 0.89 on the old half-second rounds, docs/sslacc-cluster.md.)
_AS_NODES = ["nice", "-n", str(NODE_NICE)]

#: The load generator: standard library only, run with ``python -I -c`` in the client's
#: namespace. argv: mode, host, address, cafile, path, expected length, threads, seconds.
LOADER = r"""
import json, socket, ssl, sys, threading, time
mode, host, addr, cafile, path = sys.argv[1:6]
length, threads, seconds = int(sys.argv[6]), int(sys.argv[7]), float(sys.argv[8])
ctx = ssl.create_default_context(cafile=cafile)
ctx.maximum_version = ssl.TLSVersion.TLSv1_2
ctx.options |= ssl.OP_NO_TICKET
ctx.set_ciphers("AES128-SHA")
req = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
def fetch():
    with socket.create_connection((addr, 443), timeout=60) as raw:
        with ctx.wrap_socket(raw, server_hostname=host) as s:
            s.sendall(req)
            got, buf = bytearray(), bytearray(1 << 17)
            view = memoryview(buf)
            while n := s.recv_into(buf):  # one buffer: a fresh 128 KiB per recv is an mmap
                got += view[:n]
    head, _, body = bytes(got).partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200") or len(body) != length:
        raise RuntimeError(f"bad response: {head[:40]!r}, {len(body)} of {length} bytes")
    return len(got)
done, errors, total = [0], [], [0]
lock = threading.Lock()
def work():
    end = time.monotonic() + seconds
    while True:
        try:
            n = fetch()
        except Exception as exc:
            errors.append(repr(exc)); return
        with lock:
            done[0] += 1; total[0] += n
        if time.monotonic() >= end:
            return
t0 = time.monotonic()
ts = [threading.Thread(target=work) for _ in range(threads)]
for t in ts: t.start()
for t in ts: t.join()
print(json.dumps({"requests": done[0], "bytes": total[0], "wall_s": time.monotonic() - t0,
                  "errors": errors}))
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"python benchmarks/{BENCH}.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_repeats_option(p)
    p.add_argument("--streams", type=int, default=4, help="concurrent connections (default 4)")
    p.add_argument("--seconds", type=float, default=3.0,
                   help="length of a round in seconds (default 3)")
    p.add_argument("--json", type=Path, help="write the results here")
    return p


class _Lab:
    """The pair's namespaces, the files and the certificate; one node set per measurement."""

    def __init__(self, work: Path) -> None:
        from sslacc_sim.aio.linux.failover import HOSTNAME, file_bytes, site_credentials
        from sslacc_sim.aio.linux.netns import MIRROR_ADDRESSES, VIP, Topology

        self.work, self.host, self.vip = work, HOSTNAME, VIP
        root = work / "docroot"
        root.mkdir()
        (root / "big").write_bytes(file_bytes(BIG))
        (root / "small").write_bytes(file_bytes(SMALL))
        self.cert, key = site_credentials(work)
        self.topo = Topology(tag="bench")  # fresh namespaces for every measurement (measure)
        self.ring = Topology(tag="benchb", shared_vip=True)  # the bucket layout's
        self.root, self.key = root, key
        self.args = ["--docroot", str(root), "--vip", VIP, "--mirror", MIRROR_ADDRESSES["b"],
                     "--cert", str(self.cert), "--key", str(key)]  # fmt: skip

    def _nodes(self, pair: bool) -> list[subprocess.Popen[str]]:
        from sslacc_sim.aio.linux.failover import wait_line

        node = [sys.executable, "-m", "sslacc_sim.aio.linux.node"]
        pipes: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.DEVNULL,
                                 "env": repo_env()}  # fmt: skip
        procs = []
        if pair:
            procs.append(self.topo.popen("b", [*node, "backup", *self.args,
                                               *self.topo.fence_args("a")], **pipes))  # fmt: skip
            wait_line(procs[-1], "ready", 30)
        solo = [] if pair else ["--standalone"]
        procs.append(self.topo.popen("a", [*node, "primary", *self.args, *solo], **pipes))
        wait_line(procs[-1], "ready", 30)
        return procs

    def _mir_tx(self) -> int:
        out = self.topo.run("a", ["cat", "/sys/class/net/mir0/statistics/tx_bytes"], check=True)
        return int(out.stdout)

    def _cl_tx(self, members: int) -> int:
        return sum(int(self.ring.run(n, ["cat", "/sys/class/net/cl0/statistics/tx_bytes"],
                                     check=True).stdout)
                   for n in ["a", "b", "c"][:members])  # fmt: skip

    def measure(self, who: str, mode: str, streams: int, seconds: float) -> dict[str, float]:
        """One round: ``who`` is ``standalone``, ``pair`` or ``members<N>`` (the bucket
        layout with N members, :mod:`sslacc_sim.aio.linux.member`)."""
        if who.startswith("members"):
            with self.ring, ExitStack() as stack:
                from sslacc_sim.aio.linux.cluster import start_members

                members = int(who.removeprefix("members"))
                procs = list(start_members(self.ring, stack, members=members, docroot=self.root,
                                           cert=self.cert, key=self.key).values())  # fmt: skip
                return self._load(self.ring, procs, mode, streams, seconds,
                                  lambda: self._cl_tx(members))  # fmt: skip
        with self.topo:  # no socket of an earlier measurement holds the ports
            procs = self._nodes(who == "pair")
            return self._load(self.topo, procs, mode, streams, seconds, self._mir_tx)

    def _load(self, topo: Any, procs: list[subprocess.Popen[str]], mode: str, streams: int,
              seconds: float, cluster_tx: Any) -> dict[str, float]:  # fmt: skip
        try:
            path, length = ("/big", BIG) if mode == "download" else ("/small", SMALL)
            tx0 = cluster_tx()
            run = topo.run("client", [*_AS_NODES, sys.executable, "-I", "-c", LOADER, mode,
                                      self.host, self.vip, str(self.cert), path, str(length),
                                      str(streams), str(seconds)], timeout=300)  # fmt: skip
            tx = cluster_tx() - tx0
        finally:
            for p in procs:
                p.kill()
                p.wait()
        if run.returncode != 0:
            fail(BENCH, f"the load generator failed: {run.stderr.strip()[-300:]}")
        got = json.loads(run.stdout)
        if got["errors"]:
            fail(BENCH, f"{len(got['errors'])} requests failed: {got['errors'][0]}")
        return {"rate": (got["bytes"] / 1e6 if mode == "download" else got["requests"])
                / got["wall_s"], "replication": tx / got["bytes"]}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from testbed.linux.netns import NamespacesUnavailable, check_available

    try:
        check_available()
    except NamespacesUnavailable as exc:
        fail(BENCH, str(exc))
    require_c_extension(BENCH)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sacc-bench-") as tmp:
        lab = _Lab(Path(tmp))
        steps = {f"{who}/{mode}": (lambda w=who, m=mode:
                                   lab.measure(w, m, args.streams, args.seconds))
                 for mode in ("download", "handshakes") for who in WHO}
        got = rounds(steps, args.repeats)
    out: dict[str, Any] = {"streams": args.streams, "seconds": args.seconds, "file_bytes": BIG}
    for mode, unit in (("download", "MB_per_s"), ("handshakes", "handshakes_per_s")):
        solo = [r["rate"] for r in got[f"standalone/{mode}"]]
        pair = [r["rate"] for r in got[f"pair/{mode}"]]
        out[mode] = {
            f"standalone_{unit}": Repeated.of(solo).to_json(),
            f"pair_{unit}": Repeated.of(pair).to_json(),
            "pair_over_standalone": Repeated.of([p / s for p, s in zip(pair, solo,
                                                                       strict=True)]).to_json(),
            "replication_bytes_per_payload_byte": Repeated.of(
                [r["replication"] for r in got[f"pair/{mode}"]]).to_json(),
        }  # fmt: skip
        print(f"{mode}: standalone {Repeated.of(solo).text('.1f')} / pair "
              f"{Repeated.of(pair).text('.1f')} {unit}; pair/standalone "
              f"{Repeated.of([p / s for p, s in zip(pair, solo, strict=True)]).text('.3f')}")
        for n in (1, 2, 3):
            ring = [r["rate"] for r in got[f"members{n}/{mode}"]]
            ratio = [m / s for m, s in zip(ring, solo, strict=True)]
            out[mode][f"members{n}_{unit}"] = Repeated.of(ring).to_json()
            out[mode][f"members{n}_over_standalone"] = Repeated.of(ratio).to_json()
            out[mode][f"members{n}_replication_bytes_per_payload_byte"] = Repeated.of(
                [r["replication"] for r in got[f"members{n}/{mode}"]]).to_json()
            print(f"{mode}: bucket layout, {n} member(s) {Repeated.of(ring).text('.1f')} {unit}; "
                  f"/ standalone {Repeated.of(ratio).text('.3f')}")
    out["goodput_target"] = 0.9
    out["goodput_target_met"] = out["download"]["pair_over_standalone"]["median"] >= 0.9
    if args.json:
        write_json(args.json, out, repeats=args.repeats, wall_s=time.monotonic() - start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
