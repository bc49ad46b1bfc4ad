"""Reverse SSL's puzzle and signature checks, each at its boundary and with its reason.

Written to kill the mutants ``make mutation`` (group ``reverse_ssl``) found alive.  The puzzle
checks (Figure 3 of the paper) are driven directly with hand-made replies -- the server's
secret ``m`` is known here, so a reply can sit exactly on the edge of the window, carry an
exponent of 3 or a pre-image one byte too long -- and the handshake checks through in-memory
pairs whose misbehaving side is a real connection subclass (an adversary, never a stand-in for
the code under test).
"""

from __future__ import annotations

import dataclasses

import pytest
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from reverse_ssl.aio.pool import SignaturePool
from reverse_ssl.client_connection import ReverseClientConnection
from reverse_ssl.config import SeenKeyCache
from reverse_ssl.errors import (
    BadOfflineSignature,
    BadSelfSignature,
    ForgedOneTimeSignature,
    MissingSelfSignature,
    ModulusOutOfRange,
    PuzzleReplayed,
    ReusedOneTimeKey,
    WrongPreimage,
)
from reverse_ssl.messages import Mode
from reverse_ssl.onoff import (
    OnlineOfflineSignature,
    make_offline_token,
    sign_fallback,
    sign_online,
    verify,
)
from reverse_ssl.ots import OTSScheme, keygen, lamport_verify, winternitz_keygen, winternitz_verify
from reverse_ssl.puzzle import (
    Construction,
    PuzzleChallenge,
    PuzzleParams,
    PuzzleReply,
    PuzzleRequest,
    ReplayCache,
    SignaturePolicy,
    make_puzzle,
    solve,
    solve_preimage,
    verify_reply,
)
from reverse_ssl.server_connection import ReverseServerConnection
from tests.reverse_ssl.rssl_helpers import (
    LeakyPool,
    client_config,
    client_credentials,
    server_config,
    server_credentials,
    token_factory,
)
from tls12.errors import BadCertificate, DecodeError, DecryptError, InsufficientSecurity
from tls12.messages import Certificate, HandshakeType, push_certificate
from tls12.testing import credentials, pipe, seeded_rng

SIG = b"not checked"  # a self-signature for verify_reply(..., verify_signature=False)


def _odd_challenge(params: PuzzleParams) -> PuzzleChallenge:
    """A challenge whose hidden m is odd, so that m and m +- 2^K are candidate moduli."""
    for seed in range(64):
        challenge = make_puzzle(params, seeded_rng(seed))
        if challenge.m % 2:
            return challenge
    raise AssertionError("no odd m in 64 seeds")


def _reply(challenge: PuzzleChallenge, n: int, *, e: int = 65537, preimage: bytes = b"",
           nbytes: int | None = None) -> PuzzleReply:
    size = challenge.params.n_bits // 8 if nbytes is None else nbytes
    return PuzzleReply(preimage, n.to_bytes(size, "big"), e, SIG)


# --- the modulus window and the exponent ---------------------------------------------------------


def test_the_window_is_closed_at_both_ends() -> None:
    """|n - m| <= 2^K is accepted, one step further is ModulusOutOfRange, and so are even or
    wrongly sized moduli (an even n is no RSA modulus)."""
    params = PuzzleParams(n_bits=512)
    c = _odd_challenge(params)
    k = params.k
    assert k is not None
    for n in (c.m, c.m + (1 << k), c.m - (1 << k)):
        key = verify_reply(c, _reply(c, n), verify_signature=False)
        assert key.public_numbers().n == n
    out_of_range = f"^modulus is not inside \\[m - 2\\^{k}, m \\+ 2\\^{k}\\]$"
    for bad in (_reply(c, c.m + (1 << k) + 2), _reply(c, c.m - (1 << k) - 2), _reply(c, c.m + 1),
                _reply(c, c.m - 1), _reply(c, c.m, nbytes=65)):
        with pytest.raises(ModulusOutOfRange, match=out_of_range):
            verify_reply(c, bad, verify_signature=False)


