"""The handshake context: every field one handshake negotiates or carries between messages.

A connection keeps two kinds of state.  The *machinery* -- record reader and
writer, sequence numbers, reassembly buffers, close flags, the state enum --
belongs to :class:`tls12.connection.Connection` and is the same for every
protocol built on the core.  The *handshake context* is what the messages
decide: randoms, the suite, the master secret, the transcript, and whatever a
role or a protocol variant has to remember from one message to the next (the
server's ephemeral ECDH key, the client's offered ClientHello, Reverse SSL's
mode and puzzle).  It lives in one dataclass per role::

    HandshakeContext                 fields both roles share
    ├── ServerHandshakeContext       + client_version, group, ecdhe_private, client_schemes
    │   └── (reverse_ssl) ReverseServerContext
    └── ClientHandshakeContext       + offered, peer_certificates, server_ecdh, ...
        └── (reverse_ssl) ReverseClientContext

A protocol variant subclasses the context of its role and names the subclass
in its connection's ``CONTEXT`` class attribute; it never stores handshake
state in private attributes of the connection.  That is what lets
:mod:`tls12.state` export and import *any* connection, mid-handshake
included, without knowing its fields: it walks :func:`dataclasses.fields`.

Serialisation rules, per field:

* a field's JSON codec is its ``metadata["codec"]`` (:func:`codec_field`), or
  else follows from its default: ``bytes``/``bytearray`` as hex, ``int``,
  ``bool``, ``str`` and ``None`` as themselves.  Anything else must declare a
  codec -- exporting it otherwise raises ``TypeError`` naming the field, so a
  forgotten codec shows up in the first test that exports;
* a field declared with :func:`derived_field` is not exported; the context
  rebuilds it in :meth:`HandshakeContext.after_import` (the client's RSA key
  object is re-read from the exported certificate chain);
* fields are grouped by the class that declares them, under that class's
  ``EXPORT_SECTION`` key (``None`` for the top level of the document), so a
  subclass's fields never collide with its base's.

Connection attributes that users read (``conn.master_secret``,
``conn.cipher_suite``, ``conn.mode`` ...) are :class:`ContextAttribute`
descriptors onto the context: the public API is unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from operator import attrgetter
from typing import Any, ClassVar, Generic, TypeVar

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa

from .buffer import Buffer
from .messages import TLS12, ClientHello, SignatureScheme, pull_client_hello, push_client_hello
from .session import Session

__all__ = [
    "FieldCodec",
    "codec_field",
    "derived_field",
    "ContextAttribute",
    "HandshakeContext",
    "ServerHandshakeContext",
    "ClientHandshakeContext",
    "context_to_json",
    "context_from_json",
    "BYTES",
    "PLAIN",
    "INT_TUPLE",
    "BYTES_TUPLE",
    "optional",
    "int_enum",
]

T = TypeVar("T")
Json = Any


@dataclass(frozen=True)
class FieldCodec(Generic[T]):
    """How one context field becomes JSON and back."""

    encode: Callable[[T], Json]
    decode: Callable[[Json], T]


def _plain_encode(value: Any) -> Json:
    if value is None or isinstance(value, (bool, int, str, float)):
        return value
    raise TypeError(f"{type(value).__name__} is not a JSON scalar")


PLAIN: FieldCodec[Any] = FieldCodec(_plain_encode, lambda v: v)
"""JSON scalars (int, bool, str, None) as themselves."""
BYTES: FieldCodec[bytes] = FieldCodec(lambda v: bytes(v).hex(), bytes.fromhex)
BYTEARRAY: FieldCodec[bytearray] = FieldCodec(lambda v: bytes(v).hex(), bytearray.fromhex)
INT_TUPLE: FieldCodec[tuple[int, ...]] = FieldCodec(
    lambda v: [int(x) for x in v], lambda v: tuple(v)
)
BYTES_TUPLE: FieldCodec[tuple[bytes, ...]] = FieldCodec(
    lambda v: [bytes(x).hex() for x in v], lambda v: tuple(bytes.fromhex(x) for x in v)
)


def optional(codec: FieldCodec[T]) -> FieldCodec[T | None]:
    """``codec`` for a value that may be ``None`` (JSON ``null``)."""
    return FieldCodec(
        lambda v: None if v is None else codec.encode(v),
        lambda v: None if v is None else codec.decode(v),
    )


E = TypeVar("E", bound=IntEnum)


def int_enum(enum: type[E]) -> FieldCodec[E]:
    """An :class:`enum.IntEnum` member as its integer value."""
    return FieldCodec(lambda v: int(v), enum)


def codec_field(codec: FieldCodec[Any], **kwargs: Any) -> Any:
    """A dataclass field exported with ``codec`` (``kwargs`` as for :func:`dataclasses.field`)."""
    return field(metadata={"codec": codec}, **kwargs)


def derived_field(**kwargs: Any) -> Any:
    """A field that is not exported: :meth:`HandshakeContext.after_import` rebuilds it."""
    return field(metadata={"derived": True}, repr=False, **kwargs)


SESSION: FieldCodec[Session | None] = optional(
    FieldCodec(
        lambda s: {
            "session_id": s.session_id.hex(),
            "master_secret": s.master_secret.hex(),
            "cipher_suite": s.cipher_suite,
            "extended_master_secret": s.extended_master_secret,
            "server_name": s.server_name,
        },
        lambda d: Session(
            bytes.fromhex(d["session_id"]),
            bytes.fromhex(d["master_secret"]),
            d["cipher_suite"],
            d["extended_master_secret"],
            d["server_name"],
        ),
    )
)
CLIENT_HELLO: FieldCodec[ClientHello | None] = optional(
    FieldCodec(
        lambda h: push_client_hello(h).hex(), lambda v: pull_client_hello(Buffer(bytes.fromhex(v)))
    )
)
GROUP_AND_POINT: FieldCodec[tuple[int, bytes] | None] = optional(
    FieldCodec(lambda v: [int(v[0]), v[1].hex()], lambda v: (int(v[0]), bytes.fromhex(v[1])))
)


class ContextAttribute(property):
    """A connection attribute stored in the connection's handshake context.

    ``conn.master_secret`` reads ``conn.context.master_secret``; assigning
    writes it there.  Declared on the connection class as
    ``master_secret = ContextAttribute()``.  A :class:`property` whose getter is an
    :func:`operator.attrgetter` (no Python frame per read: handshake handlers read these
    attributes dozens of times per handshake).
    """

    name: str

    def __init__(self) -> None:
        super().__init__()

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

        def set_field(obj: Any, value: Any) -> None:
            setattr(obj.context, name, value)

        property.__init__(self, attrgetter(f"context.{name}"), set_field)


@dataclass(eq=False)
class HandshakeContext:
    """What both roles negotiate.  ``transcript`` holds every hashed handshake message so far."""

    EXPORT_SECTION: ClassVar[str | None] = None
    """Key of this class's own fields in the exported document (None: top level)."""

    version: int = TLS12
    cipher_suite: int | None = None
    client_random: bytes = b""
    server_random: bytes = b""
    session_id: bytes = b""
    master_secret: bytes = b""
    extended_master_secret: bool = False
    secure_renegotiation: bool = False
    server_name: str | None = None
    resumed: bool = False
    session: Session | None = codec_field(SESSION, default=None)
    transcript: bytearray = codec_field(BYTEARRAY, default_factory=bytearray)

    def after_import(self) -> None:
        """Rebuild :func:`derived_field` values once every exported field is set (hook)."""


