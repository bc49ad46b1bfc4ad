"""The broker's sans-IO core (:mod:`sslsplit.barnraising.service`): HTTP/1.1 bytes in, bytes
out, time passed in -- no socket, no clock, no event loop."""

from __future__ import annotations

import json

import h11
from hypothesis import given, settings
from hypothesis import strategies as st

from sslsplit.barnraising import protocol as p
from sslsplit.barnraising.service import MAX_HEAD, BrokerService, JoinConnection

from .helpers import SITE, registry


def _post(request: p.Request | tuple[str, bytes]) -> bytes:
    path, body = request if isinstance(request, tuple) else p.encode_request(request)
    return (f"POST {path} HTTP/1.1\r\nHost: broker\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def _responses(data: bytes) -> list[tuple[int, dict[bytes, bytes], dict[str, object]]]:
    """Every response in ``data``, in order: status, headers, JSON body."""
    out = []
    while data:
        client = h11.Connection(h11.CLIENT)  # one parser per response, as if it had asked
        client.send(h11.Request(method="POST", target="/", headers=[("Host", "b"),
                                                                  ("Content-Length", "0")]))
        client.send(h11.EndOfMessage())
        client.receive_data(data)
        status, headers, body = 0, {}, b""
        while not isinstance(event := client.next_event(), h11.EndOfMessage):
            assert event is not h11.NEED_DATA, "a response is cut short"
            if isinstance(event, h11.Response):
                status, headers = event.status_code, dict(event.headers)
            elif isinstance(event, h11.Data):
                body += event.data
        out.append((status, headers, json.loads(body)))
        data = client.trailing_data[0]
    return out


def test_pipelined_requests_are_answered_in_order_with_now_passed_in() -> None:
    service = BrokerService(registry(lease_seconds=10))
    conn = JoinConnection(service, "127.0.0.2")
    conn.receive_data(_post(p.Join(SITE.name, 4433)) + _post(p.Lookup(SITE.name)), now=100.0)
    (s1, _, join), (s2, _, lookup) = _responses(conn.data_to_send())
    assert (s1, s2) == (200, 200) and not conn.closed
    assert join["lease_seconds"] == 10 and lookup["volunteers"] == 1
    assert service.requests == 2
    live = service.lookup("www.news.test", now=105.0)
    assert live == ("127.0.0.2",) and service.lookup("www.news.test", now=106.0) is live
    assert service.lookup("www.news.test", now=111.0) == ()  # the lease ended at 110
    assert service.lookup("v127-0-0-2.www.news.test", now=105.0) is None  # expired one
    assert service.lookup("elsewhere.test", now=105.0) is None


def test_limits_and_garbage_get_an_error_and_a_close() -> None:
    service = BrokerService(registry())
    for data, status in (
        (b"\x16\x03\x01 not http\r\n\r\n", 400),
        (_post(("/barnraising/1/join", b" " * (p.MAX_BODY + 1))), 413),
        (b"GET / HTTP/1.1\r\nHost: b\r\nX: " + b"a" * MAX_HEAD, 400),  # head never ends
    ):
        conn = JoinConnection(service, "127.0.0.9")
        conn.receive_data(data, now=0.0)
        [(got, headers, reply)] = _responses(conn.data_to_send())
        assert got == status and conn.closed and headers[b"connection"] == b"close"
        assert "error" in reply
        conn.receive_data(b"more", now=0.0)  # after the close nothing more is answered
        assert conn.data_to_send() == b""


def test_rate_limit_carries_retry_after_and_end_of_stream_closes() -> None:
    service = BrokerService(registry(join_rate=0.5, join_burst=1.0))
    conn = JoinConnection(service, "127.0.0.3")
    join = _post(p.Join(SITE.name, 4433))
    conn.receive_data(join + join, now=0.0)
    (ok, _, _), (limited, headers, reply) = _responses(conn.data_to_send())
    assert (ok, limited) == (200, 429) and int(headers[b"retry-after"]) >= 1
    assert reply["error"]["code"] == "rate_limited"  # type: ignore[index]
    conn.receive_data(b"", now=1.0)
    assert conn.closed and conn.data_to_send() == b""


@given(st.lists(st.binary(max_size=300), max_size=6))
@settings(max_examples=300, deadline=None)
def test_any_bytes_never_raise(chunks: list[bytes]) -> None:
    conn = JoinConnection(BrokerService(registry()), "127.0.0.4")
    for chunk in chunks:
        conn.receive_data(chunk, now=0.0)
        out = conn.data_to_send()
        assert not out or out.startswith(b"HTTP/1.1 ")
