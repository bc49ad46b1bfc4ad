"""The server side of the TLS 1.2 handshake (RFC 5246 §7.3, §7.4).

Full handshake::

    ClientHello          -->
                         <--  ServerHello, Certificate, [ServerKeyExchange], ServerHelloDone
    ClientKeyExchange,
    [ChangeCipherSpec],
    Finished             -->
                         <--  [ChangeCipherSpec], Finished

Abbreviated handshake (resumption by session ID): ServerHello, CCS and
Finished come from the server first.  The states and the transition table
are in ``ServerConnection.TRANSITIONS`` (drawn in ``docs/tls12-state-machine.md``).

Extended master secret (RFC 7627).  The server negotiates EMS whenever the
client offers it and, to interoperate with legacy clients, continues a full
handshake without it (§5.2 allows this; ``HandshakeComplete`` reports which
one the connection got).  Resumption follows §5.3: a session created with EMS
is never resumed without it (the handshake is aborted with
``handshake_failure``), a session created without EMS is never resumed by a
ClientHello that offers EMS (a full handshake follows).  When *neither* the
session nor the ClientHello uses EMS, §5.3 says the server SHOULD abort; this
server resumes such sessions, as OpenSSL 3.0 and BoringSSL do.  The attacks
that rule prevents (the triple handshake, §1) need what §5.4 then forbids --
renegotiation, ``tls-unique`` channel bindings, keying-material exporters --
and this core offers none of them (renegotiation is refused).  A session
created without EMS is no stronger than the legacy full handshake that made
it; a deployment that wants only EMS sessions can give the server a
:class:`tls12.session.SessionStore` whose ``put`` drops the others.

Customisation points (seam 4) -- override in a subclass:

* :meth:`ServerConnection._select_cipher_suite` -- suite choice;
* :meth:`ServerConnection._build_server_key_exchange` -- what the server sends
  (and signs) after its Certificate, ``None`` for plain RSA;
* :meth:`ServerConnection._premaster_from_client_key_exchange` -- how the
  premaster secret is obtained from the ClientKeyExchange body.

Delegated sessions (seam 5, :mod:`tls12.delegate`).  Given ``delegate=``, the
server hands the EncryptedPreMasterSecret to the delegate and keeps only the
:class:`tls12.delegate.KeyHandle` it returns: Finished values, record
protection and resumption all go through the delegate, and the session store
receives sessions that hold the handle.  Only RSA key exchange is delegated,
so such a server skips ECDHE suites.  Its config may hold the certificate chain alone
(:meth:`tls12.certs.Credentials.chain_only`), and :meth:`ServerConnection.queue_sealed` passes
on records the delegate sealed by itself (a WebALPS guardian answering a request).  Its config
has no key log (:mod:`tls12.keylog`): the delegate, which holds the secrets, writes it.
"""

from __future__ import annotations

import functools
import hmac
from enum import Enum
from typing import TYPE_CHECKING

from . import prf
from .buffer import Buffer
from .config import ServerConfig
from .connection import COMMON_TRANSITIONS, Connection, HandshakeState
from .context import ContextAttribute, ServerHandshakeContext
from .delegate import DelegateError
from .delegation import unwrap
from .ecdhe import GROUP_IDS, ecdhe_keypair, ecdhe_shared_secret
from .errors import (
    DecodeError,
    DecryptError,
    HandshakeFailure,
    IllegalParameter,
    LocalProtocolError,
    ProtocolVersionError,
)
from .handshake_table import Transition
from .keys import SUPPORTED_SCHEMES
from .messages import (
    SCSV_RENEGOTIATION,
    TLS12,
    Certificate,
    ClientHello,
    ExtensionType,
    Finished,
    HandshakeType,
    NamedGroup,
    ServerHello,
    ServerKeyExchangeECDHE,
    decode_ec_point_formats,
    decode_server_name,
    decode_u16_list,
    ecdhe_params_bytes,
    pull_client_hello,
    pull_client_key_exchange_ecdhe,
    pull_client_key_exchange_rsa,
    pull_finished,
    push_certificate,
    push_finished,
    push_server_hello,
    push_server_key_exchange_ecdhe,
)
from .record import ContentType, RecordWriter
from .session import Session
from .suites import SUITES, KeyExchange

if TYPE_CHECKING:
    from .delegate import EventDelegate, KeyHandle, SessionDelegate

