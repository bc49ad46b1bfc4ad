"""The core says what it did: the trace (:mod:`tls12.trace`) and :class:`ReceivedRecord`."""

from __future__ import annotations

import pytest

from tls12 import ClientConnection, ServerConnection
from tls12.config import ClientConfig, ServerConfig
from tls12.connection import HandshakeState, ReceivedRecord
from tls12.errors import AlertDescription, AlertLevel
from tls12.handshake_table import RecordInput
from tls12.messages import HandshakeType as H
from tls12.record import ContentType as C
from tls12.suites import CipherSuite
from tls12.testing import credentials, pipe, seeded_rng
from tls12.trace import TraceEvent, WireTrace

RSA = (CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA,)


def pair(trace: bool = True, suites: tuple[CipherSuite, ...] = RSA) -> tuple[ClientConnection, ServerConnection]:
    client = ClientConnection(ClientConfig(cipher_suites=suites, rng=seeded_rng(1), trace=trace))
    server = ServerConnection(ServerConfig(credentials=credentials(), cipher_suites=suites,
                                           rng=seeded_rng(2), trace=trace))
    return client, server


def messages(events: list[TraceEvent], name: str) -> list[object]:
    return [e.data["type"] for e in events if e.category == "handshake" and e.name == name]


def test_trace_of_a_full_rsa_handshake_lists_the_messages_in_order() -> None:
    client, server = pair()
    pipe(client, server)
    c, s = client.take_trace(), server.take_trace()
    assert messages(c, "message_sent") == [H.CLIENT_HELLO, H.CLIENT_KEY_EXCHANGE, H.FINISHED]
    assert messages(c, "message_parsed") == [H.SERVER_HELLO, H.CERTIFICATE, H.SERVER_HELLO_DONE,
                                             H.FINISHED]
    assert messages(s, "message_parsed") == [H.CLIENT_HELLO, H.CLIENT_KEY_EXCHANGE, H.FINISHED]
    assert messages(s, "message_sent") == [H.SERVER_HELLO, H.CERTIFICATE, H.SERVER_HELLO_DONE,
                                           H.FINISHED]
    transitions = [(e.data["from"], e.data["input"], e.data["to"])
                   for e in s if e.category == "state"]
    assert transitions == [
        (HandshakeState.EXPECT_CLIENT_HELLO, H.CLIENT_HELLO, HandshakeState.EXPECT_CLIENT_KEY_EXCHANGE),
        (HandshakeState.EXPECT_CLIENT_KEY_EXCHANGE, H.CLIENT_KEY_EXCHANGE,
         HandshakeState.EXPECT_CHANGE_CIPHER_SPEC),
        (HandshakeState.EXPECT_CHANGE_CIPHER_SPEC, RecordInput.CHANGE_CIPHER_SPEC,
         HandshakeState.EXPECT_FINISHED),
        (HandshakeState.EXPECT_FINISHED, H.FINISHED, HandshakeState.ESTABLISHED),
    ]
    # the trace carries no clock: the caller stamps what it takes
    assert all("time" not in e.data for e in c + s)
    assert client.take_trace() == [] and server.take_trace() == []


def test_ecdhe_handshake_sends_and_parses_the_server_key_exchange() -> None:
    client, server = pair(suites=(CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,))
    pipe(client, server)
    assert messages(server.take_trace(), "message_sent") == [
        H.SERVER_HELLO, H.CERTIFICATE, H.SERVER_KEY_EXCHANGE, H.SERVER_HELLO_DONE, H.FINISHED]
    assert H.SERVER_KEY_EXCHANGE in messages(client.take_trace(), "message_parsed")


def test_sent_records_add_up_to_the_bytes_on_the_wire() -> None:
    client, server = pair()
    pipe(client, server)
    client.take_trace(), server.take_trace()
    client.send_data(b"x" * 40000)
    wire = client.data_to_send()
    sent = [e.data for e in client.take_trace() if (e.category, e.name) == ("record", "sent")]
    assert [d["plaintext_length"] for d in sent] == [16384, 16384, 7232]
    assert all(d["content_type"] is C.APPLICATION_DATA and d["encrypted"] for d in sent)
    assert sum(5 + d["length"] for d in sent) == len(wire)
    received = server.receive_data(wire)
    got = [e.data for e in server.take_trace() if (e.category, e.name) == ("record", "received")]
    assert [d["length"] for d in got] == [d["length"] for d in sent]
    assert sum(len(e.data) for e in received) == 40000


