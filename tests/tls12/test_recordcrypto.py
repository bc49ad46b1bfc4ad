"""Record crypto: C extension (stitched and generic paths) vs the pure-Python twin.

References are built in this file from primitives (``cryptography`` AES-CBC and
the stdlib ``hmac``), never from the code under test.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import random
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from hypothesis import given, settings
from hypothesis import strategies as st

from tls12.recordcrypto import (
    BACKEND,
    FRAGMENT_MAX,
    PLAINTEXT_MAX,
    RECORD_CRYPTO_ERRORS,
    CRecordCipher,
    PyRecordCipher,
    RecordCipher,
)
from tls12.suites import SUITES, SuiteParams

CIPHERS = {"null": 0, "aes-128-cbc": 16, "aes-256-cbc": 32}
MACS = {"sha1": 20, "sha256": 32}
COMBOS = [(c, m) for c in CIPHERS for m in MACS]
AES_COMBOS = [(c, m) for c, m in COMBOS if c != "null"]
BAD_RECORD = "bad record MAC"

Factory = Callable[..., Any]


def _c_stitched(cipher: str, mac: str, enc_key: bytes, mac_key: bytes) -> Any:
    assert CRecordCipher is not None
    return CRecordCipher(cipher, mac, enc_key, mac_key)


def _c_generic(cipher: str, mac: str, enc_key: bytes, mac_key: bytes) -> Any:
    assert CRecordCipher is not None
    return CRecordCipher(cipher, mac, enc_key, mac_key, stitched=False)


def _python(cipher: str, mac: str, enc_key: bytes, mac_key: bytes) -> Any:
    return PyRecordCipher(cipher, mac, enc_key, mac_key)


IMPLS: dict[str, Factory] = {"python": _python}
if CRecordCipher is not None:
    IMPLS = {"c-stitched": _c_stitched, "c-generic": _c_generic, **IMPLS}

@pytest.fixture
def c_extension() -> None:
    """The C extension must be built (``make build``); its absence is a failure, never a skip."""
    if CRecordCipher is None:
        pytest.fail("tls12._recordcrypto is not built: run `make build` (or TLS12_PURE_PYTHON is set)")


requires_c = pytest.mark.usefixtures("c_extension")


def cpu_has_aes_ni() -> bool:
    """OpenSSL's stitched AES-CBC-HMAC ciphers exist only with AES-NI (x86 'aes' flag)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return any(line.startswith("flags") and " aes " in f"{line} " for line in flags.splitlines())
slow_settings = settings(deadline=None, max_examples=150)


@pytest.fixture(params=sorted(IMPLS))
def impl(request: pytest.FixtureRequest) -> Factory:
    return IMPLS[request.param]


# -- reference construction from primitives ----------------------------------


def reference_mac(
    mac: str, mac_key: bytes, seq: int, ctype: int, version: int, data: bytes
) -> bytes:
    header = seq.to_bytes(8, "big") + bytes([ctype]) + version.to_bytes(2, "big")
    digest = hashlib.sha1 if mac == "sha1" else hashlib.sha256
    return hmac.new(mac_key, header + len(data).to_bytes(2, "big") + data, digest).digest()


def reference_encrypt(enc_key: bytes, iv: bytes, body: bytes) -> bytes:
    encryptor = Cipher(algorithms.AES(enc_key), modes.CBC(iv)).encryptor()
    return iv + encryptor.update(body) + encryptor.finalize()


def reference_seal(
    cipher: str,
    mac: str,
    keys: tuple[bytes, bytes],
    header: tuple[int, int, int],
    plaintext: bytes,
    iv: bytes,
    pad: int | None = None,
) -> bytes:
    tag = reference_mac(mac, keys[1], *header, plaintext)
    if cipher == "null":
        return plaintext + tag
    body = plaintext + tag
    pad = 15 - len(body) % 16 if pad is None else pad
    return reference_encrypt(keys[0], iv, body + bytes([pad]) * (pad + 1))


