"""In-memory splitting server -> splicer -> client chains for fast tests."""

from __future__ import annotations

import os

from sslsplit.splicer import PayloadNeeded, Splicer
from sslsplit.store import RecordStore
from sslsplit.writer import SplittingRecordWriter
from tls12 import ClientConfig, ClientConnection, ServerConfig, ServerConnection
from tls12.suites import CipherSuite
from tls12.testing import PipeEvents, credentials, pipe


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
        events = self.splicer.receive_data(stream)
        while events:  # a digest stub: look its payload up, then the splicer goes on
            event = events.pop(0)
            if isinstance(event, PayloadNeeded):
                payload = (lookup or self.store.get)(event.stub.ident)
                events += self.splicer.supply(event.stub, payload)
        return self.splicer.data_to_send()

    def pipe(self) -> PipeEvents:
        """Run client <-> server until quiet, the server's bytes spliced on their way down."""
        return pipe(self.client, self.server, to_client=self.to_client)
