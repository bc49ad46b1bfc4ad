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

from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tls12.buffer import Buffer
from tls12.client_connection import ClientConnection
from tls12.connection import HandshakeState
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
    pull_server_hello,
    push_certificate,
    push_finished,
)
from tls12.record import RecordWriter

from . import onoff
from .config import ReverseClientConfig, ReverseState
from .errors import ReusedOneTimeKey
from .messages import (
    REVERSE_SSL_EXTENSION,
    Mode,
    ReverseHandshakeType,
    decode_chosen_mode,
    encode_offered_modes,
    pull_key_transport,
    signed_message,
)
from .ots import OTSScheme
from .puzzle import Construction, SolvedPuzzle, pull_puzzle_request, push_puzzle_reply, solve

__all__ = ["ReverseClientConnection"]


class ReverseClientConnection(ClientConnection):
    """A sans-IO Reverse SSL client connection (falls back to the standard handshake)."""

    TRANSITIONS = {
        **ClientConnection.TRANSITIONS,
        (ReverseState.EXPECT_REVERSE_HELLO_DONE, ReverseHandshakeType.PUZZLE_REQUEST): "_handle_puzzle_request",
        (ReverseState.EXPECT_REVERSE_HELLO_DONE, HandshakeType.SERVER_HELLO_DONE): "_handle_reverse_hello_done",
        (ReverseState.EXPECT_SERVER_CERTIFICATE, HandshakeType.CERTIFICATE): "_handle_reverse_certificate",
        (ReverseState.EXPECT_KEY_TRANSPORT, ReverseHandshakeType.KEY_TRANSPORT): "_handle_key_transport",
    }

    def __init__(self, config: ReverseClientConfig, record_writer: RecordWriter | None = None) -> None:
        self.reverse_config = config
        self.mode: Mode | None = None
        self.puzzle_solution: SolvedPuzzle | None = None
        self.server_used_fallback_signature = False
        self._private_key: rsa.RSAPrivateKey | None = None
        super().__init__(config.tls, record_writer)

    def _build_client_hello(self) -> ClientHello:
        hello = super()._build_client_hello()
        if not self.reverse_config.modes:
            return hello
        exts = (*(hello.extensions or ()), (REVERSE_SSL_EXTENSION, encode_offered_modes(self.reverse_config.modes)))
        return ClientHello(hello.random, hello.session_id, hello.cipher_suites, hello.compression_methods, exts, hello.client_version)

    def _handle_server_hello(self, raw: bytes) -> None:
        super()._handle_server_hello(raw)
        ext = pull_server_hello(Buffer(raw[4:])).extension(REVERSE_SSL_EXTENSION)
        if ext is None:
            return  # the standard handshake (or a resumption) continues
        mode = decode_chosen_mode(ext)
        if mode not in self.reverse_config.modes:
            raise IllegalParameter(f"server chose Reverse SSL mode {mode.name} that was not offered")
        if self.resumed:
            raise IllegalParameter("Reverse SSL mode in an abbreviated handshake")
        self.mode = mode
        self.state = ReverseState.EXPECT_REVERSE_HELLO_DONE

    def _handle_puzzle_request(self, raw: bytes) -> None:
        request = pull_puzzle_request(Buffer(raw[4:]))
        self._transcript += raw
        cfg = self.reverse_config
        if self.mode is not Mode.PUZZLE or self.puzzle_solution is not None:
            raise DecodeError("unexpected PuzzleRequest")
        if request.n_bits > cfg.max_puzzle_bits or (
            request.construction is Construction.HASH_AND_RANGE and request.preimage_bits > cfg.max_preimage_bits
        ):
            raise InsufficientSecurity("the server's puzzle exceeds this client's limits")
        self.puzzle_solution = solve(request, self.config.rng)
        self._private_key = self.puzzle_solution.private_key

    def _handle_reverse_hello_done(self, raw: bytes) -> None:
        if len(raw) != 4:
            raise DecodeError("ServerHelloDone has an empty body")
        self._transcript += raw
        if self.mode is Mode.PUZZLE:
            if self.puzzle_solution is None:
                raise DecodeError("ServerHelloDone before the puzzle")
            body = push_puzzle_reply(self.puzzle_solution.reply)
            self._send_handshake((ReverseHandshakeType.PUZZLE_REPLY, body))
        else:
            creds = self.reverse_config.credentials
            assert creds is not None
            self._private_key = creds.private_key
            self._send_handshake((HandshakeType.CERTIFICATE, push_certificate(Certificate(tuple(creds.chain_der)))))
        self.state = ReverseState.EXPECT_SERVER_CERTIFICATE

    def _handle_reverse_certificate(self, raw: bytes) -> None:
        self._accept_server_certificate(raw)
        self.state = ReverseState.EXPECT_KEY_TRANSPORT

    def _handle_key_transport(self, raw: bytes) -> None:
        msg = pull_key_transport(Buffer(raw[4:]))
        cfg = self.reverse_config
        sig = msg.signature
        if sig.scheme not in cfg.accepted_schemes or (
            sig.scheme is OTSScheme.RSA_FALLBACK and not cfg.accept_rsa_fallback
        ):
            raise IllegalParameter(f"signature scheme {sig.scheme.name} not accepted")
        assert self._server_public_key is not None
        onoff.verify(self._server_public_key, signed_message(bytes(self._transcript), msg.encrypted_premaster), sig)
        if sig.scheme is OTSScheme.RSA_FALLBACK:
            self.server_used_fallback_signature = True
        elif cfg.seen_keys is not None and not cfg.seen_keys.check_and_add(sig.public_key):
            raise ReusedOneTimeKey("the server reused a one-time signing key")
        self._transcript += raw
        assert self._private_key is not None
        try:
            premaster = self._private_key.decrypt(msg.encrypted_premaster, padding.PKCS1v15())
        except ValueError:
            raise DecryptError("cannot decrypt the premaster secret") from None
        finally:
            if self.mode is Mode.PUZZLE:
                self._private_key = None  # the puzzle key lives for one handshake only
        if len(premaster) != 48 or premaster[:2] != TLS12.to_bytes(2, "big"):
            raise DecryptError("malformed premaster secret")
        self._set_premaster(premaster)
        self._send_change_cipher_spec()
        self._send_handshake((HandshakeType.FINISHED, push_finished(Finished(self._finished_body(True)))))
        self.state = HandshakeState.EXPECT_CHANGE_CIPHER_SPEC