# -- strategies -------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    cipher: str
    mac: str
    enc_key: bytes
    mac_key: bytes
    seq: int
    ctype: int
    version: int
    plaintext: bytes
    iv: bytes

    def build(self, factory: Factory, keyless: bool = False) -> Any:
        return factory(self.cipher, self.mac, self.enc_key, b"" if keyless else self.mac_key)

    @property
    def header(self) -> tuple[int, int, int]:
        return (self.seq, self.ctype, self.version)


lengths = st.one_of(
    st.integers(0, 300),
    st.integers(0, PLAINTEXT_MAX),
    st.sampled_from([0, 15, 16, 239, 240, 255, 256, PLAINTEXT_MAX - 1, PLAINTEXT_MAX]),
)
versions = st.one_of(
    st.sampled_from([0x0303, 0x0302, 0x0301, 0x0300, 0xFEFD]), st.integers(0, 0xFFFF)
)
seqs = st.one_of(st.integers(0, 2**64 - 1), st.sampled_from([0, 1, 2**64 - 1]))


@st.composite
def cases(
    draw: st.DrawFn, combos: list[tuple[str, str]] = COMBOS, max_length: int | None = None
) -> Case:
    cipher, mac = draw(st.sampled_from(combos))
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    length = draw(lengths if max_length is None else st.integers(0, max_length))
    return Case(
        cipher=cipher,
        mac=mac,
        enc_key=rng.randbytes(CIPHERS[cipher]),
        mac_key=rng.randbytes(MACS[mac]),
        seq=draw(seqs),
        ctype=draw(st.integers(0, 255)),
        version=draw(versions),
        plaintext=rng.randbytes(length),
        iv=rng.randbytes(16) if cipher != "null" else b"",
    )


# -- equivalence and round trips ------------------------------------------------


@requires_c
@slow_settings
@given(case=cases())
def test_backends_give_identical_bytes(case: Case) -> None:
    ciphers = {name: case.build(f) for name, f in IMPLS.items()}
    fragments = {name: c.seal(*case.header, case.plaintext, case.iv) for name, c in ciphers.items()}
    assert len(set(fragments.values())) == 1, {n: len(f) for n, f in fragments.items()}
    macs = {c.compute_mac(*case.header, case.plaintext) for c in ciphers.values()}
    assert len(macs) == 1
    fragment = fragments["python"]
    for c in ciphers.values():
        assert c.open(*case.header, fragment) == case.plaintext


@slow_settings
@given(case=cases())
def test_matches_reference_and_seal_with_mac(case: Case) -> None:
    expected = reference_seal(
        case.cipher, case.mac, (case.enc_key, case.mac_key), case.header, case.plaintext, case.iv
    )
    for factory in IMPLS.values():
        cipher, keyless = case.build(factory), case.build(factory, keyless=True)
        tag = cipher.compute_mac(*case.header, case.plaintext)
        assert cipher.seal(*case.header, case.plaintext, case.iv) == expected
        assert cipher.seal_with_mac(case.plaintext, tag, case.iv) == expected
        assert keyless.seal_with_mac(case.plaintext, tag, case.iv) == expected
        assert cipher.open(*case.header, expected) == case.plaintext


@slow_settings
@given(case=cases(max_length=2000), count=st.integers(0, 6), data=st.data())
def test_seal_many_equals_repeated_seal(case: Case, count: int, data: st.DataObject) -> None:
    seq = min(case.seq, 2**64 - max(count, 1))
    rng = random.Random(case.seq)
    plaintexts = [rng.randbytes(rng.randrange(0, 2000)) for _ in range(count)]
    ivs = [rng.randbytes(len(case.iv)) for _ in range(count)]
    results = []
    for factory in IMPLS.values():
        c = case.build(factory)
        many = c.seal_many(seq, case.ctype, case.version, plaintexts, ivs)
        single = [
            c.seal(seq + i, case.ctype, case.version, p, v)
            for i, (p, v) in enumerate(zip(plaintexts, ivs, strict=True))
        ]
        assert many == single
        assert c.open_many(seq, case.ctype, case.version, many) == plaintexts
        results.append(many)
    assert all(r == results[0] for r in results)


