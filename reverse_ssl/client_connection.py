"""The client side of Reverse SSL: a :class:`tls12.ClientConnection` that can receive the key.

The client offers its flavours in the ``reverse_ssl`` extension.  If the
server picks one, the client

1. sends its certificate (client authentication, Figure 1b) or solves the
   server's puzzle and sends the fresh public key (Figure 2);
2. receives the server's Certificate and KeyTransport, verifies the
   online/offline signature -- W under the certificate's key, then the
   one-time signature over the transcript -- refuses a one-time key it has
   seen before, and decrypts the premaster secret with its private key;
3. continues with ChangeCipherSpec and Finished exactly as the core does.

If the server ignores the extension, the standard handshake of the core
runs unchanged.  Client-side refusals raise the typed errors of
:mod:`reverse_ssl.errors` (``BadOfflineSignature``,
``ForgedOneTimeSignature``, ``ReusedOneTimeKey``).

Solving a puzzle happens inside :meth:`receive_data` (sans-IO: the caller
decides where the CPU time is spent); ``puzzle_solution`` keeps the solver's
statistics.  The fresh private key is dropped once the premaster secret is
decrypted.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tls12.buffer import Buffer
from tls12.client_connection import ClientConnection
from tls12.context import (
    ClientHandshakeContext,
    ContextAttribute,
    FieldCodec,
    codec_field,
    int_enum,
    optional,
)
from tls12.errors import (
    DecodeError,
    DecryptError,
    IllegalParameter,
    InsufficientSecurity,
)
from tls12.messages import (
    TLS12,
    Certificate,
    ClientHello,
    Finished,
    HandshakeType,
    ServerHello,
    push_certificate,
    push_finished,
)
from tls12.record import RecordWriter
from tls12.state import import_connection

from . import onoff
from .config import ReverseClientConfig
from .errors import ReusedOneTimeKey
from .messages import (
    REVERSE_SSL_EXTENSION,
    KeyTransport,
    Mode,
    ReverseHandshakeType,
    decode_chosen_mode,
    encode_offered_modes,
    signed_message,
)
from .ots import OTSScheme
from .puzzle import (
    Construction,
    PuzzleRequest,
    SolvedPuzzle,
    pull_puzzle_reply,
    push_puzzle_reply,
    solve,
)
from .state import CLIENT_TRANSITIONS, ReverseState

__all__ = ["ReverseClientConnection", "ReverseClientContext"]


def _private_key_to_json(key: rsa.RSAPrivateKey) -> str:
    der = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return der.hex()


def _private_key_from_json(value: str) -> rsa.RSAPrivateKey:
    key = serialization.load_der_private_key(bytes.fromhex(value), password=None)
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ValueError("exported Reverse SSL key is not an RSA key")
    return key


_PRIVATE_KEY: FieldCodec[rsa.RSAPrivateKey] = FieldCodec(_private_key_to_json, _private_key_from_json)


def _solution_to_json(s: SolvedPuzzle) -> dict[str, object]:
    return {
        "reply": push_puzzle_reply(s.reply).hex(),
        "private_key": _private_key_to_json(s.private_key),
        "counters": [s.hashes_tried, s.p_attempts, s.q_candidates],
    }


def _solution_from_json(d: dict[str, Any]) -> SolvedPuzzle:
    reply = pull_puzzle_reply(Buffer(bytes.fromhex(d["reply"])))
    return SolvedPuzzle(reply, _private_key_from_json(d["private_key"]), *d["counters"])


@dataclass(eq=False)
class ReverseClientContext(ClientHandshakeContext):
    """The client's handshake fields plus Reverse SSL's: the mode, the puzzle, the decryption key.

    ``private_key`` is the key the KeyTransport is encrypted to: the fresh
    puzzle key (dropped once used) or the client's certificate key.  Both are
    exported with the rest of the state -- which already holds key material.
    """

    EXPORT_SECTION: ClassVar[str | None] = "reverse_client"

    mode: Mode | None = codec_field(optional(int_enum(Mode)), default=None)
    puzzle_solution: SolvedPuzzle | None = codec_field(
        optional(FieldCodec(_solution_to_json, _solution_from_json)), default=None
    )
    server_used_fallback_signature: bool = False
    private_key: rsa.RSAPrivateKey | None = codec_field(optional(_PRIVATE_KEY), default=None, repr=False)


class ReverseClientConnection(ClientConnection):
    """A sans-IO Reverse SSL client connection (falls back to the standard handshake)."""

    TRANSITIONS = CLIENT_TRANSITIONS  # the core's table widened by Reverse SSL's states (:mod:`.state`)

    CONTEXT = ReverseClientContext
    context: ReverseClientContext
    mode = ContextAttribute()
    puzzle_solution = ContextAttribute()
    server_used_fallback_signature = ContextAttribute()

    def __init__(
        self, config: ReverseClientConfig, record_writer: RecordWriter | None = None, *, start: bool = True
    ) -> None:
        self.reverse_config = config
        super().__init__(config.tls, record_writer, start=start)

    @classmethod
    def import_state(  # type: ignore[override]  # takes the Reverse SSL config, which wraps the tls12 one
        cls, config: ReverseClientConfig, blob: bytes, record_writer: RecordWriter | None = None
    ) -> ReverseClientConnection:
        """Continue a connection exported by :meth:`export_state`, in any state (seam 3)."""
        conn = cls(config, record_writer, start=False)
        import_connection(conn, blob)
        return conn

    def _build_client_hello(self) -> ClientHello:
        hello = super()._build_client_hello()
        if not self.reverse_config.modes:
            return hello
        exts = (*(hello.extensions or ()), (REVERSE_SSL_EXTENSION, encode_offered_modes(self.reverse_config.modes)))
        return ClientHello(hello.random, hello.session_id, hello.cipher_suites, hello.compression_methods, exts, hello.client_version)

    def _handle_server_hello(self, hello: ServerHello) -> Enum:
        standard = super()._handle_server_hello(hello)
        ext = hello.extension(REVERSE_SSL_EXTENSION)
        if ext is None:
            return standard  # the standard handshake (or a resumption) continues
        mode = decode_chosen_mode(ext)
        if mode not in self.reverse_config.modes:
            raise IllegalParameter(f"server chose Reverse SSL mode {mode.name} that was not offered")
        if self.resumed:
            raise IllegalParameter("Reverse SSL mode in an abbreviated handshake")
        self.mode = mode
        return ReverseState.EXPECT_REVERSE_HELLO_DONE

    def _handle_puzzle_request(self, request: PuzzleRequest) -> None:
        cfg = self.reverse_config
        if self.mode is not Mode.PUZZLE or self.puzzle_solution is not None:
            raise DecodeError("unexpected PuzzleRequest")
        if request.n_bits > cfg.max_puzzle_bits or (
            request.construction is Construction.HASH_AND_RANGE and request.preimage_bits > cfg.max_preimage_bits
        ):
            raise InsufficientSecurity("the server's puzzle exceeds this client's limits")
        self.puzzle_solution = solve(request, self.config.rng)
        self.context.private_key = self.puzzle_solution.private_key

    def _handle_reverse_hello_done(self, _: None) -> None:
        if self.mode is Mode.PUZZLE:
            if self.puzzle_solution is None:
                raise DecodeError("ServerHelloDone before the puzzle")
            body = push_puzzle_reply(self.puzzle_solution.reply)
            self._send_handshake((ReverseHandshakeType.PUZZLE_REPLY, body))
        else:
            creds = self.reverse_config.credentials
            assert creds is not None
            self.context.private_key = creds.private_key
            self._send_handshake((HandshakeType.CERTIFICATE, push_certificate(Certificate(tuple(creds.chain_der)))))

    def _handle_reverse_certificate(self, cert: Certificate) -> None:
        self._accept_server_certificate(cert)

    def _handle_key_transport(self, msg: KeyTransport) -> None:
        cfg = self.reverse_config
        sig = msg.signature
        if sig.scheme not in cfg.accepted_schemes or (
            sig.scheme is OTSScheme.RSA_FALLBACK and not cfg.accept_rsa_fallback
        ):
            raise IllegalParameter(f"signature scheme {sig.scheme.name} not accepted")
        assert self.context.server_public_key is not None
        signed = signed_message(self._transcript_before_message(), msg.encrypted_premaster)
        onoff.verify(self.context.server_public_key, signed, sig)
        if sig.scheme is OTSScheme.RSA_FALLBACK:
            self.server_used_fallback_signature = True
        elif cfg.seen_keys is not None and not cfg.seen_keys.check_and_add(sig.public_key):
            raise ReusedOneTimeKey("the server reused a one-time signing key")
        assert self.context.private_key is not None
        try:
            premaster = self.context.private_key.decrypt(msg.encrypted_premaster, padding.PKCS1v15())
        except ValueError:
            raise DecryptError("cannot decrypt the premaster secret") from None
        finally:
            if self.mode is Mode.PUZZLE:
                self.context.private_key = None  # the puzzle key lives for one handshake only
        if len(premaster) != 48 or premaster[:2] != TLS12.to_bytes(2, "big"):
            raise DecryptError("malformed premaster secret")
        self._set_premaster(premaster)
        self._send_change_cipher_spec()
        self._send_handshake((HandshakeType.FINISHED, push_finished(Finished(self._finished_body(True)))))