@pytest.mark.parametrize("e", [3, 5, 17, 65537])
def test_small_odd_exponents_are_valid(e: int) -> None:
    c = _odd_challenge(PuzzleParams(n_bits=512))
    assert verify_reply(c, _reply(c, c.m, e=e), verify_signature=False).public_numbers().e == e


@pytest.mark.parametrize("e", [0, 1, 2, 4, 6, 8, 65536])
def test_invalid_exponents_are_refused(e: int) -> None:
    c = _odd_challenge(PuzzleParams(n_bits=512))
    with pytest.raises(ModulusOutOfRange, match="^invalid public exponent$"):
        verify_reply(c, _reply(c, c.m, e=e), verify_signature=False)


def test_a_reply_needs_a_self_signature_and_a_valid_one() -> None:
    c = make_puzzle(PuzzleParams(n_bits=512), seeded_rng(3))
    solved = solve(c.request, seeded_rng(4))
    with pytest.raises(MissingSelfSignature, match="^the puzzle reply carries no self-signature$"):
        verify_reply(c, dataclasses.replace(solved.reply, self_signature=b""), verify_signature=False)
    sig = solved.reply.self_signature
    flipped = dataclasses.replace(solved.reply, self_signature=bytes([sig[0] ^ 1]) + sig[1:])
    with pytest.raises(BadSelfSignature, match="^the self-signature does not verify under \\(n, e\\)$"):
        verify_reply(c, flipped)
    verify_reply(c, flipped, verify_signature=False)  # the policy may skip the check...
    assert verify_reply(c, solved.reply).public_numbers() == solved.private_key.public_key().public_numbers()


def test_a_solution_is_accepted_once() -> None:
    c = _odd_challenge(PuzzleParams(n_bits=512))
    cache = ReplayCache()
    verify_reply(c, _reply(c, c.m), verify_signature=False, replay_cache=cache)
    with pytest.raises(PuzzleReplayed, match="^this modulus already solved a puzzle: replayed solution$"):
        verify_reply(c, _reply(c, c.m), verify_signature=False, replay_cache=cache)


# --- the hash pre-image (second construction) ----------------------------------------------------------


