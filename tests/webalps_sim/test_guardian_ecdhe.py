"""ECDHE_RSA in the guardian: the ephemeral key is made, used once and kept inside it.

A real :class:`tls12.ClientConnection` does a full ECDHE_RSA handshake whose server side is
written out here message by message, with every secret operation answered by a
:class:`webalps_sim.service.GuardianService` (``EPHEMERAL`` for the ServerKeyExchange,
``DERIVE_FINISH`` for the client's flight, ``OPEN`` / ``SEAL`` for data): the client checks the
guardian's signature and Finished, and data crosses byte-exact both ways.  Then the faults: a
point not on the curve is ``BAD_KEY_EXCHANGE`` and spends the key, a spent or released key is
``UNKNOWN_HANDLE``, and an ECDHE suite never mixes with an RSA key exchange.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import pytest
from cryptography.hazmat.primitives.asymmetric import padding

from tls12 import prf
from tls12.buffer import Buffer
from tls12.client_connection import ClientConnection
from tls12.config import ClientConfig
from tls12.events import ApplicationData
from tls12.messages import (
    Certificate,
    ExtensionType,
    HandshakeType,
    ServerHello,
    ServerKeyExchangeECDHE,
    frame_handshake,
    pull_client_hello,
    pull_client_key_exchange_ecdhe,
    push_certificate,
    push_server_hello,
    push_server_key_exchange_ecdhe,
)
from tls12.suites import CipherSuite
from tls12.testing import credentials
from webalps_sim import protocol as p
from webalps_sim.service import GuardianService

TLS12 = 0x0303
RSA_PKCS1_SHA256 = 0x0401
X25519, SECP256R1 = 0x001D, 0x0017
GROUP_NAMES = {X25519: "x25519", SECP256R1: "secp256r1"}
ECDHE_SUITES = (CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA,
                CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256,
                CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)


class RecordingCost:
    def __init__(self) -> None:
        self.charged: list[tuple[str, int]] = []

    def charge(self, op: str, nbytes: int) -> None:
        self.charged.append((op, nbytes))


def _service(**kwargs: object) -> GuardianService:
    creds = credentials()
    return GuardianService(creds.private_key, tuple(creds.chain_der), b"m" * 32,
                           **kwargs)  # type: ignore[arg-type]


def _record(content_type: int, payload: bytes) -> bytes:
    return bytes([content_type]) + TLS12.to_bytes(2, "big") + len(payload).to_bytes(2, "big") + payload


def _call(service: GuardianService, message: p.Message) -> object:
    """A request through the frame layer, as a host sends it: the decoded reply."""
    (frame,) = p.FrameDecoder().feed(p.message_frame(message, 7))
    (reply,) = p.FrameDecoder().feed(service.handle_frame(frame))
    return p.decode_message(reply)


@dataclass
class Flight:
    """A handshake stopped after the client's key-exchange flight, not yet sent to the guardian."""

    client: ClientConnection
    suite: int
    client_random: bytes
    server_random: bytes
    ephemeral: p.EphemeralReply
    transcript: bytes
    point: bytes
    finished_fragment: bytes
    ems: bool

    def derive_finish(self, point: bytes | None = None, ephemeral_id: int | None = None
                      ) -> p.DeriveFinish:
        return p.DeriveFinish(self.point if point is None else point, TLS12, self.client_random,
                              self.server_random, self.suite, self.ems, self.transcript, TLS12,
                              self.finished_fragment,
                              self.ephemeral.handle_id if ephemeral_id is None else ephemeral_id)


def _server_hello_flight(service: GuardianService, suite: int, group: int, ems: bool
                         ) -> tuple[ClientConnection, bytes, bytes, p.EphemeralReply, bytes]:
    """ClientHello in, the server's first flight out (ServerKeyExchange by the guardian)."""
    client = ClientConnection(ClientConfig(cipher_suites=(CipherSuite(suite),),
                                           groups=(GROUP_NAMES[group],),
                                           offer_extended_master_secret=ems))
    (hello_record,) = client.data_to_send_records()
    hello_message = hello_record[5:]
    hello = pull_client_hello(Buffer(hello_message[4:]))
    server_random = os.urandom(32)
    extensions = [(ExtensionType.RENEGOTIATION_INFO, b"\x00")]
    if ems:
        extensions.append((ExtensionType.EXTENDED_MASTER_SECRET, b""))
    ephemeral = _call(service, p.Ephemeral(group, RSA_PKCS1_SHA256, hello.random, server_random,
                                           suite))
    assert isinstance(ephemeral, p.EphemeralReply), ephemeral
    chain = service.info.chain
    flight = b"".join([
        frame_handshake(HandshakeType.SERVER_HELLO, push_server_hello(
            ServerHello(server_random, b"", suite, 0, tuple(extensions)))),
        frame_handshake(HandshakeType.CERTIFICATE, push_certificate(Certificate(chain))),
        frame_handshake(HandshakeType.SERVER_KEY_EXCHANGE, push_server_key_exchange_ecdhe(
            ServerKeyExchangeECDHE(group, ephemeral.public, RSA_PKCS1_SHA256,
                                   ephemeral.signature))),
        frame_handshake(HandshakeType.SERVER_HELLO_DONE, b""),
    ])
    client.receive_data(_record(22, flight))  # the client checks the guardian's signature here
    return client, hello.random, server_random, ephemeral, hello_message + flight


