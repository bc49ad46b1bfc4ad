"""Seam 5: a session-crypto delegate, so a server connection runs with opaque key handles.

Seam 1 (:mod:`tls12.keys`) keeps the private key out of the connection, but
it hands the *premaster secret* back, and from it the connection derives the
master secret, the key block, the Finished values and the record ciphers in
this process.  WebALPS (the trusted co-server, ``webalps.md`` §4) needs more:
the host that runs the connection must never hold the premaster, the master
secret or any session key.  A :class:`SessionDelegate` does every operation
that touches them, and the connection holds only :class:`KeyHandle` values --
an integer that names secrets kept by the delegate::

    delegate = LocalDelegate(credentials.private_key, rng=config.rng)
    server = ServerConnection(config, delegate=delegate)

What the delegate does (and the connection no longer does):

* :meth:`SessionDelegate.derive` -- decrypt the EncryptedPreMasterSecret,
  apply the RFC 5246 §7.4.7.1 countermeasure (a random premaster on *any*
  decryption or version failure, chosen without revealing which), compute the
  master secret (RFC 7627 when given the session hash) and the keys;
* :meth:`SessionDelegate.resume` -- the keys of an abbreviated handshake from
  the handle of a stored session and the new randoms;
* :meth:`SessionDelegate.verify_data` / :meth:`SessionDelegate.check_finished`
  -- the server's Finished and the check of the client's;
* optionally ``finish(handle, client_hash, client_verify_data, server_hash)`` -- both of the
  above in one call for a full handshake: check the client's Finished and, if it is right,
  return the server's verify_data (``None`` if wrong).  A server connection uses it when its
  delegate has it (:class:`FinishingDelegate`), so a remote delegate saves a round trip;
* optionally ``derive_finish(...)`` -- the whole client flight of a full handshake in one call
  (:class:`FlightDelegate`): derive the keys, open the client's encrypted Finished record,
  check it, and compute the server's verify_data.  A server connection uses it when the
  delegate has it *and* the ClientChangeCipherSpec and the Finished record are already
  buffered behind the ClientKeyExchange (clients send the three in one flight); otherwise it
  makes the separate calls.  It is one round trip to a guardian instead of three.  A record
  that does not open is a ``ValueError`` (``bad_record_mac``), a wrong Finished is ``None``
  (``decrypt_error``), and either way the delegate keeps nothing of the attempt;
* :meth:`SessionDelegate.seal` / :meth:`SessionDelegate.open` -- record
  protection in both directions, a batch of records per call (one round trip
  to a guardian per flight or burst, not per record): the connection seals
  what one ``send_data`` produces in one call, and :class:`DelegatedReadCipher`
  opens the application-data records already buffered together.

The connection keeps the sequence numbers and builds the records' headers
(:class:`tls12.record.OutgoingRecord`); the delegate returns whole records.
Handles live as long as the delegate keeps them: :meth:`LocalDelegate.release`
forgets one (a host would call it when a session leaves its store).

Sessions (:class:`tls12.session.Session`) made by a delegated connection hold
the handle and an empty ``master_secret``; :meth:`Connection.export_state`
and :meth:`Connection.export_keys` refuse with :class:`DelegatedStateError`
(the state is in the delegate; a document with handles alone could not be
continued by another delegate, so none is written).

Key exchange: RSA and ECDHE_RSA.  For an ECDHE suite the delegate makes the ephemeral
key and signs the ServerKeyExchange (:meth:`LocalDelegate.ephemeral` returns an
:class:`EphemeralKey`: a handle that names the private scalar, the public point and the
signature); the ClientKeyExchange's point goes back to :meth:`SessionDelegate.derive` (or
``derive_finish``) with ``ephemeral=`` that handle, in place of the encrypted premaster, and the
delegate computes the premaster.  The connection never holds the ephemeral private key, as
Keyless SSL and enclave key stores serve ECDHE.

Two ways to ask (the **event-driven seam**).  A delegate object that answers at once (this
module's :class:`LocalDelegate`) is called inline.  A delegate that must wait for another
process (a guardian behind a socket) is given as :class:`EventDelegate`: the connection then
never calls out of ``receive_data``; it returns a :class:`tls12.events.DelegateNeeded` event
carrying a :class:`DelegateRequest` (an id, the operation -- one of :data:`OPERATIONS`, the
method names above -- and its arguments), and the adapter answers with
``conn.supply(request.id, answer)`` whenever the answer arrives.  Requests of many connections
may be in flight at once and be answered in any order.  While a connection waits for an answer
it needs to go on reading (keys, a Finished, opened records), it only buffers what arrives;
``seal`` requests do not stop it: their records wait in order behind the slot, and
:meth:`tls12.connection.Connection.data_to_send` returns only what is sealed.  A failed
operation is answered with the exception (``supply(id, exc)``): a ``ValueError`` to ``open`` or
``derive_finish`` is ``bad_record_mac``, a :class:`tls12.errors.RemoteProtocolError` is sent as
its own alert, anything else ends the connection with ``internal_error``.  See
:mod:`tls12.delegation` for the connection side.

:class:`LocalDelegate` is the in-process implementation: it holds the private
key and the secrets in plain attributes, draws the countermeasure's fallback
from the injected RNG at the same point the non-delegated server does, and
builds the same record ciphers and explicit IVs (:mod:`tls12.record`), so a
delegated handshake is byte-for-byte the non-delegated one under a seeded RNG.
A guardian process implements the same protocol over a socket.
"""

