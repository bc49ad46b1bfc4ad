"""The authoritative DNS answers of Barnraising, sans-IO: query bytes in, response bytes out.

Paper §5.1 redirects clients with DNS: the site's name resolves to the addresses of live
volunteers (the paper used mysql + mydns; here the broker's own volunteer set answers).
Because a client connects to whatever address DNS gives it and then checks the *site's*
certificate, a volunteer never needs a certificate of its own (HTTPS reference integrity,
§5.2), and a short TTL means a volunteer that dies or is removed stops receiving clients
within about one TTL.

:class:`Responder` decides every answer and :class:`TCPConnection` frames them for TCP;
:mod:`.aio.dns` only moves datagrams and bytes.
All wire work is dnspython's (``dns.message.from_wire``, ``make_response``, ``to_wire``):
no packet is assembled by hand.  What it answers, for a query of name N and type T:

====================================================== ============================
N outside every zone                                   REFUSED (not authoritative)
N a served site name, T = A / AAAA / ANY               NOERROR, live volunteers'
                                                       IPv4 / IPv6 addresses
N a served name, other T, or no live volunteer         NOERROR, no answer (NODATA)
N the zone apex, T = SOA                               the zone's SOA
N in a zone but not served                             NXDOMAIN
bytes that are not a DNS query (with a 12-byte header) FORMERR (same id)
fewer than 12 bytes, or a response (QR set)            nothing (dropped)
an opcode other than QUERY                             NOTIMP
====================================================== ============================

Negative answers carry the zone's SOA in the authority section, so resolvers cache them for
the SOA's minimum (set to the TTL).  Addresses rotate round robin: each query for a name
starts the list one place further, and at most ``max_answers`` are returned (in that order:
dnspython would otherwise shuffle them).

**Answer caches.**  Rendering an answer with dnspython costs about 100 us and parsing a query
about 45 us; a busy site gets the same few questions again and again.  So the responder keeps
the response dnspython rendered for each rotation step of an address answer, in two places:

* by the query's bytes after its two-byte id: a repeat of the very same query is answered
  without parsing it at all;
* by the parsed question -- the name as asked (case kept: the answer echoes it), type, class,
  the RD flag, opcode and the EDNS version, payload size and padding request, the only parts
  of a query :func:`dns.message.make_response` copies -- so queries that differ in bytes the
  response never shows (an EDNS client cookie, RFC 7873, new on every query a resolver
  sends) are parsed but not rendered again.

Either way a repeat is answered by copying the new query's id in front of the stored bytes --
the only bytes the responder writes itself.  An entry is used only while ``lookup`` returns
the very same address object it was rendered from (the broker returns a new tuple when the
volunteer set changes: its version), so a change of the set invalidates it at once.
``max_cached`` bounds each cache (0 turns both off: every answer is rendered, the reference
the benchmark compares against).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import dns.edns
import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset

from tls12.buffer import Buffer, Writer

__all__ = ["Responder", "TCPConnection", "default_zones"]

HEADER_LEN = 12
UDP_PAYLOAD = 512
"""Largest UDP response without EDNS (RFC 1035 §4.2.1)."""

Lookup = Callable[[str], "Sequence[str] | None"]
"""``lookup(name)``: the live addresses of served name ``name``, or ``None`` if not served.
Returning the *same* object while the set is unchanged lets the responder reuse its work."""

_Rotation = tuple[str, int, "Sequence[str]", int, int]
"""(name, rdtype, addresses, period, start) of a rotating address answer."""
MAX_CACHED_QUERIES = 4096
_K = TypeVar("_K")


@dataclass(slots=True)
class _Rendered:
    """The rendered responses (without their id) to one question, per rotation step, valid
    while ``lookup(name)`` is ``addresses``."""

    name: str
    rdtype: int
    addresses: Sequence[str]
    period: int
    tails: dict[int, bytes] = field(default_factory=dict)


def default_zones(names: Iterable[str]) -> list[str]:
    """The zones to claim when none are configured: the parent of each served name
    (``www.news.test`` -> ``news.test``), or the name itself if it has one label."""
    zones = []
    for name in names:
        labels = name.rstrip(".").split(".")
        zone = ".".join(labels[1:]) if len(labels) > 1 else labels[0]
        if zone not in zones:
            zones.append(zone)
    return zones


class Responder:
    """Builds authoritative responses for ``zones`` from ``lookup`` (see the module table)."""

    def __init__(
        self,
        zones: Iterable[str],
        lookup: Lookup,
        *,
        ttl: int = 20,
        max_answers: int = 8,
        serial: int = 1,
        max_cached: int = MAX_CACHED_QUERIES,
    ) -> None:
        if not 0 <= ttl <= 86400:
            raise ValueError("ttl must be within 0-86400 seconds")
        if max_answers < 1:
            raise ValueError("max_answers must be positive")
        if max_cached < 0:
            raise ValueError("max_cached must be 0 (no cache) or more")
        self.zones = [dns.name.from_text(z) for z in zones]
        if not self.zones:
            raise ValueError("a responder needs at least one zone")
        self.lookup = lookup
        self.ttl = ttl
        self.max_answers = max_answers
        self.serial = serial
        self._turn: dict[tuple[str, int], int] = {}
        self._rdatas: dict[str, dns.rdata.Rdata] = {}
        self.max_cached = max_cached
        self._by_wire: dict[tuple[bytes, int], _Rendered] = {}
        self._by_question: dict[tuple[object, ...], _Rendered] = {}
        self._families: dict[str, tuple[Sequence[str], tuple[list[str], list[str]]]] = {}
        self.answered = 0
        self.malformed = 0

    def _soa(self, zone: dns.name.Name) -> dns.rrset.RRset:
        text = (f"ns.{zone.to_text()} hostmaster.{zone.to_text()} "
                f"{self.serial} 3600 600 86400 {self.ttl}")
        return dns.rrset.from_text(zone, self.ttl, "IN", "SOA", text)

    def _zone_of(self, qname: dns.name.Name) -> dns.name.Name | None:
        best = None
        for zone in self.zones:
            if qname.is_subdomain(zone) and (best is None or len(zone) > len(best)):
                best = zone
        return best

    def _split(self, name: str, addresses: Sequence[str]) -> tuple[list[str], list[str]]:
        """``addresses`` as (IPv4, IPv6) lists, remembered while ``lookup`` returns the same
        object (so a large, unchanged volunteer set costs O(max_answers) per query)."""
        cached = self._families.get(name)
        if cached is not None and cached[0] is addresses:
            return cached[1]
        split = ([a for a in addresses if ":" not in a], [a for a in addresses if ":" in a])
        self._families[name] = (addresses, split)
        return split

    def _rdata(self, rdtype: dns.rdatatype.RdataType, address: str) -> dns.rdata.Rdata:
        """The (immutable) A or AAAA rdata of ``address``, parsed once."""
        rd = self._rdatas.get(address)
        if rd is None:
            if len(self._rdatas) >= 65536:
                self._rdatas.clear()
            rd = self._rdatas[address] = dns.rdata.from_text(dns.rdataclass.IN, rdtype, address)
        return rd

    def _formerr(self, wire: bytes) -> bytes:
        """A FORMERR for bytes dnspython could not parse, echoing the query id."""
        reply = dns.message.Message(id=int.from_bytes(wire[:2], "big"))
        reply.flags = dns.flags.QR
        reply.set_rcode(dns.rcode.FORMERR)
        return reply.to_wire()

    def respond(self, wire: bytes, *, max_size: int = 65535) -> bytes | None:
        """The response to query ``wire``, at most ``max_size`` bytes; ``None`` to stay silent.

        Never raises for any input: bytes that are not a well-formed query get FORMERR (or
        nothing, when there is no header to answer to).
        """
        if len(wire) < HEADER_LEN or wire[2] & 0x80:  # too short for an id, or a response
            self.malformed += 1
            return None
        key = (wire[2:], max_size)
        entry = self._by_wire.get(key)
        if entry is not None and (reused := self._reuse(entry, wire)) is not None:
            return reused
        try:
            query = dns.message.from_wire(wire)
        except Exception:  # dnspython raises many types (FormError, ShortHeader, BadLabel...)
            self.malformed += 1
            return self._formerr(wire)
        question = self._question_key(query, max_size)
        entry = self._by_question.get(question) if question is not None else None
        if entry is not None and (reused := self._reuse(entry, wire)) is not None:
            self._store(self._by_wire, key, entry)
            return reused
        try:
            reply, rotation = self._answer(query)
            self.answered += 1
            if query.edns >= 0:
                max_size = min(max_size, max(query.payload, UDP_PAYLOAD))
            elif max_size < 65535:
                max_size = min(max_size, UDP_PAYLOAD)
            try:
                out = reply.to_wire(max_size=max_size, want_shuffle=False)
            except dns.exception.TooBig:
                reply.answer.clear()
                reply.authority.clear()
                reply.flags |= dns.flags.TC
                return reply.to_wire(max_size=max_size, want_shuffle=False)
        except Exception:  # a query dnspython parsed but we cannot answer: still FORMERR
            self.malformed += 1
            return self._formerr(wire)
        if rotation is not None and question is not None:
            self._remember(key, question, rotation, out)
        return out

    def _reuse(self, entry: _Rendered, wire: bytes) -> bytes | None:
        """The stored response of ``entry`` with ``wire``'s id, if the address set is the one
        it was rendered from and this rotation step was rendered; else ``None``."""
        if self.lookup(entry.name) is not entry.addresses:
            return None
        turn = self._turn.get((entry.name, entry.rdtype), 0)
        tail = entry.tails.get(turn % entry.period)
        if tail is None:
            return None
        self._turn[(entry.name, entry.rdtype)] = turn + 1
        self.answered += 1
        return wire[:2] + tail  # the query's id, then the rendered response

    @staticmethod
    def _question_key(query: dns.message.Message, max_size: int) -> tuple[object, ...] | None:
        """Everything of ``query`` its response depends on (see the module docstring), or
        ``None`` for a query that is not one plain question."""
        if len(query.question) != 1:
            return None
        q = query.question[0]
        padded = any(o.otype == dns.edns.OptionType.PADDING for o in query.options)
        return (q.name.labels, q.rdtype, q.rdclass, query.flags & dns.flags.RD, query.opcode(),
                query.edns, query.payload if query.edns >= 0 else 0, padded, max_size)

    def _store(self, cache: dict[_K, _Rendered], key: _K, entry: _Rendered) -> None:
        if key not in cache and len(cache) >= self.max_cached:
            cache.clear()  # bounded; a busy site refills it with the few questions it gets
        if self.max_cached:
            cache[key] = entry

    def _remember(self, key: tuple[bytes, int], question: tuple[object, ...],
                  rotation: _Rotation, out: bytes) -> None:
        """Keep the rendered answer for this question and rotation step (:meth:`respond`)."""
        name, rdtype, addresses, period, start = rotation
        entry = self._by_question.get(question)
        if entry is None or entry.addresses is not addresses:
            entry = _Rendered(name, rdtype, addresses, period)
            self._store(self._by_question, question, entry)
        self._store(self._by_wire, key, entry)
        entry.tails[start] = out[2:]

    def _answer(self, query: dns.message.Message
                ) -> tuple[dns.message.Message, _Rotation | None]:
        """The reply, and for a one-type address answer the rotation step it used."""
        reply = dns.message.make_response(query)
        if query.opcode() != dns.opcode.QUERY:
            reply.set_rcode(dns.rcode.NOTIMP)
            return reply, None
        if len(query.question) != 1:
            reply.set_rcode(dns.rcode.FORMERR)
            return reply, None
        q = query.question[0]
        zone = self._zone_of(q.name)
        if zone is None or q.rdclass != dns.rdataclass.IN:
            reply.set_rcode(dns.rcode.REFUSED)
            return reply, None
        reply.flags |= dns.flags.AA
        name = q.name.to_text(omit_final_dot=True).lower()
        addresses = self.lookup(name)
        if addresses is None:
            if q.name == zone:
                if q.rdtype == dns.rdatatype.SOA:
                    reply.answer.append(self._soa(zone))
                else:
                    reply.authority.append(self._soa(zone))
            else:
                reply.set_rcode(dns.rcode.NXDOMAIN)
                reply.authority.append(self._soa(zone))
            return reply, None
        wanted = {dns.rdatatype.A: 4, dns.rdatatype.AAAA: 6}
        rotation: _Rotation | None = None
        types = ([dns.rdatatype.A, dns.rdatatype.AAAA] if q.rdtype == dns.rdatatype.ANY
                 else [q.rdtype] if q.rdtype in wanted else [])
        for rdtype in types:
            family = self._split(name, addresses)[wanted[rdtype] == 6]
            if not family:
                continue
            turn = self._turn.get((name, rdtype), 0)
            self._turn[(name, rdtype)] = turn + 1
            n = len(family)
            chosen = [family[(turn + i) % n] for i in range(min(n, self.max_answers))]
            rrset = dns.rrset.RRset(q.name, dns.rdataclass.IN, rdtype)
            rrset.update_ttl(self.ttl)
            for address in chosen:
                rrset.add(self._rdata(rdtype, address))
            reply.answer.append(rrset)
            rotation = (name, rdtype, addresses, n, turn % n)
        if not reply.answer:
            reply.authority.append(self._soa(zone))
        return reply, rotation if len(types) == 1 else None


class TCPConnection:
    """One DNS-over-TCP connection (RFC 1035 §4.2.2, RFC 7766), sans-IO.

    Each message has a two-byte length prefix and a connection may carry several queries:
    :meth:`receive_data` takes whatever bytes arrived (``b""`` when the client closed),
    answers every query they complete with ``responder`` (no size limit: TCP is what a
    truncated UDP answer sends the resolver to) and queues the framed responses for
    :meth:`data_to_send`.  A query the responder will not answer (shorter than a header, or
    a response) ends the connection: :attr:`closed` turns true and nothing more is read.
    """

    def __init__(self, responder: Responder) -> None:
        self.responder = responder
        self.closed = False
        self._in = bytearray()
        self._out = bytearray()

    def receive_data(self, data: bytes) -> None:
        if self.closed:
            return
        if not data:
            self.closed = True
            return
        self._in += data
        while len(self._in) >= 2:  # RFC 1035 §4.2.2: a uint16 length, then the message
            buf = Buffer(self._in)
            length = buf.pull_uint16()
            if buf.remaining < length:
                return
            query = buf.pull_bytes(length)
            del self._in[: 2 + length]
            reply = self.responder.respond(query)
            if reply is None:
                self.closed = True
                return
            out = Writer()
            out.push_vector(2, reply)
            self._out += out.getvalue()

    def data_to_send(self) -> bytes:
        out, self._out = bytes(self._out), bytearray()
        return out
