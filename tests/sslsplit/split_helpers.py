"""In-memory splitting server -> splicer -> client chains for fast tests."""

from __future__ import annotations

import os
from functools import lru_cache

from sslsplit.splicer import Splicer
from sslsplit.store import RecordStore
from sslsplit.wire import Stub
from sslsplit.writer import SplittingRecordWriter
from tls12 import ClientConfig, ClientConnection, ServerConfig, ServerConnection
from tls12.certs import Credentials, generate_self_signed
from tls12.events import Event
from tls12.suites import CipherSuite


@lru_cache(maxsize=1)
def credentials() -> Credentials:
    return generate_self_signed(key_size=2048)


class Chain:
    """server (splitting writer) -> splicer (payloads from the store) -> client, in memory."""

    def __init__(self, suite: CipherSuite, store: RecordStore | None = None, *, expose_keys: bool = True) -> None:
        self.store = store if store is not None else RecordStore()
        self.writer = SplittingRecordWriter(self.store, expose_keys=expose_keys)
        self.server = ServerConnection(
            ServerConfig(credentials=credentials(), cipher_suites=(suite,)), record_writer=self.writer
        )
        self.client = ClientConnection(ClientConfig(cipher_suites=(suite,)))
        self.splicer = Splicer(os.urandom)
        self.server_wire = 0  # bytes the server sent to the proxy

    def to_client(self, stream: bytes, lookup=None) -> bytes:
        self.server_wire += len(stream)
        self.splicer.feed(stream)
        out = b""
        while (msg := self.splicer.next_message()) is not None:
            data = self.splicer.handle(msg)
            if data is None:
                assert isinstance(msg, Stub)
                payload = (lookup or self.store.get)(msg.ident)
                data = self.splicer.rebuild(msg, payload)
            out += data
        return out

    def pump(self) -> tuple[list[Event], list[Event]]:
        s_events: list[Event] = []
        c_events: list[Event] = []
        for _ in range(6):
            up = self.client.data_to_send()
            if up:
                s_events += self.server.receive_data(up)
            down = self.server.data_to_send()
            if down:
                c_events += self.client.receive_data(self.to_client(down))
            if not up and not down:
                break
        return s_events, c_events
