"""Wire-format regression vector (tests/sine/vectors/), checked partly by independent code."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import ed25519

from sine.algorithms import SigAlg, SigningKey, VerifyingKey
from sine.format import ForwardAuthenticator
from sine.tag import encode_stream, sign_document
from sine.verifier import BlockVerified, StreamVerifier

VECTOR = json.loads((Path(__file__).parent / "vectors/sine_v1_ed25519.json").read_text())


def test_signer_reproduces_the_vector() -> None:
    v = VECTOR
    key = SigningKey(SigAlg.ED25519, ed25519.Ed25519PrivateKey.from_private_bytes(
        bytes.fromhex(v["ed25519_seed_hex"])))
    doc = bytes.fromhex(v["document_hex"])
    fa = ForwardAuthenticator(tuple((p, bytes.fromhex(d)) for p, d in v["forward_authenticator"]))
    signed = sign_document(doc, v["path"], key, float(v["now"]), lifetime=v["lifetime"],
                           block_size=v["block_size"], forward_authenticator=fa)
    assert b"".join(encode_stream(doc, signed)).hex() == v["stream_hex"]
    assert signed.info.at_sign().hex() == v["at_sign_hex"]


def test_vector_layout_by_hand() -> None:
    """Parse the vector with struct and hashlib only (FORMAT.md sections 2-5)."""
    v = VECTOR
    stream = bytes.fromhex(v["stream_hex"])
    doc = bytes.fromhex(v["document_hex"])
    bs = v["block_size"]
    (info_len,) = struct.unpack_from("!I", stream, 0)
    info = stream[4 : 4 + info_len]
    assert info[:4] == b"SINE" and info[4:8] == bytes([1, 1, 2, 0])
    block_size, t, e, length, n, path_len = struct.unpack_from("!IQQQQH", info, 8)
    assert (block_size, t, e - t, length) == (bs, v["now"], v["lifetime"], len(doc))
    assert n == -(-len(doc) // bs)
    path_end = 46 + path_len
    assert info[46:path_end].decode() == v["path"]
    root = info[path_end : path_end + 32]
    h = bytes(32)
    for i in reversed(range(n)):
        h = hashlib.sha256(doc[i * bs : (i + 1) * bs].ljust(bs, b"\0") + h).digest()
    assert h == root
    identity = info[: path_end + 32]
    assert hashlib.sha256(b"SINE/1 AT_sign\0" + identity).hexdigest() == v["at_sign_hex"]
    (sig_len,) = struct.unpack_from("!H", stream, 4 + info_len)
    assert sig_len == 64
    pub = ed25519.Ed25519PrivateKey.from_private_bytes(
        bytes.fromhex(v["ed25519_seed_hex"])).public_key()
    pub.verify(stream[6 + info_len : 6 + info_len + 64], b"SINE/1 Y_0\0" + info)
    records = stream[6 + info_len + 64 :]
    first = records[: bs + 32]
    assert first[:bs] == doc[:bs] and hashlib.sha256(first).digest() == root


def test_verifier_accepts_the_vector() -> None:
    v = VECTOR
    pk = VerifyingKey(SigAlg.ED25519, ed25519.Ed25519PrivateKey.from_private_bytes(
        bytes.fromhex(v["ed25519_seed_hex"])).public_key())
    ver = StreamVerifier(v["path"], v["now"] + 10, public_key=pk)
    events = ver.receive_data(bytes.fromhex(v["stream_hex"])) + ver.receive_eof()
    data = b"".join(e.data for e in events if isinstance(e, BlockVerified))
    assert data == bytes.fromhex(v["document_hex"])
    sep = StreamVerifier(v["path"], v["now"] + 10, public_key=pk,
                         separate=bytes.fromhex(v["separate_tag_hex"]))
    events = sep.receive_data(bytes.fromhex(v["document_hex"])) + sep.receive_eof()
    assert b"".join(e.data for e in events if isinstance(e, BlockVerified)) == data
