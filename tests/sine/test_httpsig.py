"""RFC 9421 signed heads over RFC 9530 digests (sine.httpsig): vectors, round trips, failures."""

from __future__ import annotations

import ast
import base64
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from hypothesis import given, settings
from hypothesis import strategies as st

import sine.httpsig
import sine.mice
from sine.algorithms import SigningKey
from sine.errors import HttpSignatureError, MiceIntegrityError, SineError
from sine.httpsig import (
    MICE_COVERED,
    RESPONSE_COVERED,
    Fields,
    check_content_digest,
    content_digest,
    open_mice_response,
    sign_response,
    verify_request,
    verify_response,
)
from sine.mice import RecordVerified, mice_encode, response_fields

VECTOR = json.loads((Path(__file__).resolve().parents[1] / "vectors" / "httpsig" /
                     "rfc9421_appendix_b.json").read_text())
REQ = VECTOR["test_request"]
ED_KEY = SigningKey.from_pem(VECTOR["keys"]["test-key-ed25519"]["private_pem"].encode())
SECRET = base64.b64decode(VECTOR["keys"]["test-shared-secret"]["secret_base64"])
NOW = 1_700_000_000.0
BODY = b"<html><body>" + b"signed head " * 300 + b"</body></html>"


def _sig(section: str) -> dict[str, str]:
    return next(s for s in VECTOR["signatures"] if s["section"] == section)


def _request_fields(section: str, **changes: str) -> list[tuple[str, str]]:
    sig = _sig(section)
    fields = [(n, changes.get(n, v)) for n, v in REQ["fields"]]
    return fields + [("Signature-Input", sig["signature_input"]),
                     ("Signature", changes.get("Signature", sig["signature"]))]


def _verify_vector(section: str, **changes: str) -> sine.httpsig.SignedHead:
    key = SECRET if section == "B.2.5" else ED_KEY.verifying_key()
    return verify_request(REQ["method"], REQ["url"], _request_fields(section, **changes), key,
                          key_id=_sig(section)["key_id"], now=1618884473)


# --- RFC 9421 Appendix B -----------------------------------------------------------------


@pytest.mark.parametrize("section", ["B.2.5", "B.2.6"])
def test_rfc9421_vectors_verify(section: str) -> None:
    head = _verify_vector(section)
    base = "\n".join(f"{k}: {v}" for k, v in head.covered.items())
    assert base == _sig(section)["signature_base"]
    assert head.algorithm == _sig(section)["algorithm"]


def test_rfc9421_ed25519_signature_is_reproduced() -> None:
    """Ed25519 is deterministic: the vector's base signed with the test key gives its value."""
    sig = _sig("B.2.6")
    raw = ED_KEY.sign(sig["signature_base"].encode())
    assert sig["signature"] == f"sig-b26=:{base64.b64encode(raw).decode()}:"
    public = serialization.load_pem_public_key(
        VECTOR["keys"]["test-key-ed25519"]["public_pem"].encode())
    assert isinstance(public, ed25519.Ed25519PublicKey)
    public.verify(raw, sig["signature_base"].encode())


@pytest.mark.parametrize("section", ["B.2.5", "B.2.6"])
@pytest.mark.parametrize("change", [
    {"Date": "Tue, 20 Apr 2021 02:07:56 GMT"},
    {"Content-Type": "application/xml"},
])
def test_rfc9421_vectors_fail_when_a_covered_field_changes(section: str,
                                                           change: dict[str, str]) -> None:
    with pytest.raises(HttpSignatureError):
        _verify_vector(section, **change)


@pytest.mark.parametrize("section", ["B.2.5", "B.2.6"])
def test_rfc9421_vectors_fail_for_another_authority(section: str) -> None:
    """``@authority`` comes from the target URI (the Host field is not what is signed)."""
    key = SECRET if section == "B.2.5" else ED_KEY.verifying_key()
    with pytest.raises(HttpSignatureError):
        verify_request(REQ["method"], REQ["url"].replace("example.com", "example.org"),
                       _request_fields(section), key, key_id=_sig(section)["key_id"],
                       now=1618884473)


def test_rfc9421_vector_fails_with_another_signature() -> None:
    with pytest.raises(HttpSignatureError):
        _verify_vector("B.2.6", Signature=_sig("B.2.5")["signature"].replace("b25", "b26"))


def test_content_digest_matches_rfc_example() -> None:
    assert content_digest(b'{"hello": "world"}') == \
        "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:"
    check_content_digest(REQ["fields"][3][1], REQ["content"].encode())  # the sha-512 member


# --- round trips with SINE's key types ----------------------------------------------------


@pytest.mark.parametrize("which", ["ed_key", "ec_key", "rsa_key"])
def test_plain_response_round_trip(which: str, request: pytest.FixtureRequest) -> None:
    key: SigningKey = request.getfixturevalue(which)
    fields = sign_response(200, [("Content-Type", "text/html")], BODY, key, key_id="k", now=NOW)
    names = [n for n, _ in fields]
    assert names[-3:] == ["Content-Digest", "Signature-Input", "Signature"]
    head = verify_response(200, fields, BODY, key.verifying_key(), key_id="k", now=NOW + 60)
    assert head.covered['"content-digest"'] == content_digest(BODY)
    assert head.created == int(NOW) and all(head.covers(c) for c in RESPONSE_COVERED)
    assert head.algorithm == {"ed_key": "ed25519", "ec_key": "ecdsa-p256-sha256",
                              "rsa_key": "rsa-pss-sha512"}[which]