from __future__ import annotations

import hmac
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Any, Protocol, cast, runtime_checkable

from cryptography.hazmat.primitives.asymmetric import padding, rsa

from . import prf
from .ecdhe import ecdhe_keypair, ecdhe_shared_secret
from .errors import LocalProtocolError
from .keylog import KeyLog, keylog_line
from .keys import scheme_hash, scheme_padding
from .messages import HandshakeType, ecdhe_params_bytes
from .record import IV_KEY_LABEL, ContentType, DirectionKeys, OutgoingRecord, WriteProtection
from .suites import SUITES, CipherSuite, SuiteParams

__all__ = [
    "KeyHandle",
    "SessionDelegate",
    "FinishingDelegate",
    "FlightDelegate",
    "FlightResult",
    "EphemeralKey",
    "DelegateRequest",
    "EventDelegate",
    "OPERATIONS",
    "LocalDelegate",
    "DelegateError",
    "DelegatedStateError",
    "DelegatedDirection",
    "DelegatedWriteProtection",
    "DelegatedReadCipher",
]


class DelegateError(LocalProtocolError):
    """The delegate was asked for something it does not do (unknown handle, raw keys, ...)."""


class DelegatedStateError(DelegateError):
    """A delegated connection's keys live in its delegate: its state cannot be exported."""


@dataclass(frozen=True, slots=True)
class KeyHandle:
    """An opaque name for secrets held by a delegate: nothing in it is secret."""

    id: int
    cipher_suite: int


@dataclass(frozen=True, slots=True)
class EphemeralKey:
    """What :meth:`LocalDelegate.ephemeral` returns: nothing in it is secret."""

    handle: KeyHandle
    """Names the ephemeral private key inside the delegate (``derive(..., ephemeral=handle)``)."""
    public: bytes
    """The public point, as the ServerKeyExchange carries it."""
    signature: bytes
    """The signature over ``client_random + server_random + ServerECDHParams``."""


OPERATIONS = frozenset({"derive", "derive_finish", "resume", "verify_data", "check_finished",
                        "finish", "seal", "open", "ephemeral"})
"""The operations a connection may ask of its delegate (the method names of the protocols)."""


