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

Every operation is charged to the cost model (:mod:`webalps_sim.app`): ``rsa`` per premaster,
``finished`` per Finished, ``seal`` / ``open`` per batch with its plaintext bytes, ``transfer``
per request with the bytes that cross the host<->card boundary both ways.

**Debug switch** ``reveal`` (``python -m webalps_sim.guardian --debug-reveal-secrets FILE``):
writes, for each handle, the premaster, master secret and all record keys as one JSON line.
It exists only so that a test can search the host's memory and the host<->guardian channel for
these exact values; never enable it in a deployment (it defeats the guardian).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tls12.delegate import DelegateError, KeyHandle, LocalDelegate
from tls12.messages import HandshakeType, frame_handshake
from tls12.record import MAX_PLAINTEXT, ContentType, OutgoingRecord

from . import protocol as p
from .app import CostCharger, GuardianApp, NoCost, NullApp
from .errors import WebAlpsError
from .router import RequestRouter
from .state import ChannelInput, ChannelState, ChannelStateError, advance

__all__ = ["GuardianService", "GuardianFailure"]

_APPLICATION_DATA = ContentType.APPLICATION_DATA
_HANDSHAKE = ContentType.HANDSHAKE


class GuardianFailure(WebAlpsError):
    """A request the guardian refuses; becomes an :class:`webalps_sim.protocol.Error` reply."""

    def __init__(self, code: p.ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(slots=True)
class _Channel:
    """What the guardian tracks per handle besides the keys (those stay in the delegate)."""

    router: RequestRouter
    suite: int
    state: ChannelState
    """Where the channel is in :mod:`webalps_sim.state`'s table (every request consults it)."""
    read_seq: int = 0
    write_seq: int = 0
    version: int = 0x0303
    revealed: dict[str, str] = field(default_factory=dict)


class GuardianService:
    """Answers host requests (:mod:`webalps_sim.protocol` messages) with the guardian's secrets.

    ``chain`` (DER, leaf first) and ``measurement`` are what ``HELLO`` reports; ``run_id`` is
    fresh per process.  ``reveal`` is the debug switch described in the module docstring.
    """

    def __init__(self, private_key: rsa.RSAPrivateKey, chain: tuple[bytes, ...],
                 measurement: bytes, *, app: GuardianApp | None = None, app_name: str = "null",
                 cost: CostCharger | None = None, rng: Callable[[int], bytes] = os.urandom,
                 reveal: Callable[[str], None] | None = None) -> None:
        self._key = private_key
        self._delegate = LocalDelegate(private_key, rng=rng)
        self.info = p.Info(tuple(chain), measurement, app_name, rng(16))
        self.app = app if app is not None else NullApp()
        self.cost = cost if cost is not None else NoCost()
        self._channels: dict[int, _Channel] = {}
        self._reveal = reveal

    # -- dispatch ------------------------------------------------------------------------

    def handle_frame(self, frame: p.Frame) -> bytes:
        """The reply frame to one request frame (an ``ERROR`` frame if it is refused)."""
        try:
            if frame.type >= 0x80:
                raise GuardianFailure(p.ErrorCode.UNSUPPORTED,
                                      f"{p.FrameType(frame.type).name} is a reply, not a request")
            message = p.decode_message(frame)
            reply = self.handle(message)
        except p.ProtocolError as exc:
            reply = p.Error(p.ErrorCode.MALFORMED, str(exc))
        except GuardianFailure as exc:
            reply = p.Error(exc.code, str(exc))
        payload = reply.to_payload()  # type: ignore[attr-defined]
        self.cost.charge("transfer", len(frame.payload) + len(payload))
        return p.encode_frame(reply.TYPE, frame.request_id, payload)  # type: ignore[attr-defined]

    def handle(self, message: object) -> object:
        """The reply message to one request message."""
        method = _HANDLERS.get(type(message))
        if method is None:
            raise GuardianFailure(p.ErrorCode.UNSUPPORTED,
                                  f"{type(message).__name__} is not a request")
        return method(self, message)

    # -- requests ------------------------------------------------------------------------

    def _hello(self, _: p.Hello) -> p.Info:
        return self.info

    def _derive(self, m: p.Derive) -> p.HandleReply:
        self.cost.charge("rsa", len(m.encrypted_premaster))
        try:
            handle = self._delegate.derive(m.encrypted_premaster, m.client_version,
                                           m.client_random, m.server_random, m.cipher_suite,
                                           m.session_hash)
        except (KeyError, ValueError) as exc:
            raise GuardianFailure(p.ErrorCode.UNSUPPORTED, f"cannot derive: {exc}") from None
        self._new_channel(handle, m.encrypted_premaster, ChannelInput.DERIVE)
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
        self.cost.charge("rsa", len(m.encrypted_premaster))
        self.cost.charge("open", len(m.fragment))
        self.cost.charge("finished", 32)
        try:
            result = self._delegate.derive_finish(
                m.encrypted_premaster, m.client_version, m.client_random, m.server_random,
                m.cipher_suite, m.transcript, m.extended_master_secret, m.version, m.fragment)
        except KeyError as exc:
            raise GuardianFailure(p.ErrorCode.UNSUPPORTED, f"cannot derive: {exc}") from None
        except ValueError:
            raise GuardianFailure(p.ErrorCode.BAD_RECORD, "bad record MAC") from None
        if result is None:
            raise GuardianFailure(p.ErrorCode.BAD_FINISHED, "the client's Finished is wrong")
        handle = result.handle
        self.cost.charge("finished", 32)
        message = frame_handshake(HandshakeType.FINISHED, result.server_verify_data)
        self.cost.charge("seal", len(message))
        sealed = self._delegate.seal(handle, False, [OutgoingRecord(_HANDSHAKE, m.version, 0,
                                                                    message)])
        self._new_channel(handle, m.encrypted_premaster, ChannelInput.DERIVE_FINISH)
        channel = self._channels[handle.id]
        channel.read_seq = channel.write_seq = 1
        return p.DerivedReply(handle.id, handle.cipher_suite, result.client_finished,
                              result.server_verify_data, 0, sealed)

    def _seal(self, m: p.Seal) -> p.Sealed:
        if m.from_client:
            raise GuardianFailure(p.ErrorCode.UNSUPPORTED, "the guardian seals server records only")
        channel = self._channel(m.handle_id)
        if not m.records:
            return p.Sealed(b"")
        _check_run([r[2] for r in m.records], channel.write_seq, "seal")
        for record in m.records:
            _step(channel, ChannelInput.SEAL_APPLICATION if record[0] == _APPLICATION_DATA
                  else ChannelInput.SEAL_HANDSHAKE)
        records = [OutgoingRecord(ct, version, seq, data) for ct, version, seq, data in m.records]
        self.cost.charge("seal", sum(len(r.plaintext) for r in records))
        # one delegate call per run of one content type (a response and the close_notify
        # behind it come in one request)
        handle = self._handle(m)
        runs: list[list[OutgoingRecord]] = []
        for record in records:
            if runs and runs[-1][0].content_type == record.content_type:
                runs[-1].append(record)
            else:
                runs.append([record])
        sealed = b"".join(self._call(self._delegate.seal, handle, False, run) for run in runs)
        channel.write_seq += len(records)
        return p.Sealed(sealed)

    def _open(self, m: p.Open) -> p.Opened:
        if not m.from_client:
            raise GuardianFailure(p.ErrorCode.UNSUPPORTED, "the guardian opens client records only")
        channel = self._channel(m.handle_id)
        if not m.records:
            return p.Opened(())
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
        out: list[bytes] = []
        responses: list[bytes] = []
        close = False
        for (_, content_type, version, _), plaintext in zip(m.records, plaintexts, strict=True):
            if content_type != _APPLICATION_DATA:
                out.append(plaintext)
                continue
            channel.version = version
            routed = channel.router.feed(plaintext)
            out.append(routed.to_host)
            responses += routed.responses
            close = close or routed.close
        if not responses:
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

    def _release(self, m: p.Release) -> p.Ok:
        channel = self._channels.pop(m.handle_id, None)
        advance(ChannelState.NEW if channel is None else channel.state, ChannelInput.RELEASE)
        self._delegate.release(KeyHandle(m.handle_id, 0))
        return p.Ok()

    # -- helpers -------------------------------------------------------------------------

    def _handle(self, m: p.VerifyData | p.CheckFinished | p.Seal | p.Open) -> KeyHandle:
        return KeyHandle(m.handle_id, m.cipher_suite)

    def _channel(self, handle_id: int) -> _Channel:
        try:
            return self._channels[handle_id]
        except KeyError:
            raise GuardianFailure(p.ErrorCode.UNKNOWN_HANDLE,
                                  f"unknown key handle {handle_id}") from None

    def _call(self, fn, *args):  # type: ignore[no-untyped-def]
        try:
            return fn(*args)
        except DelegateError as exc:
            raise GuardianFailure(p.ErrorCode.UNKNOWN_HANDLE, str(exc)) from None

    def _new_channel(self, handle: KeyHandle, encrypted_premaster: bytes | None,
                     how: ChannelInput) -> None:
        state = advance(ChannelState.NEW, how)
        self._channels[handle.id] = _Channel(RequestRouter(self.app), handle.cipher_suite, state)
        if self._reveal is not None:
            self._reveal(json.dumps(self._secrets_of(handle, encrypted_premaster)))

    def _secrets_of(self, handle: KeyHandle, encrypted: bytes | None) -> dict[str, object]:
        """The debug switch's record of one handle (see the module docstring)."""
        s = self._delegate._secrets[handle.id]
        premaster = b""
        if encrypted is not None:
            try:
                premaster = self._key.decrypt(encrypted, padding.PKCS1v15())
            except ValueError:
                premaster = b""
        keys = [k.hex() for d in (s.client, s.server)
                for k in (d.enc_key, d.mac_key, d.iv, d.iv_key) if k]
        return {"handle": handle.id, "premaster": premaster.hex(),
                "master_secret": s.master_secret.hex(), "keys": keys}


def _step(channel: _Channel, channel_input: ChannelInput) -> None:
    """Move ``channel`` along the state table, or refuse the request (``UNSUPPORTED``) with the
    table's reason; a refused input leaves the channel as it was."""
    try:
        channel.state = advance(channel.state, channel_input)
    except ChannelStateError as exc:
        raise GuardianFailure(p.ErrorCode.UNSUPPORTED, str(exc)) from None


def _check_run(seqs: list[int], expected: int, what: str) -> None:
    if seqs != list(range(expected, expected + len(seqs))):
        raise GuardianFailure(p.ErrorCode.SEQUENCE,
                              f"{what} of sequence numbers {seqs[0]}..{seqs[-1]}, expected "
                              f"{expected} onwards, consecutive")


_HANDLERS: dict[type, Callable[[GuardianService, object], object]] = {
    p.Hello: GuardianService._hello,
    p.Derive: GuardianService._derive,
    p.Resume: GuardianService._resume,
    p.VerifyData: GuardianService._verify_data,
    p.CheckFinished: GuardianService._check_finished,
    p.Seal: GuardianService._seal,
    p.Open: GuardianService._open,
    p.Release: GuardianService._release,
    p.Finish: GuardianService._finish,
    p.DeriveFinish: GuardianService._derive_finish,
}  # type: ignore[dict-item]
