"""Cache sharing between a site's volunteers on asyncio (paper §5.3), over :mod:`.ring`.

A volunteer's cache hierarchy (:mod:`sslsplit.cache`) is: its memory (and disk) cache, then
:class:`RingSource` -- the one peer the ring names as the owner of the payload's stub id --
then the origin's record store.  So a local miss costs **one** message to a peer, whatever the
number of volunteers.  That figure is measured where the messages travel, not where the
lookup is decided: :attr:`RingSource.messages` counts the requests its
:class:`~sslsplit.aio.PayloadClient` s wrote to peer sockets, and :attr:`PeerServer.received`
the requests that reached an owner; the tests compare both with :attr:`RingSource.lookups`
(``tests/sslsplit/barnraising/test_peer_messages.py``) and the benchmark reports messages per lookup.  When the owner is the volunteer itself, the ring is skipped.

The owner answers from its own caches and, on a miss, fetches the payload from the origin
for the asker (:class:`PeerServer`, read-through): the first volunteer to need a payload
makes the owner fetch it once, and every other volunteer then gets it from the owner, so a
payload leaves the origin about once per site instead of once per volunteer.  An owner
answers through to the origin only for keys its own ring says it owns (never forwarding to
another peer), so views of the ring that differ for a moment cannot make a loop.

Nothing a peer sends is trusted: :class:`~sslsplit.cache.CacheHierarchy` hashes every payload
against its stub id and discards a poisoned one (counted under ``"ring"`` in its stats), and
the request continues at the origin.  A peer that cannot be reached counts as a source error
and is skipped the same way.  Either way the peer is then *avoided* for ``penalty`` seconds:
lookups of the keys it owns go straight to the origin (no message, counted in
:attr:`RingSource.skipped`), so a black-holing or poisoning peer costs its neighbours one
timeout (``timeout``, 1 s by default) or one wasted transfer, not one per payload.  Until the
broker drops it, that is all a malicious volunteer can do to its peers.

Concurrent requests from peers for the same id at an owner share one origin fetch
(:class:`PeerServer`, single flight).  Which peer to ask and which to avoid is decided
sans-IO by :class:`~.peers.PeerRouter`; this module sends the messages and serves the
answers on asyncio.
"""

from __future__ import annotations

import asyncio
import logging

from ...aio.payloads import PayloadClient
from ...cache import CacheHierarchy, CacheMiss
from ...wire import IDEncoding
from ..peers import Peer, PeerRouter
from ..ring import Ring

__all__ = ["Peer", "RingSource", "PeerServer"]

logger = logging.getLogger("sslsplit.barnraising.sharing")