@dataclass(frozen=True, slots=True)
class DelegateRequest:
    """One question of a connection to its delegate (:class:`tls12.events.DelegateNeeded`).

    ``op`` is one of :data:`OPERATIONS` and ``args`` / ``kwargs`` are exactly what the method of
    that name takes, so ``request.call(local_delegate)`` answers it in this process.  ``id`` is
    unique within the connection; the adapter hands it back with the answer to ``supply``.
    """

    id: int
    op: str
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...] = ()

    @property
    def handle(self) -> KeyHandle | None:
        """The key handle the request is about, if it names one (not for ``derive``)."""
        first = self.args[0] if self.args else None
        return first if isinstance(first, KeyHandle) else None

    def call(self, delegate: object) -> Any:
        """Answer the request with a delegate object that answers at once."""
        return getattr(delegate, self.op)(*self.args, **dict(self.kwargs))


class EventDelegate:
    """The delegate of a connection that asks through events (see the module docstring).

    ``ops`` names the optional operations the adapter's delegate offers (``finish``,
    ``derive_finish``); the required ones are always asked for.  The connection never calls
    this object: it only reads :attr:`ops`.
    """

    REQUIRED = frozenset({"derive", "resume", "verify_data", "check_finished", "seal", "open",
                          "ephemeral"})

    def __init__(self, ops: frozenset[str] | set[str] = OPERATIONS) -> None:
        unknown = set(ops) - OPERATIONS
        if unknown:
            raise ValueError(f"unknown delegate operations {sorted(unknown)}")
        self.ops = frozenset(ops) | self.REQUIRED

    def offers(self, op: str) -> bool:
        return op in self.ops


@runtime_checkable
class SessionDelegate(Protocol):
    """Everything a server connection does with the premaster, master secret and keys."""

    def derive(
        self,
        encrypted_premaster: bytes,
        client_version: int,
        client_random: bytes,
        server_random: bytes,
        cipher_suite: int,
        session_hash: bytes | None,
        *,
        ephemeral: KeyHandle | None = None,
    ) -> KeyHandle:
        """Keys for a full handshake; never raises on bad padding (§7.4.7.1).

        ``session_hash`` is the transcript hash through ClientKeyExchange when
        the extended master secret was negotiated, ``None`` otherwise.  ECDHE:
        ``ephemeral`` names the key of :meth:`ephemeral`, ``encrypted_premaster``
        is the client's public point and ``client_version`` is not used (an
        invalid point is :class:`tls12.errors.IllegalParameter`).
        """
        ...

    def ephemeral(self, group: int, scheme: int, client_random: bytes, server_random: bytes,
                  cipher_suite: int) -> EphemeralKey:
        """A fresh ephemeral key of ``group`` and its ServerKeyExchange signature (``scheme``)."""
        ...

    def resume(self, session: KeyHandle, client_random: bytes, server_random: bytes) -> KeyHandle:
        """Keys for an abbreviated handshake that resumes the session named by ``session``."""
        ...

    def verify_data(self, handle: KeyHandle, from_client: bool, transcript_hash: bytes) -> bytes:
        """The 12-byte verify_data of a Finished message (RFC 5246 §7.4.9)."""
        ...

    def check_finished(
        self, handle: KeyHandle, from_client: bool, transcript_hash: bytes, verify_data: bytes
    ) -> bool:
        """Whether the peer's verify_data is right (compared in constant time)."""
        ...

    def seal(self, handle: KeyHandle, from_client: bool, records: Sequence[OutgoingRecord]) -> bytes:
        """The protected records, headers included (consecutive sequence numbers; the content
        types may differ, e.g. a response and its close_notify)."""
        ...

    def open(
        self, handle: KeyHandle, from_client: bool, records: Sequence[tuple[int, int, int, bytes]]
    ) -> list[bytes]:
        """Plaintexts of ``(seq, content_type, version, fragment)`` records; ValueError on any failure."""
        ...


