"""The client side of the TLS 1.2 handshake (RFC 5246 §7.3, §7.4).

The ClientHello is queued when the connection is created; call
:meth:`Connection.data_to_send` to get it.  Offering a previous
:class:`tls12.session.Session` (``ClientConfig(session=...)``) asks for the
abbreviated handshake; the server decides.

Customisation points (seam 4): :meth:`ClientConnection._build_client_hello`,
:meth:`ClientConnection._premaster_and_client_key_exchange`.
"""

from __future__ import annotations

from enum import Enum

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import padding

from .certs import peer_rsa_key
from .config import ClientConfig
from .connection import COMMON_TRANSITIONS, Connection, HandshakeState
from .context import ClientHandshakeContext, ContextAttribute
from .ecdhe import GROUP_IDS, ecdhe_keypair, ecdhe_shared_secret
from .errors import (
    BadCertificate,
    DecodeError,
    DecryptError,
    HandshakeFailure,
    IllegalParameter,
    ProtocolVersionError,
    UnsupportedExtension,
)
from .handshake_table import ANY_STATE, SAME, Transition
from .keys import SUPPORTED_SCHEMES, scheme_hash, scheme_padding
from .messages import (
    TLS12,
    Certificate,
    ClientHello,
    ExtensionType,
    Finished,
    HandshakeType,
    ServerHello,
    ServerKeyExchangeECDHE,
    ecdhe_params_bytes,
    encode_server_name,
    encode_u16_list,
    pull_certificate,
    pull_empty,
    pull_finished,
    pull_server_hello,
    pull_server_key_exchange_ecdhe,
    push_certificate,
    push_client_hello,
    push_client_key_exchange_ecdhe,
    push_client_key_exchange_rsa,
    push_finished,
)
from .record import RecordWriter
from .session import Session
from .suites import SUITES, KeyExchange

__all__ = ["ClientConnection"]