def test_seal_many_accepts_tuples_and_empty(impl: Factory) -> None:
    c = impl("aes-128-cbc", "sha1", bytes(16), bytes(20))
    assert c.seal_many(0, 23, 0x0303, [], []) == []
    assert c.open_many(0, 23, 0x0303, ()) == []
    sealed = c.seal_many(7, 23, 0x0303, (b"a", b"b"), (bytes(16), bytes(range(16))))
    assert c.open_many(7, 23, 0x0303, tuple(sealed)) == [b"a", b"b"]


# -- known answers per suite ---------------------------------------------------


@pytest.mark.parametrize("params", [p for p in SUITES.values() if not p.aead], ids=lambda p: p.openssl_name)
@pytest.mark.parametrize("version", [0x0303, 0x0301])
@pytest.mark.parametrize("length", [0, 100, PLAINTEXT_MAX])
def test_known_answer_per_suite(
    impl: Factory, params: SuiteParams, version: int, length: int
) -> None:
    enc_key = bytes(range(1, 1 + params.key_length))
    mac_key = bytes(range(100, 100 + params.mac_length))
    header = (0x0102030405060708, 23, version)
    plaintext = bytes(i * 31 % 251 for i in range(length))
    iv = bytes(range(200, 200 + params.block_size))
    expected = reference_seal(params.cipher, params.mac, (enc_key, mac_key), header, plaintext, iv)
    c = impl(params.cipher, params.mac, enc_key, mac_key)
    assert (c.mac_length, c.block_size) == (params.mac_length, params.block_size)
    assert c.compute_mac(*header, plaintext) == reference_mac(
        params.mac, mac_key, *header, plaintext
    )
    assert c.seal(*header, plaintext, iv) == expected
    assert c.open(*header, expected) == plaintext


@pytest.mark.parametrize(("cipher", "mac"), AES_COMBOS)
@pytest.mark.parametrize("pad", [0, 16, 255])
def test_non_minimal_padding_is_accepted(impl: Factory, cipher: str, mac: str, pad: int) -> None:
    keys = (bytes(CIPHERS[cipher]), bytes(range(MACS[mac])))
    length = (-(MACS[mac] + pad + 1)) % 16 + 48  # makes the padded body block-aligned
    plaintext = bytes(range(length))
    fragment = reference_seal(cipher, mac, keys, (9, 23, 0x0303), plaintext, bytes(16), pad=pad)
    assert impl(cipher, mac, *keys).open(9, 23, 0x0303, fragment) == plaintext


# -- tampering: every failure is the same error -----------------------------------


def _assert_bad_record(c: Any, header: tuple[int, int, int], fragment: bytes) -> None:
    with pytest.raises(RECORD_CRYPTO_ERRORS) as info:
        c.open(*header, fragment)
    assert str(info.value) == BAD_RECORD


@pytest.mark.parametrize(("cipher", "mac"), COMBOS)
def test_tampering_is_detected(impl: Factory, cipher: str, mac: str) -> None:
    c = impl(cipher, mac, bytes(range(CIPHERS[cipher])), bytes(range(MACS[mac])))
    iv = bytes(range(16)) if cipher != "null" else b""
    header = (1000, 23, 0x0303)
    fragment = c.seal(*header, b"attack at dawn, bring snacks", iv)
    for i in range(len(fragment)):
        for bit in (0x01, 0x80):
            tampered = bytearray(fragment)
            tampered[i] ^= bit
            _assert_bad_record(c, header, bytes(tampered))
    for cut in (
        fragment[:-1],
        fragment[:-16],
        fragment[16:],
        fragment[1:],
        b"",
        fragment + b"\0" * 16,
    ):
        _assert_bad_record(c, header, cut)
    for wrong in ((1001, 23, 0x0303), (1000, 22, 0x0303), (1000, 23, 0x0302), (0, 23, 0x0303)):
        _assert_bad_record(c, wrong, fragment)


