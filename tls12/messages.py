"""Handshake message codecs (RFC 5246 §7.4, RFC 4492 §5, RFC 7627, RFC 5746, RFC 6066).

Each message is a dataclass with a ``pull_x(buf)`` / ``push_x(msg)`` pair (the
aioquic ``tls.py`` pattern).  ``pull_*`` consumes a message *body* (without the
4-byte handshake header) and rejects trailing bytes; ``push_*`` returns the
body.  :func:`pull_handshake_header` and :func:`frame_handshake` add and strip
the header.  Every message round-trips byte-exact (see the tests).

Extensions are kept as an ordered tuple of ``(type, data)`` pairs so that
unknown extensions are preserved (and ignored by the handshake); the helpers
``encode_*``/``decode_*`` give meaning to the ones this core understands.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from types import MappingProxyType

from .buffer import Buffer, Writer
from .errors import DecodeError, IllegalParameter

__all__ = [
    "HandshakeType",
    "ExtensionType",
    "NamedGroup",
    "SignatureScheme",
    "TLS12",
    "SCSV_RENEGOTIATION",
    "ClientHello",
    "ServerHello",
    "Certificate",
    "ServerKeyExchangeECDHE",
    "Finished",
    "pull_client_hello",
    "push_client_hello",
    "pull_server_hello",
    "push_server_hello",
    "pull_certificate",
    "push_certificate",
    "pull_server_key_exchange_ecdhe",
    "push_server_key_exchange_ecdhe",
    "ecdhe_params_bytes",
    "pull_client_key_exchange_rsa",
    "push_client_key_exchange_rsa",
    "pull_client_key_exchange_ecdhe",
    "push_client_key_exchange_ecdhe",
    "pull_finished",
    "pull_empty",
    "pull_opaque",
    "push_finished",
    "pull_handshake_header",
    "frame_handshake",
    "MAX_HANDSHAKE_MESSAGE",
    "MAX_HANDSHAKE_BODY",
    "max_handshake_body",
    "encode_server_name",
    "decode_server_name",
    "encode_u16_list",
    "decode_u16_list",
    "decode_ec_point_formats",
]

TLS12 = 0x0303
SCSV_RENEGOTIATION = 0x00FF  # TLS_EMPTY_RENEGOTIATION_INFO_SCSV (RFC 5746 §3.3)
MAX_HANDSHAKE_MESSAGE = 1 << 17
"""Largest handshake message body accepted (certificate chains included); bounds memory.

