"""Which peer a volunteer asks for a payload, and which peers it stops asking (§5.3), sans-IO.

The cache-sharing level of a volunteer's cache hierarchy asks the one peer the ring
(:mod:`.ring`) names as the owner of a payload's stub id.  :class:`PeerRouter` makes that
decision and keeps its books; :class:`~.sharing.RingSource` only sends the message it decides:

* :meth:`PeerRouter.route` -- the peer to ask about ``ident`` at time ``now``, or ``None``
  when there is nobody to ask: no member, the owner is this volunteer itself, or the owner is
  being *avoided* (then the lookup goes straight to the origin and counts in :attr:`skipped`);
* :meth:`PeerRouter.failed` -- the peer could not be reached: avoid it for ``penalty`` seconds;
* :meth:`PeerRouter.check` -- a payload came back: it must hash to its stub id
  (:func:`sslsplit.wire.check_payload`); a poisoned one is counted against the peer in
  :attr:`poisoned`, which is then avoided too.

So a black-holing or poisoning peer costs its neighbours one timeout or one wasted transfer,
not one per payload, until the broker drops it.  Time is passed in (``now``, in seconds on any
monotonic clock): the asyncio adapter gives the loop's time, a simulation its own.
"""

from __future__ import annotations

from ..wire import IDEncoding, check_payload
from .ring import Ring

__all__ = ["Peer", "PeerRouter"]

Peer = tuple[str, int]
"""A volunteer's cache endpoint: ``(host, cache_port)``, as in the broker's lookup reply."""


class PeerRouter:
    """Routes stub ids to ring owners for volunteer ``me`` (``None``: it serves no cache)."""

    def __init__(self, me: Peer | None, ring: Ring[Peer] | None = None, *,
                 penalty: float = 30.0) -> None:
        if penalty < 0:
            raise ValueError("penalty must be 0 or more seconds")
        self.me = me
        self.ring: Ring[Peer] = ring if ring is not None else Ring()
        self.penalty = penalty
        self.lookups = 0
        """Ids looked up on a peer (the owner was not this volunteer)."""
        self.skipped = 0
        """Ids whose owner was being avoided (no message; the origin's copy is used)."""
        self.poisoned: dict[Peer, int] = {}
        """Payloads per peer that did not hash to their id."""
        self._avoid: dict[Peer, float] = {}

    @property
    def messages(self) -> int:
        """Messages the router *decides* to send: one per lookup, **true by construction** (one
        ring owner per id, no multi-hop routing).  It is no measurement: what actually left on
        a socket is counted by the adapter (:attr:`.aio.sharing.RingSource.messages`) and what
        arrived by the owner (:attr:`.aio.sharing.PeerServer.received`)."""
        return self.lookups

    def owns(self, ident: bytes) -> bool:
        """Whether this volunteer is the ring owner of ``ident``."""
        return self.me is not None and self.ring.owner(ident) == self.me

    def avoided(self, peer: Peer, now: float) -> bool:
        until = self._avoid.get(peer)
        return until is not None and now < until

    def route(self, ident: bytes, now: float) -> Peer | None:
        """The peer to send one lookup of ``ident`` to (counted), or ``None``."""
        owner = self.ring.owner(ident)
        if owner is None or owner == self.me:
            return None
        if self.avoided(owner, now):
            self.skipped += 1
            return None
        self.lookups += 1
        return owner

    def failed(self, peer: Peer, now: float) -> None:
        """``peer`` did not answer (refused, reset, timed out): avoid it for a while."""
        self._avoid[peer] = now + self.penalty

    def check(self, peer: Peer, encoding: IDEncoding, ident: bytes, payload: bytes,
              now: float) -> bool:
        """Whether ``payload`` from ``peer`` is the one ``ident`` names; if not, count it and
        avoid the peer (the cache hierarchy discards the payload and asks the origin)."""
        if check_payload(encoding, ident, payload):
            return True
        self.poisoned[peer] = self.poisoned.get(peer, 0) + 1
        self.failed(peer, now)
        return False