@slow_settings
@given(case=cases(max_length=600), position=st.integers(0, 10**6), flip=st.integers(1, 255))
def test_any_single_byte_change_is_rejected(case: Case, position: int, flip: int) -> None:
    for factory in IMPLS.values():
        c = case.build(factory)
        fragment = bytearray(c.seal(*case.header, case.plaintext, case.iv))
        fragment[position % len(fragment)] ^= flip
        _assert_bad_record(c, case.header, bytes(fragment))


@pytest.mark.parametrize(("cipher", "mac"), AES_COMBOS)
def test_padding_and_mac_failures_are_indistinguishable(
    impl: Factory, cipher: str, mac: str
) -> None:
    keys = (bytes(range(CIPHERS[cipher])), bytes(range(7, 7 + MACS[mac])))
    header, iv = (5, 23, 0x0303), bytes(16)
    plaintext = bytes(range(44))
    tag = reference_mac(mac, keys[1], *header, plaintext)
    body = plaintext + tag
    pad = 15 - len(body) % 16
    good_padding = bytes([pad]) * (pad + 1)
    bad_padding = bytes([pad]) * pad + bytes([(pad + 1) % 256])
    broken_inner = bytes([pad ^ 1]) + bytes([pad]) * pad if pad else bytes([1])
    bad_mac = bytes([tag[0] ^ 1]) + tag[1:]
    c = impl(cipher, mac, *keys)
    assert c.open(*header, reference_encrypt(keys[0], iv, body + good_padding)) == plaintext
    errors = []
    for record in (
        body + bad_padding,  # padding byte says more than is there
        body + broken_inner,  # inner padding byte differs
        plaintext + bad_mac + good_padding,  # padding fine, MAC wrong
        body + bytes([pad]) * pad + b"\0",  # valid zero-length padding, so the MAC is wrong
    ):
        with pytest.raises(RECORD_CRYPTO_ERRORS) as info:
            c.open(*header, reference_encrypt(keys[0], iv, record))
        errors.append((type(info.value), str(info.value)))
    assert len(set(errors)) == 1 and errors[0][1] == BAD_RECORD


@slow_settings
@given(
    combo=st.sampled_from(COMBOS),
    garbage=st.one_of(
        st.binary(max_size=600),
        st.tuples(st.integers(0, FRAGMENT_MAX + 64), st.integers(0, 2**32)).map(
            lambda t: random.Random(t[1]).randbytes(t[0])
        ),
    ),
)
def test_open_fuzz_raises_only_record_errors(combo: tuple[str, str], garbage: bytes) -> None:
    cipher, mac = combo
    for factory in IMPLS.values():
        c = factory(cipher, mac, bytes(CIPHERS[cipher]), bytes(MACS[mac]))
        _assert_bad_record(c, (0, 23, 0x0303), garbage)
        with pytest.raises(RECORD_CRYPTO_ERRORS):
            c.open_many(0, 23, 0x0303, [garbage])


# -- limits and argument checking --------------------------------------------------