@dataclass(eq=False)
class ServerHandshakeContext(HandshakeContext):
    """The server's extra fields: what the ClientHello offered, the ephemeral ECDH key."""

    EXPORT_SECTION: ClassVar[str | None] = "server"

    client_version: int = TLS12
    group: int | None = None
    """The ECDHE group chosen from the client's ``supported_groups`` (None: no common group)."""
    ecdhe_private: bytes = b""
    """The server's ephemeral private key, between ServerKeyExchange and ClientKeyExchange."""
    client_schemes: tuple[int, ...] = codec_field(
        INT_TUPLE, default=(SignatureScheme.RSA_PKCS1_SHA1,)
    )


@dataclass(eq=False)
class ClientHandshakeContext(HandshakeContext):
    """The client's extra fields: its ClientHello, the server's certificate and ECDH share."""

    EXPORT_SECTION: ClassVar[str | None] = "client"

    offered: ClientHello | None = codec_field(CLIENT_HELLO, default=None)
    peer_certificates: tuple[bytes, ...] = codec_field(BYTES_TUPLE, default=())
    server_ecdh: tuple[int, bytes] | None = codec_field(GROUP_AND_POINT, default=None)
    certificate_requested: bool = False
    server_public_key: rsa.RSAPublicKey | None = derived_field(default=None)
    """The RSA key of ``peer_certificates[0]``; derived, so never exported."""

    def after_import(self) -> None:
        super().after_import()
        self.server_public_key = None
        if self.peer_certificates:
            key = x509.load_der_x509_certificate(self.peer_certificates[0]).public_key()
            if isinstance(key, rsa.RSAPublicKey):
                self.server_public_key = key