@runtime_checkable
class FinishingDelegate(Protocol):
    """The optional one-call Finished exchange of a full handshake (see the module docstring)."""

    def finish(self, handle: KeyHandle, client_hash: bytes, client_verify_data: bytes,
               server_hash: bytes) -> bytes | None:
        """The server's verify_data if the client's is right for ``client_hash``, else ``None``."""
        ...


@dataclass(frozen=True, slots=True)
class FlightResult:
    """What :meth:`FlightDelegate.derive_finish` returns when the client's Finished is right."""

    handle: KeyHandle
    client_finished: bytes
    """The plaintext of the client's Finished record: exactly the Finished message, header
    included (what goes into the transcript)."""
    server_verify_data: bytes
    """The server's verify_data, over the transcript that ends with the client's Finished."""


@runtime_checkable
class FlightDelegate(Protocol):
    """The optional one-call handling of the client's whole key-exchange flight."""

    def derive_finish(self, encrypted_premaster: bytes, client_version: int,
                      client_random: bytes, server_random: bytes, cipher_suite: int,
                      transcript: bytes, extended_master_secret: bool, record_version: int,
                      finished_fragment: bytes, *,
                      ephemeral: KeyHandle | None = None) -> FlightResult | None:
        """Derive keys as :meth:`SessionDelegate.derive` (the session hash, if
        ``extended_master_secret``, is the hash of ``transcript``: every handshake message
        through the ClientKeyExchange), open ``finished_fragment`` as client record 0 of type
        handshake, and check that it is exactly a Finished message whose verify_data is right
        for ``transcript``.  Then compute the server's verify_data over ``transcript`` plus
        that message.  ``ValueError`` if the record does not open, ``None`` if the message is
        not a right Finished; in both cases nothing is kept (no handle survives).
        """
        ...


class DelegatedDirection:
    """One direction's pending keys of a delegated connection (what ChangeCipherSpec installs)."""

    __slots__ = ("delegate", "handle", "from_client", "params")

    def __init__(self, delegate: SessionDelegate | EventDelegate, handle: KeyHandle,
                 from_client: bool) -> None:
        self.delegate = delegate

        self.handle = handle
        self.from_client = from_client
        self.params: SuiteParams = SUITES[CipherSuite(handle.cipher_suite)]


class DelegatedWriteProtection(WriteProtection):
    """A write epoch whose records the delegate seals; raw keys and MACs are not available."""

    def __init__(self, direction: DelegatedDirection, rng: Callable[[int], bytes], seq: int = 0) -> None:
        super().__init__(None, rng, seq)
        self.direction = direction

    @property
    def encrypted(self) -> bool:
        return True

    @property
    def params(self) -> SuiteParams | None:
        return self.direction.params

    @property
    def enc_key(self) -> bytes:
        raise DelegateError("the write key of a delegated connection is held by its delegate")

    @property
    def iv(self) -> bytes:
        raise DelegateError("the write IV of a delegated connection is held by its delegate")

    def compute_mac(self, record: OutgoingRecord) -> bytes:
        raise DelegateError("record MACs of a delegated connection are computed by its delegate")

    def seal_with_mac(self, record: OutgoingRecord, mac: bytes) -> bytes:
        raise DelegateError("a delegated connection cannot seal with an outside MAC")

    def seal(self, record: OutgoingRecord) -> bytes:
        return self._session_delegate().seal(self.direction.handle, self.direction.from_client,
                                             [record])

    def seal_many(self, records: list[OutgoingRecord]) -> bytes:
        return self._session_delegate().seal(self.direction.handle, self.direction.from_client,
                                             records)

    def _session_delegate(self) -> SessionDelegate:
        # cast: a connection with an EventDelegate asks for seals by event
        # (tls12.delegation), so only a SessionDelegate's direction is called here
        return cast("SessionDelegate", self.direction.delegate)