def _mice_response(key: SigningKey, content: bytes = BODY, rs: int = 1024) -> tuple[
        list[tuple[str, str]], bytes]:
    enc = mice_encode(content, rs)
    fields = [("Content-Type", "text/html"), *response_fields(enc)]
    return sign_response(200, fields, enc.body, key, key_id="k", now=NOW,
                         unencoded=content), enc.body


def test_mice_response_round_trip(ed_key: SigningKey) -> None:
    fields, body = _mice_response(ed_key)
    head, decoder = open_mice_response(200, fields, ed_key.verifying_key(), key_id="k", now=NOW)
    events = decoder.receive_data(body) + decoder.receive_data(b"")
    decoded = b"".join(e.data for e in events if isinstance(e, RecordVerified))
    assert decoded == BODY
    check_content_digest(head.covered['"content-digest"'], body)
    check_content_digest(head.covered['"unencoded-digest"'], decoded, "Unencoded-Digest")
    verify_response(200, fields, body, ed_key.verifying_key(), key_id="k", now=NOW,
                    require=MICE_COVERED)


def test_mice_body_tampering_is_caught_progressively(ed_key: SigningKey) -> None:
    fields, body = _mice_response(ed_key)
    bad = bytearray(body)
    bad[8 + 2 * (1024 + 32) + 3] ^= 4  # inside record 3
    _, decoder = open_mice_response(200, fields, ed_key.verifying_key(), key_id="k", now=NOW)
    with pytest.raises(MiceIntegrityError) as info:
        decoder.receive_data(bytes(bad))
    assert info.value.record == 3
    assert [e.index for e in info.value.events if isinstance(e, RecordVerified)] == [1, 2]


# --- signature checks fail closed ----------------------------------------------------------


def _replace(fields: list[tuple[str, str]], name: str, value: str) -> list[tuple[str, str]]:
    return [(n, value if n.lower() == name.lower() else v) for n, v in fields]


def test_changed_body_fails(ed_key: SigningKey) -> None:
    fields = sign_response(200, [("Content-Type", "text/html")], BODY, ed_key, key_id="k", now=NOW)
    with pytest.raises(HttpSignatureError):
        verify_response(200, fields, BODY + b" ", ed_key.verifying_key(), key_id="k", now=NOW)


@pytest.mark.parametrize("name,value", [
    ("Content-Digest", "sha-256=:" + base64.b64encode(bytes(32)).decode() + ":"),
    ("Content-Type", "text/plain"),
    ("Digest", "mi-sha256-03=" + base64.b64encode(bytes(32)).decode()),
    ("Content-Encoding", "identity"),
    ("Unencoded-Digest", "sha-256=:" + base64.b64encode(bytes(32)).decode() + ":"),
])
def test_changed_covered_field_fails(ed_key: SigningKey, name: str, value: str) -> None:
    fields, body = _mice_response(ed_key)
    with pytest.raises(HttpSignatureError):
        open_mice_response(200, _replace(fields, name, value), ed_key.verifying_key(),
                           key_id="k", now=NOW)


def test_changed_digest_with_matching_body_still_fails(ed_key: SigningKey) -> None:
    """A cache that swaps body *and* Content-Digest is caught by the signature."""
    fields = sign_response(200, [("Content-Type", "text/html")], BODY, ed_key, key_id="k", now=NOW)
    other = b"forged"
    with pytest.raises(HttpSignatureError):
        verify_response(200, _replace(fields, "Content-Digest", content_digest(other)), other,
                        ed_key.verifying_key(), key_id="k", now=NOW)


def test_changed_status_fails(ed_key: SigningKey) -> None:
    fields = sign_response(200, [("Content-Type", "text/html")], BODY, ed_key, key_id="k", now=NOW)
    with pytest.raises(HttpSignatureError):
        verify_response(404, fields, BODY, ed_key.verifying_key(), key_id="k", now=NOW)


def test_plain_signature_does_not_open_a_mice_response(ed_key: SigningKey) -> None:
    enc = mice_encode(BODY, 1024)
    fields = sign_response(200, [("Content-Type", "text/html"), *response_fields(enc)],
                           enc.body, ed_key, key_id="k", now=NOW)  # Digest not covered
    with pytest.raises(HttpSignatureError):
        open_mice_response(200, fields, ed_key.verifying_key(), key_id="k", now=NOW)


def test_signed_head_with_another_coding_does_not_open(ed_key: SigningKey) -> None:
    """The origin signed ``Content-Encoding: gzip``: the Digest is not a MICE top proof."""
    enc = mice_encode(BODY, 1024)
    fields = [("Content-Type", "text/html"), ("Content-Encoding", "gzip"),
              ("Digest", enc.digest_field())]
    signed = sign_response(200, fields, enc.body, ed_key, key_id="k", now=NOW, unencoded=BODY)
    with pytest.raises(HttpSignatureError):
        open_mice_response(200, signed, ed_key.verifying_key(), key_id="k", now=NOW)