def test_plaintext_and_fragment_limits(impl: Factory) -> None:
    c = impl("aes-128-cbc", "sha256", bytes(16), bytes(32))
    iv, big = bytes(16), bytes(PLAINTEXT_MAX + 1)
    for call in (
        lambda: c.seal(0, 23, 0x0303, big, iv),
        lambda: c.seal_with_mac(big, bytes(32), iv),
        lambda: c.compute_mac(0, 23, 0x0303, big),
        lambda: c.seal_many(0, 23, 0x0303, [b"", big], [iv, iv]),
    ):
        with pytest.raises(ValueError, match="2\\^14"):
            call()
    _assert_bad_record(c, (0, 23, 0x0303), bytes(FRAGMENT_MAX + 16))
    _assert_bad_record(c, (0, 23, 0x0303), bytes(FRAGMENT_MAX))
    fragment = c.seal(0, 23, 0x0303, bytes(PLAINTEXT_MAX), iv)
    assert len(fragment) <= FRAGMENT_MAX
    assert c.open(0, 23, 0x0303, fragment) == bytes(PLAINTEXT_MAX)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("aes-128-cbc", "sha1", bytes(15), bytes(20)), "enc_key"),
        (("aes-128-cbc", "sha1", bytes(32), bytes(20)), "enc_key"),
        (("aes-256-cbc", "sha1", bytes(16), bytes(20)), "enc_key"),
        (("null", "sha1", bytes(16), bytes(20)), "enc_key"),
        (("aes-128-cbc", "sha1", bytes(16), bytes(32)), "mac_key"),
        (("null", "sha256", b"", bytes(20)), "mac_key"),
        (("aes-128-gcm", "sha1", bytes(16), bytes(20)), "unknown cipher"),
        (("aes-128-cbc", "md5", bytes(16), bytes(16)), "unknown MAC"),
    ],
)
def test_bad_construction(impl: Factory, args: tuple[str, str, bytes, bytes], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        impl(*args)


def test_bad_arguments(impl: Factory) -> None:
    c = impl("aes-128-cbc", "sha1", bytes(16), bytes(20))
    n = impl("null", "sha1", b"", bytes(20))
    iv = bytes(16)
    value_errors = [
        lambda: c.seal(0, 23, 0x0303, b"x", b""),
        lambda: c.seal(0, 23, 0x0303, b"x", bytes(15)),
        lambda: c.seal(0, 23, 0x0303, b"x", bytes(17)),
        lambda: n.seal(0, 23, 0x0303, b"x", iv),
        lambda: c.seal(-1, 23, 0x0303, b"x", iv),
        lambda: c.seal(2**64, 23, 0x0303, b"x", iv),
        lambda: c.open(2**64, 23, 0x0303, bytes(64)),
        lambda: c.compute_mac(-1, 23, 0x0303, b"x"),
        lambda: c.seal(0, 256, 0x0303, b"x", iv),
        lambda: c.seal(0, -1, 0x0303, b"x", iv),
        lambda: c.seal(0, 23, 0x10000, b"x", iv),
        lambda: c.seal(0, 23, 2**70, b"x", iv),
        lambda: c.seal_with_mac(b"x", bytes(19), iv),
        lambda: c.seal_with_mac(b"x", bytes(20), bytes(8)),
        lambda: c.seal_many(2**64 - 1, 23, 0x0303, [b"a", b"b"], [iv, iv]),
        lambda: c.open_many(2**64 - 1, 23, 0x0303, [bytes(48), bytes(48)]),
        lambda: c.seal_many(0, 23, 0x0303, [b"a", b"b"], [iv]),
    ]
    for call in value_errors:
        with pytest.raises(ValueError) as info:
            call()
        assert not isinstance(info.value, RECORD_CRYPTO_ERRORS)
    assert c.seal_many(2**64 - 2, 23, 0x0303, [b"a", b"b"], [iv, iv])
    type_errors = [
        lambda: c.seal(0, 23, 0x0303, "text", iv),
        lambda: c.seal(0, 23, 0x0303, bytearray(b"x"), iv),
        lambda: c.seal(0.0, 23, 0x0303, b"x", iv),
        lambda: c.open(0, 23, 0x0303, memoryview(bytes(48))),
        lambda: c.seal_many(0, 23, 0x0303, [b"a", "b"], [iv, iv]),
        lambda: c.open_many(0, 23, 0x0303, 5),
    ]
    for call in type_errors:
        with pytest.raises(TypeError):
            call()


def test_keyless_cipher_only_seals_with_mac(impl: Factory) -> None:
    keyless = impl("aes-128-cbc", "sha1", bytes(16), b"")
    full = impl("aes-128-cbc", "sha1", bytes(16), bytes(range(20)))
    iv = bytes(range(16))
    tag = full.compute_mac(3, 23, 0x0303, b"payload")
    assert keyless.seal_with_mac(b"payload", tag, iv) == full.seal(3, 23, 0x0303, b"payload", iv)
    for call in (
        lambda: keyless.compute_mac(3, 23, 0x0303, b"payload"),
        lambda: keyless.seal(3, 23, 0x0303, b"payload", iv),
        lambda: keyless.open(3, 23, 0x0303, bytes(48)),
        lambda: keyless.seal_many(3, 23, 0x0303, [b""], [iv]),
        lambda: keyless.open_many(3, 23, 0x0303, [bytes(48)]),
    ):
        with pytest.raises(ValueError, match="without a MAC key"):
            call()
    null = impl("null", "sha256", b"", b"")
    assert null.seal_with_mac(b"abc", bytes(32)) == b"abc" + bytes(32)


# -- backend and path selection ------------------------------------------------------


@requires_c
@pytest.mark.parametrize(("cipher", "mac"), COMBOS)
def test_stitched_flag_selects_path(cipher: str, mac: str) -> None:
    assert CRecordCipher is not None
    keys = (bytes(CIPHERS[cipher]), bytes(MACS[mac]))
    assert not CRecordCipher(cipher, mac, *keys, stitched=False).stitched
    assert not CRecordCipher(cipher, mac, keys[0], b"").stitched
    assert not PyRecordCipher(cipher, mac, *keys).stitched
    stitched = CRecordCipher(cipher, mac, *keys).stitched
    # the one-pass path is used exactly when OpenSSL can offer it: an AES suite on an AES-NI CPU
    assert stitched == (cipher != "null" and cpu_has_aes_ni())


def test_backend_selection() -> None:
    code = "import tls12.recordcrypto as r; print(r.BACKEND, r.RecordCipher is r.PyRecordCipher)"
    env = dict(os.environ, TLS12_PURE_PYTHON="1")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["python", "True"]
    missing = "import sys; sys.modules['tls12._recordcrypto'] = None; " + code
    missing += "; print(r.CRecordCipher, len(r.RECORD_CRYPTO_ERRORS))"
    out = subprocess.run(
        [sys.executable, "-c", missing], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["python", "True", "None", "1"]
    if CRecordCipher is not None and os.environ.get("TLS12_PURE_PYTHON") != "1":
        assert BACKEND == "c" and RecordCipher is CRecordCipher
    assert all(issubclass(e, ValueError) for e in RECORD_CRYPTO_ERRORS)


@requires_c
def test_c_object_without_successful_init_never_crashes() -> None:
    assert CRecordCipher is not None
    bare = CRecordCipher.__new__(CRecordCipher)
    failed = CRecordCipher("aes-128-cbc", "sha1", bytes(16), bytes(20))
    with pytest.raises(ValueError):
        failed.__init__("aes-128-cbc", "sha1", bytes(15), bytes(20))  # type: ignore[misc]
    calls: list[tuple[str, tuple[Any, ...]]] = [
        ("seal", (0, 23, 0x0303, b"x", bytes(16))),
        ("seal_with_mac", (b"x", bytes(20), bytes(16))),
        ("open", (0, 23, 0x0303, bytes(48))),
        ("compute_mac", (0, 23, 0x0303, b"x")),
        ("seal_many", (0, 23, 0x0303, [b"x"], [bytes(16)])),
        ("open_many", (0, 23, 0x0303, [bytes(48)])),
    ]
    for c in (bare, failed):
        for name, args in calls:
            with pytest.raises(ValueError, match="__init__"):
                getattr(c, name)(*args)
    failed.__init__("null", "sha256", b"", bytes(32))  # type: ignore[misc]
    assert failed.open(1, 23, 0x0303, failed.seal(1, 23, 0x0303, b"ok")) == b"ok"
