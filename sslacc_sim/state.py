"""SSLACC's state machines: what a cluster update is about, and the phases every update goes through.

**Checkpoint labels** (:class:`CheckpointLabel`).  Every update the owner of a connection
sends its mirror (:class:`sslacc_sim.checkpoint.Checkpoint`) names the step it follows: a
client record the owner read (its kind comes from the core's
:class:`tls12.connection.ReceivedRecord`, :func:`label_for_record`), a piece of the
response, a partial ACK, a takeover, the end of the stream.  The members are ``str``
values (:class:`enum.StrEnum`), so the encoded updates, the CSV files and the DataFrames
carry the same strings as before and compare equal to them.

**Handshake progress** (:class:`HandshakeProgress`).  The labels of one connection follow the
handshake: ``client_hello``, ``client_key_exchange`` (skipped when a session resumes),
``change_cipher_spec``, ``finished``, then ``established`` (Figures 18-20), and only then
request ``data``, ``response`` pieces and ``partial_ack`` updates; a client may stop
(``eof``, ``alert_received``) or be refused (``alert``) anywhere, and a ``takeover`` may come
at any point.  :data:`LABEL_TRANSITIONS` is that order as a table ``(progress, label) ->
progress``; :func:`next_progress` raises :class:`UpdateOrderError` for a label the table
does not allow in the current progress.  A new owner continues from the progress of the
checkpoint it took over (a fingered restart from the start).

**Update phases** (:class:`UpdatePhase`).  The relay's own order is fixed: an update is
``prepared`` (state captured, nothing sent), then ``sent`` to the mirror (only with one),
then ``committed`` (acknowledged; only with cluster-then-commit), then ``released`` (its
output on the wire), before the next one is prepared.  :data:`PHASE_TRANSITIONS` is that
order as a table ``(phase now, phase announced) -> phase after``; :func:`next_phase`
looks a step up and raises :class:`UpdateOrderError` for a step the table does not list,
so a relay that released output before its commit (the First Law broken) stops at once.
"""

from __future__ import annotations

from enum import StrEnum

from tls12.connection import ReceivedRecord
from tls12.messages import HandshakeType
from tls12.record import ContentType

from .errors import SslaccError

__all__ = [
    "CheckpointLabel",
    "HandshakeProgress",
    "LABEL_TRANSITIONS",
    "next_progress",
    "UpdatePhase",
    "PHASE_TRANSITIONS",
    "IDLE",
    "UpdateOrderError",
    "next_phase",
    "label_for_record",
]


class CheckpointLabel(StrEnum):
    """What a cluster update follows (the ``label`` of a :class:`~sslacc_sim.checkpoint.Checkpoint`)."""

    CLIENT_HELLO = "client_hello"
    CLIENT_KEY_EXCHANGE = "client_key_exchange"
    HANDSHAKE = "handshake"
    """Another handshake record (in clear, or protected and not the client's Finished)."""
    CHANGE_CIPHER_SPEC = "change_cipher_spec"
    FINISHED = "finished"
    """The client's Finished read and checked: the handshake is complete on the server."""
    ESTABLISHED = "established"
    """The server's Finished reached the client (Figure 20); the keys travel once from here."""
    DATA = "data"
    """A record of the client's request."""
    ALERT_RECEIVED = "alert_received"
    """An alert from the client (its close_notify)."""
    RESPONSE = "response"
    """A piece of the origin's response, sealed and queued."""
    PARTIAL_ACK = "partial_ack"
    """Part of a client record acknowledged before the rest arrived (section 5.5)."""
    TAKEOVER = "takeover"
    """A mirror took the connection over from its last checkpoint."""
    FINGERED = "fingered"
    """A mirror took over a connection it had no checkpoint of, on the client's fingered ACK."""
    EOF = "eof"
    """The client's FIN."""
    ALERT = "alert"
    """The client's bytes were refused: the server queued a fatal alert."""


class HandshakeProgress(StrEnum):
    """How far the connection's handshake is, as the owner's updates have recorded it."""

    START = "start"
    HELLO = "hello"
    """The ClientHello read (the pre-ServerHello state of Figure 18)."""
    KEY_EXCHANGE = "key_exchange"
    CHANGE_CIPHER_SPEC = "change_cipher_spec"
    FINISHED = "finished"
    """The client's Finished read: the server's CCS and Finished are on their way."""
    ESTABLISHED = "established"