# --- generic (de)serialisation ----------------------------------------------------


def _codec_of(f: dataclasses.Field[Any]) -> FieldCodec[Any]:
    codec = f.metadata.get("codec")
    if codec is not None:
        return codec  # type: ignore[no-any-return]  # field metadata is Mapping[str, Any]; "codec" holds a FieldCodec
    default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
    if isinstance(default, bytearray):
        return BYTEARRAY
    if isinstance(default, bytes):
        return BYTES
    return PLAIN


def _section_of(cls: type, name: str) -> str | None:
    """The EXPORT_SECTION of the class (in ``cls``'s MRO) that first declares field ``name``."""
    for klass in reversed(cls.__mro__):
        if name in klass.__dict__.get("__annotations__", {}):
            if "EXPORT_SECTION" not in klass.__dict__:
                raise TypeError(
                    f"{klass.__qualname__} declares context fields but no EXPORT_SECTION"
                )
            return klass.__dict__["EXPORT_SECTION"]  # type: ignore[no-any-return]  # class __dict__ values are Any; EXPORT_SECTION is a str
    raise TypeError(
        f"field {name} is declared by no class of {cls.__qualname__}"
    )  # pragma: no cover


def context_to_json(context: HandshakeContext) -> dict[str | None, dict[str, Json]]:
    """The exported fields of ``context``, grouped by section (None = top level)."""
    sections: dict[str | None, dict[str, Json]] = {}
    for f in dataclasses.fields(context):
        if f.metadata.get("derived"):
            continue
        try:
            value = _codec_of(f).encode(getattr(context, f.name))
        except TypeError as exc:
            raise TypeError(
                f"{type(context).__qualname__}.{f.name} needs a codec_field: {exc}"
            ) from None
        sections.setdefault(_section_of(type(context), f.name), {})[f.name] = value
    return sections


def context_from_json(
    context: HandshakeContext, sections: dict[str | None, dict[str, Json]]
) -> None:
    """Set every exported field of ``context`` from ``sections``, then run ``after_import``.

    A missing field is a ``ValueError`` (the blob was made by a different
    context class or version); unknown extra keys are ignored.
    """
    for f in dataclasses.fields(context):
        if f.metadata.get("derived"):
            continue
        section = sections.get(_section_of(type(context), f.name)) or {}
        if f.name not in section:
            raise ValueError(f"exported state lacks the handshake field {f.name}")
        setattr(context, f.name, _codec_of(f).decode(section[f.name]))
    context.after_import()
