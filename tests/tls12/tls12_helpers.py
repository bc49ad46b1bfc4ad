"""In-memory client/server pairs for fast protocol tests (after aioquic's and h11's helpers)."""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import lru_cache

from tls12 import ClientConnection, ServerConnection
from tls12.certs import Credentials, generate_self_signed
from tls12.events import Event


@lru_cache(maxsize=1)
def credentials() -> Credentials:
    return generate_self_signed(key_size=2048)


def seeded_rng(seed: int) -> Callable[[int], bytes]:
    r = random.Random(seed)
    return lambda n: r.randbytes(n)


def pump(
    server: ServerConnection, client: ClientConnection, rounds: int = 6
) -> tuple[list[Event], list[Event]]:
    """Move bytes both ways until quiet; returns (server events, client events)."""
    s_events: list[Event] = []
    c_events: list[Event] = []
    for _ in range(rounds):
        to_server = client.data_to_send()
        if to_server:
            s_events += server.receive_data(to_server)
        to_client = server.data_to_send()
        if to_client:
            c_events += client.receive_data(to_client)
        if not to_server and not to_client:
            break
    return s_events, c_events