class RingSource:
    """The remote cache level "the ring owner of this id" (one message per lookup).

    Which peer to ask, and which to avoid, is decided by :attr:`router`
    (:class:`~.peers.PeerRouter`, sans-IO, given the loop's time); this class sends the
    message.  :attr:`lookups`, :attr:`skipped` and :attr:`poisoned` are the router's books;
    :attr:`messages` is measured on the sockets (the clients' request counts), so a bug that
    sent two requests per lookup would show as ``messages == 2 * lookups``.
    """

    name = "ring"

    def __init__(self, me: Peer | None, ring: Ring[Peer] | None = None, *,
                 timeout: float = 1.0, penalty: float = 30.0) -> None:
        self.router = PeerRouter(me, ring, penalty=penalty)
        self.timeout = timeout
        self._clients: dict[Peer, PayloadClient] = {}
        self._sent_by_closed = 0  # requests written by clients of peers that left the ring

    @property
    def me(self) -> Peer | None:
        """This volunteer's own cache endpoint (``None``: it serves no cache)."""
        return self.router.me

    @me.setter
    def me(self, value: Peer | None) -> None:
        self.router.me = value

    @property
    def ring(self) -> Ring[Peer]:
        return self.router.ring

    @property
    def penalty(self) -> float:
        return self.router.penalty

    @property
    def lookups(self) -> int:
        """Ids looked up on a peer (:attr:`.PeerRouter.lookups`)."""
        return self.router.lookups

    @property
    def messages(self) -> int:
        """Requests written to peer sockets (measured): the sum of every peer client's
        :attr:`~sslsplit.aio.PayloadClient.requests`, counted as each request is written,
        including clients closed since.  A request re-sent on a fresh connection after a
        kept-alive one was found closed counts twice -- it was sent twice."""
        return self._sent_by_closed + sum(c.requests for c in self._clients.values())

    @property
    def skipped(self) -> int:
        """Lookups whose owner was avoided (:attr:`.PeerRouter.skipped`)."""
        return self.router.skipped

    @property
    def poisoned(self) -> dict[Peer, int]:
        """Payloads per peer that did not match their id (:attr:`.PeerRouter.poisoned`)."""
        return self.router.poisoned

    @staticmethod
    def _now() -> float:
        return asyncio.get_running_loop().time()

    def owns(self, ident: bytes) -> bool:
        return self.router.owns(ident)

    def avoided(self, peer: Peer) -> bool:
        return self.router.avoided(peer, self._now())

    async def update(self, peers: tuple[Peer, ...] | list[Peer]) -> bool:
        """Take a new member list (from a broker lookup); close connections to departed peers."""
        changed = self.ring.update(peers)
        for peer in [p for p in self._clients if p not in self.ring.members]:
            client = self._clients.pop(peer)
            self._sent_by_closed += client.requests
            await client.close()
        return changed

    async def fetch(self, encoding: IDEncoding, ident: bytes) -> bytes | None:
        owner = self.router.route(ident, self._now())
        if owner is None:
            return None
        client = self._clients.get(owner)
        if client is None:
            client = self._clients[owner] = PayloadClient(
                *owner, timeout=self.timeout, name=f"peer {owner[0]}:{owner[1]}")
        try:
            payload = await client.fetch(encoding, ident)
        except (OSError, TimeoutError):
            self.router.failed(owner, self._now())
            raise
        if payload is not None:  # a poisoned one is counted; the hierarchy discards it
            self.router.check(owner, encoding, ident, payload, self._now())
        return payload

    async def close(self) -> None:
        for client in self._clients.values():
            self._sent_by_closed += client.requests
            await client.close()
        self._clients.clear()


class PeerServer:
    """What a volunteer answers its peers: its caches, and the origin's copy for keys it owns.

    :attr:`received` counts the peers' requests as they arrive (measured at the receiving
    end: the payload server calls :meth:`lookup` once per request it parsed off a socket),
    :attr:`served` those answered with a payload, :attr:`fetched_for_peers` those it had to
    fetch from the origin first.
    """

    def __init__(self, hierarchy: CacheHierarchy, ring: RingSource) -> None:
        self.hierarchy = hierarchy
        self.ring = ring
        self.received = 0
        self.served = 0
        self.fetched_for_peers = 0
        self._inflight: dict[tuple[IDEncoding, bytes], asyncio.Future[bytes | None]] = {}

    async def lookup(self, encoding: IDEncoding, ident: bytes) -> bytes | None:
        """Answer one peer request for ``ident`` (``None``: not here and not ours to fetch)."""
        self.received += 1
        payload = self.hierarchy.lookup_local(encoding, ident)
        if payload is None and self.ring.owns(ident):
            key = (encoding, ident)
            pending = self._inflight.get(key)
            if pending is not None:  # another peer's request is fetching it already
                payload = await asyncio.shield(pending)
            else:
                future = self._inflight[key] = asyncio.get_running_loop().create_future()
                try:
                    payload = await self.hierarchy.get(encoding, ident)  # we own it: origin
                    self.fetched_for_peers += 1
                except CacheMiss:
                    payload = None
                finally:
                    del self._inflight[key]
                    future.set_result(payload)
        if payload is not None:
            self.served += 1
        return payload