def test_received_records_say_their_content_and_handshake_types() -> None:
    client, server = pair(trace=False)
    records: list[ReceivedRecord] = []

    def read_all(data: bytes) -> None:
        server.receive_data(data, max_records=0)
        while (got := server.receive_record()) is not None:
            records.append(got)

    read_all(client.data_to_send())
    client.receive_data(server.data_to_send())
    flight = client.data_to_send()
    read_all(flight)
    client.receive_data(server.data_to_send())
    client.send_data(b"GET / HTTP/1.0\r\n\r\n")
    client.close()
    read_all(client.data_to_send())
    assert [r.content_type for r in records] == [
        C.HANDSHAKE, C.HANDSHAKE, C.CHANGE_CIPHER_SPEC, C.HANDSHAKE, C.APPLICATION_DATA, C.ALERT]
    assert [r.handshake_types for r in records] == [
        (H.CLIENT_HELLO,), (H.CLIENT_KEY_EXCHANGE,), (), (H.FINISHED,), (), ()]
    assert [r.encrypted for r in records] == [False, False, False, True, True, True]
    assert sum(r.wire_length for r in records[1:4]) == len(flight)
    assert all(isinstance(r.content_type, C) for r in records)


def test_a_message_split_over_records_belongs_to_the_record_that_completes_it() -> None:
    client, server = pair(trace=False)
    hello = client.data_to_send()
    body = hello[5:]
    cut = 40
    split = (bytes((22, 3, 3)) + cut.to_bytes(2, "big") + body[:cut]
             + bytes((22, 3, 3)) + (len(body) - cut).to_bytes(2, "big") + body[cut:])
    server.receive_data(split, max_records=0)
    first, second = server.receive_record(), server.receive_record()
    assert first is not None and second is not None
    assert (first.handshake_types, second.handshake_types) == ((), (H.CLIENT_HELLO,))
    assert first.wire_length + second.wire_length == len(split)


def test_alerts_are_traced_both_ways() -> None:
    client, server = pair()
    pipe(client, server)
    client.take_trace(), server.take_trace()
    client.close()
    server.receive_data(client.data_to_send())
    s = server.take_trace()
    assert [(e.category, e.name, e.data) for e in s if e.category == "alert"] == [
        ("alert", "received", {"level": AlertLevel.WARNING,
                               "description": AlertDescription.CLOSE_NOTIFY}),
        ("alert", "sent", {"level": AlertLevel.WARNING,
                           "description": AlertDescription.CLOSE_NOTIFY}),
    ]
    assert s[-1].data["to"] is HandshakeState.CLOSED


def test_trace_is_off_by_default_and_enable_is_idempotent() -> None:
    client, server = pair(trace=False)
    assert client.trace is None and client.take_trace() == []
    server.enable_trace()
    server.receive_data(client.data_to_send())
    first = server.trace
    server.enable_trace()
    assert server.trace is first and messages(first or [], "message_parsed") == [H.CLIENT_HELLO]


@pytest.mark.parametrize("chunk", [1, 7, 100000])
def test_wire_trace_reads_a_stream_as_the_connection_does(chunk: int) -> None:
    client, server = pair()
    stream: list[bytes] = []
    pipe(client, server, to_server=lambda data: stream.append(data) or data)
    client.send_data(b"y" * 3000)
    client.close()
    stream.append(client.data_to_send())
    flight = b"".join(stream)
    server.receive_data(stream[-1])
    wire, observed = WireTrace(), []
    for i in range(0, len(flight), chunk):
        observed += wire.feed(flight[i : i + chunk])
    core = server.take_trace()
    assert [e for e in observed if e.category == "record"] == [
        e for e in core if e.category == "record" and e.name == "received"]
    assert messages(observed, "message_parsed") == [H.CLIENT_HELLO, H.CLIENT_KEY_EXCHANGE, None]