# GROUP_IDS and the ECDHE helpers live in tls12.ecdhe; re-exported here for older imports.
__all__ = ["ServerConnection", "GROUP_IDS", "ecdhe_keypair", "ecdhe_shared_secret"]

_CCS_RECORD = int(ContentType.CHANGE_CIPHER_SPEC)
_HANDSHAKE_RECORD = int(ContentType.HANDSHAKE)


@functools.lru_cache(maxsize=64)
def _certificate_body(chain_der: tuple[bytes, ...]) -> bytes:
    """The Certificate message body of a chain: the same bytes for every connection of a config."""
    return push_certificate(Certificate(chain_der))

class ServerConnection(Connection):
    """A sans-IO TLS 1.2 server connection."""

    is_client = False
    TRANSITIONS = COMMON_TRANSITIONS.extend(
        {
            (HandshakeState.EXPECT_CLIENT_HELLO, HandshakeType.CLIENT_HELLO): Transition(
                "_handle_client_hello",
                (HandshakeState.EXPECT_CLIENT_KEY_EXCHANGE, HandshakeState.EXPECT_CHANGE_CIPHER_SPEC),
                parse=pull_client_hello,
            ),
            (HandshakeState.EXPECT_CLIENT_KEY_EXCHANGE, HandshakeType.CLIENT_KEY_EXCHANGE): Transition(
                "_handle_client_key_exchange", (HandshakeState.EXPECT_CHANGE_CIPHER_SPEC,)
            ),
            (HandshakeState.EXPECT_FINISHED, HandshakeType.FINISHED): Transition(
                "_handle_finished", (HandshakeState.ESTABLISHED,), parse=pull_finished
            ),
            (HandshakeState.ESTABLISHED, HandshakeType.CLIENT_HELLO): Transition(
                "_refuse_renegotiation", (HandshakeState.ESTABLISHED,), hashed=False
            ),
        }
    )

    CONTEXT = ServerHandshakeContext
    context: ServerHandshakeContext
    config: ServerConfig
    client_version = ContextAttribute()

    def __init__(
        self,
        config: ServerConfig,
        record_writer: RecordWriter | None = None,
        *,
        delegate: SessionDelegate | EventDelegate | None = None,
    ) -> None:
        """``delegate``: seam 5 -- a :class:`tls12.delegate.SessionDelegate` that holds every
        session secret (RSA suites only); ``None`` keeps them in this connection."""
        if delegate is None and config.key_operations is None:
            raise ValueError(
                "the ServerConfig has a certificate chain and no private key: "
                "give the connection a delegate that holds the key"
            )
        if delegate is not None and config.keylog is not None:
            raise ValueError(
                "a delegated connection holds no master secret to log: give the key log to the "
                "delegate (tls12.delegate.LocalDelegate(keylog=...)), not to the ServerConfig"
            )
        super().__init__(config.rng, record_writer, random_ivs=config.random_ivs)
        self.config = config
        self.state = HandshakeState.EXPECT_CLIENT_HELLO
        self._delegate = delegate
        self._flight_finished: tuple[bytes, bytes] | None = None
        """(client's verify_data, ours) from a one-call flight (:meth:`_flight_answered`)."""
        self._ephemeral: KeyHandle | None = None
        """Delegated ECDHE: the delegate's handle of the ephemeral key, until ClientKeyExchange."""
        if config.trace:
            self.enable_trace()

    def queue_sealed(self, records: bytes, count: int) -> None:
        """Queue records the delegate sealed on its own, and count them in the write sequence.

        A WebALPS guardian answers some requests itself: it seals the response at the next
        ``count`` write sequence numbers and the host passes the records through unread.  Call
        this as soon as they arrive (before anything else is sent) so that the bytes go out in
        sequence order and the next record this connection seals gets the right number.
        """
        if self._delegate is None or not self.handshake_complete:
            raise LocalProtocolError("only an established delegated connection takes sealed records")
        if count < 0:
            raise ValueError("count must be at least 0")
        if self._close_sent:
            raise LocalProtocolError("records after close_notify")
        self._queue_output(records)
        self._write.seq += count

    @property
    def key_handle(self) -> KeyHandle | None:
        """Delegated: the delegate's name for this connection's keys (nothing secret), once
        derived; release it in the delegate when the connection ends (unless a stored
        session still names it)."""
        return self._key_handle

    @property
    def ephemeral_handle(self) -> KeyHandle | None:
        """Delegated ECDHE: the handle of an ephemeral key whose ClientKeyExchange has not
        come (release it if the connection ends before)."""
        return self._ephemeral

    @classmethod
    def import_state(cls, config: ServerConfig, blob: bytes, record_writer: RecordWriter | None = None) -> ServerConnection:
        """Continue a connection exported by :meth:`export_state` (seam 3)."""
        from .state import import_connection

        conn = cls(config, record_writer)
        import_connection(conn, blob)
        return conn

    # --- ClientHello --------------------------------------------------------

    def _handle_client_hello(self, hello: ClientHello) -> Enum:
        """Negotiate; answer with the full handshake's first flight or the abbreviated one."""
        if hello.client_version < TLS12:
            raise ProtocolVersionError(f"client offers only version 0x{hello.client_version:04x}")
        if 0 not in hello.compression_methods:
            raise IllegalParameter("client does not offer the null compression method")
        ctx = self.context  # the ContextAttributes' storage, read directly on this hot path
        ctx.client_version = hello.client_version
        ctx.client_random = hello.random
        exts = dict(reversed(hello.extensions or ()))  # the first of a type, as hello.extension()
        ri = exts.get(ExtensionType.RENEGOTIATION_INFO)
        if ri is not None and ri != b"\x00":
            raise HandshakeFailure("non-empty renegotiation_info in an initial handshake")
        ctx.secure_renegotiation = ri is not None or SCSV_RENEGOTIATION in hello.cipher_suites
        ems = exts.get(ExtensionType.EXTENDED_MASTER_SECRET)
        if ems not in (None, b""):
            raise DecodeError("extended_master_secret extension must be empty")
        sni = exts.get(ExtensionType.SERVER_NAME)
        ctx.server_name = decode_server_name(sni) if sni else None
        groups_ext = exts.get(ExtensionType.SUPPORTED_GROUPS)
        client_groups = decode_u16_list(groups_ext) if groups_ext is not None else (NamedGroup.SECP256R1,)
        formats = exts.get(ExtensionType.EC_POINT_FORMATS)
        if formats is not None and 0 not in decode_ec_point_formats(formats):
            raise IllegalParameter("client does not accept uncompressed points")
        sig_ext = exts.get(ExtensionType.SIGNATURE_ALGORITHMS)
        if sig_ext is not None:
            ctx.client_schemes = decode_u16_list(sig_ext)
        ctx.group = next(
            (GROUP_IDS[g] for g in self.config.groups if GROUP_IDS[g] in client_groups), None
        )
        ctx.cipher_suite = self._select_cipher_suite(hello)
        ctx.server_random = self.config.rng(32)
        session = self._find_session(hello, ems is not None)
        if session is not None:
            return self._resume(session, hello)
        ctx.extended_master_secret = ems is not None
        return self._full_handshake(hello)

    def _select_cipher_suite(self, hello: ClientHello) -> int:
        """Server preference order; ECDHE suites only with a common group."""
        for suite in self.config.cipher_suites:
            if suite not in hello.cipher_suites:
                continue
            if SUITES[suite].key_exchange is KeyExchange.ECDHE_RSA and (
                self.context.group is None
                or (self._delegate is not None and not self._offers("ephemeral"))
            ):
                continue
            return int(suite)
        raise HandshakeFailure("no cipher suite in common")

    def _find_session(self, hello: ClientHello, client_ems: bool) -> Session | None:
        """The stored session to resume, or None for a full handshake.

        RFC 7627 §5.3 decides on the extended master secret first, as soon as
        the session is known (before the cipher suite, as OpenSSL does):

        * session with EMS, ClientHello without it: the server MUST abort
          the abbreviated handshake -- ``handshake_failure``;
        * session without EMS, ClientHello with it: MUST NOT resume; a full
          handshake follows, in which EMS is negotiated;
        * neither uses EMS: the RFC says SHOULD abort; this server resumes
          (legacy insecure resumption, see the module docstring).
        """
        store = self.config.session_store
        if store is None or not hello.session_id:
            return None
        session = store.get(hello.session_id)
        if session is None or (session.handle is None) != (self._delegate is None):
            return None  # a delegated server resumes only sessions with a handle, and vice versa
        if session.extended_master_secret and not client_ems:
            raise HandshakeFailure(
                "ClientHello resumes an extended-master-secret session without the extension (RFC 7627 §5.3)"
            )
        if client_ems and not session.extended_master_secret:
            return None
        if session.cipher_suite not in hello.cipher_suites or session.cipher_suite not in self.config.cipher_suites:
            return None
        return session

    def _server_hello_extensions(self, hello: ClientHello) -> tuple[tuple[int, bytes], ...]:
        exts: list[tuple[int, bytes]] = []
        if self.secure_renegotiation:
            exts.append((ExtensionType.RENEGOTIATION_INFO, b"\x00"))
        if self.extended_master_secret:
            exts.append((ExtensionType.EXTENDED_MASTER_SECRET, b""))
        if (
            SUITES[self.cipher_suite].key_exchange is KeyExchange.ECDHE_RSA
            and hello.extension(ExtensionType.EC_POINT_FORMATS) is not None
        ):
            exts.append((ExtensionType.EC_POINT_FORMATS, b"\x01\x00"))
        return tuple(exts)

    def _server_hello(self, hello: ClientHello) -> bytes:
        assert self.cipher_suite is not None
        return push_server_hello(
            ServerHello(self.server_random, self.session_id, self.cipher_suite, 0, self._server_hello_extensions(hello))
        )

    def _full_handshake(self, hello: ClientHello) -> Enum:
        """Queue ServerHello .. ServerHelloDone; the state that awaits the client's answer."""
        self.resumed = False
        self.session = None
        self.session_id = self.config.rng(32) if self.config.session_store is not None else b""
        ecdhe = SUITES[self.cipher_suite].key_exchange is KeyExchange.ECDHE_RSA
        if self._delegate is not None and ecdhe:
            # the delegate makes the ephemeral key and signs the ServerKeyExchange
            group, scheme = self.context.group, self._choose_scheme()
            assert group is not None  # an ECDHE suite is chosen only with a common group
            return self._ask("ephemeral", (group, scheme, self.client_random, self.server_random,
                                           self.cipher_suite),
                             lambda answer: self._send_first_flight(
                                 hello, self._delegated_server_key_exchange(answer, group, scheme)))
        return self._send_first_flight(hello, self._build_server_key_exchange())

    def _delegated_server_key_exchange(self, answer: object, group: int, scheme: int) -> bytes:
        ephemeral = unwrap(answer)
        self._ephemeral = ephemeral.handle
        return push_server_key_exchange_ecdhe(
            ServerKeyExchangeECDHE(group, ephemeral.public, scheme, ephemeral.signature))

    def _send_first_flight(self, hello: ClientHello, ske: bytes | None) -> Enum:
        """Queue ServerHello, Certificate, [ServerKeyExchange,] ServerHelloDone."""
        flight: list[tuple[int, bytes]] = [
            (HandshakeType.SERVER_HELLO, self._server_hello(hello)),
            (HandshakeType.CERTIFICATE, _certificate_body(tuple(self.config.credentials.chain_der))),
        ]
        if ske is not None:
            flight.append((HandshakeType.SERVER_KEY_EXCHANGE, ske))
        flight.append((HandshakeType.SERVER_HELLO_DONE, b""))
        self._send_handshake(*flight)
        return HandshakeState.EXPECT_CLIENT_KEY_EXCHANGE

    def _choose_scheme(self) -> int:
        for scheme in SUPPORTED_SCHEMES:
            if scheme in self.context.client_schemes:
                return int(scheme)
        raise HandshakeFailure("no RSA signature scheme in common")

    def _build_server_key_exchange(self) -> bytes | None:
        """ServerKeyExchange body for ECDHE_RSA (signed ServerECDHParams); None for RSA."""
        if SUITES[self.cipher_suite].key_exchange is not KeyExchange.ECDHE_RSA:
            return None
        assert self.context.group is not None
        self.context.ecdhe_private, public = ecdhe_keypair(self.context.group, self.config.rng(32))
        params = ecdhe_params_bytes(self.context.group, public)
        scheme = self._choose_scheme()
        key_ops = self.config.key_operations
        assert key_ops is not None
        signature = key_ops.sign(self.client_random + self.server_random + params, scheme)
        return push_server_key_exchange_ecdhe(ServerKeyExchangeECDHE(self.context.group, public, scheme, signature))

    # --- ClientKeyExchange ----------------------------------------------------

    def _premaster_from_client_key_exchange(self, body: bytes) -> bytes:
        """The premaster secret; for RSA with the RFC 5246 §7.4.7.1 countermeasure."""
        if SUITES[self.cipher_suite].key_exchange is KeyExchange.ECDHE_RSA:
            point = pull_client_key_exchange_ecdhe(Buffer(body))
            assert self.context.group is not None
            return ecdhe_shared_secret(self.context.group, self.context.ecdhe_private, point)
        encrypted = pull_client_key_exchange_rsa(Buffer(body))
        # Draw the fallback first, decrypt, then pick without revealing which path was taken.
        fallback = self.client_version.to_bytes(2, "big") + self.config.rng(46)
        key_ops = self.config.key_operations
        assert key_ops is not None
        decrypted = key_ops.decrypt_premaster(encrypted)
        good = (
            decrypted is not None
            and len(decrypted) == 48
            and hmac.compare_digest(decrypted[:2], fallback[:2])
        )
        chosen = decrypted if good else fallback
        assert chosen is not None
        return chosen

    def _handle_client_key_exchange(self, body: bytes) -> object:
        if self._delegate is not None:
            return self._delegated_key_exchange(body)
        premaster = self._premaster_from_client_key_exchange(body)
        self._set_premaster(premaster)
        self.context.ecdhe_private = b""
        return None

    def _delegated_key_exchange(self, body: bytes) -> object:
        """Ask the delegate for the keys: with the client's whole flight when it is here."""
        kwargs: tuple[tuple[str, object], ...] = ()
        if SUITES[self.cipher_suite].key_exchange is KeyExchange.ECDHE_RSA:
            exchanged = pull_client_key_exchange_ecdhe(Buffer(body))
            kwargs = (("ephemeral", self._ephemeral),)
            self._ephemeral = None
        else:  # the countermeasure (RFC 5246 §7.4.7.1) runs inside the delegate
            exchanged = pull_client_key_exchange_rsa(Buffer(body))
        assert self.cipher_suite is not None
        common = (exchanged, self.client_version, self.client_random, self.server_random,
                  self.cipher_suite)
        finished = self._buffered_finished_record()
        if finished is not None:
            args = (*common, bytes(self.context.transcript), self.extended_master_secret,
                    self.context.version, finished)
            return self._ask("derive_finish", args,
                             lambda answer: self._flight_answered(answer, finished), kwargs)
        session_hash = (
            prf.transcript_hash(bytes(self.context.transcript)) if self.extended_master_secret else None
        )
        return self._ask("derive", (*common, session_hash), self._keys_answered, kwargs)

    def _keys_answered(self, answer: object) -> None:
        self._set_delegated_keys(unwrap(answer))

    def _buffered_finished_record(self) -> bytes | None:
        """The encrypted Finished record, if the ClientKeyExchange is followed, already buffered,
        by nothing but a ChangeCipherSpec record and one handshake record, and the delegate
        takes the whole flight (``derive_finish``, :class:`tls12.delegate.FlightDelegate`):
        then one question derives the keys, checks the client's Finished and makes ours."""
        if self._hs_buffer or not self._offers("derive_finish"):
            return None
        version = self.context.version
        records = self._reader.peek_records(2)
        if (len(records) < 2 or records[0] != (_CCS_RECORD, version, b"\x01")
                or records[1][:2] != (_HANDSHAKE_RECORD, version)):
            return None
        return records[1][2]

    def _flight_answered(self, answer: object, finished_fragment: bytes) -> None:
        """The opened record goes to the read cipher the ChangeCipherSpec installs, and our
        verify_data waits for :meth:`_handle_finished`."""
        result = unwrap(answer, record=True)
        if result is None:
            raise DecryptError("Finished verify_data mismatch")
        self._set_delegated_keys(result.handle)
        self._opened_ahead = (finished_fragment, result.client_finished)
        self._flight_finished = (result.client_finished[4:], result.server_verify_data)

    # --- Finished ---------------------------------------------------------------

    def _handle_finished(self, finished: Finished) -> object:
        flight, self._flight_finished = self._flight_finished, None
        if flight is not None:
            # the delegate checked this very Finished and made ours (_flight_answered)
            if not hmac.compare_digest(finished.verify_data, flight[0]):
                raise DecryptError("Finished verify_data mismatch")
            self._send_our_finished(flight[1])
            return None
        if self._delegate is not None:
            return self._delegated_finished(finished)
        self._check_finished(finished)
        if self.resumed:
            self._complete()
            return None
        self._send_our_finished(self._finished_body(False))
        return None

    def _send_our_finished(self, verify_data: bytes) -> None:
        """ChangeCipherSpec and our Finished after the client's; the handshake is complete."""
        self._send_change_cipher_spec()
        self._send_handshake((HandshakeType.FINISHED, push_finished(Finished(verify_data))))
        self._store_session()
        self._complete()

    def _delegated_finished(self, finished: Finished) -> object:
        """The client's Finished checked by the delegate (with ours in the same question when
        it offers ``finish``); a resumed handshake only checks it."""
        handle = self._key_handle
        assert handle is not None
        client_hash = prf.transcript_hash(self._transcript_before_message())
        if self.resumed:
            return self._ask("check_finished", (handle, True, client_hash, finished.verify_data),
                             lambda ok: self._resumed_finished_checked(unwrap(ok)))
        our_hash = prf.transcript_hash(bytes(self.context.transcript))
        if self._offers("finish"):
            return self._ask("finish", (handle, client_hash, finished.verify_data, our_hash),
                             lambda ours: self._ours_answered(unwrap(ours)))

        def checked(ok: object) -> object:
            if not unwrap(ok):
                raise DecryptError("Finished verify_data mismatch")
            return self._ask("verify_data", (handle, False, our_hash),
                             lambda ours: self._ours_answered(unwrap(ours)))

        return self._ask("check_finished", (handle, True, client_hash, finished.verify_data), checked)

    def _ours_answered(self, ours: bytes | None) -> None:
        if ours is None:
            raise DecryptError("Finished verify_data mismatch")
        self._send_our_finished(ours)

    def _resumed_finished_checked(self, ok: bool) -> None:
        if not ok:
            raise DecryptError("Finished verify_data mismatch")
        self._complete()

    def _store_session(self) -> None:
        assert self.cipher_suite is not None
        if self._delegate is not None:
            self.session = Session(
                self.session_id, b"", self.cipher_suite, self.extended_master_secret, self.server_name,
                handle=self._key_handle,
            )
        else:
            self.session = Session(
                self.session_id, self.master_secret, self.cipher_suite, self.extended_master_secret,
                self.server_name,
            )
        if self.config.session_store is not None and self.session_id:
            self.config.session_store.put(self.session)

    def _resume(self, session: Session, hello: ClientHello) -> Enum:
        """Queue ServerHello, ChangeCipherSpec, Finished of the abbreviated handshake.

        Delegated, the delegate is asked first for the session's new keys; if it no longer
        holds the session (a restarted guardian, an evicted handle: :class:`DelegateError`)
        the session leaves the store and a full handshake follows."""
        if self._delegate is not None:
            handle: KeyHandle = session.handle  # type: ignore[assignment]  # Session.handle is object (tls12 keeps it opaque); a delegate's is a KeyHandle
            return self._ask("resume", (handle, self.client_random, self.server_random),
                             lambda answer: self._resume_answered(answer, session, hello))
        self._enter_resumption(session, hello)
        self.master_secret = session.master_secret
        self._derive_keys()
        self._send_change_cipher_spec()
        self._send_handshake((HandshakeType.FINISHED, push_finished(Finished(self._finished_body(False)))))
        return HandshakeState.EXPECT_CHANGE_CIPHER_SPEC

    def _enter_resumption(self, session: Session, hello: ClientHello) -> None:
        self.resumed = True
        self.session = session
        self.session_id = session.session_id
        self.cipher_suite = session.cipher_suite
        self.extended_master_secret = session.extended_master_secret
        self._send_handshake((HandshakeType.SERVER_HELLO, self._server_hello(hello)))

    def _resume_answered(self, answer: object, session: Session, hello: ClientHello) -> Enum:

        if isinstance(answer, DelegateError):
            store = self.config.session_store
            if store is not None:
                store.remove(session.session_id)
            self.extended_master_secret = hello.extension(ExtensionType.EXTENDED_MASTER_SECRET) is not None
            return self._full_handshake(hello)
        self._enter_resumption(session, hello)
        self._set_delegated_keys(unwrap(answer))
        assert self._key_handle is not None
        our_hash = prf.transcript_hash(bytes(self.context.transcript))

        def ours(verify_data: object) -> Enum:
            self._send_change_cipher_spec()
            self._send_handshake((HandshakeType.FINISHED, push_finished(Finished(unwrap(verify_data)))))
            return HandshakeState.EXPECT_CHANGE_CIPHER_SPEC

        return self._ask("verify_data", (self._key_handle, False, our_hash), ours)
