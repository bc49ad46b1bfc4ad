"""The guardian's request router: the application's requests stay, the host's go through unchanged."""

from __future__ import annotations

import h11
from hypothesis import given, settings
from hypothesis import strategies as st

from webalps_sim.app import Headers, NullApp, Response
from webalps_sim.router import RequestRouter, render_response


class Claims:
    def __init__(self, fail: bool = False) -> None:
        self.seen: list[tuple[str, str, bytes]] = []
        self.fail = fail

    def handle(self, method: str, target: str, headers: Headers, body: bytes) -> Response | None:
        if not target.startswith("/app"):
            return None
        if self.fail:
            raise RuntimeError("bug in the application")
        self.seen.append((method, target, body))
        return 201, [(b"x-app", b"1"), (b"content-length", b"999")], b"created"


HOST_REQ = b"GET /file HTTP/1.1\r\nHost: h\r\n\r\n"
APP_REQ = b"POST /app/vote HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nalice"


def _parse_response(data: bytes) -> tuple[h11.Response, bytes]:
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method="GET", target="/", headers=[("Host", "h")]))
    conn.send(h11.EndOfMessage())
    conn.receive_data(data)
    head = conn.next_event()
    body = b""
    while not isinstance(event := conn.next_event(), h11.EndOfMessage):
        body += event.data  # type: ignore[union-attr]
    assert isinstance(head, h11.Response)
    return head, body


def test_claimed_and_unclaimed_requests_in_one_stream() -> None:
    app = Claims()
    router = RequestRouter(app)
    routed = router.feed(HOST_REQ + APP_REQ + HOST_REQ)
    assert routed.to_host == HOST_REQ + HOST_REQ
    assert app.seen == [("POST", "/app/vote", b"alice")]
    assert routed.claimed == 1 and len(routed.responses) == 1
    head, body = _parse_response(routed.responses[0])
    assert head.status_code == 201 and body == b"created"
    assert (b"content-length", b"7") in head.headers and (b"x-app", b"1") in head.headers


def test_requests_are_routed_whole_whatever_the_cut() -> None:
    stream = APP_REQ + HOST_REQ + APP_REQ
    for cut in (1, 2, 7, 30):
        app = Claims()
        router = RequestRouter(app)
        to_host = b""
        responses = []
        for i in range(0, len(stream), cut):
            routed = router.feed(stream[i : i + cut])
            to_host += routed.to_host
            responses += routed.responses
        assert to_host == HOST_REQ and len(responses) == 2 and len(app.seen) == 2


def test_head_close_and_application_errors() -> None:
    routed = RequestRouter(Claims()).feed(b"HEAD /app HTTP/1.0\r\n\r\n")
    assert routed.responses[0].endswith(b"\r\n\r\n")  # no body for HEAD
    assert b"connection: close" in routed.responses[0]
    routed = RequestRouter(Claims(fail=True)).feed(APP_REQ)
    assert routed.responses[0].startswith(b"HTTP/1.1 500 ") and routed.to_host == b""


def test_not_http_and_huge_bodies_go_to_the_host() -> None:
    router = RequestRouter(Claims())
    assert router.feed(b"\x16\x03garbage\r\n\r\n").to_host == b"\x16\x03garbage\r\n\r\n"
    assert router.passthrough and router.feed(APP_REQ).to_host == APP_REQ
    router = RequestRouter(Claims(), max_body=10)
    big = b"POST /app HTTP/1.1\r\nHost: h\r\nContent-Length: 20\r\n\r\n" + b"x" * 20
    assert router.feed(big).to_host == big and router.passthrough


def test_render_response_strips_injected_framing() -> None:
    out = render_response((200, [(b"x-evil", b"a\r\nset-cookie: b"), (b"connection", b"keep")], b""))
    assert b"set-cookie" not in out and b"connection" not in out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([HOST_REQ, APP_REQ]), max_size=6), st.integers(1, 40))
def test_null_app_passes_everything_through(requests: list[bytes], cut: int) -> None:
    stream = b"".join(requests)
    router = RequestRouter(NullApp())
    out = b"".join(router.feed(stream[i : i + cut]).to_host for i in range(0, len(stream), cut))
    assert out == stream


def test_null_app_router_does_not_hold_partial_requests() -> None:
    """The null application claims nothing, so nothing is parsed or held back; a router whose
    application may claim a request holds a partial one until it is whole."""
    assert RequestRouter(NullApp()).feed(APP_REQ[:7]).to_host == APP_REQ[:7]

    class Never:
        def handle(self, method: str, target: str, headers: Headers, body: bytes) -> Response | None:
            return None

    router = RequestRouter(Never())
    assert router.feed(APP_REQ[:7]).to_host == b""
    assert router.feed(APP_REQ[7:]).to_host == APP_REQ
