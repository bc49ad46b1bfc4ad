"""The cluster's view of one client connection: the record the relay's processes share.

:class:`RelayConn` holds what the model needs of one connection across its owners: the TCP
connection (which outlives any node, as the client's socket does), the owner's working state
(the ``tls`` object, offsets, the update under way), what each mirror holds (``mirrored``,
``mirror_keys``, ``readers``) and the metrics (``checkpoints``, ``takeovers``).  It is
written by :mod:`sslacc_sim.relay` (the owner's loop), :mod:`sslacc_sim.takeover` and
:mod:`sslacc_sim.handoff`; in a real cluster each node would hold only its own part.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import simpy

from tls12 import ServerConnection

from .checkpoint import Checkpoint
from .delta import DeltaReader, DeltaWriter
from .state import CheckpointLabel, HandshakeProgress, UpdatePhase
from .tcpside import ClusterTcpConnection, FourTuple

__all__ = ["RelayConn"]


@dataclass
class RelayConn:
    """The cluster's view of one client connection."""

    id: int
    four_tuple: FourTuple
    bucket: int
    tcp: ClusterTcpConnection
    handler: int
    inbox: simpy.Store
    #: a copy of the client bytes buffered in ``tls`` (what a partial ACK clusters)
    rx: bytearray = field(default_factory=bytearray)
    #: stream offset of the end of the last client record consumed
    consumed: int = 0
    #: packet inter-arrival estimator (section 5.5): estimate, last arrival, partial ACKs
    iat: float = 0.0
    last_arrival: float | None = None
    partial_acks: int = 0
    #: client bytes still to arrive that the imported state had buffered already
    skip_in: int = 0
    ready: bool = True
    tls: ServerConnection | None = None
    request_offset: int = 0
    response_offset: int = 0
    closed: bool = False
    #: (time, label, bytes, node) of every update this connection sent
    checkpoints: list[tuple[float, CheckpointLabel, int, int]] = field(default_factory=list)
    #: per node, the phase of the update it is making (:data:`sslacc_sim.state.PHASE_TRANSITIONS`)
    phases: dict[int, UpdatePhase] = field(default_factory=dict)
    #: how far the handshake is (:data:`sslacc_sim.state.LABEL_TRANSITIONS`), and after each update
    progress: HandshakeProgress = HandshakeProgress.START
    progress_at: dict[int, HandshakeProgress] = field(default_factory=dict)
    mirrored: dict[int, Checkpoint] = field(default_factory=dict)
    pending: tuple[Checkpoint, bytes, simpy.Event] | None = None
    #: the newest checkpoint the owner captured (what a join's handoff sends the newcomer)
    latest: Checkpoint | None = None
    #: the node the pending update was last sent to
    pending_to: int | None = None
    takeovers: list[tuple[float, int, str]] = field(default_factory=list)
    #: the compact base, once exported; which nodes have received it
    keys: bytes | None = None
    keys_at: set[int] = field(default_factory=set)
    mirror_keys: dict[int, bytes] = field(default_factory=dict)
    #: (origin offset, plaintext sizes) of the response records queued in ``tls``
    piece: tuple[int, tuple[int, ...]] | None = None
    #: queued records a takeover re-created verbatim (they follow the re-sealed ones)
    carry: list[tuple[bytes, int]] = field(default_factory=list)
    #: per mirror, the number of the last full update this owner sent it and a writer holding
    #: that state (the base of the next delta); per mirror, the reader holding what it has
    sent_full: dict[int, tuple[int, DeltaWriter]] = field(default_factory=dict)
    readers: dict[int, DeltaReader] = field(default_factory=dict)
