"""The guardian's logic: one request message in, one reply message out (no sockets).

:class:`GuardianService` is what the secure coprocessor runs in the paper (``webalps.md`` §4.1,
Figure 3).  It holds the RSA private key and, through a :class:`tls12.delegate.LocalDelegate`,
every premaster, master secret and record key; the host only ever sees
:class:`tls12.delegate.KeyHandle` numbers.  Per handle it also keeps what a guardian must own
to stay in charge of the channel:

* **the sequence numbers.**  ``OPEN`` must start at the next client record and ``SEAL`` at the
  next server record, both consecutive; anything else is refused (``SEQUENCE``).  A host that
  replays, drops or reorders a client record cannot make the guardian accept it twice or out of
  order, and cannot make it seal two plaintexts under one sequence number (one explicit IV);
* **the direction.**  The guardian opens only client records and seals only server records,
  computes only the server's Finished and checks only the client's: a host cannot forge
  client->server data (a vote) by asking the guardian to seal it;
* **the handshake order.**  No application data is opened or sealed before the client's
  Finished was checked right, and a session resumes only with its own suite.  Each channel's
  state (:class:`webalps_sim.state.ChannelState`) moves only along the table of
  :mod:`webalps_sim.state`, which every request consults first.  (The guardian
  sees transcript *hashes*, or for ``DERIVE_FINISH`` the public handshake messages it hashes
  itself, as the paper's co-server sees only the randoms and the encrypted premaster: what the
  host negotiated in the hello messages is the host's to choose.)
* **the request router** (:mod:`webalps_sim.router`): application data is opened *and* read
  here; requests the guardian application answers are answered here, sealed at the next server
  sequence numbers and returned as records (:class:`webalps_sim.protocol.Opened`), and the host
  gets ``b""`` for them.  An ``OPEN`` batch is atomic: if one record fails, nothing advances.

**ECDHE_RSA** (``EPHEMERAL``, then ``DERIVE`` / ``DERIVE_FINISH`` with ``ephemeral_id``): the
guardian makes the ephemeral key and signs the ServerKeyExchange; the private key stays here,
serves exactly one key exchange (spent even when the client's point is invalid, which is
``BAD_KEY_EXCHANGE``), and the suite must be an ECDHE_RSA suite and the one the key was made for.
An RSA suite never takes an ephemeral key, and an ECDHE suite never an RSA premaster.

**Bounded.**  Channels and pending ephemeral keys live in two
:class:`webalps_sim.state.HandleTable` values: at most ``max_sessions`` channels and
``max_ephemerals`` keys, least recently used evicted first, each dropped after
``session_lifetime`` idle seconds of the injected ``clock``, and every handle belongs to the
*owner* that created it -- the host connection, which the server passes with each frame --
and is freed by :meth:`GuardianService.close_owner` when that connection closes.  Whatever is
dropped has its secrets freed in the delegate, and its handle is ``UNKNOWN_HANDLE`` from then on.
A channel keeps only what it needs: its request router (an h11 parser) is made at its first
application-data record, and not at all for the null application; once the server's
close_notify (or a fatal alert) is sealed, that direction's record cipher is dropped and later
``SEAL`` requests are refused, and likewise for the client's direction and ``OPEN`` (a record
cipher is about 18 KB; what a cached session keeps to resume is about 2 KB).

Every operation is charged to the cost model (:mod:`webalps_sim.app`): ``rsa`` per premaster
and per ServerKeyExchange signature, ``finished`` per Finished, ``seal`` / ``open`` per batch
with its plaintext bytes, ``transfer`` per request with the bytes that cross the host<->card
boundary both ways.

**Debug switch** ``reveal`` (``python -m webalps_sim.guardian --debug-reveal-secrets FILE``):
writes, for each handle, the premaster, master secret and all record keys as one JSON line
(for ECDHE also the ephemeral private key, ``ephemeral_private``; the premaster is then the ECDH
shared secret).  It exists only so that a test can search the host's memory and the
host<->guardian channel for these exact values; never enable it in a deployment (it defeats the
guardian).

**Key log** ``keylog`` (``python -m webalps_sim.guardian --keylog FILE``, or ``SSLKEYLOGFILE``):
the NSS key-log line of each handle derived or resumed (:mod:`tls12.keylog`), written by the
delegate that holds the master secret, so that Wireshark can decrypt a capture of the client's
connection.  The host cannot write it: it never holds a master secret.  A debugging switch,
off by default, as ``reveal``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tls12.delegate import DelegateError, KeyHandle, LocalDelegate
from tls12.ecdhe import ecdhe_shared_secret
from tls12.errors import IllegalParameter
from tls12.messages import HandshakeType, frame_handshake
from tls12.record import MAX_PLAINTEXT, ContentType, OutgoingRecord
from tls12.suites import SUITES, CipherSuite, KeyExchange

from . import protocol as p
from .app import CostCharger, GuardianApp, NoCost, NullApp
from .errors import WebAlpsError
from .router import RequestRouter
from .state import ChannelInput, ChannelState, ChannelStateError, HandleTable, advance

__all__ = ["GuardianService", "GuardianFailure", "DEFAULT_MAX_SESSIONS",
           "DEFAULT_SESSION_LIFETIME", "DEFAULT_OWNER"]

DEFAULT_MAX_SESSIONS = 16_384
"""Channels (live connections and cached sessions) kept at most: above a WebALPS host's
default session cache of 10,000 (:class:`webalps_sim.aio.host.GuardianSessionStore`)."""
DEFAULT_SESSION_LIFETIME = 3600.0
"""Seconds a channel or ephemeral key may stay unused before it is dropped."""
DEFAULT_OWNER = 0
"""The owner of handles created by callers that name none (tests driving the service)."""


def _no_clock() -> float:
    """The default clock: time stands still, so nothing expires (the server injects a real one)."""
    return 0.0

_APPLICATION_DATA = ContentType.APPLICATION_DATA
_HANDSHAKE = ContentType.HANDSHAKE
_P = ParamSpec("_P")
_R = TypeVar("_R")
_M = TypeVar("_M", bound=p.Message)


class GuardianFailure(WebAlpsError):
    """A request the guardian refuses; becomes an :class:`webalps_sim.protocol.Error` reply."""

    def __init__(self, code: p.ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(slots=True)
class _Channel:
    """What the guardian tracks per handle besides the keys (those stay in the delegate)."""

    suite: int
    state: ChannelState
    """Where the channel is in :mod:`webalps_sim.state`'s table (every request consults it)."""
    read_seq: int = 0
    write_seq: int = 0
    version: int = 0x0303
    router: RequestRouter | None = None
    """Made at the first application-data record (a cached session never needs one)."""
    write_closed: bool = False
    """The server's close_notify or a fatal alert was sealed: nothing more is sealed."""
    read_closed: bool = False
    """The client's close_notify or a fatal alert was opened: nothing more is opened."""