def _flight(service: GuardianService, suite: int = ECDHE_SUITES[0], group: int = X25519,
            ems: bool = True) -> Flight:
    client, client_random, server_random, ephemeral, transcript = _server_hello_flight(
        service, suite, group, ems)
    key_exchange, ccs, finished = client.data_to_send_records()
    assert ccs == _record(20, b"\x01")
    message = key_exchange[5:]
    point = pull_client_key_exchange_ecdhe(Buffer(message[4:]))
    return Flight(client, suite, client_random, server_random, ephemeral, transcript + message,
                  point, finished[5:], ems)


@pytest.mark.parametrize("suite", ECDHE_SUITES, ids=lambda s: CipherSuite(s).name)
@pytest.mark.parametrize("group", [X25519, SECP256R1], ids=GROUP_NAMES.get)
@pytest.mark.parametrize("ems", [True, False], ids=["ems", "no-ems"])
def test_a_full_ecdhe_handshake_through_the_guardian(suite: int, group: int, ems: bool) -> None:
    service = _service()
    flight = _flight(service, suite, group, ems)
    derived = _call(service, flight.derive_finish())
    assert isinstance(derived, p.DerivedReply), derived
    client = flight.client
    client.receive_data(_record(20, b"\x01") + derived.sealed)
    assert client.handshake_complete
    assert service.holds() == 1  # the session; the ephemeral key is gone

    request = os.urandom(3000) + b"GET / HTTP/1.1\r\n\r\n"
    client.send_data(request)
    records = client.data_to_send_records()
    opened = _call(service, p.Open(derived.handle_id, suite, True, tuple(
        (1 + i, 23, TLS12, r[5:]) for i, r in enumerate(records))))
    assert isinstance(opened, p.Opened) and b"".join(opened.plaintexts) == request
    response = os.urandom(40000)
    chunks = [response[i:i + 16384] for i in range(0, len(response), 16384)]
    sealed = _call(service, p.Seal(derived.handle_id, suite, False, tuple(
        (23, TLS12, 1 + i, c) for i, c in enumerate(chunks))))
    assert isinstance(sealed, p.Sealed)
    events = client.receive_data(sealed.records)
    assert b"".join(e.data for e in events if isinstance(e, ApplicationData)) == response


def test_the_split_flight_derive_takes_the_ephemeral_key_too() -> None:
    """``DERIVE`` (the three-exchange path) with ``ephemeral_id``: the same keys as the client."""
    service = _service()
    flight = _flight(service, ems=False)
    reply = _call(service, p.Derive(flight.point, TLS12, flight.client_random,
                                    flight.server_random, flight.suite, None,
                                    flight.ephemeral.handle_id))
    assert isinstance(reply, p.HandleReply)
    assert service._delegate._secrets[reply.handle_id].master_secret == flight.client.master_secret


def test_the_ephemeral_key_is_used_once() -> None:
    service = _service()
    flight = _flight(service)
    assert isinstance(_call(service, flight.derive_finish()), p.DerivedReply)
    again = _call(service, flight.derive_finish())
    assert isinstance(again, p.Error) and again.code == p.ErrorCode.UNKNOWN_HANDLE
    assert "ephemeral" in again.message
    assert service.holds() == 1 and not service._delegate._ephemerals


@pytest.mark.parametrize("group, point", [
    (X25519, b"\x01" * 31),                      # wrong length
    (X25519, b"\x00" * 32),                      # the all-zero shared secret (low order point)
    (SECP256R1, b"\x04" + b"\x01" * 64),         # not on the curve
    (SECP256R1, b"\x02" + b"\x01" * 32),         # compressed: not accepted
], ids=["x25519-short", "x25519-low-order", "p256-off-curve", "p256-compressed"])
def test_a_bad_point_is_bad_key_exchange_and_spends_the_key(group: int, point: bytes) -> None:
    service = _service()
    flight = _flight(service, group=group)
    error = _call(service, flight.derive_finish(point=point))
    assert isinstance(error, p.Error) and error.code == p.ErrorCode.BAD_KEY_EXCHANGE, error
    assert service.holds() == 0 and not service._delegate._ephemerals
    assert not service._delegate._secrets
    retry = _call(service, flight.derive_finish())  # the right point now: the key is spent
    assert isinstance(retry, p.Error) and retry.code == p.ErrorCode.UNKNOWN_HANDLE
    # the split path answers a bad point the same way
    flight = _flight(service, group=group)
    error = _call(service, p.Derive(point, TLS12, flight.client_random, flight.server_random,
                                    flight.suite, None, flight.ephemeral.handle_id))
    assert isinstance(error, p.Error) and error.code == p.ErrorCode.BAD_KEY_EXCHANGE