def _is_ip(host: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class ClientConnection(Connection):
    """A sans-IO TLS 1.2 client connection."""

    is_client = True
    TRANSITIONS = COMMON_TRANSITIONS.extend(
        {
            (HandshakeState.EXPECT_SERVER_HELLO, HandshakeType.SERVER_HELLO): Transition(
                "_handle_server_hello",
                (HandshakeState.EXPECT_CERTIFICATE, HandshakeState.EXPECT_CHANGE_CIPHER_SPEC),
                parse=pull_server_hello,
            ),
            (HandshakeState.EXPECT_CERTIFICATE, HandshakeType.CERTIFICATE): Transition(
                "_handle_certificate",
                (HandshakeState.EXPECT_SERVER_KEY_EXCHANGE, HandshakeState.EXPECT_SERVER_HELLO_DONE),
                parse=pull_certificate,
            ),
            (HandshakeState.EXPECT_SERVER_KEY_EXCHANGE, HandshakeType.SERVER_KEY_EXCHANGE): Transition(
                "_handle_server_key_exchange",
                (HandshakeState.EXPECT_SERVER_HELLO_DONE,),
                parse=pull_server_key_exchange_ecdhe,
            ),
            (HandshakeState.EXPECT_SERVER_HELLO_DONE, HandshakeType.CERTIFICATE_REQUEST): Transition(
                "_handle_certificate_request", (HandshakeState.EXPECT_SERVER_HELLO_DONE,)
            ),
            (HandshakeState.EXPECT_SERVER_HELLO_DONE, HandshakeType.SERVER_HELLO_DONE): Transition(
                "_handle_server_hello_done", (HandshakeState.EXPECT_CHANGE_CIPHER_SPEC,), parse=pull_empty
            ),
            (HandshakeState.EXPECT_FINISHED, HandshakeType.FINISHED): Transition(
                "_handle_finished", (HandshakeState.ESTABLISHED,), parse=pull_finished
            ),
            (ANY_STATE, HandshakeType.HELLO_REQUEST): Transition(
                "_handle_hello_request", (SAME,), hashed=False, parse=pull_empty
            ),
        }
    )

    CONTEXT = ClientHandshakeContext
    context: ClientHandshakeContext
    peer_certificates = ContextAttribute()

    def __init__(self, config: ClientConfig, record_writer: RecordWriter | None = None, *, start: bool = True) -> None:
        super().__init__(config.rng, record_writer, random_ivs=config.random_ivs)
        self.config = config
        self.server_name = config.server_name
        if config.trace:
            self.enable_trace()
        if start:
            self.state = HandshakeState.EXPECT_SERVER_HELLO
            hello = self._build_client_hello()
            self.context.offered = hello
            self.client_random = hello.random
            self._send_handshake((HandshakeType.CLIENT_HELLO, push_client_hello(hello)))

    @classmethod
    def import_state(cls, config: ClientConfig, blob: bytes, record_writer: RecordWriter | None = None) -> ClientConnection:
        """Continue a connection exported by :meth:`export_state` (seam 3)."""
        from .state import import_connection

        conn = cls(config, record_writer, start=False)
        import_connection(conn, blob)
        return conn

    # --- ClientHello -----------------------------------------------------------

    def _build_client_hello(self) -> ClientHello:
        cfg = self.config
        exts: list[tuple[int, bytes]] = []
        if cfg.server_name and not _is_ip(cfg.server_name):
            exts.append((ExtensionType.SERVER_NAME, encode_server_name(cfg.server_name)))
        if any(SUITES[s].key_exchange is KeyExchange.ECDHE_RSA for s in cfg.cipher_suites):
            exts.append((ExtensionType.SUPPORTED_GROUPS, encode_u16_list([GROUP_IDS[g] for g in cfg.groups])))
            exts.append((ExtensionType.EC_POINT_FORMATS, b"\x01\x00"))
        exts.append((ExtensionType.SIGNATURE_ALGORITHMS, encode_u16_list(list(SUPPORTED_SCHEMES))))
        if cfg.offer_extended_master_secret:
            exts.append((ExtensionType.EXTENDED_MASTER_SECRET, b""))
        exts.append((ExtensionType.RENEGOTIATION_INFO, b"\x00"))
        session_id = b""
        if isinstance(cfg.session, Session):
            session_id = cfg.session.session_id
        return ClientHello(cfg.rng(32), session_id, tuple(int(s) for s in cfg.cipher_suites), b"\x00", tuple(exts))

    # --- ServerHello -------------------------------------------------------------

    def _handle_server_hello(self, hello: ServerHello) -> Enum:
        """Check the server's choices; a full handshake or the resumption the server accepted."""
        offered = self.context.offered
        assert offered is not None
        if hello.server_version != TLS12:
            raise ProtocolVersionError(f"server chose version 0x{hello.server_version:04x}")
        if hello.cipher_suite not in offered.cipher_suites:
            raise IllegalParameter("server chose a cipher suite that was not offered")
        if hello.compression_method != 0:
            raise IllegalParameter("server chose a compression method that was not offered")
        offered_types = {t for t, _ in offered.extensions or ()}
        for ext_type, _ in hello.extensions or ():
            if ext_type not in offered_types:
                raise UnsupportedExtension(f"server sent extension {ext_type} that was not offered")
        ri = hello.extension(ExtensionType.RENEGOTIATION_INFO)
        if ri is not None and ri != b"\x00":
            raise HandshakeFailure("non-empty renegotiation_info in an initial handshake")
        self.secure_renegotiation = ri is not None
        ems = hello.extension(ExtensionType.EXTENDED_MASTER_SECRET)
        if ems not in (None, b""):
            raise DecodeError("extended_master_secret extension must be empty")
        self.server_random = hello.random
        self.session_id = hello.session_id
        self.cipher_suite = hello.cipher_suite
        self.extended_master_secret = ems is not None
        self._reader.version = TLS12
        self.version = TLS12
        session = self.config.session
        if isinstance(session, Session) and hello.session_id and hello.session_id == session.session_id:
            return self._resume(session, hello)
        return HandshakeState.EXPECT_CERTIFICATE

    def _resume(self, session: Session, hello: ServerHello) -> Enum:
        """Continue with the abbreviated handshake the server chose.

        RFC 7627 §5.3, client side: the ServerHello that accepts resumption
        must agree with the session on the extended master secret.  If the
        session used EMS and the ServerHello lacks it, or the session did not
        and the ServerHello has it, the client MUST abort: ``handshake_failure``
        (a server that mixes them up, e.g. a farm sharing one session cache
        across old and new front ends, would otherwise resume a master secret
        under the wrong guarantees).  An EMS extension the client did not
        offer at all was already refused as ``unsupported_extension``.

        The client offers whatever ``ClientConfig.session`` holds, as
        OpenSSL's client does.  A session without EMS, offered together with
        EMS, is never resumed by a conforming server (§5.3) and costs only the
        session ID bytes; a session with EMS, offered by a client configured
        with ``offer_extended_master_secret=False``, makes a conforming server
        abort with ``handshake_failure``.
        """
        if hello.cipher_suite != session.cipher_suite:
            raise IllegalParameter("resumed session with a different cipher suite")
        if session.extended_master_secret != self.extended_master_secret:
            raise HandshakeFailure(
                f"server resumed a session {'with' if session.extended_master_secret else 'without'} "
                f"extended_master_secret by a ServerHello {'with' if self.extended_master_secret else 'without'} "
                "it (RFC 7627 §5.3)"
            )
        self.resumed = True
        self.session = session
        self.master_secret = session.master_secret
        self._derive_keys()
        return HandshakeState.EXPECT_CHANGE_CIPHER_SPEC

    # --- server's certificate and key exchange ------------------------------------

    def _accept_server_certificate(self, cert: Certificate) -> None:
        """Let ``verify_certificate`` judge the server's Certificate message, keep the RSA key."""
        if cert.chain and self.config.verify_certificate is not None:
            self.config.verify_certificate(list(cert.chain))
        self.context.server_public_key = peer_rsa_key(cert.chain, "server")
        self.peer_certificates = cert.chain

    def _handle_certificate(self, cert: Certificate) -> Enum:
        self._accept_server_certificate(cert)
        kex = SUITES[self.cipher_suite].key_exchange
        if kex is KeyExchange.ECDHE_RSA:
            return HandshakeState.EXPECT_SERVER_KEY_EXCHANGE
        return HandshakeState.EXPECT_SERVER_HELLO_DONE

    def _handle_server_key_exchange(self, ske: ServerKeyExchangeECDHE) -> None:
        if ske.group not in [GROUP_IDS[g] for g in self.config.groups]:
            raise IllegalParameter(f"server chose group {ske.group} that was not offered")
        if ske.signature_scheme not in SUPPORTED_SCHEMES:
            raise IllegalParameter(f"server used signature scheme 0x{ske.signature_scheme:04x} that was not offered")
        signed = self.client_random + self.server_random + ecdhe_params_bytes(ske.group, ske.public)
        assert self.context.server_public_key is not None
        try:
            self.context.server_public_key.verify(
                ske.signature, signed, scheme_padding(ske.signature_scheme), scheme_hash(ske.signature_scheme)
            )
        except (InvalidSignature, ValueError):
            raise DecryptError("bad ServerKeyExchange signature") from None
        self.context.server_ecdh = (ske.group, ske.public)

    def _handle_certificate_request(self, _: bytes) -> None:
        # Client authentication is not implemented: answer with an empty Certificate.
        self.context.certificate_requested = True

    def _premaster_and_client_key_exchange(self) -> tuple[bytes, bytes]:
        """(premaster secret, ClientKeyExchange body)."""
        if self.context.server_ecdh is not None:
            group, server_public = self.context.server_ecdh
            private, public = ecdhe_keypair(group, self.config.rng(32))
            return ecdhe_shared_secret(group, private, server_public), push_client_key_exchange_ecdhe(public)
        premaster = TLS12.to_bytes(2, "big") + self.config.rng(46)
        assert self.context.server_public_key is not None
        try:
            encrypted = self.context.server_public_key.encrypt(premaster, padding.PKCS1v15())
        except ValueError as exc:  # a malformed key that parsed (e.g. an even modulus)
            raise BadCertificate(f"cannot encrypt to the server's RSA key: {exc}") from None
        return premaster, push_client_key_exchange_rsa(encrypted)

    def _handle_server_hello_done(self, _: None) -> None:
        if self.context.certificate_requested:
            self._send_handshake((HandshakeType.CERTIFICATE, push_certificate(Certificate(()))))
        premaster, body = self._premaster_and_client_key_exchange()
        self._send_handshake((HandshakeType.CLIENT_KEY_EXCHANGE, body))
        self._set_premaster(premaster)
        self._send_change_cipher_spec()
        self._send_handshake((HandshakeType.FINISHED, push_finished(Finished(self._finished_body(True)))))

    # --- Finished ---------------------------------------------------------------------

    def _handle_finished(self, finished: Finished) -> None:
        self._check_finished(finished)
        if self.resumed:
            self._send_change_cipher_spec()
            self._send_handshake((HandshakeType.FINISHED, push_finished(Finished(self._finished_body(True)))))
        elif self.session_id:
            assert self.cipher_suite is not None
            self.session = Session(
                self.session_id, self.master_secret, self.cipher_suite, self.extended_master_secret,
                self.config.server_name,
            )
        self._complete()