The messages with a smaller bound are listed in :data:`MAX_HANDSHAKE_BODY`.
"""


class HandshakeType(IntEnum):
    HELLO_REQUEST = 0
    CLIENT_HELLO = 1
    SERVER_HELLO = 2
    NEW_SESSION_TICKET = 4
    CERTIFICATE = 11
    SERVER_KEY_EXCHANGE = 12
    CERTIFICATE_REQUEST = 13
    SERVER_HELLO_DONE = 14
    CERTIFICATE_VERIFY = 15
    CLIENT_KEY_EXCHANGE = 16
    FINISHED = 20


class ExtensionType(IntEnum):
    SERVER_NAME = 0
    SUPPORTED_GROUPS = 10
    EC_POINT_FORMATS = 11
    SIGNATURE_ALGORITHMS = 13
    ENCRYPT_THEN_MAC = 22
    EXTENDED_MASTER_SECRET = 23
    SESSION_TICKET = 35
    RENEGOTIATION_INFO = 0xFF01


class NamedGroup(IntEnum):
    SECP256R1 = 23
    X25519 = 29


class SignatureScheme(IntEnum):
    RSA_PKCS1_SHA1 = 0x0201
    RSA_PKCS1_SHA256 = 0x0401
    RSA_PKCS1_SHA384 = 0x0501
    RSA_PKCS1_SHA512 = 0x0601
    RSA_PSS_RSAE_SHA256 = 0x0804
    RSA_PSS_RSAE_SHA384 = 0x0805
    RSA_PSS_RSAE_SHA512 = 0x0806


Extensions = tuple[tuple[int, bytes], ...]


def _pull_extensions(buf: Buffer) -> Extensions:
    if buf.eof():  # the extensions block is optional (RFC 5246 §7.4.1.2)
        return ()
    block = buf.pull_vector(2)
    out: list[tuple[int, bytes]] = []
    seen: set[int] = set()
    pos, end = 0, len(block)
    while pos < end:  # type (2 bytes), data<0..2^16-1>; read in place, as Buffer would
        if end - pos < 4:  # the type, or the data's length, is cut short
            left = end - pos if end - pos < 2 else end - pos - 2
            raise DecodeError(f"message truncated: wanted 2 bytes, {left} left")
        ext_type = (block[pos] << 8) | block[pos + 1]
        n = (block[pos + 2] << 8) | block[pos + 3]
        pos += 4
        if pos + n > end:
            raise DecodeError(f"message truncated: wanted {n} bytes, {end - pos} left")
        if ext_type in seen:
            raise IllegalParameter(f"duplicate extension {ext_type}")
        seen.add(ext_type)
        out.append((ext_type, block[pos : pos + n]))
        pos += n
    return tuple(out)


def _push_extensions(w: Writer, extensions: Extensions | None) -> None:
    if extensions is not None:
        w.push_bytes(_extensions_block(extensions))


def _vector(length_width: int, data: bytes) -> bytes:
    """``data`` with its length prefix (what :meth:`Writer.push_vector` appends)."""
    if len(data) >= 1 << (8 * length_width):
        raise ValueError(f"vector of {len(data)} bytes does not fit a {length_width}-byte length")
    return len(data).to_bytes(length_width, "big") + data


def _extensions_block(extensions: Extensions) -> bytes:
    """The extensions block, length prefix included."""
    return _vector(2, b"".join([ext_type.to_bytes(2, "big") + _vector(2, data) for ext_type, data in extensions]))


@dataclass(frozen=True)
class ClientHello:
    random: bytes
    session_id: bytes
    cipher_suites: tuple[int, ...]
    compression_methods: bytes = b"\x00"
    extensions: Extensions | None = ()
    client_version: int = TLS12

    def extension(self, ext_type: int) -> bytes | None:
        for t, d in self.extensions or ():
            if t == ext_type:
                return d
        return None


def pull_client_hello(buf: Buffer) -> ClientHello:
    version = buf.pull_uint16()
    random = buf.pull_bytes(32)
    session_id = buf.pull_vector(1, 0, 32)
    suites_raw = buf.pull_vector(2, 2, 0xFFFE)
    if len(suites_raw) % 2:
        raise DecodeError("odd cipher_suites length")
    suites = _u16s(suites_raw)
    compression = buf.pull_vector(1, 1, 255)
    extensions = None if buf.eof() else _pull_extensions(buf)
    buf.expect_end("ClientHello")
    return ClientHello(random, session_id, suites, compression, extensions, version)


def push_client_hello(msg: ClientHello) -> bytes:
    w = Writer()
    w.push_uint16(msg.client_version)
    w.push_bytes(msg.random)
    w.push_vector(1, msg.session_id)
    w.push_vector(2, b"".join(s.to_bytes(2, "big") for s in msg.cipher_suites))
    w.push_vector(1, msg.compression_methods)
    _push_extensions(w, msg.extensions)
    return w.getvalue()


@dataclass(frozen=True)
class ServerHello:
    random: bytes
    session_id: bytes
    cipher_suite: int
    compression_method: int = 0
    extensions: Extensions | None = ()
    server_version: int = TLS12

    def extension(self, ext_type: int) -> bytes | None:
        for t, d in self.extensions or ():
            if t == ext_type:
                return d
        return None


def pull_server_hello(buf: Buffer) -> ServerHello:
    version = buf.pull_uint16()
    random = buf.pull_bytes(32)
    session_id = buf.pull_vector(1, 0, 32)
    suite = buf.pull_uint16()
    compression = buf.pull_uint8()
    extensions = None if buf.eof() else _pull_extensions(buf)
    buf.expect_end("ServerHello")
    return ServerHello(random, session_id, suite, compression, extensions, version)


def push_server_hello(msg: ServerHello) -> bytes:
    return b"".join((
        msg.server_version.to_bytes(2, "big"),
        msg.random,
        _vector(1, msg.session_id),
        msg.cipher_suite.to_bytes(2, "big"),
        msg.compression_method.to_bytes(1, "big"),
        b"" if msg.extensions is None else _extensions_block(msg.extensions),
    ))


@dataclass(frozen=True)
class Certificate:
    chain: tuple[bytes, ...] = field(default_factory=tuple)  # DER, leaf first


def pull_certificate(buf: Buffer) -> Certificate:
    block = Buffer(buf.pull_vector(3))
    buf.expect_end("Certificate")
    chain: list[bytes] = []
    while not block.eof():
        chain.append(block.pull_vector(3, 1))
    return Certificate(tuple(chain))


def push_certificate(msg: Certificate) -> bytes:
    inner = Writer()
    for der in msg.chain:
        inner.push_vector(3, der)
    w = Writer()
    w.push_vector(3, inner.getvalue())
    return w.getvalue()


@dataclass(frozen=True)
class ServerKeyExchangeECDHE:
    """ServerECDHParams plus the signature over client_random || server_random || params."""

    group: int
    public: bytes
    signature_scheme: int
    signature: bytes


def ecdhe_params_bytes(group: int, public: bytes) -> bytes:
    """The signed ``ServerECDHParams``: curve_type named_curve (3), group, point."""
    w = Writer()
    w.push_uint8(3)
    w.push_uint16(group)
    w.push_vector(1, public)
    return w.getvalue()


def pull_server_key_exchange_ecdhe(buf: Buffer) -> ServerKeyExchangeECDHE:
    curve_type = buf.pull_uint8()
    if curve_type != 3:
        raise IllegalParameter(f"unsupported ECParameters curve_type {curve_type}")
    group = buf.pull_uint16()
    public = buf.pull_vector(1, 1)
    scheme = buf.pull_uint16()
    signature = buf.pull_vector(2)
    buf.expect_end("ServerKeyExchange")
    return ServerKeyExchangeECDHE(group, public, scheme, signature)


def push_server_key_exchange_ecdhe(msg: ServerKeyExchangeECDHE) -> bytes:
    w = Writer()
    w.push_bytes(ecdhe_params_bytes(msg.group, msg.public))
    w.push_uint16(msg.signature_scheme)
    w.push_vector(2, msg.signature)
    return w.getvalue()


def pull_client_key_exchange_rsa(buf: Buffer) -> bytes:
    """EncryptedPreMasterSecret (a 2-byte length prefix in TLS 1.0 and later)."""
    enc = buf.pull_vector(2)
    buf.expect_end("ClientKeyExchange")
    return enc


def push_client_key_exchange_rsa(encrypted: bytes) -> bytes:
    w = Writer()
    w.push_vector(2, encrypted)
    return w.getvalue()


def pull_client_key_exchange_ecdhe(buf: Buffer) -> bytes:
    point = buf.pull_vector(1, 1)
    buf.expect_end("ClientKeyExchange")
    return point


def push_client_key_exchange_ecdhe(point: bytes) -> bytes:
    w = Writer()
    w.push_vector(1, point)
    return w.getvalue()


@dataclass(frozen=True)
class Finished:
    verify_data: bytes


def pull_finished(buf: Buffer) -> Finished:
    data = buf.pull_bytes(12)
    buf.expect_end("Finished")
    return Finished(data)


def pull_empty(buf: Buffer) -> None:
    """The body of ServerHelloDone and HelloRequest: nothing (``decode_error`` otherwise)."""
    buf.expect_end("a message whose body is empty")


def pull_opaque(buf: Buffer) -> bytes:
    """The whole body, uninterpreted: for messages whose layout depends on what was negotiated
    (ClientKeyExchange: RSA or ECDHE) or that are refused whatever they hold."""
    return buf.pull_rest()


def push_finished(msg: Finished) -> bytes:
    if len(msg.verify_data) != 12:
        raise ValueError("verify_data is 12 bytes in TLS 1.2")
    return msg.verify_data


MAX_HANDSHAKE_BODY: Mapping[int, int] = MappingProxyType({
    HandshakeType.HELLO_REQUEST: 0,
    # version, random, session_id<0..32>, cipher_suite, compression_method, extensions<0..2^16-1>
    HandshakeType.SERVER_HELLO: 2 + 32 + 1 + 32 + 2 + 1 + 2 + 0xFFFF,
    # ECDHE (the only ServerKeyExchange here): curve_type, named_curve, point<1..2^8-1>,
    # signature scheme, signature<0..2^16-1> (RFC 4492 §5.4, RFC 5246 §7.4.1.4.1)
    HandshakeType.SERVER_KEY_EXCHANGE: 1 + 2 + 1 + 0xFF + 2 + 2 + 0xFFFF,
    HandshakeType.SERVER_HELLO_DONE: 0,
    # RSA: EncryptedPreMasterSecret<0..2^16-1> under a modulus of at most 16384 bits, OpenSSL's
    # OPENSSL_RSA_MAX_MODULUS_BITS; ECDHE: ECPoint<1..2^8-1> is smaller
    HandshakeType.CLIENT_KEY_EXCHANGE: 2 + 16384 // 8,
    HandshakeType.FINISHED: 12,  # verify_data is 12 bytes in TLS 1.2 (RFC 5246 §7.4.9)
})
"""Per-type bounds on a handshake message body, below :data:`MAX_HANDSHAKE_MESSAGE`.