def test_two_signatures_without_a_tag_fail(ed_key: SigningKey) -> None:
    plain = [("Content-Type", "text/html")]
    one = dict(sign_response(200, plain, BODY, ed_key, key_id="k", now=NOW))
    two = dict(sign_response(200, plain, BODY, ed_key, key_id="k", now=NOW, label="two"))
    fields = [*plain, ("Content-Digest", one["Content-Digest"]),
              ("Signature-Input", one["Signature-Input"] + ", " + two["Signature-Input"]),
              ("Signature", one["Signature"] + ", " + two["Signature"])]
    with pytest.raises(HttpSignatureError):
        verify_response(200, fields, BODY, ed_key.verifying_key(), key_id="k", now=NOW)


def test_wrong_key_and_key_id_fail(ed_key: SigningKey, ec_key: SigningKey) -> None:
    fields = sign_response(200, [("Content-Type", "text/html")], BODY, ed_key, key_id="k", now=NOW)
    other = SigningKey.generate(ed_key.alg)
    for key, key_id in ((other, "k"), (ed_key, "other"), (ec_key, "k")):
        with pytest.raises(HttpSignatureError):
            verify_response(200, fields, BODY, key.verifying_key(), key_id=key_id, now=NOW)


@pytest.mark.parametrize("now", [NOW - 60, NOW + 86400 + 60])
def test_clock_is_passed_in(ed_key: SigningKey, now: float) -> None:
    """``created`` in the future, or older than ``max_age``, fails; no clock is read."""
    fields = sign_response(200, [("Content-Type", "text/html")], BODY, ed_key, key_id="k", now=NOW)
    with pytest.raises(HttpSignatureError):
        verify_response(200, fields, BODY, ed_key.verifying_key(), key_id="k", now=now)


def test_expires_is_checked(ed_key: SigningKey) -> None:
    fields = sign_response(200, [("Content-Type", "text/html")], BODY, ed_key, key_id="k",
                           now=NOW, expires=NOW + 100)
    verify_response(200, fields, BODY, ed_key.verifying_key(), key_id="k", now=NOW + 100)
    with pytest.raises(HttpSignatureError):
        verify_response(200, fields, BODY, ed_key.verifying_key(), key_id="k", now=NOW + 200)


def test_signing_a_missing_field_is_a_value_error(ed_key: SigningKey) -> None:
    with pytest.raises(ValueError):
        sign_response(200, [], BODY, ed_key, key_id="k", now=NOW)  # no Content-Type


def test_fields_container() -> None:
    f = Fields([("A", "1"), ("a", "2"), ("B", "3")])
    assert list(f) == ["A", "a", "B"] and "b" in f and 5 not in f and f.get("A") == "1, 2"
    f["a"] = "9"
    assert f.lines == [("B", "3"), ("a", "9")] and f.get("c") is None


def test_cores_do_no_io() -> None:
    for module in (sine.httpsig, sine.mice):
        tree = ast.parse(Path(str(module.__file__)).read_text())
        names = {a.name.split(".")[0] for n in ast.walk(tree)
                 if isinstance(n, ast.Import | ast.ImportFrom) for a in n.names}
        names |= {str(n.module).split(".")[0] for n in ast.walk(tree)
                  if isinstance(n, ast.ImportFrom) and n.module}
        assert not names & {"socket", "asyncio", "time", "random", "ssl"}


# --- fuzz: header values -> typed error ------------------------------------------------------

_FIELD_TEXT = st.one_of(st.text(max_size=120),
                        st.text(alphabet='abc=:;,"()*@ -_/+sig01', max_size=120))


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(["Signature-Input", "Signature", "Content-Digest", "Content-Type",
                             "Digest", "Content-Encoding", "Unencoded-Digest"]),
       value=_FIELD_TEXT)
def test_fuzzed_field_values_raise_only_typed_errors(name: str, value: str) -> None:
    fields, body = FUZZ_BASE
    try:
        open_mice_response(200, _replace(fields, name, value), FUZZ_KEY.verifying_key(),
                           key_id="k", now=NOW)
        verify_response(200, _replace(fields, name, value), body, FUZZ_KEY.verifying_key(),
                        key_id="k", now=NOW, require=MICE_COVERED)
    except SineError as exc:
        assert isinstance(exc, HttpSignatureError)


@settings(max_examples=200, deadline=None)
@given(value=_FIELD_TEXT, content=st.binary(max_size=64))
def test_fuzzed_digest_values_raise_only_typed_errors(value: str, content: bytes) -> None:
    try:
        check_content_digest(value, content)
    except SineError as exc:
        assert isinstance(exc, HttpSignatureError)


FUZZ_KEY = SigningKey.from_pem(VECTOR["keys"]["test-key-ed25519"]["private_pem"].encode())
FUZZ_BASE = _mice_response(FUZZ_KEY, b"fuzz" * 600)
