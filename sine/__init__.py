"""SINE, SINEB and SINEX: cache-friendly integrity for web documents.

A document is cut into blocks and protected by a backwards hash chain whose root is signed
(Gennaro and Rohatgi, "How to sign digital streams").  A client verifies the signature once
and then every block with one hash, as the bytes arrive, so the document can be served by an
untrusted, unmodified HTTP cache.  See ``FORMAT.md`` for the wire format.

Layers (sans-IO first):

* :mod:`sine.format` -- codecs of the tag, the separate tag and the Forward Authenticator
  (on :class:`tls12.buffer.Buffer`);
* :mod:`sine.tag` -- the signer (hash chain + signature) and the stream encoder;
* :mod:`sine.state` -- the verifier's state machine (an enum and its transition table);
* :mod:`sine.verifier` -- the streaming verifier;
* :mod:`sine.cache_status` -- was a response served from a cache (RFC 9211 ``Cache-Status``,
  ``X-Cache-Status``, ``X-Cache``, ``Age``);
* :mod:`sine.links` -- ``Expected_Set(P)`` from a page's same-site links (SINEX);
* :mod:`sine.errors` -- :class:`SineError`, the root of every exception of the package;
* :mod:`sine.site` -- signing a document root (``python -m sine.sign``);
* :mod:`sine.origin` -- the origin's answers to HTTP requests, bytes out (no sockets);
* :mod:`sine.aio` -- everything on sockets: :mod:`sine.aio.server` (asyncio origin server,
  ``python -m sine.server``), :mod:`sine.aio.client` (verifying client, ``python -m
  sine.fetch``), :mod:`sine.aio.runner` (``python -m sine.aio``, the link experiments' client);
* :mod:`sine.model_latency` -- the SimPy model with hand-typed byte counts;
  :mod:`sine.model_driver` -- the same scenario with the real objects over simulated TCP;
* :mod:`sine.experiments` -- Table II and Figures 4-6 as DataFrames (``variant="model" |
  "driver" | "measured"``); :mod:`sine.experiments.link` -- the measured figures.
"""

from .algorithms import HashAlg, SigAlg, SigningKey, VerifyingKey
from .errors import (
    BadPadding,
    BlockMismatch,
    DigestMismatch,
    LocalProtocolError,
    RemoteProtocolError,
    SignatureInvalid,
    SineError,
    TagExpired,
    TagFormatError,
    TagNotYetValid,
    TrailingData,
    TruncatedDocument,
    UntrustedTag,
    WrongResource,
)
from .format import ForwardAuthenticator, SeparateTag, Tag, TagInfo
from .tag import SignedDocument, encode_stream, hash_chain, sign_document, stream_length
from .tree import TreeHash, TreeTag, sign_tree, tree_overhead
from .tree_verifier import SliceVerifier, TreeVerifier, VerifiedData
from .verifier import (
    BlockVerified,
    DocumentVerified,
    Event,
    ForwardAuthenticatorVerified,
    RunVerified,
    StreamVerifier,
    TagVerified,
)

__all__ = [
    "HashAlg",
    "SigAlg",
    "SigningKey",
    "VerifyingKey",
    "SineError",
    "LocalProtocolError",
    "RemoteProtocolError",
    "TagFormatError",
    "SignatureInvalid",
    "UntrustedTag",
    "DigestMismatch",
    "TagExpired",
    "TagNotYetValid",
    "WrongResource",
    "BlockMismatch",
    "BadPadding",
    "TruncatedDocument",
    "TrailingData",
    "ForwardAuthenticator",
    "SeparateTag",
    "Tag",
    "TagInfo",
    "SignedDocument",
    "encode_stream",
    "hash_chain",
    "sign_document",
    "stream_length",
    "Event",
    "TagVerified",
    "BlockVerified",
    "RunVerified",
    "ForwardAuthenticatorVerified",
    "DocumentVerified",
    "StreamVerifier",
    "TreeHash",
    "TreeTag",
    "sign_tree",
    "tree_overhead",
    "TreeVerifier",
    "SliceVerifier",
    "VerifiedData",
]

# MICE (sine.mice) and RFC 9421 signed heads (sine.httpsig): their typed errors
from .errors import HttpSignatureError, MiceIntegrityError  # noqa: E402

__all__ += ["MiceIntegrityError", "HttpSignatureError"]