Each is the largest body the message's grammar allows (for fixed-size messages
the size itself; for an RSA ClientKeyExchange, under the largest modulus
OpenSSL accepts), so no valid message is refused.  A connection checks the
bound as soon as the 4-byte header has arrived and before it buffers the body:
a peer cannot make it hold 128 KiB for a Finished.  Types not listed
(ClientHello, whose grammar allows 131,396 bytes, Certificate,
CertificateRequest, and protocol variants' own types) get
:data:`MAX_HANDSHAKE_MESSAGE`.
"""


def max_handshake_body(msg_type: int) -> int:
    """The largest body accepted for a handshake message of type ``msg_type``."""
    return MAX_HANDSHAKE_BODY.get(msg_type, MAX_HANDSHAKE_MESSAGE)


def pull_handshake_header(data: bytes | bytearray) -> tuple[int, int] | None:
    """(type, body length) of the message at the start of ``data``, or None if incomplete.

    A length above :func:`max_handshake_body` for the type is a malformed
    message -- the 24-bit length field is out of the accepted range -- so
    :class:`DecodeError` (``decode_error``, RFC 5246 §7.2.2).  OpenSSL 3.0
    sends ``illegal_parameter`` for an excessive message size instead; both
    are fatal and the peer sees the handshake end at the header.
    """
    if len(data) < 4:
        return None
    msg_type = data[0]
    length = int.from_bytes(data[1:4], "big")
    limit = max_handshake_body(msg_type)
    if length > limit:
        raise DecodeError(f"handshake message type {msg_type} of {length} bytes exceeds {limit}")
    return msg_type, length


def frame_handshake(msg_type: int, body: bytes) -> bytes:
    """Prefix a body with its handshake header (type, 24-bit length)."""
    return bytes([msg_type]) + len(body).to_bytes(3, "big") + body


# --- extension payloads ------------------------------------------------------


def encode_server_name(host: str) -> bytes:
    name = host.encode("idna") if not host.isascii() else host.encode("ascii")
    entry = Writer()
    entry.push_uint8(0)  # host_name
    entry.push_vector(2, name)
    w = Writer()
    w.push_vector(2, entry.getvalue())
    return w.getvalue()


def decode_server_name(data: bytes) -> str | None:
    """The host_name of a server_name extension (RFC 6066 §3), None if absent."""
    buf = Buffer(data)
    names = Buffer(buf.pull_vector(2, 1))
    buf.expect_end("server_name")
    host = None
    while not names.eof():
        kind = names.pull_uint8()
        value = names.pull_vector(2, 1)
        if kind == 0:
            if host is not None:
                raise IllegalParameter("two host_names in server_name")
            try:
                host = value.decode("ascii")
            except UnicodeDecodeError as exc:
                raise DecodeError("server_name is not ASCII") from exc
    return host


def encode_u16_list(values: tuple[int, ...] | list[int], length_width: int = 2) -> bytes:
    w = Writer()
    w.push_vector(length_width, b"".join(v.to_bytes(2, "big") for v in values))
    return w.getvalue()


def decode_u16_list(data: bytes, length_width: int = 2) -> tuple[int, ...]:
    buf = Buffer(data)
    raw = buf.pull_vector(length_width, 2)
    buf.expect_end("extension")
    if len(raw) % 2:
        raise DecodeError("odd length in a list of 16-bit values")
    return _u16s(raw)


def _u16s(raw: bytes) -> tuple[int, ...]:
    """Big-endian 16-bit values (``raw`` has an even length)."""
    return struct.unpack(f">{len(raw) // 2}H", raw)


def decode_ec_point_formats(data: bytes) -> bytes:
    buf = Buffer(data)
    formats = buf.pull_vector(1, 1)
    buf.expect_end("ec_point_formats")
    return formats