class DelegatedReadCipher:
    """The read side's cipher for :class:`tls12.record.RecordReader`: plaintexts opened ahead.

    The connection opens each record through the delegate *before* the reader reaches it
    (:meth:`tls12.delegation.Delegation._ask_open`: one question for an application-data
    record and those already buffered behind it, at most :attr:`MAX_BATCH`, so a burst costs
    one call) and leaves the plaintexts here, keyed by sequence number and ciphertext; the
    reader then takes them.  Only application data is batched: no key change can come between
    two such records (renegotiation is refused).  A record that was not opened ahead is opened
    alone with a delegate that answers at once; an :class:`EventDelegate` connection never
    reaches that point.
    """

    __slots__ = ("direction", "_ahead")

    MAX_BATCH = 32

    def __init__(self, direction: DelegatedDirection,
                 opened: tuple[bytes, bytes] | None = None) -> None:
        """``opened``: ``(fragment, plaintext)`` of record 0 of this epoch, already opened by
        the delegate (:meth:`FlightDelegate.derive_finish`); given back without a call."""
        self.direction = direction
        self._ahead: dict[int, tuple[bytes, bytes]] = {0: opened} if opened is not None else {}

    def has(self, seq: int, fragment: bytes) -> bool:
        """Whether record ``seq`` with this ciphertext was opened ahead."""
        ahead = self._ahead.get(seq)
        return ahead is not None and ahead[0] == fragment

    def fill(self, batch: Sequence[tuple[int, int, int, bytes]], plaintexts: Sequence[bytes]) -> None:
        """Keep the delegate's plaintexts of ``batch`` (``(seq, type, version, fragment)``)."""
        self._ahead = {seq: (f, pt) for (seq, _, _, f), pt in zip(batch, plaintexts, strict=True)}

    def open(self, seq: int, content_type: int, version: int, fragment: bytes) -> bytes:
        ahead = self._ahead.pop(seq, None)
        if ahead is not None and ahead[0] == fragment:
            return ahead[1]
        d = self.direction
        if isinstance(d.delegate, EventDelegate):
            raise DelegateError(f"record {seq} was not opened ahead by the delegate")
        return d.delegate.open(d.handle, d.from_client, [(seq, content_type, version, fragment)])[0]


_HANDSHAKE = ContentType.HANDSHAKE
_FINISHED = HandshakeType.FINISHED
_VERIFY_DATA_LENGTH = 12


class _Secrets:
    """What :class:`LocalDelegate` keeps per handle (never leaves the delegate)."""

    __slots__ = ("master_secret", "params", "client", "server", "ems", "write", "read")

    def __init__(self, master_secret: bytes, params: SuiteParams, client_random: bytes,
                 server_random: bytes, ems: bool) -> None:
        self.master_secret = master_secret
        self.params = params
        self.ems = ems
        block = prf.key_block(master_secret, client_random, server_random, params.mac_length,
                              params.key_length, params.fixed_iv_length)
        client_iv_key = server_iv_key = b""
        if params.block_size:  # the same k' as tls12.keyschedule.KeySchedule._derive_keys
            iv_keys = prf.prf(master_secret, IV_KEY_LABEL, server_random + client_random, 32)
            client_iv_key, server_iv_key = iv_keys[:16], iv_keys[16:]
        self.client = DirectionKeys(params, block.client_key, block.client_mac_key,
                                    block.client_iv, client_iv_key)
        self.server = DirectionKeys(params, block.server_key, block.server_mac_key,
                                    block.server_iv, server_iv_key)
        # one sealing epoch and one opening cipher per direction, built on first use
        self.write: dict[bool, WriteProtection] = {}
        self.read: dict[bool, object] = {}