class GuardianService:
    """Answers host requests (:mod:`webalps_sim.protocol` messages) with the guardian's secrets.

    ``chain`` (DER, leaf first) and ``measurement`` are what ``HELLO`` reports; ``run_id`` is
    fresh per process.  ``reveal`` and ``keylog`` are the debug switches described in the
    module docstring.
    The bounds (module docstring): ``max_sessions`` channels (default
    :data:`DEFAULT_MAX_SESSIONS`), ``max_ephemerals`` pending ECDHE keys (default: the same),
    ``session_lifetime`` idle seconds (:data:`DEFAULT_SESSION_LIFETIME`) measured by ``clock``
    (default: a clock that stands still, so nothing expires).
    """

    def __init__(self, private_key: rsa.RSAPrivateKey, chain: tuple[bytes, ...],
                 measurement: bytes, *, app: GuardianApp | None = None, app_name: str = "null",
                 cost: CostCharger | None = None, rng: Callable[[int], bytes] = os.urandom,
                 reveal: Callable[[str], None] | None = None,
                 keylog: Callable[[str], None] | None = None,
                 max_sessions: int = DEFAULT_MAX_SESSIONS, max_ephemerals: int | None = None,
                 session_lifetime: float = DEFAULT_SESSION_LIFETIME,
                 clock: Callable[[], float] = _no_clock) -> None:
        self._key = private_key
        self._delegate = LocalDelegate(private_key, rng=rng, keylog=keylog)
        self.info = p.Info(tuple(chain), measurement, app_name, rng(16))
        self.app = app if app is not None else NullApp()
        self.cost = cost if cost is not None else NoCost()
        self._channels: HandleTable[_Channel] = HandleTable(
            max_sessions, session_lifetime, clock, self._free)
        self._ephemerals: HandleTable[int] = HandleTable(  # handle id -> cipher suite
            max_sessions if max_ephemerals is None else max_ephemerals, session_lifetime, clock,
            self._free)
        self._reveal = reveal
        self._owner: Hashable = DEFAULT_OWNER

    # -- dispatch ------------------------------------------------------------------------

    def handle_frame(self, frame: p.Frame, owner: Hashable = DEFAULT_OWNER) -> bytes:
        """The reply frame to one request frame (an ``ERROR`` frame if it is refused);
        handles it creates belong to ``owner`` (the host connection it came on)."""
        try:
            if frame.type >= 0x80:
                raise GuardianFailure(p.ErrorCode.UNSUPPORTED,
                                      f"{p.FrameType(frame.type).name} is a reply, not a request")
            message = p.decode_message(frame)
            reply = self.handle(message, owner)
        except p.ProtocolError as exc:
            reply = p.Error(p.ErrorCode.MALFORMED, str(exc))
        except GuardianFailure as exc:
            reply = p.Error(exc.code, str(exc))
        payload = reply.to_payload()
        self.cost.charge("transfer", len(frame.payload) + len(payload))
        return p.encode_frame(reply.TYPE, frame.request_id, payload)

    def handle(self, message: object, owner: Hashable = DEFAULT_OWNER) -> p.Message:
        """The reply message to one request message; new handles belong to ``owner``."""
        if not isinstance(message, p.Message) or (method := _HANDLERS.get(type(message))) is None:
            raise GuardianFailure(p.ErrorCode.UNSUPPORTED,
                                  f"{type(message).__name__} is not a request")
        self._owner = owner
        return method(self, message)

    def close_owner(self, owner: Hashable) -> int:
        """Free every handle ``owner`` created (its host connection closed); how many."""
        return self._channels.drop_owner(owner) + self._ephemerals.drop_owner(owner)

    def holds(self) -> int:
        """How many handles (channels and pending ephemeral keys) the guardian keeps now."""
        return len(self._channels) + len(self._ephemerals)

    # -- requests ------------------------------------------------------------------------

    def _hello(self, _: p.Hello) -> p.Info:
        return self.info

    def _ephemeral(self, m: p.Ephemeral) -> p.EphemeralReply:
        if _key_exchange(m.cipher_suite) is not KeyExchange.ECDHE_RSA:
            raise GuardianFailure(p.ErrorCode.UNSUPPORTED,
                                  f"suite 0x{m.cipher_suite:04x} is not an ECDHE_RSA suite")
        self.cost.charge("rsa", (self._key.key_size + 7) // 8)
        try:
            key = self._delegate.ephemeral(m.group, m.scheme, m.client_random, m.server_random,
                                           m.cipher_suite)
        except ValueError as exc:  # an unknown group or signature scheme
            raise GuardianFailure(p.ErrorCode.UNSUPPORTED, f"cannot make the key: {exc}") from None
        self._ephemerals.add(key.handle.id, m.cipher_suite, self._owner)
        return p.EphemeralReply(key.handle.id, key.handle.cipher_suite, key.public, key.signature)

    def _derive(self, m: p.Derive) -> p.HandleReply:
        ephemeral = self._key_exchange(m.cipher_suite, m.ephemeral_id, len(m.encrypted_premaster))
        revealed = self._ephemeral_secret(ephemeral)
        try:
            handle = self._delegate.derive(m.encrypted_premaster, m.client_version,
                                           m.client_random, m.server_random, m.cipher_suite,
                                           m.session_hash, ephemeral=ephemeral)
        except IllegalParameter as exc:
            raise GuardianFailure(p.ErrorCode.BAD_KEY_EXCHANGE, str(exc)) from None
        except (KeyError, ValueError) as exc:
            raise GuardianFailure(p.ErrorCode.UNSUPPORTED, f"cannot derive: {exc}") from None
        except DelegateError as exc:
            raise GuardianFailure(p.ErrorCode.UNKNOWN_HANDLE, str(exc)) from None
        finally:
            self._spend(ephemeral)
        self._new_channel(handle, m.encrypted_premaster, ChannelInput.DERIVE, revealed)
        return p.HandleReply(handle.id, handle.cipher_suite)

    def _resume(self, m: p.Resume) -> p.HandleReply:
        source = self._channel(m.handle_id)
        if source.suite != m.cipher_suite:
            raise GuardianFailure(p.ErrorCode.UNSUPPORTED, "a session resumes with its own suite")
        _step(source, ChannelInput.RESUME_FROM)
        handle = self._call(self._delegate.resume, KeyHandle(m.handle_id, m.cipher_suite),
                            m.client_random, m.server_random)
        self._new_channel(handle, None, ChannelInput.RESUME)
        return p.HandleReply(handle.id, handle.cipher_suite)

    def _verify_data(self, m: p.VerifyData) -> p.DataReply:
        if m.from_client:
            raise GuardianFailure(p.ErrorCode.UNSUPPORTED, "the guardian computes the server's "
                                  "Finished only")
        self.cost.charge("finished", len(m.transcript_hash))
        _step(self._channel(m.handle_id), ChannelInput.VERIFY_DATA)
        return p.DataReply(self._call(self._delegate.verify_data, self._handle(m), False,
                                      m.transcript_hash))

    def _check_finished(self, m: p.CheckFinished) -> p.BoolReply:
        if not m.from_client:
            raise GuardianFailure(p.ErrorCode.UNSUPPORTED, "the guardian checks the client's "
                                  "Finished only")
        channel = self._channel(m.handle_id)
        _step(channel, ChannelInput.CHECK_FINISHED)
        self.cost.charge("finished", len(m.transcript_hash))
        ok = self._call(self._delegate.check_finished, self._handle(m), True, m.transcript_hash,
                        m.verify_data)
        if ok:
            _step(channel, ChannelInput.CLIENT_FINISHED_VERIFIED)
        return p.BoolReply(ok)

    def _finish(self, m: p.Finish) -> p.FinishReply:
        channel = self._channel(m.handle_id)
        _step(channel, ChannelInput.FINISH)
        handle = KeyHandle(m.handle_id, m.cipher_suite)
        self.cost.charge("finished", len(m.client_hash))
        ok = self._call(self._delegate.check_finished, handle, True, m.client_hash,
                        m.client_verify_data)
        if not ok:
            return p.FinishReply(False)
        _step(channel, ChannelInput.CLIENT_FINISHED_VERIFIED)
        self.cost.charge("finished", len(m.server_hash))
        verify_data = self._call(self._delegate.verify_data, handle, False, m.server_hash)
        message = frame_handshake(HandshakeType.FINISHED, verify_data)
        self.cost.charge("seal", len(message))
        seq = channel.write_seq
        sealed = self._delegate.seal(handle, False, [OutgoingRecord(_HANDSHAKE, m.version, seq,
                                                                    message)])
        channel.write_seq += 1
        return p.FinishReply(True, verify_data, seq, sealed)

    def _derive_finish(self, m: p.DeriveFinish) -> p.DerivedReply:
        """``DERIVE`` + ``OPEN`` of the client's Finished + ``FINISH`` in one request.

        The same checks as the three requests: the record opens as client record 0 of type
        handshake, it is exactly a Finished message whose verify_data is right for the
        transcript, and only then does the channel exist (Finished checked, next client record
        1) with the server's Finished sealed at server record 0.  A failure keeps nothing.
        """
        ephemeral = self._key_exchange(m.cipher_suite, m.ephemeral_id, len(m.encrypted_premaster))
        revealed = self._ephemeral_secret(ephemeral)
        self.cost.charge("open", len(m.fragment))
        self.cost.charge("finished", 32)
        try:
            result = self._delegate.derive_finish(
                m.encrypted_premaster, m.client_version, m.client_random, m.server_random,
                m.cipher_suite, m.transcript, m.extended_master_secret, m.version, m.fragment,
                ephemeral=ephemeral)
        except IllegalParameter as exc:
            raise GuardianFailure(p.ErrorCode.BAD_KEY_EXCHANGE, str(exc)) from None
        except KeyError as exc:
            raise GuardianFailure(p.ErrorCode.UNSUPPORTED, f"cannot derive: {exc}") from None
        except ValueError:
            raise GuardianFailure(p.ErrorCode.BAD_RECORD, "bad record MAC") from None
        except DelegateError as exc:
            raise GuardianFailure(p.ErrorCode.UNKNOWN_HANDLE, str(exc)) from None
        finally:
            self._spend(ephemeral)
        if result is None:
            raise GuardianFailure(p.ErrorCode.BAD_FINISHED, "the client's Finished is wrong")
        handle = result.handle
        self.cost.charge("finished", 32)
        message = frame_handshake(HandshakeType.FINISHED, result.server_verify_data)
        self.cost.charge("seal", len(message))
        sealed = self._delegate.seal(handle, False, [OutgoingRecord(_HANDSHAKE, m.version, 0,
                                                                    message)])
        channel = self._new_channel(handle, m.encrypted_premaster, ChannelInput.DERIVE_FINISH,
                                    revealed)
        channel.read_seq = channel.write_seq = 1
        return p.DerivedReply(handle.id, handle.cipher_suite, result.client_finished,
                              result.server_verify_data, 0, sealed)

    def _seal(self, m: p.Seal) -> p.Sealed:
        if m.from_client:
            raise GuardianFailure(p.ErrorCode.UNSUPPORTED, "the guardian seals server records only")
        channel = self._channel(m.handle_id)
        if not m.records:
            return p.Sealed(b"")
        if channel.write_closed:
            raise GuardianFailure(p.ErrorCode.UNSUPPORTED, "the server's side of this channel "
                                  "is closed (its close_notify or a fatal alert was sealed)")
        _check_run([r[2] for r in m.records], channel.write_seq, "seal")
        for record in m.records:
            _step(channel, ChannelInput.SEAL_APPLICATION if record[0] == _APPLICATION_DATA
                  else ChannelInput.SEAL_HANDSHAKE)
        records = [OutgoingRecord(ct, version, seq, data) for ct, version, seq, data in m.records]
        self.cost.charge("seal", sum(len(r.plaintext) for r in records))
        # a response and the close_notify behind it come in one request: the delegate seals
        # each run of one content type (tls12.delegate.LocalDelegate.seal)
        sealed = self._call(self._delegate.seal, self._handle(m), False, records)
        channel.write_seq += len(records)
        if any(_final_alert(r.content_type, r.plaintext) for r in records):
            self._retire(m.handle_id, channel, write=True)
        return p.Sealed(sealed)

    def _open(self, m: p.Open) -> p.Opened:
        if not m.from_client:
            raise GuardianFailure(p.ErrorCode.UNSUPPORTED, "the guardian opens client records only")
        channel = self._channel(m.handle_id)
        if not m.records:
            return p.Opened(())
        if channel.read_closed:
            raise GuardianFailure(p.ErrorCode.UNSUPPORTED, "the client's side of this channel "
                                  "is closed (its close_notify or a fatal alert was opened)")
        _check_run([r[0] for r in m.records], channel.read_seq, "open")
        for record in m.records:
            _step(channel, ChannelInput.OPEN_APPLICATION if record[1] == _APPLICATION_DATA
                  else ChannelInput.OPEN_HANDSHAKE)
        self.cost.charge("open", sum(len(r[3]) for r in m.records))
        try:
            plaintexts = self._delegate.open(self._handle(m), True, m.records)
        except DelegateError as exc:
            raise GuardianFailure(p.ErrorCode.UNKNOWN_HANDLE, str(exc)) from None
        except ValueError:
            raise GuardianFailure(p.ErrorCode.BAD_RECORD, "bad record MAC") from None
        channel.read_seq += len(m.records)
        out, responses, close = self._route(channel, m.records, plaintexts)
        if any(_final_alert(r[1], pt) for r, pt in zip(m.records, plaintexts, strict=True)):
            self._retire(m.handle_id, channel, write=False)
        if not responses or channel.write_closed:
            return p.Opened(tuple(out))
        data = b"".join(responses)
        records = [
            OutgoingRecord(_APPLICATION_DATA, channel.version, channel.write_seq + i,
                           data[j : j + MAX_PLAINTEXT])
            for i, j in enumerate(range(0, len(data), MAX_PLAINTEXT))
        ]
        self.cost.charge("seal", len(data))
        sealed = self._delegate.seal(self._handle(m), False, records)
        channel.write_seq += len(records)
        return p.Opened(tuple(out), len(records), sealed, close)

    def _route(self, channel: _Channel, records: tuple[tuple[int, int, int, bytes], ...],
               plaintexts: list[bytes]) -> tuple[list[bytes], list[bytes], bool]:
        """Opened plaintexts through the channel's router: (bytes for the host per record,
        responses to seal, whether an answered request asked to close)."""
        out: list[bytes] = []
        responses: list[bytes] = []
        close = False
        for (_, content_type, version, _), plaintext in zip(records, plaintexts, strict=True):
            if content_type != _APPLICATION_DATA:
                out.append(plaintext)
                continue
            channel.version = version
            if self._passthrough:
                out.append(plaintext)
                continue
            if channel.router is None:
                channel.router = RequestRouter(self.app)
            routed = channel.router.feed(plaintext)
            out.append(routed.to_host)
            responses += routed.responses
            close = close or routed.close
        return out, responses, close

    def _retire(self, handle_id: int, channel: _Channel, *, write: bool) -> None:
        """One direction of the connection ended (close_notify or a fatal alert): drop what
        only that direction used -- its record cipher (about 18 KB each) and, for the client's
        side, the request router.  What a cached session needs to resume (the master secret)
        stays until the handle is released, evicted, expired or its host connection closes."""
        secrets = self._delegate._secrets.get(handle_id)
        if write:
            channel.write_closed = True
            if secrets is not None:
                secrets.write.pop(False, None)
        else:
            channel.read_closed = True
            channel.router = None
            if secrets is not None:
                secrets.read.pop(True, None)

    def _release(self, m: p.Release) -> p.Ok:
        """Forget a channel or a pending ephemeral key (``OK`` also if it is unknown already)."""
        channel = self._channels.pop(m.handle_id)
        advance(ChannelState.NEW if channel is None else channel.state, ChannelInput.RELEASE)
        self._ephemerals.pop(m.handle_id)
        self._free(m.handle_id)
        return p.Ok()

    # -- helpers -------------------------------------------------------------------------

    def _handle(self, m: p.VerifyData | p.CheckFinished | p.Seal | p.Open) -> KeyHandle:
        return KeyHandle(m.handle_id, m.cipher_suite)

    def _channel(self, handle_id: int) -> _Channel:
        """The channel, now the most recently used; unknown, released, evicted or expired:
        ``UNKNOWN_HANDLE``."""
        channel = self._channels.use(handle_id)
        if channel is None:
            raise GuardianFailure(p.ErrorCode.UNKNOWN_HANDLE, f"unknown key handle {handle_id}")
        return channel

    def _free(self, handle_id: int) -> None:
        """Forget a handle's secrets in the delegate (``on_drop`` of both handle tables)."""
        self._delegate.release(KeyHandle(handle_id, 0))

    def _key_exchange(self, suite: int, ephemeral_id: int, nbytes: int) -> KeyHandle | None:
        """Check that the key exchange fits the suite.  RSA (``ephemeral_id`` 0): charge the
        decryption, ``None``.  ECDHE: the ephemeral key's handle, taken out of the table now
        (used once, whatever happens next)."""
        ecdhe = _key_exchange(suite) is KeyExchange.ECDHE_RSA
        if not ephemeral_id:
            if ecdhe:
                raise GuardianFailure(p.ErrorCode.UNSUPPORTED,
                                      "an ECDHE suite needs an EPHEMERAL key (ephemeral_id)")
            self.cost.charge("rsa", nbytes)
            return None
        made_for = self._ephemerals.pop(ephemeral_id)
        if made_for is None:
            raise GuardianFailure(p.ErrorCode.UNKNOWN_HANDLE,
                                  f"unknown ephemeral key {ephemeral_id} (spent, released, "
                                  "evicted or expired)")
        if made_for != suite:
            self._free(ephemeral_id)
            raise GuardianFailure(p.ErrorCode.UNSUPPORTED,
                                  f"ephemeral key {ephemeral_id} was made for suite "
                                  f"0x{made_for:04x}, not 0x{suite:04x}")
        return KeyHandle(ephemeral_id, made_for)

    def _spend(self, ephemeral: KeyHandle | None) -> None:
        """An ephemeral key serves one key exchange: make sure the delegate forgot it."""
        if ephemeral is not None:
            self._free(ephemeral.id)

    def _ephemeral_secret(self, ephemeral: KeyHandle | None) -> tuple[int, bytes] | None:
        """For the debug switch only: the ephemeral key's (group, private) before it is spent."""
        if self._reveal is None or ephemeral is None:
            return None
        return self._delegate._ephemerals.get(ephemeral.id)

    def _call(self, fn: Callable[_P, _R], *args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return fn(*args, **kwargs)
        except DelegateError as exc:
            raise GuardianFailure(p.ErrorCode.UNKNOWN_HANDLE, str(exc)) from None

    def _new_channel(self, handle: KeyHandle, encrypted_premaster: bytes | None,
                     how: ChannelInput, ephemeral: tuple[int, bytes] | None = None) -> _Channel:
        channel = _Channel(handle.cipher_suite, advance(ChannelState.NEW, how))
        self._channels.add(handle.id, channel, self._owner)
        if self._reveal is not None:
            self._reveal(json.dumps(self._secrets_of(handle, encrypted_premaster, ephemeral)))
        return channel

    @property
    def _passthrough(self) -> bool:
        """The null application claims nothing: opened bytes go to the host unparsed."""
        return isinstance(self.app, NullApp)

    def _secrets_of(self, handle: KeyHandle, encrypted: bytes | None,
                    ephemeral: tuple[int, bytes] | None) -> dict[str, object]:
        """The debug switch's record of one handle (see the module docstring)."""
        s = self._delegate._secrets[handle.id]
        record: dict[str, object] = {"handle": handle.id}
        premaster = b""
        if ephemeral is not None and encrypted is not None:
            group, private = ephemeral
            premaster = ecdhe_shared_secret(group, private, encrypted)
            record["ephemeral_private"] = private.hex()
        elif encrypted is not None:
            try:
                premaster = self._key.decrypt(encrypted, padding.PKCS1v15())
            except ValueError:
                premaster = b""
        keys = [k.hex() for d in (s.client, s.server)
                for k in (d.enc_key, d.mac_key, d.iv, d.iv_key) if k]
        record.update(premaster=premaster.hex(), master_secret=s.master_secret.hex(), keys=keys)
        return record


def _key_exchange(suite: int) -> KeyExchange | None:
    """The suite's key exchange; ``None`` for a suite this guardian does not know."""
    try:
        return SUITES[CipherSuite(suite)].key_exchange
    except (ValueError, KeyError):
        return None


def _step(channel: _Channel, channel_input: ChannelInput) -> None:
    """Move ``channel`` along the state table, or refuse the request (``UNSUPPORTED``) with the
    table's reason; a refused input leaves the channel as it was."""
    try:
        channel.state = advance(channel.state, channel_input)
    except ChannelStateError as exc:
        raise GuardianFailure(p.ErrorCode.UNSUPPORTED, str(exc)) from None


def _final_alert(content_type: int, plaintext: bytes) -> bool:
    """Whether a record is an alert that ends its direction: close_notify (0) or fatal (2)."""
    return content_type == ContentType.ALERT and len(plaintext) >= 2 and (
        plaintext[0] == 2 or plaintext[1] == 0)


def _check_run(seqs: list[int], expected: int, what: str) -> None:
    if seqs != list(range(expected, expected + len(seqs))):
        raise GuardianFailure(p.ErrorCode.SEQUENCE,
                              f"{what} of sequence numbers {seqs[0]}..{seqs[-1]}, expected "
                              f"{expected} onwards, consecutive")


class _HandlerTable:
    """Request type -> its ``GuardianService`` method; ``add`` and ``get`` tie the method's
    argument type to its key, which a plain dict cannot say."""

    def __init__(self) -> None:
        self._handlers: dict[type[p.Message], Callable[..., p.Message]] = {}

    def add(self, cls: type[_M], method: Callable[[GuardianService, _M], p.Message]) -> None:
        self._handlers[cls] = method

    def get(self, cls: type[_M]) -> Callable[[GuardianService, _M], p.Message] | None:
        return self._handlers.get(cls)


_HANDLERS = _HandlerTable()
_HANDLERS.add(p.Hello, GuardianService._hello)
_HANDLERS.add(p.Ephemeral, GuardianService._ephemeral)
_HANDLERS.add(p.Derive, GuardianService._derive)
_HANDLERS.add(p.Resume, GuardianService._resume)
_HANDLERS.add(p.VerifyData, GuardianService._verify_data)
_HANDLERS.add(p.CheckFinished, GuardianService._check_finished)
_HANDLERS.add(p.Seal, GuardianService._seal)
_HANDLERS.add(p.Open, GuardianService._open)
_HANDLERS.add(p.Release, GuardianService._release)
_HANDLERS.add(p.Finish, GuardianService._finish)
_HANDLERS.add(p.DeriveFinish, GuardianService._derive_finish)