def test_release_forgets_an_ephemeral_key() -> None:
    service = _service()
    flight = _flight(service)
    assert service.holds() == 1 and len(service._delegate._ephemerals) == 1
    assert _call(service, p.Release(flight.ephemeral.handle_id)) == p.Ok()
    assert service.holds() == 0 and not service._delegate._ephemerals
    error = _call(service, flight.derive_finish())
    assert isinstance(error, p.Error) and error.code == p.ErrorCode.UNKNOWN_HANDLE


def test_key_exchange_and_suite_must_agree() -> None:
    service = _service()
    flight = _flight(service, suite=CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA)
    rsa_suite = CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA
    for message in (
        flight.derive_finish(ephemeral_id=0),  # an ECDHE suite without its ephemeral key
        p.Ephemeral(X25519, RSA_PKCS1_SHA256, b"c" * 32, b"s" * 32, rsa_suite),
        p.Ephemeral(0x0999, RSA_PKCS1_SHA256, b"c" * 32, b"s" * 32, flight.suite),  # group
        p.Ephemeral(X25519, 0x0999, b"c" * 32, b"s" * 32, flight.suite),  # signature scheme
    ):
        error = _call(service, message)
        assert isinstance(error, p.Error) and error.code == p.ErrorCode.UNSUPPORTED, (message, error)
    # the key was made for another suite: refused, and spent
    wrong = p.DeriveFinish(flight.point, TLS12, flight.client_random, flight.server_random,
                           CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, True,
                           flight.transcript, TLS12, flight.finished_fragment,
                           flight.ephemeral.handle_id)
    error = _call(service, wrong)
    assert isinstance(error, p.Error) and error.code == p.ErrorCode.UNSUPPORTED
    assert "made for suite" in error.message
    assert service.holds() == 0 and not service._delegate._ephemerals
    # an RSA suite never takes an ephemeral key
    other = _flight(service)
    error = _call(service, p.Derive(b"\x00" * 256, TLS12, b"c" * 32, b"s" * 32, rsa_suite, None,
                                    other.ephemeral.handle_id))
    assert isinstance(error, p.Error) and error.code == p.ErrorCode.UNSUPPORTED


def test_the_signature_is_charged_as_an_rsa_operation() -> None:
    cost = RecordingCost()
    service = _service(cost=cost)
    flight = _flight(service)
    assert [c for c in cost.charged if c[0] == "rsa"] == [("rsa", 256)]  # the signature only
    _call(service, flight.derive_finish())
    assert [c for c in cost.charged if c[0] == "rsa"] == [("rsa", 256)]  # no RSA decryption


def test_the_debug_switch_reveals_the_ephemeral_key_and_the_premaster() -> None:
    """What the memory-scan test searches the host for: the ephemeral private key and the ECDH
    premaster, the same secrets the client derived -- and they are in no reply frame."""
    lines: list[str] = []
    service = _service(reveal=lines.append)
    flight = _flight(service, group=SECP256R1, ems=False)
    frames = [p.message_frame(flight.ephemeral, 1)]
    request = flight.derive_finish()
    (frame,) = p.FrameDecoder().feed(p.message_frame(request, 2))
    frames.append(service.handle_frame(frame))
    (revealed,) = [json.loads(line) for line in lines]
    premaster = bytes.fromhex(revealed["premaster"])
    private = bytes.fromhex(revealed["ephemeral_private"])
    assert len(private) == 32 and len(premaster) == 32
    master = prf.master_secret(premaster, flight.client_random, flight.server_random)
    assert master == flight.client.master_secret == bytes.fromhex(revealed["master_secret"])
    for secret in (private, premaster, master):
        assert not any(secret in f for f in frames)
    # an RSA handshake's line has no ephemeral key
    creds = credentials()
    pre = TLS12.to_bytes(2, "big") + os.urandom(46)
    encrypted = creds.private_key.public_key().encrypt(pre, padding.PKCS1v15())
    _call(service, p.Derive(encrypted, TLS12, b"c" * 32, b"s" * 32, 0x002F, None))
    rsa_line = json.loads(lines[-1])
    assert "ephemeral_private" not in rsa_line and bytes.fromhex(rsa_line["premaster"]) == pre