_H, _L = HandshakeProgress, CheckpointLabel
_AFTER_HANDSHAKE = (_H.FINISHED, _H.ESTABLISHED)
LABEL_TRANSITIONS: dict[tuple[HandshakeProgress | None, CheckpointLabel], HandshakeProgress | None] = {
    (_H.START, _L.CLIENT_HELLO): _H.HELLO,
    (_H.HELLO, _L.CLIENT_HELLO): _H.HELLO,                      # a fingered restart reads it again
    (_H.HELLO, _L.CLIENT_KEY_EXCHANGE): _H.KEY_EXCHANGE,
    (_H.HELLO, _L.CHANGE_CIPHER_SPEC): _H.CHANGE_CIPHER_SPEC,   # a resumed session
    (_H.KEY_EXCHANGE, _L.CHANGE_CIPHER_SPEC): _H.CHANGE_CIPHER_SPEC,
    (_H.CHANGE_CIPHER_SPEC, _L.FINISHED): _H.FINISHED,
    (_H.FINISHED, _L.ESTABLISHED): _H.ESTABLISHED,
    **{(h, label): h for h in _AFTER_HANDSHAKE
       for label in (_L.DATA, _L.RESPONSE, _L.PARTIAL_ACK)},
    # in any progress (key None), leaving it as it is (value None)
    **{(None, label): None for label in (_L.HANDSHAKE, _L.ALERT_RECEIVED, _L.ALERT, _L.EOF,
                                          _L.TAKEOVER, _L.FINGERED)},
}
"""(progress, label of the next update) -> progress after it; a ``None`` key is any progress,
a ``None`` value leaves the progress unchanged."""


def next_progress(now: HandshakeProgress, label: CheckpointLabel | str) -> HandshakeProgress:
    """The progress after an update labelled ``label``; :class:`UpdateOrderError` if the
    table does not allow ``label`` now (say ``established`` before ``finished``)."""
    label = CheckpointLabel(label)
    key = (now, label)
    if key in LABEL_TRANSITIONS:
        return LABEL_TRANSITIONS[key] or now
    if (None, label) in LABEL_TRANSITIONS:
        return now
    raise UpdateOrderError(f"an update {label!s} cannot follow handshake progress {now!s}")


class UpdatePhase(StrEnum):
    """Where one update is (what a :data:`sslacc_sim.relay.CheckpointHook` is told)."""

    PREPARED = "prepared"
    SENT = "sent"
    COMMITTED = "committed"
    RELEASED = "released"


_P = UpdatePhase
PHASE_TRANSITIONS: dict[tuple[UpdatePhase, UpdatePhase], UpdatePhase] = {
    (_P.RELEASED, _P.PREPARED): _P.PREPARED,     # the next update (RELEASED: none pending)
    (_P.PREPARED, _P.SENT): _P.SENT,             # with a mirror
    (_P.PREPARED, _P.COMMITTED): _P.COMMITTED,   # no mirror: committed at once
    (_P.PREPARED, _P.RELEASED): _P.RELEASED,     # no mirror, no cluster-then-commit
    (_P.SENT, _P.COMMITTED): _P.COMMITTED,       # the mirror acknowledged
    (_P.SENT, _P.RELEASED): _P.RELEASED,         # cluster-then-commit off (a control)
    (_P.COMMITTED, _P.RELEASED): _P.RELEASED,
}
"""(phase the connection's current update is in, phase announced) -> phase after."""

IDLE = UpdatePhase.RELEASED
"""The phase of a connection with no update pending (before the first one, after a takeover)."""


class UpdateOrderError(SslaccError, RuntimeError):
    """An update label or phase out of order (a bug in the relay, not the client's fault)."""


def next_phase(now: UpdatePhase, announced: UpdatePhase | str) -> UpdatePhase:
    """The phase after ``announced`` in ``now``; :class:`UpdateOrderError` if not in the table."""
    after = PHASE_TRANSITIONS.get((now, UpdatePhase(announced)))
    if after is None:
        raise UpdateOrderError(f"update phase {announced!s} cannot follow {now!s}")
    return after


_BY_CONTENT = {
    ContentType.CHANGE_CIPHER_SPEC: CheckpointLabel.CHANGE_CIPHER_SPEC,
    ContentType.APPLICATION_DATA: CheckpointLabel.DATA,
    ContentType.ALERT: CheckpointLabel.ALERT_RECEIVED,
}
_BY_MESSAGE: dict[int, CheckpointLabel] = {
    HandshakeType.CLIENT_HELLO: CheckpointLabel.CLIENT_HELLO,
    HandshakeType.CLIENT_KEY_EXCHANGE: CheckpointLabel.CLIENT_KEY_EXCHANGE,
}


def label_for_record(record: ReceivedRecord) -> CheckpointLabel:
    """The label of the update that follows ``record``, from what the core says it was.

    A handshake record is named by the first message it completed when it was read in clear
    (ClientHello, ClientKeyExchange), ``finished`` if it completed the client's Finished
    (the server then reports the handshake complete), ``handshake`` otherwise.
    """
    if record.content_type is not ContentType.HANDSHAKE:
        return _BY_CONTENT[record.content_type]
    types = record.handshake_types
    if HandshakeType.FINISHED in types:
        return CheckpointLabel.FINISHED
    if types and not record.encrypted:
        return _BY_MESSAGE.get(types[0], CheckpointLabel.HANDSHAKE)
    return CheckpointLabel.HANDSHAKE
