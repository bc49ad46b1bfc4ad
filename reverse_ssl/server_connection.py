"""The server side of Reverse SSL: a :class:`tls12.ServerConnection` whose key exchange is reversed.

The standard handshake (RSA key exchange) makes the server *decrypt* the
premaster secret -- one RSA private-key operation per handshake.  Reverse SSL
(Figure 1b) swaps the roles: the client sends its public key (a certificate,
or a freshly generated key that doubles as a client puzzle, Figure 2), the
server *encrypts* the premaster secret for it -- a cheap public-key
operation -- and authenticates itself with an online/offline signature whose
RSA part was computed earlier (:mod:`reverse_ssl.aio.pool`).  Online cost: one
RSA public-key operation plus table look-ups.

The class extends the core through its documented seams:

* :meth:`_select_cipher_suite` -- negotiates the mode (``reverse_ssl``
  extension) and, in a reverse mode, an RSA-key-exchange suite (the key
  exchange is ours, the record protection is the suite's);
* :meth:`_full_handshake` -- the reverse flight (ServerHello,
  [PuzzleRequest], ServerHelloDone) instead of the standard one;
* ``TRANSITIONS`` -- the core's table extended: two more (state, message)
  pairs, ``EXPECT_CLIENT_CERTIFICATE`` + Certificate and
  ``EXPECT_PUZZLE_REPLY`` + PuzzleReply, each answered by Certificate +
  KeyTransport, after which the core's ChangeCipherSpec / Finished handling
  runs unchanged; and the ClientHello entry may now lead to those states;
* :class:`ReverseServerContext` -- the handshake fields Reverse SSL adds, so
  a connection exports and imports in any state (``tls12.state``).

A client without the extension gets the unmodified standard handshake (or a
``handshake_failure`` if ``allow_original`` is False).  Every refusal is a
typed :class:`tls12.errors.RemoteProtocolError` (see :mod:`reverse_ssl.errors`):
the core sends the alert and closes this connection only.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar

from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tls12.buffer import Buffer
from tls12.certs import peer_rsa_key
from tls12.context import (
    ContextAttribute,
    FieldCodec,
    ServerHandshakeContext,
    codec_field,
    int_enum,
    optional,
)
from tls12.errors import BadCertificate, HandshakeFailure
from tls12.messages import (
    TLS12,
    Certificate,
    ClientHello,
    HandshakeType,
    push_certificate,
)
from tls12.record import RecordWriter
from tls12.server_connection import ServerConnection
from tls12.session import Session
from tls12.state import import_connection
from tls12.suites import SUITES, KeyExchange

from . import onoff
from .config import ReverseServerConfig
from .messages import (
    REVERSE_SSL_EXTENSION,
    KeyTransport,
    Mode,
    ReverseHandshakeType,
    decode_offered_modes,
    encode_chosen_mode,
    push_key_transport,
    signed_message,
)
from .puzzle import (
    Construction,
    PuzzleChallenge,
    PuzzleParams,
    PuzzleReply,
    SignaturePolicy,
    make_puzzle,
    pull_puzzle_request,
    push_puzzle_request,
    verify_reply,
)
from .state import SERVER_TRANSITIONS, ReverseState

__all__ = ["ReverseServerConnection", "ReverseServerContext"]


def _challenge_to_json(c: PuzzleChallenge) -> dict[str, object]:
    p = c.params
    return {
        "params": [int(p.construction), p.n_bits, p.k, p.preimage_bits, p.e],
        "m": hex(c.m),
        "request": push_puzzle_request(c.request).hex(),
    }


def _challenge_from_json(d: dict[str, Any]) -> PuzzleChallenge:
    construction, n_bits, k, preimage_bits, e = d["params"]
    params = PuzzleParams(Construction(construction), n_bits, k, preimage_bits, e)
    request = pull_puzzle_request(Buffer(bytes.fromhex(d["request"])))
    return PuzzleChallenge(params, int(d["m"], 16), request)


@dataclass(eq=False)
class ReverseServerContext(ServerHandshakeContext):
    """The server's handshake fields plus Reverse SSL's: the mode, the puzzle, what was checked."""

    EXPORT_SECTION: ClassVar[str | None] = "reverse_server"

    mode: Mode | None = codec_field(optional(int_enum(Mode)), default=None)
    """The negotiated flavour; None for the standard handshake."""
    used_fallback_signature: bool = False
    """True if the pool was empty and the server signed with plain RSA."""
    verified_self_signature: bool = False
    challenge: PuzzleChallenge | None = codec_field(
        optional(FieldCodec(_challenge_to_json, _challenge_from_json)), default=None
    )
    """The puzzle sent, with the secret m it hides, until the PuzzleReply is checked."""


class ReverseServerConnection(ServerConnection):
    """A sans-IO Reverse SSL server connection (falls back to the standard handshake)."""

    TRANSITIONS = SERVER_TRANSITIONS  # the core's table widened by Reverse SSL's states (:mod:`.state`)

    CONTEXT = ReverseServerContext
    context: ReverseServerContext
    mode = ContextAttribute()
    used_fallback_signature = ContextAttribute()
    verified_self_signature = ContextAttribute()

    def __init__(self, config: ReverseServerConfig, record_writer: RecordWriter | None = None) -> None:
        super().__init__(config.tls, record_writer)
        self.reverse_config = config

    @classmethod
    def import_state(  # type: ignore[override]  # takes the Reverse SSL config, which wraps the tls12 one
        cls, config: ReverseServerConfig, blob: bytes, record_writer: RecordWriter | None = None
    ) -> ReverseServerConnection:
        """Continue a connection exported by :meth:`export_state`, in any state (seam 3)."""
        conn = cls(config, record_writer)
        import_connection(conn, blob)
        return conn

    # --- negotiation --------------------------------------------------------------

    def _select_cipher_suite(self, hello: ClientHello) -> int:
        cfg = self.reverse_config
        ext = hello.extension(REVERSE_SSL_EXTENSION)
        offered = decode_offered_modes(ext) if ext is not None else ()
        self.mode = next((m for m in cfg.modes if m in offered), None)
        if self.mode is None:
            if not cfg.allow_original:
                raise HandshakeFailure("this server requires Reverse SSL")
            return super()._select_cipher_suite(hello)
        for suite in self.config.cipher_suites:
            if suite in hello.cipher_suites and SUITES[suite].key_exchange is KeyExchange.RSA:
                return int(suite)
        raise HandshakeFailure("no RSA-key-exchange suite in common for Reverse SSL")

    def _resume(self, session: Session, hello: ClientHello) -> Enum:
        self.mode = None  # an abbreviated handshake has no key exchange to reverse
        return super()._resume(session, hello)

    def _server_hello_extensions(self, hello: ClientHello) -> tuple[tuple[int, bytes], ...]:
        exts = super()._server_hello_extensions(hello)
        if self.mode is not None:
            exts = (*exts, (REVERSE_SSL_EXTENSION, encode_chosen_mode(self.mode)))
        return exts

    def _full_handshake(self, hello: ClientHello) -> Enum:
        if self.mode is None:
            return super()._full_handshake(hello)
        self.resumed = False
        self.session_id = self.config.rng(32) if self.config.session_store is not None else b""
        flight: list[tuple[int, bytes]] = [(HandshakeType.SERVER_HELLO, self._server_hello(hello))]
        if self.mode is Mode.PUZZLE:
            self.context.challenge = make_puzzle(self.reverse_config.puzzle, self.config.rng)
            flight.append((ReverseHandshakeType.PUZZLE_REQUEST, push_puzzle_request(self.context.challenge.request)))
            next_state = ReverseState.EXPECT_PUZZLE_REPLY
        else:
            next_state = ReverseState.EXPECT_CLIENT_CERTIFICATE
        flight.append((HandshakeType.SERVER_HELLO_DONE, b""))
        self._send_handshake(*flight)
        return next_state

    # --- the client's public key ---------------------------------------------------

    def _handle_client_certificate(self, cert: Certificate) -> None:
        if not cert.chain:
            raise BadCertificate("Reverse SSL with client authentication needs a client certificate")
        if self.reverse_config.verify_client_certificate is not None:
            self.reverse_config.verify_client_certificate(list(cert.chain))
        key = peer_rsa_key(cert.chain, "client")
        self.peer_certificates = cert.chain
        self._send_key_transport(key)

    def _handle_puzzle_reply(self, reply: PuzzleReply) -> None:
        assert self.context.challenge is not None
        cfg = self.reverse_config
        policy = cfg.signature_policy
        pool_ready = cfg.pool is not None and len(cfg.pool) > 0
        check = policy is SignaturePolicy.ALWAYS or (policy is SignaturePolicy.WHEN_POOL_EMPTY and not pool_ready)
        key = verify_reply(self.context.challenge, reply, verify_signature=check, replay_cache=cfg.replay_cache)
        self.verified_self_signature = check
        self.context.challenge = None
        self._send_key_transport(key)

    # --- KeyTransport: encrypt for the client, sign online ----------------------------

    def _send_key_transport(self, client_key: rsa.RSAPublicKey) -> None:
        if client_key.key_size < 512:
            raise BadCertificate("client RSA key too small to carry a premaster secret")
        premaster = TLS12.to_bytes(2, "big") + self.config.rng(46)
        encrypted = client_key.encrypt(premaster, padding.PKCS1v15())
        server_cert = (HandshakeType.CERTIFICATE, push_certificate(Certificate(tuple(self.config.credentials.chain_der))))
        self._send_handshake(server_cert)
        message = signed_message(bytes(self.context.transcript), encrypted)
        pool = self.reverse_config.pool
        token = pool.take() if pool is not None else None
        if token is not None:
            signature = onoff.sign_online(token, message)
        else:
            key = self.config.credentials.private_key
            assert key is not None  # a Reverse SSL server signs itself: it holds its key
            signature = onoff.sign_fallback(key, message)
            self.used_fallback_signature = True
            if pool is not None:
                pool.record_fallback()
        self._send_handshake((ReverseHandshakeType.KEY_TRANSPORT, push_key_transport(KeyTransport(encrypted, signature))))
        self._set_premaster(premaster)
