"""Parameters of the SSLACC cluster model, in one frozen dataclass.

Every number the model uses lives here, with its unit, so an experiment changes a field with
:func:`dataclasses.replace` instead of a global.  The paper's cards do 200 or 600 RSA-1024
private-key operations per second; the per-message costs stand for the kernel work of one
cluster message (UDP send or receive plus the MAC that protects it) and the interrupt that
announces it.  They are placeholders for the measured costs of our own code (see the report of
issue 11: "CPU costs of our own code measured" is still open) and are kept small next to the
RSA operation, as on the paper's hardware.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ClusterParams"]


@dataclass(frozen=True)
class ClusterParams:
    """Constants of one cluster.  Times in seconds, sizes in bytes, rates per second.

    ``rsa_ops_per_s``: private-key operations per second of one node's accelerator card
    (the paper's SSLACC 200 and SSLACC 600).  ``msg_cpu``: CPU seconds to build or parse one
    cluster message; ``interrupt_cpu``: CPU seconds per message received (the cost that
    flattens Figures 28/29 beyond three or four nodes).  ``keepalive_interval``: seconds
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
    """

    rsa_ops_per_s: float = 200.0
    msg_cpu: float = 20e-6
    interrupt_cpu: float = 10e-6
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

    def __post_init__(self) -> None:
        if self.rsa_ops_per_s <= 0:
            raise ValueError("rsa_ops_per_s must be positive")
        if min(self.msg_cpu, self.interrupt_cpu, self.lan_delay) < 0:
            raise ValueError("costs and delays must be non-negative")
        if self.keepalive_interval <= 0 or self.dead_after < 1:
            raise ValueError("keepalive_interval must be positive and dead_after at least 1")
        if self.buckets < 1 or self.lan_bandwidth <= 0 or self.response_piece < 1:
            raise ValueError("buckets, lan_bandwidth and response_piece must be positive")
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
