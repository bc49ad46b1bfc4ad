"""Parameters of the SSLACC cluster model, in one frozen dataclass, and its measured costs.

Every number the model uses lives here, with its unit, so an experiment changes a field with
:func:`dataclasses.replace` instead of a global.  The paper's cards do 200 or 600 RSA-1024
private-key operations per second (``rsa_ops_per_s`` stays a parameter: the cards are not
ours to measure).  The per-message costs are measured on our own code
(:func:`sslacc_sim.aio.measure.measure_cluster_costs`): :class:`ClusterCosts` holds one such
measurement, :data:`DEFAULT_CLUSTER_COSTS` a table measured once (so that simulations are
reproducible without timing anything), and :meth:`ClusterParams.measured` turns a table into
parameters.  The defaults of :class:`ClusterParams` are that table's values:

* a cluster message costs ``msg_cpu + bytes * msg_cpu_per_byte`` CPU seconds to build (at the
  sender) and again to parse (at the receiver): the least-squares line through the mean
  build-and-parse cost of a full update, a compact update and a session replication message,
  each encoded, MACed (HMAC-SHA256) and decoded by the real code;
* every message received costs ``interrupt_cpu`` more: a UDP datagram sent and received on
  loopback, measured (the interrupt itself cannot be measured in a simulation; see
  :mod:`sslacc_sim.aio.measure` for what the stand-in covers);
* a takeover costs ``import_cpu`` once (:func:`tls12.state.import_connection`, measured);
* a handshake update sent as a delta (:mod:`sslacc_sim.delta`) costs ``delta_make_cpu`` more
  to build and ``delta_apply_cpu`` more at the mirror that rebuilds the state (measured).

**Which measurement.**  :data:`DEFAULT_CLUSTER_COSTS` was typed in from one earlier run of
``python -m sslacc_sim.measure --full``; no results file holds that run, so nothing quoted as
*measured* should rest on it.  ``make reproduce`` measures the table again on the machine it
runs on (``python -m sslacc_sim.measure --json results/sslacc/cluster_costs.json``, a step of
``notebooks/run_all.py``), and Figures 28/29 use that file: :func:`read_cluster_costs` reads
one such file with its provenance, :func:`cluster_costs` finds it (``results/``, else the
copy ``make readme`` ships in ``docs/results/``), records which file it used in the run's
``run.json`` (:func:`testbed.results.record_input`) and, with no file at all, warns
(:class:`CostsWarning`) that it fell back to the typed-in table.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from .errors import SslaccError

__all__ = ["COSTS_COMMAND", "COSTS_FILE", "SHIPPED_COSTS_FILE", "ClusterCosts", "ClusterParams",
           "CostsWarning", "DEFAULT_CLUSTER_COSTS", "cluster_costs", "read_cluster_costs"]

#: Where ``make reproduce`` writes the cluster costs it measures (relative to the repository).
COSTS_FILE = Path("results") / "sslacc" / "cluster_costs.json"
#: The copy of it that ``make readme`` ships.
SHIPPED_COSTS_FILE = Path("docs") / "results" / "sslacc" / "cluster_costs.json"
#: The command (a step of ``make reproduce``) that writes :data:`COSTS_FILE`.
COSTS_COMMAND = "python -m sslacc_sim.measure --json results/sslacc/cluster_costs.json"
#: The name under which :func:`cluster_costs` records its input in the run's ``run.json``.
COSTS_INPUT = "sslacc cluster costs"


@dataclass(frozen=True)
class ClusterCosts:
    """CPU seconds per cluster operation, with the message sizes (bytes) they were timed on.

    ``*_build``: make the message (export, encode, MAC); ``*_parse``: check the MAC and decode
    it; for a ``full`` update (the exported state after the client's Finished), a ``compact``
    one (a Progress delta and one record size) and a ``session`` replication message.
    ``export_state`` / ``import_state``: :func:`tls12.state.export_connection` and
    :func:`~tls12.state.import_connection` alone.  ``interrupt``: per message received (see
    :mod:`sslacc_sim.aio.measure`).  ``source`` says how the table was made.  ``delta_make`` /
    ``delta_apply``: :func:`sslacc_sim.delta.make_delta` and
    :func:`~sslacc_sim.delta.apply_delta` alone, timed on a delta of ``delta_bytes`` bytes
    (zero: not measured).
    """

    full_build: float
    full_parse: float
    full_bytes: int
    compact_build: float
    compact_parse: float
    compact_bytes: int
    session_build: float
    session_parse: float
    session_bytes: int
    export_state: float
    import_state: float
    interrupt: float
    source: str = "assumed"
    delta_make: float = 0.0
    delta_apply: float = 0.0
    delta_bytes: int = 0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name != "source" and not value >= 0:
                raise ValueError(f"{f.name} must be >= 0, got {value}")
        if not 0 < self.compact_bytes < self.full_bytes:
            raise ValueError("a compact update must be smaller than a full one")

    def message_line(self) -> tuple[float, float]:
        """(seconds per message, seconds per byte): least squares through the three kinds'
        mean of build and parse cost against their size, both clamped at zero."""
        points = [(self.full_bytes, (self.full_build + self.full_parse) / 2),
                  (self.compact_bytes, (self.compact_build + self.compact_parse) / 2),
                  (self.session_bytes, (self.session_build + self.session_parse) / 2)]
        n = len(points)
        mx = sum(x for x, _ in points) / n
        my = sum(y for _, y in points) / n
        sxx = sum((x - mx) ** 2 for x, _ in points)
        slope = max(0.0, sum((x - mx) * (y - my) for x, y in points) / sxx)
        return max(0.0, my - slope * mx), slope

    def to_dict(self) -> dict[str, Any]:
        """Plain values (for JSON)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ClusterCosts:
        """The inverse of :meth:`to_dict`; unknown keys are a ``ValueError``."""
        unknown = set(values) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown cost entries: {sorted(unknown)}")
        return cls(**values)


#: Typed in from one run of ``python -m sslacc_sim.measure --full`` (see that module) on a
#: 2-core x86-64 virtual machine under load, Python 3.11, OpenSSL 3 (the ``delta_*`` entries
#: from a later run of the same command, whose other entries agreed within 25 %).  No results
#: file holds those runs: this table keeps simulations reproducible without timing anything
#: (the unit tests, the experiments given no costs), and Figures 28/29 use the costs
#: ``make reproduce`` measures instead (:func:`cluster_costs`).
DEFAULT_CLUSTER_COSTS = ClusterCosts(
    full_build=7.0e-5, full_parse=1.3e-5, full_bytes=4273,
    compact_build=3.7e-5, compact_parse=1.2e-5, compact_bytes=298,
    session_build=4.9e-6, session_parse=5.4e-6, session_bytes=178,
    export_state=4.2e-5, import_state=6.6e-5, interrupt=4.4e-6,
    source="default", delta_make=4.6e-5, delta_apply=3.5e-5, delta_bytes=997,
)
_MSG_CPU, _MSG_CPU_PER_BYTE = DEFAULT_CLUSTER_COSTS.message_line()


class CostsWarning(SslaccError, UserWarning):
    """:func:`cluster_costs` found no measured costs file and used the typed-in table."""


def read_cluster_costs(path: str | Path) -> tuple[ClusterCosts, dict[str, Any]]:
    """One costs file as written by ``python -m sslacc_sim.measure --json PATH``: the table
    and the file's ``provenance`` (command, ``written_utc``, ``machine``, ``git_revision``,
    ``quick``).  Anything else -- not JSON, no ``costs`` object, unknown or invalid entries --
    is a ``ValueError`` naming the file."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("costs"), dict):
        raise ValueError(f"{path}: expected a JSON object with a 'costs' object "
                         f"(written by `{COSTS_COMMAND}`)")
    try:
        costs = ClusterCosts.from_dict(doc["costs"])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: {exc}") from exc
    provenance = doc.get("provenance")
    return costs, dict(provenance) if isinstance(provenance, dict) else {}


def cluster_costs(path: str | Path | None = None) -> ClusterCosts:
    """The measured cluster costs a model run should use, and a record of which they are.

    ``path``, else ``results/sslacc/cluster_costs.json`` (written by ``make reproduce`` on
    this machine), else the shipped ``docs/results/sslacc/cluster_costs.json``, both under
    the repository root: the first that exists is read (:func:`read_cluster_costs`) and its
    provenance recorded under ``inputs["sslacc cluster costs"]`` of the current run's
    ``run.json`` (:func:`testbed.results.record_input`).  With none, the typed-in
    :data:`DEFAULT_CLUSTER_COSTS` is returned, ``defaults`` recorded and a
    :class:`CostsWarning` issued: those costs were not measured by this run."""
    from testbed.results import file_provenance, record_input

    root = Path(__file__).resolve().parents[1]
    candidates = [Path(path)] if path is not None else [root / COSTS_FILE,
                                                        root / SHIPPED_COSTS_FILE]
    for candidate in candidates:
        if candidate.is_file():
            costs, own = read_cluster_costs(candidate)
            record = file_provenance(candidate, own.get("command", COSTS_COMMAND), root, own)
            record["costs_source"] = costs.source
            record_input(COSTS_INPUT, record)
            return costs
    looked = " or ".join(str(c) for c in candidates)
    record_input(COSTS_INPUT, {"source": "defaults", "looked_for": looked,
                               "values": "DEFAULT_CLUSTER_COSTS, typed in from an earlier run "
                                         "(no results file holds it)"})
    warnings.warn(f"no measured SSLACC cluster costs ({looked}); using the typed-in "
                  f"DEFAULT_CLUSTER_COSTS. Run `{COSTS_COMMAND}` to measure them on this "
                  "machine.", CostsWarning, stacklevel=2)
    return DEFAULT_CLUSTER_COSTS


@dataclass(frozen=True)
class ClusterParams:
    """Constants of one cluster.  Times in seconds, sizes in bytes, rates per second.

    ``rsa_ops_per_s``: private-key operations per second of one node's accelerator card
    (the paper's SSLACC 200 and SSLACC 600).  ``msg_cpu`` + ``msg_cpu_per_byte`` * size: CPU
    seconds to build or to parse one cluster message (measured, module docstring);
    ``interrupt_cpu``: CPU seconds per message received (the cost that flattens Figures 28/29
    beyond three or four nodes; a measured stand-in); ``import_cpu``: CPU seconds for a
    takeover to import the clustered state (measured).  ``keepalive_interval``: seconds
    between two keepalives of a node; ``dead_after``: keepalives missed before the master
    declares a node dead.  ``buckets``: size of the 4-tuple hash space (1024 in AlchemyOS).
    ``lan_bandwidth`` (bit/s) and ``lan_delay`` (s): the wire the cluster messages share;
    ``msg_header``: UDP/IP/Ethernet header plus the cluster MAC per message.  ``msl``: TCP
    maximum segment lifetime; RSTs for unknown connections stay suppressed for ``2 * msl``
    after a takeover.  ``cluster_then_commit``: the First Law; turning it off is the
    negative control of the paper's Figure 6.  ``response_piece``: bytes the relay reads
    from the origin per step (one checkpoint each).  ``compact_updates``: after the handshake
    send keys once and then only sequence numbers, record sizes and origin offsets (sections
    5.5-5.6; off: every update is the whole exported state).  ``record_size_prewrite``: the
    compact update names the size of each record about to be written (section 5.6); turning
    it off is the negative control of Figures 25-26.  ``partial_acks``: acknowledge (after
    clustering it) the read part of a client record when the rest has not come within twice
    the estimated packet inter-arrival time (section 5.5); ``iat_gain``: weight of a new
    inter-arrival sample in that estimate (an exponentially weighted mean), which starts at
    ``iat_initial`` seconds.
    ``replicate_sessions``: :class:`~sslacc_sim.sessions.ClusterSessionStore` sends each new
    session to every node (off: resumption only on the node that made the session).
    ``aggregate``: updates from one node to one mirror within ``aggregate_window`` seconds
    travel as one message (one header, one interrupt each way; the "agg" line of Figure 28,
    :mod:`sslacc_sim.updates`).  ``update_timeout``: seconds an owner waits for a mirror's
    acknowledgement before it reports the mirror to the master as unfit (longer than
    ``detection_time``, so that a dead mirror is found by its keepalives first;
    ``math.inf``: never).  ``takeover_resend``: a new owner sends the client one ACK when it
    takes a connection over (section 4.8) and, once it has imported the state, sends the
    unacknowledged tail of the server -> client stream at once, so the client's next byte
    follows the detection time; off, the tail waits for the next expiry of the fixed TCP
    retransmission timer (``netsim.tcp.TcpParams.rto``, 1 s) -- the behaviour before.
    ``delta_updates``: a full (handshake) update to a mirror that holds this connection's
    previous full update carries only what changed since (:mod:`sslacc_sim.delta`: changed
    fields, and the transcript bytes appended); building one costs ``delta_make_cpu`` more
    CPU seconds, rebuilding the state at the mirror ``delta_apply_cpu`` (both measured);
    off: every full update carries the whole exported state.
    ``report_interval``: seconds between two sends of one report to the master -- that a
    mirror does not acknowledge updates, or that a new mirror holds a bucket's state (a
    join, ``mirror_handoff``).  A report is one unacknowledged message, lost on the wire or
    with a master that dies before it acts, so the reporter sends it again, to whoever is
    master then, until the table shows the change
    (:meth:`~sslacc_sim.cluster.Cluster.report_unfit_mirror`); the default, 0.1 s, is the
    default keepalive interval.  ``math.inf``: send once (the behaviour before, a negative
    control: a lost report leaves the connection waiting for ever).  ``mirror_handoff``: when a join would make the newcomer the mirror of a
    bucket that has connections, the bucket keeps its old mirror until the owner has sent
    the newcomer the full state of each of its connections (:mod:`sslacc_sim.handoff`);
    off: the newcomer is the mirror at once and holds nothing until each connection's next
    update (the behaviour before, a negative control: the owner's death then loses them).
    ``mirror_resend``: when the master replaces a bucket's mirror that died, left or was
    found unfit, the owner sends the new mirror the newest checkpoint of each open connection
    of the bucket (:mod:`sslacc_sim.handoff`); off: the new mirror holds nothing of an idle
    connection until that connection's next update (the behaviour before, a negative control:
    the owner's death in that time loses the connection).
    """

    rsa_ops_per_s: float = 200.0
    msg_cpu: float = _MSG_CPU
    interrupt_cpu: float = DEFAULT_CLUSTER_COSTS.interrupt
    keepalive_interval: float = 0.1
    dead_after: int = 3
    buckets: int = 1024
    lan_bandwidth: float = 100e6
    lan_delay: float = 50e-6
    msg_header: int = 42 + 20
    msl: float = 30.0
    cluster_then_commit: bool = True
    response_piece: int = 16384
    compact_updates: bool = True
    record_size_prewrite: bool = True
    partial_acks: bool = True
    iat_gain: float = 0.125
    iat_initial: float = 0.01
    replicate_sessions: bool = True
    msg_cpu_per_byte: float = _MSG_CPU_PER_BYTE
    import_cpu: float = DEFAULT_CLUSTER_COSTS.import_state
    aggregate: bool = False
    aggregate_window: float = 200e-6
    update_timeout: float = 0.5
    takeover_resend: bool = True
    delta_updates: bool = True
    delta_make_cpu: float = DEFAULT_CLUSTER_COSTS.delta_make
    delta_apply_cpu: float = DEFAULT_CLUSTER_COSTS.delta_apply
    report_interval: float = 0.1
    mirror_handoff: bool = True
    mirror_resend: bool = True

    def __post_init__(self) -> None:
        if self.rsa_ops_per_s <= 0:
            raise ValueError("rsa_ops_per_s must be positive")
        if min(self.msg_cpu, self.interrupt_cpu, self.lan_delay, self.msg_cpu_per_byte,
               self.import_cpu, self.delta_make_cpu, self.delta_apply_cpu) < 0:
            raise ValueError("costs and delays must be non-negative")
        if self.keepalive_interval <= 0 or self.dead_after < 1:
            raise ValueError("keepalive_interval must be positive and dead_after at least 1")
        if self.buckets < 1 or self.lan_bandwidth <= 0 or self.response_piece < 1:
            raise ValueError("buckets, lan_bandwidth and response_piece must be positive")
        if self.aggregate_window <= 0 or self.update_timeout <= 0 or self.report_interval <= 0:
            raise ValueError("aggregate_window, update_timeout and report_interval must be "
                             "positive")
        if not 0 < self.iat_gain <= 1 or self.iat_initial <= 0:
            raise ValueError("iat_gain must be in (0, 1] and iat_initial positive")

    @property
    def rsa_time(self) -> float:
        """Seconds of the card per RSA private-key operation."""
        return 1.0 / self.rsa_ops_per_s

    @property
    def detection_time(self) -> float:
        """Seconds from a node's last keepalive until the master declares it dead."""
        return self.keepalive_interval * self.dead_after

    def message_cpu(self, nbytes: int) -> float:
        """CPU seconds to build (or to parse) one cluster message of ``nbytes`` bytes."""
        return self.msg_cpu + nbytes * self.msg_cpu_per_byte

    @classmethod
    def measured(cls, costs: ClusterCosts | None = None, **changes: Any) -> ClusterParams:
        """Parameters whose message, interrupt and import costs come from ``costs`` (a
        :func:`~sslacc_sim.aio.measure.measure_cluster_costs` table; by default
        :data:`DEFAULT_CLUSTER_COSTS`), with ``changes`` (e.g. ``rsa_ops_per_s=600``) on top."""
        costs = DEFAULT_CLUSTER_COSTS if costs is None else costs
        fixed, per_byte = costs.message_line()
        base = cls(msg_cpu=fixed, msg_cpu_per_byte=per_byte, interrupt_cpu=costs.interrupt,
                   import_cpu=costs.import_state, delta_make_cpu=costs.delta_make,
                   delta_apply_cpu=costs.delta_apply)
        return replace(base, **changes)
