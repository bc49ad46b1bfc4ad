"""The cluster update format: one :class:`Checkpoint`, its wire form and its kinds.

A checkpoint is what the owner of a connection sends to the bucket's mirror before it commits
(see :mod:`sslacc_sim.relay`).  It has two forms:

* **full**: the whole exported ``tls12`` state (:func:`tls12.state.export_connection`, about
  4 KB during the handshake, mostly the transcript) plus the TCP and origin offsets; on the
  wire to a mirror that holds the connection's previous full checkpoint, ``tls_state`` may be
  a *delta* against that one instead (``base``, :mod:`sslacc_sim.delta`), which the mirror
  turns back into the whole state on arrival;
* **compact** (after the handshake): an 18-byte :class:`tls12.state.Progress`, the number of
  queued records and their plaintext sizes (the record-size pre-write of section 5.6), the
  origin offset where their plaintext starts, and any other queued record verbatim.

The wire form (:meth:`Checkpoint.encode`) is one JSON header line followed by the binary
blobs; :meth:`Checkpoint.decode` is its inverse and the tests round-trip it byte-exact.  The
sizes of these real messages are what the model puts on the cluster's LAN.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from .state import CheckpointLabel

__all__ = ["Checkpoint", "CheckpointLabel"]


@dataclass(frozen=True)
class Checkpoint:
    """One cluster update: the TLS state plus the TCP and origin positions it belongs to.

    Offsets count stream bytes (not sequence numbers): ``rcv_appack`` client bytes committed,
    ``out_start`` where the state's queued output starts in the server -> client stream,
    ``request_offset`` / ``response_offset`` bytes handed to / read from the origin.

    A *full* checkpoint has the exported state in ``tls_state``.  A *compact* one (after the
    handshake, see :mod:`sslacc_sim.relay`) has ``progress`` (a :class:`tls12.state.Progress`
    after all queued output), ``rewind`` (queued records sealed from the origin's bytes,
    followed by ``raw_records`` others), ``sizes`` (plaintext sizes of the queued response
    records, ``None`` without pre-writes), ``plain_start`` (origin offset of
    their plaintext) and ``raw`` (the other queued records, verbatim).  ``keys`` travels only
    in a mirror's first compact update.  ``buffered``: client bytes past ``rcv_appack``
    that a full ``tls_state`` already holds in its record buffer (a takeover does not feed
    them again when the client retransmits them).  ``partial``: the start of a client record
    already acknowledged to the client by a partial ACK (section 5.5), clustered as data.
    ``base``: ``-1``, or (on the wire only) the ``number`` of the full checkpoint whose
    ``tls_state`` the delta in ``tls_state`` applies to (:func:`sslacc_sim.delta.apply_delta`).
    """

    conn_id: int
    number: int
    label: CheckpointLabel
    """What the update follows (:class:`sslacc_sim.state.CheckpointLabel`; a string value is
    accepted and converted, so :meth:`decode` reads the JSON header as it is)."""
    rcv_appack: int
    out_start: int
    request_offset: int
    response_offset: int
    tls_state: bytes
    progress: bytes = b""
    rewind: int = 0
    raw_records: int = 0
    sizes: tuple[int, ...] | None = None
    plain_start: int = 0
    raw: bytes = b""
    keys: bytes = b""
    buffered: int = 0
    partial: bytes = b""
    base: int = -1

    def __post_init__(self) -> None:
        if not isinstance(self.label, CheckpointLabel):
            object.__setattr__(self, "label", CheckpointLabel(self.label))

    @property
    def delta(self) -> bool:
        """Whether ``tls_state`` is a delta against checkpoint ``base`` (wire form only)."""
        return self.base >= 0

    @property
    def compact(self) -> bool:
        """Whether this is a post-handshake compact update (no ``tls_state``)."""
        return bool(self.progress)

    def encode(self) -> bytes:
        """Wire form: a JSON header line, then the blobs (state, keys, raw records)."""
        head = {k: v for k, v in asdict(self).items()
                if k not in ("tls_state", "keys", "raw", "progress", "partial")}
        head["progress"] = self.progress.hex()
        head["lengths"] = [len(self.tls_state), len(self.keys), len(self.partial)]
        return (json.dumps(head, sort_keys=True, separators=(",", ":")).encode() + b"\n"
                + self.tls_state + self.keys + self.partial + self.raw)

    @classmethod
    def decode(cls, data: bytes) -> Checkpoint:
        """Inverse of :meth:`encode`."""
        line, _, blob = data.partition(b"\n")
        head = json.loads(line)
        n_state, n_keys, n_partial = head.pop("lengths")
        sizes = head.pop("sizes")
        at = n_state + n_keys
        return cls(tls_state=blob[:n_state], keys=blob[n_state:at],
                   partial=blob[at:at + n_partial], raw=blob[at + n_partial:],
                   progress=bytes.fromhex(head.pop("progress")),
                   sizes=None if sizes is None else tuple(sizes), **head)
