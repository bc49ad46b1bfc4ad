"""Measured CPU costs of the cluster's own code: :func:`measure_cluster_costs`.

Principle 3 of the testbed (measured, then modelled), as :func:`netsim.cpu.measure_costs` does
for the TLS operations: the model's per-message costs come from timing the real code of this
package on this machine, best of N runs.  Each timed operation is what one node does for one
cluster message of a kind, on a real ``tls12`` connection that has just finished an in-memory
RSA handshake:

* **full update**, built: :func:`tls12.state.export_connection` of the server after the
  client's Finished (the largest handshake update, ~4 KB), the :class:`~sslacc_sim.checkpoint.
  Checkpoint` around it, :meth:`~sslacc_sim.checkpoint.Checkpoint.encode` and an HMAC-SHA256
  with the cluster key (the MAC that ``ClusterParams.msg_header`` counts); parsed: the MAC
  checked and :meth:`~sslacc_sim.checkpoint.Checkpoint.decode`;
* **compact update** (a Progress delta, section 5.5): ``export_progress`` plus one pre-written
  record size, encoded and MACed; parsed: MAC and decode;
* **session replication** (:mod:`sslacc_sim.sessions`): :func:`~sslacc_sim.sessions.
  encode_session` and the MAC; parsed: MAC and :func:`~sslacc_sim.sessions.decode_session`;
* **state export / import**: ``export_connection`` alone and :func:`tls12.state.
  import_connection` into a fresh ``ServerConnection`` (what a takeover does once);
* **handshake delta** (:mod:`sslacc_sim.delta`): the chain a connection's owner and mirror
  run, a :class:`~sslacc_sim.delta.DeltaWriter` (and a :class:`~sslacc_sim.delta.DeltaReader`)
  made from the state after the ClientHello, then the deltas to the states after the
  ClientKeyExchange, ChangeCipherSpec and Finished records; the mean per delta (the first
  one parses the base); the rest of a delta update (encode, MAC, decode) costs what a
  message of its size costs.

**The interrupt.**  A simulation cannot measure the interrupt a received cluster message
raises.  ``interrupt`` here is a measured stand-in: the time for Python to send one 64-byte
UDP datagram to a second socket on the loopback interface and receive it (``sendto`` +
``recvfrom``: two system calls and the kernel's delivery path, which on a real NIC is where
the interrupt and its softirq run).  It is the per-message kernel cost on this machine, an
upper bound of the interrupt alone; the paper's profile (section 5.8) attributes most of the
per-message overhead to exactly this path.  ``measure_cluster_costs(interrupt=...)`` takes a
named modelled value instead.

This module reads the clock and opens sockets, so it is an excluded adapter of the layering
rules (``tests/test_layering.py``); the model reads only the resulting
:class:`~sslacc_sim.params.ClusterCosts` (:meth:`~sslacc_sim.params.ClusterParams.measured`).
Re-run with ``python -m sslacc_sim.measure`` (``--full`` for more repetitions); it prints the
table as JSON.  ``--json PATH`` writes it to a file instead, with its provenance (the
command, when, on which machine, at which git revision): ``make reproduce`` runs
``python -m sslacc_sim.measure --json results/sslacc/cluster_costs.json`` before the
notebooks, and Figures 28/29 read that file (:func:`sslacc_sim.params.cluster_costs`).
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import json
import os
import platform
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from netsim.cpu import best_time
from tls12 import ClientConfig, ClientConnection, ServerConfig, ServerConnection
from tls12.state import export_connection, import_connection
from tls12.suites import CipherSuite
from tls12.testing import credentials, seeded_rng

from ..checkpoint import Checkpoint
from ..delta import DeltaReader, DeltaWriter
from ..params import ClusterCosts
from ..sessionwire import decode_session, encode_session
from ..state import CheckpointLabel

__all__ = ["costs_document", "measure_cluster_costs", "udp_loopback_round", "write_costs"]

_KEY = b"cluster key: HMAC-SHA256 over every cluster message"


def _mac(msg: bytes) -> bytes:
    return msg + hmac.new(_KEY, msg, hashlib.sha256).digest()


def _unmac(wire: bytes) -> bytes:
    msg, tag = wire[:-32], wire[-32:]
    if not hmac.compare_digest(tag, hmac.new(_KEY, msg, hashlib.sha256).digest()):
        raise ValueError("cluster message MAC mismatch")
    return msg


def _established() -> tuple[ServerConnection, ServerConfig, bytes, list[bytes]]:
    """A server right after the client's Finished (full state) and then established; last,
    its exported state after each client record of the handshake (the relay's checkpoints:
    ClientHello, ClientKeyExchange, ChangeCipherSpec, Finished)."""
    suites = (CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA,)
    config = ServerConfig(credentials=credentials(), cipher_suites=suites,
                          rng=seeded_rng("measure/server"))
    server = ServerConnection(config)
    client = ClientConnection(ClientConfig(rng=seeded_rng("measure/client"), cipher_suites=suites))
    full = b""
    states: list[bytes] = []
    for _ in range(4):
        server.receive_data(client.data_to_send(), max_records=0)     # buffer, then one
        while server.receive_record() is not None:                     # record at a time
            if not full:
                states.append(export_connection(server))
        if server.handshake_complete and not full:
            full = export_connection(server)     # Finished read, server's flight still queued
        client.receive_data(server.data_to_send())
    if not (client.handshake_complete and server.handshake_complete and full):
        raise RuntimeError("in-memory handshake did not complete")
    return server, config, full, states


def udp_loopback_round(repeat: int, number: int) -> float:
    """Seconds for one 64-byte UDP datagram sent and received on loopback (best of N)."""
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        rx.bind(("127.0.0.1", 0))
        address = rx.getsockname()
        payload = bytes(64)

        def one() -> None:
            tx.sendto(payload, address)
            rx.recv(2048)

        one()
        return best_time(one, repeat, number)
    finally:
        rx.close()
        tx.close()


def _delta_costs(states: list[bytes], timed: Callable[[Callable[[], object]], float]) -> dict[str, Any]:
    """Make and apply the chain of handshake deltas (mean per delta) and their mean size."""
    writer = DeltaWriter(states[0])
    deltas = [writer.delta(s) for s in states[1:]]

    def delta_chain() -> None:
        w = DeltaWriter(states[0])
        for s in states[1:]:
            w.delta(s)

    def apply_chain() -> None:
        r = DeltaReader(states[0])
        for d in deltas:
            r.apply(d)

    return {"delta_make": timed(delta_chain) / len(deltas),
            "delta_apply": timed(apply_chain) / len(deltas),
            "delta_bytes": round(sum(map(len, deltas)) / len(deltas))}


def _update_costs(server: ServerConnection,
                  timed: Callable[[Callable[[], object], int], float]) -> dict[str, Any]:
    """Build and parse a full update, a compact one and a session replication, MAC included."""

    def build_full() -> bytes:
        state = export_connection(server)
        return _mac(Checkpoint(0, 3, CheckpointLabel.FINISHED, 310, 1200, 0, 0, state).encode())

    full_wire = build_full()

    def compact() -> Checkpoint:
        return Checkpoint(0, 9, CheckpointLabel.RESPONSE, 400, 5000, 80, 16384, b"",
                          progress=server.export_progress().to_bytes(), rewind=1,
                          sizes=(16384,), plain_start=16384)

    compact_wire = _mac(compact().encode())
    session = server.session
    if session is None:
        raise RuntimeError("the handshake made no session")
    session_wire = _mac(encode_session(session))
    return {
        "full_build": timed(build_full, 1),
        "full_parse": timed(lambda: Checkpoint.decode(_unmac(full_wire)), 1),
        "full_bytes": len(full_wire),
        "compact_build": timed(lambda: _mac(compact().encode()), 4),
        "compact_parse": timed(lambda: Checkpoint.decode(_unmac(compact_wire)), 4),
        "compact_bytes": len(compact_wire),
        "session_build": timed(lambda: _mac(encode_session(session)), 4),
        "session_parse": timed(lambda: decode_session(_unmac(session_wire)), 4),
        "session_bytes": len(session_wire),
    }


def measure_cluster_costs(quick: bool = True, interrupt: float | None = None) -> ClusterCosts:
    """Time the cluster's message handling with the real code (see the module docstring).

    ``quick`` takes fewer repetitions (well under a second).  ``interrupt``: a modelled
    per-message interrupt cost in seconds instead of the loopback measurement.
    """
    repeat, number = (5, 20) if quick else (9, 200)
    server, config, full_state, states = _established()

    def timed(fn: Callable[[], object], scale: int = 1) -> float:
        return best_time(fn, repeat, number * scale)

    def import_state() -> None:
        import_connection(ServerConnection(config), full_state)

    return ClusterCosts(
        **_update_costs(server, timed),
        export_state=timed(lambda: export_connection(server)),
        import_state=timed(import_state),
        **_delta_costs(states, timed),
        interrupt=(udp_loopback_round(repeat, number * 4) if interrupt is None
                   else interrupt),
        source=("measured" if interrupt is None else "measured, interrupt modelled")
        + f" ({'quick' if quick else 'full'}, {time.strftime('%Y-%m-%d')})",
    )


def costs_document(costs: ClusterCosts, command: str, quick: bool) -> dict[str, Any]:
    """The JSON of a costs file: ``costs`` (the table), ``fit_msg_cpu`` /
    ``fit_msg_cpu_per_byte`` (its line) and ``provenance`` -- ``command``, ``written_utc``,
    ``machine`` (platform and CPU count), ``git_revision`` and ``quick``."""
    from testbed.results import git_revision

    fixed, per_byte = costs.message_line()
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    return {"costs": costs.to_dict(), "fit_msg_cpu": fixed, "fit_msg_cpu_per_byte": per_byte,
            "provenance": {"command": command, "written_utc": now,
                           "machine": f"{platform.platform()}, {os.cpu_count()} CPUs",
                           "git_revision": git_revision(), "quick": quick}}


def write_costs(path: str | Path, quick: bool = True, interrupt: float | None = None,
                command: str | None = None) -> dict[str, Any]:
    """Measure (:func:`measure_cluster_costs`) and write the table to ``path`` as
    :func:`costs_document`; returns the document.  ``command`` is what the provenance names
    (default: the ``python -m sslacc_sim.measure`` line that does the same)."""
    path = Path(path)
    if command is None:
        command = f"python -m sslacc_sim.measure{'' if quick else ' --full'} --json {path}"
    doc = costs_document(measure_cluster_costs(quick=quick, interrupt=interrupt), command, quick)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return doc


def main(argv: list[str] | None = None) -> int:
    """``python -m sslacc_sim.measure [--full] [--json PATH]``: print the measured table as
    JSON, or write it with its provenance to ``PATH``."""
    import argparse

    from testbed import cli

    parser = argparse.ArgumentParser(prog=cli.program_name("sslacc_sim.measure"),
                                     description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--full", action="store_true",
                        help="best of more runs (slower, steadier) instead of the quick table")
    parser.add_argument("--json", type=Path, metavar="PATH",
                        help="write the table and its provenance here instead of printing it")

    def body(args: argparse.Namespace) -> int:
        if args.json is not None:
            argv_text = "python -m sslacc_sim.measure" + (" --full" if args.full else "")
            write_costs(args.json, quick=not args.full, command=f"{argv_text} --json {args.json}")
            print(f"wrote {args.json}")
            return 0
        costs = measure_cluster_costs(quick=not args.full)
        doc = costs.to_dict()
        fixed, per_byte = costs.message_line()
        doc["fit_msg_cpu"], doc["fit_msg_cpu_per_byte"] = fixed, per_byte
        print(json.dumps(doc, indent=2))
        return 0

    return cli.run_main(parser, body, argv)