@pytest.mark.parametrize("bits", [1, 4, 8, 9, 12, 17])
def test_honest_preimages_of_every_width_verify(bits: int) -> None:
    """The pre-image travels in ceil(p / 8) bytes: 9 and 17 bits need 2 and 3 bytes."""
    params = PuzzleParams(Construction.HASH_AND_RANGE, n_bits=512, preimage_bits=bits)
    for seed in range(64):
        c = make_puzzle(params, seeded_rng(seed))
        if c.m % 2:
            break
    m, tries = solve_preimage(c.request)
    assert m == c.m
    x = (tries - 1).to_bytes((bits + 7) // 8, "big")
    assert verify_reply(c, _reply(c, m, preimage=x), verify_signature=False).public_numbers().n == m


def test_preimage_size_value_and_construction_are_checked() -> None:
    params = PuzzleParams(Construction.HASH_AND_RANGE, n_bits=512, preimage_bits=4)
    c = _odd_challenge(params)
    _, tries = solve_preimage(c.request)
    x = tries - 1
    wrong_size = "^the pre-image has the wrong size$"
    with pytest.raises(WrongPreimage, match=wrong_size):  # right value, one byte too many
        verify_reply(c, _reply(c, c.m, preimage=x.to_bytes(2, "big")), verify_signature=False)
    with pytest.raises(WrongPreimage, match=wrong_size):  # a fifth bit set
        verify_reply(c, _reply(c, c.m, preimage=bytes([x | 0x10])), verify_signature=False)
    with pytest.raises(WrongPreimage, match="^H\\(x \\|\\| y\\) != H\\(m\\): wrong hash pre-image$"):
        verify_reply(c, _reply(c, c.m, preimage=bytes([x ^ 1])), verify_signature=False)
    first = _odd_challenge(PuzzleParams(n_bits=512))
    with pytest.raises(WrongPreimage, match="^a pre-image was sent for the first construction$"):
        verify_reply(first, _reply(first, first.m, preimage=b"\x00"), verify_signature=False)


# --- the replay cache ------------------------------------------------------------------------------------


def test_replay_cache_capacity_and_eviction_order() -> None:
    with pytest.raises(ValueError, match="^capacity must be at least 1$"):
        ReplayCache(0)
    one = ReplayCache(1)
    one.add(b"a")
    assert b"a" in one
    one.add(b"b")
    assert b"a" not in one and b"b" in one
    three = ReplayCache(3)
    for m in (b"a", b"b", b"c", b"d"):
        three.add(m)
    assert [m in three for m in (b"a", b"b", b"c", b"d")] == [False, True, True, True]


# --- one-time and online/offline signatures ---------------------------------------------------------------


def test_winternitz_default_is_w16_and_bad_lengths_are_false() -> None:
    signer = winternitz_keygen(seeded_rng(b"w16"))
    sig = signer.sign(b"message")
    assert winternitz_verify(signer.public_key, b"message", sig)
    assert not winternitz_verify(signer.public_key, b"other", sig)
    assert not winternitz_verify(signer.public_key, b"message", sig[:-1])
    assert not winternitz_verify(signer.public_key, b"message", sig + b"\x00")  # no trailing bytes
    assert not winternitz_verify(signer.public_key + b"\x00", b"message", sig)
    assert not winternitz_verify(signer.public_key[:-1], b"message", sig)


def test_lamport_bad_lengths_are_false() -> None:
    signer = keygen(OTSScheme.LAMPORT, seeded_rng(b"lamport"))
    sig = signer.sign(b"message")
    assert lamport_verify(signer.public_key, b"message", sig)
    assert not lamport_verify(signer.public_key, b"message", sig + b"\x00")
    assert not lamport_verify(signer.public_key[:-1], b"message", sig)


def test_online_offline_verification_names_what_failed() -> None:
    key = server_credentials().private_key
    other = credentials(bits=1024, common_name="impostor").private_key
    public = key.public_key()
    message = b"transcript"
    with pytest.raises(BadOfflineSignature, match="^RSA signature over the transcript does not verify$"):
        verify(public, message, sign_fallback(other, message))
    verify(public, message, sign_fallback(key, message))
    with pytest.raises(BadOfflineSignature,
                       match="^W does not verify: the one-time key is not signed by the server$"):
        verify(public, message, sign_online(make_offline_token(other, seeded_rng(b"o")), message))
    good = sign_online(make_offline_token(key, seeded_rng(b"k")), message)
    verify(public, message, good)
    with pytest.raises(ForgedOneTimeSignature,
                       match="^the one-time signature over the transcript does not verify$"):
        verify(public, b"another transcript", good)
    forged = OnlineOfflineSignature(good.scheme, good.public_key, good.offline_signature,
                                    bytes(len(good.one_time_signature)))
    with pytest.raises(ForgedOneTimeSignature):
        verify(public, message, forged)


# --- the client's checks ------------------------------------------------------------------------------------


def _request(n_bits: int = 512) -> PuzzleRequest:
    return make_puzzle(PuzzleParams(n_bits=n_bits), seeded_rng(1)).request


def test_client_takes_a_puzzle_only_in_puzzle_mode_and_only_once() -> None:
    """The transition table lets a PuzzleRequest arrive before ServerHelloDone in either mode;
    the handler's own guard refuses it unless the server chose the puzzle and none came yet."""
    client = ReverseClientConnection(client_config())
    client.mode = Mode.CLIENT_AUTH
    with pytest.raises(DecodeError, match="^unexpected PuzzleRequest$"):
        client._handle_puzzle_request(_request())
    client.mode = Mode.PUZZLE
    client._handle_puzzle_request(_request())
    assert client.puzzle_solution is not None
    with pytest.raises(DecodeError, match="^unexpected PuzzleRequest$"):
        client._handle_puzzle_request(_request())


LIMIT = "^the server's puzzle exceeds this client's limits$"


def test_client_limits_are_inclusive() -> None:
    """A puzzle exactly at the client's limits is solved; one step over is refused."""
    server = ReverseServerConnection(server_config(puzzle=PuzzleParams(n_bits=512)))
    client = ReverseClientConnection(client_config(modes=(Mode.PUZZLE,), max_puzzle_bits=512))
    pipe(client, server)
    assert client.handshake_complete
    server = ReverseServerConnection(server_config(puzzle=PuzzleParams(n_bits=520)))
    client = ReverseClientConnection(client_config(modes=(Mode.PUZZLE,), max_puzzle_bits=512))
    with pytest.raises(InsufficientSecurity, match=LIMIT):
        pipe(client, server)


@pytest.mark.parametrize(("preimage_bits", "limit", "ok"), [(6, 6, True), (6, 5, False)])
def test_client_preimage_limit(preimage_bits: int, limit: int, ok: bool) -> None:
    puzzle = PuzzleParams(Construction.HASH_AND_RANGE, n_bits=512, preimage_bits=preimage_bits)
    server = ReverseServerConnection(server_config(puzzle=puzzle))
    client = ReverseClientConnection(client_config(modes=(Mode.PUZZLE,), max_preimage_bits=limit))
    if ok:
        pipe(client, server)
        assert client.handshake_complete
    else:
        with pytest.raises(InsufficientSecurity, match=LIMIT):
            pipe(client, server)


def test_puzzle_key_lives_for_one_handshake_the_certificate_key_stays() -> None:
    client = ReverseClientConnection(client_config(modes=(Mode.PUZZLE,)))
    pipe(client, ReverseServerConnection(server_config()))
    assert client.handshake_complete and client.context.private_key is None
    creds = client_credentials()
    client = ReverseClientConnection(client_config(modes=(Mode.CLIENT_AUTH,)))
    pipe(client, ReverseServerConnection(server_config()))
    assert client.handshake_complete and client.context.private_key is creds.private_key


class _WrappedKey:
    """The client's public key as a hostile server uses it: encrypts what ``make`` returns."""

    def __init__(self, key: rsa.RSAPublicKey, make) -> None:  # type: ignore[no-untyped-def]
        self.key_size = key.key_size
        self._key = key
        self._make = make

    def encrypt(self, premaster: bytes, pad: padding.AsymmetricPadding) -> bytes:
        return self._make(self._key, premaster, pad)


class HostileServer(ReverseServerConnection):
    """Sends a KeyTransport whose encrypted premaster is ``make(client_key, premaster, pad)``."""

    make = None

    def _send_key_transport(self, client_key: rsa.RSAPublicKey) -> None:
        super()._send_key_transport(_WrappedKey(client_key, type(self).make))  # type: ignore[arg-type]


def _hostile(make) -> type[HostileServer]:  # type: ignore[no-untyped-def]
    return type("Hostile", (HostileServer,), {"make": staticmethod(make)})


@pytest.mark.parametrize("make", [
    lambda k, pm, pad: k.encrypt(pm[:47], pad),                       # 47 bytes
    lambda k, pm, pad: k.encrypt(pm + b"\x00", pad),                  # 49 bytes
    lambda k, pm, pad: k.encrypt(b"\x03\x01" + pm[2:], pad),          # TLS 1.0 in a 1.2 handshake
], ids=["short", "long", "old-version"])
def test_client_refuses_a_malformed_premaster(make) -> None:  # type: ignore[no-untyped-def]
    client = ReverseClientConnection(client_config(modes=(Mode.CLIENT_AUTH,)))
    with pytest.raises(DecryptError, match="^malformed premaster secret$"):
        pipe(client, _hostile(make)(server_config()))


def test_client_refuses_a_premaster_it_cannot_decrypt() -> None:
    """A ciphertext not below the modulus cannot be decrypted at all.  (A merely wrong one
    decrypts, under OpenSSL's implicit rejection, to random bytes: "malformed" above.)"""
    client = ReverseClientConnection(client_config(modes=(Mode.PUZZLE,)))
    garbage = _hostile(lambda k, pm, pad: b"\xff" * (k.key_size // 8))  # >= the modulus
    with pytest.raises(DecryptError, match="^cannot decrypt the premaster secret$"):
        pipe(client, garbage(server_config()))
    assert client.context.private_key is None  # the puzzle key is gone even on failure


def test_reused_one_time_key_message() -> None:
    token = make_offline_token(server_credentials().private_key, seeded_rng(b"leak2"))
    cfg = dataclasses.replace(server_config(pool_size=0), pool=LeakyPool(token))
    seen = SeenKeyCache()
    pipe(ReverseClientConnection(client_config(modes=(Mode.CLIENT_AUTH,), seen_keys=seen)),
         ReverseServerConnection(cfg))
    with pytest.raises(ReusedOneTimeKey, match="^the server reused a one-time signing key$"):
        pipe(ReverseClientConnection(client_config(modes=(Mode.CLIENT_AUTH,), seen_keys=seen)),
             ReverseServerConnection(cfg))


# --- the server's checks -------------------------------------------------------------------------------------


def test_server_hands_the_client_chain_to_its_verifier_and_keeps_it() -> None:
    seen: list[list[bytes]] = []
    server = ReverseServerConnection(server_config(verify_client_certificate=seen.append))
    client = ReverseClientConnection(client_config(modes=(Mode.CLIENT_AUTH,)))
    pipe(client, server)
    chain = list(client_credentials().chain_der)
    assert seen == [chain]
    assert list(server.peer_certificates) == chain

    def refuse(_: list[bytes]) -> None:
        raise BadCertificate("not on the allow list")

    server = ReverseServerConnection(server_config(verify_client_certificate=refuse))
    with pytest.raises(BadCertificate, match="^not on the allow list$"):
        pipe(ReverseClientConnection(client_config(modes=(Mode.CLIENT_AUTH,))), server)


class EmptyCertificateClient(ReverseClientConnection):
    """Chooses client authentication and then sends an empty Certificate."""

    def _handle_reverse_hello_done(self, _: None) -> None:
        if self.mode is Mode.PUZZLE:
            super()._handle_reverse_hello_done(_)
            return
        self._send_handshake((HandshakeType.CERTIFICATE, push_certificate(Certificate(()))))


def test_server_refuses_an_empty_or_non_rsa_client_certificate() -> None:
    with pytest.raises(BadCertificate,
                       match="^Reverse SSL with client authentication needs a client certificate$"):
        pipe(EmptyCertificateClient(client_config(modes=(Mode.CLIENT_AUTH,))),
             ReverseServerConnection(server_config()))
    ec = credentials("ecdsa", bits=256, common_name="client")
    client = ReverseClientConnection(client_config(modes=(Mode.CLIENT_AUTH,), credentials=ec))
    with pytest.raises(BadCertificate, match="^the client certificate does not carry an RSA key$"):
        pipe(client, ReverseServerConnection(server_config()))


def _pool(tokens: int) -> SignaturePool:
    pool = SignaturePool(4)
    pool.fill(token_factory(server_credentials().private_key, seed=b"pool"), tokens)
    return pool


@pytest.mark.parametrize(("policy", "tokens", "checked"), [
    (SignaturePolicy.WHEN_POOL_EMPTY, 0, True),
    (SignaturePolicy.WHEN_POOL_EMPTY, 1, False),
    (SignaturePolicy.WHEN_POOL_EMPTY, 2, False),
    (SignaturePolicy.ALWAYS, 1, True),
])
def test_signature_policy_follows_the_pool(policy: SignaturePolicy, tokens: int, checked: bool) -> None:
    """The self-signature is checked exactly when the policy says so: with WHEN_POOL_EMPTY, only
    when no pre-signed key is ready (a pool of one is ready).  The challenge is single-use."""
    cfg = dataclasses.replace(server_config(pool_size=0), pool=_pool(tokens), signature_policy=policy)
    server = ReverseServerConnection(cfg)
    pipe(ReverseClientConnection(client_config(modes=(Mode.PUZZLE,))), server)
    assert server.handshake_complete
    assert server.verified_self_signature is checked
    assert server.context.challenge is None