class LocalDelegate:
    """A :class:`SessionDelegate` in this process: holds the RSA key and every secret.

    ``rng`` draws the countermeasure's fallback premaster; pass the server's
    ``config.rng`` to reproduce the non-delegated server's transcript exactly.  ``keylog`` is
    the debugging switch of :mod:`tls12.keylog` (off by default): the NSS key-log line of each
    handle made by ``derive``, ``derive_finish`` or ``resume`` (the same line the
    non-delegated server would write), since a delegated connection has no secret to log.
    """

    def __init__(self, private_key: rsa.RSAPrivateKey, rng: Callable[[int], bytes], *,
                 keylog: KeyLog | None = None) -> None:
        if not isinstance(private_key, rsa.RSAPrivateKey):
            raise TypeError("LocalDelegate needs an RSA private key")
        if keylog is not None and not callable(keylog):
            raise TypeError(f"keylog must be a callable that takes one line, or None, not {keylog!r}")
        self._key = private_key
        self._rng = rng
        self._keylog = keylog
        self._secrets: dict[int, _Secrets] = {}
        self._ephemerals: dict[int, tuple[int, bytes]] = {}
        self._ids = itertools.count(1)

    def _get(self, handle: KeyHandle) -> _Secrets:
        try:
            return self._secrets[handle.id]
        except (KeyError, AttributeError):
            raise DelegateError(f"unknown key handle {handle!r}") from None

    def _install(self, master: bytes, suite: int, client_random: bytes, server_random: bytes,
                 ems: bool) -> KeyHandle:
        params = SUITES[CipherSuite(suite)]
        handle = KeyHandle(next(self._ids), int(suite))
        self._secrets[handle.id] = _Secrets(master, params, client_random, server_random, ems)
        if self._keylog is not None:
            self._keylog(keylog_line(client_random, master))
        return handle

    def ephemeral(self, group: int, scheme: int, client_random: bytes, server_random: bytes,
                  cipher_suite: int) -> EphemeralKey:
        """Make an ECDHE key (32 bytes of the RNG, as the non-delegated server draws) and sign
        ``client_random + server_random + ServerECDHParams`` with the RSA key."""
        private, public = ecdhe_keypair(group, self._rng(32))
        signed = client_random + server_random + ecdhe_params_bytes(group, public)
        signature = self._key.sign(signed, scheme_padding(scheme), scheme_hash(scheme))
        handle = KeyHandle(next(self._ids), int(cipher_suite))
        self._ephemerals[handle.id] = (group, private)
        return EphemeralKey(handle, public, signature)

    def derive(self, encrypted_premaster: bytes, client_version: int, client_random: bytes,
               server_random: bytes, cipher_suite: int, session_hash: bytes | None, *,
               ephemeral: KeyHandle | None = None) -> KeyHandle:
        if ephemeral is not None:
            premaster = self._ecdhe_premaster(ephemeral, encrypted_premaster)
            return self._master(premaster, client_random, server_random, cipher_suite,
                                session_hash)
        # Draw the fallback first, decrypt, then pick without revealing which path was taken.
        fallback = client_version.to_bytes(2, "big") + self._rng(46)
        try:
            decrypted: bytes | None = self._key.decrypt(encrypted_premaster, padding.PKCS1v15())
        except ValueError:
            decrypted = None
        good = (decrypted is not None and len(decrypted) == 48
                and hmac.compare_digest(decrypted[:2], fallback[:2]))
        chosen = decrypted if good else fallback
        assert chosen is not None
        return self._master(chosen, client_random, server_random, cipher_suite, session_hash)

    def _ecdhe_premaster(self, ephemeral: KeyHandle, point: bytes) -> bytes:
        """The ECDH shared secret with the client's point; the ephemeral key is used once."""
        try:
            group, private = self._ephemerals.pop(ephemeral.id)
        except (KeyError, AttributeError):
            raise DelegateError(f"unknown ephemeral key {ephemeral!r}") from None
        return ecdhe_shared_secret(group, private, point)

    def _master(self, premaster: bytes, client_random: bytes, server_random: bytes,
                cipher_suite: int, session_hash: bytes | None) -> KeyHandle:
        if session_hash is not None:
            master = prf.extended_master_secret(premaster, session_hash)
        else:
            master = prf.master_secret(premaster, client_random, server_random)
        return self._install(master, cipher_suite, client_random, server_random,
                             session_hash is not None)

    def resume(self, session: KeyHandle, client_random: bytes, server_random: bytes) -> KeyHandle:
        s = self._get(session)
        return self._install(s.master_secret, session.cipher_suite, client_random, server_random,
                             s.ems)

    def verify_data(self, handle: KeyHandle, from_client: bool, transcript_hash: bytes) -> bytes:
        return prf.verify_data(self._get(handle).master_secret, from_client, transcript_hash)

    def check_finished(self, handle: KeyHandle, from_client: bool, transcript_hash: bytes,
                       verify_data: bytes) -> bool:
        expected = self.verify_data(handle, from_client, transcript_hash)
        return hmac.compare_digest(verify_data, expected)

    def finish(self, handle: KeyHandle, client_hash: bytes, client_verify_data: bytes,
               server_hash: bytes) -> bytes | None:
        if not self.check_finished(handle, True, client_hash, client_verify_data):
            return None
        return self.verify_data(handle, False, server_hash)

    def derive_finish(self, encrypted_premaster: bytes, client_version: int,
                      client_random: bytes, server_random: bytes, cipher_suite: int,
                      transcript: bytes, extended_master_secret: bool, record_version: int,
                      finished_fragment: bytes, *,
                      ephemeral: KeyHandle | None = None) -> FlightResult | None:
        """:meth:`FlightDelegate.derive_finish` in this process (same RNG draws as
        :meth:`derive`, so the handshake's bytes do not depend on which path was taken)."""
        client_hash = prf.transcript_hash(transcript)
        handle = self.derive(encrypted_premaster, client_version, client_random, server_random,
                             cipher_suite, client_hash if extended_master_secret else None,
                             ephemeral=ephemeral)
        try:
            message = self.open(handle, True, [(0, _HANDSHAKE, record_version,
                                                finished_fragment)])[0]
        except ValueError:
            self.release(handle)
            raise
        if not (len(message) == 4 + _VERIFY_DATA_LENGTH and message[0] == _FINISHED
                and int.from_bytes(message[1:4], "big") == _VERIFY_DATA_LENGTH
                and self.check_finished(handle, True, client_hash, message[4:])):
            self.release(handle)
            return None
        ours = self.verify_data(handle, False, prf.transcript_hash(transcript + message))
        return FlightResult(handle, message, ours)

    def seal(self, handle: KeyHandle, from_client: bool, records: Sequence[OutgoingRecord]) -> bytes:
        s = self._get(handle)
        protection = s.write.get(from_client)
        if protection is None:
            keys = s.client if from_client else s.server
            protection = s.write[from_client] = WriteProtection(keys, self._rng)
        records = list(records)
        if len(records) == 1:
            return protection.seal(records[0])
        return b"".join(protection.seal_many(list(run))
                        for _, run in groupby(records, key=lambda r: r.content_type))

    def open(self, handle: KeyHandle, from_client: bool,
             records: Sequence[tuple[int, int, int, bytes]]) -> list[bytes]:
        s = self._get(handle)
        cipher = s.read.get(from_client)
        if cipher is None:
            cipher = s.read[from_client] = (s.client if from_client else s.server).cipher()
        return [cipher.open(seq, ct, version, fragment)  # type: ignore[attr-defined]  # the read cipher is stored as object; cipher() makes an opener
                for seq, ct, version, fragment in records]

    def release(self, handle: KeyHandle) -> None:
        """Forget a handle's secrets (a session evicted from the store, a closed connection,
        an ephemeral key whose ClientKeyExchange never came)."""
        self._secrets.pop(handle.id, None)
        self._ephemerals.pop(handle.id, None)

    def holds(self) -> int:
        """How many handles (sessions and ephemeral keys) this delegate keeps now."""
        return len(self._secrets) + len(self._ephemerals)
