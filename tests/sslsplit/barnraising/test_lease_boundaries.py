"""Leases and bans end at an exact instant, and every reader of the broker agrees on it.

A lease granted at ``t`` for ``L`` seconds runs on the half-open interval ``[t, t + L)``: at
``t + L`` the volunteer is no longer live (:meth:`Registry.live`, the ``lookup`` reply and the
DNS view), cannot renew (it must join again), and :meth:`Registry.expire` deletes it.  A ban
until ``u`` refuses joins before ``u`` and admits one at ``u``.  The instants used here are
exactly representable (``T0`` + whole seconds), so the boundary is the boundary, not a float
rounding; these tests pin the comparisons that the other tests only cross with a margin.
"""

from __future__ import annotations

import pytest

from sslsplit.barnraising import protocol as p
from sslsplit.barnraising.registry import Registry, SiteConfig
from sslsplit.barnraising.service import BrokerService

from .helpers import SITE, registry

T0 = 1_700_000_000.0
LEASE = 10.0
NAME = SITE.names[0]


def _joined(lease: float = LEASE):  # type: ignore[no-untyped-def]
    reg = registry(lease_seconds=lease)
    reply = reg.handle(p.Join(SITE.name, 4433), "127.0.0.2", T0)
    assert isinstance(reply, p.JoinReply)
    return reg, reply.volunteer_id


def test_a_lease_is_live_until_just_before_its_end_and_not_at_it() -> None:
    reg, _ = _joined()
    end = T0 + LEASE
    assert [v.host for v in reg.live(SITE.name, end - 0.5)] == ["127.0.0.2"]
    assert reg.live(SITE.name, end) == []
    lookup = reg.handle(p.Lookup(SITE.name), "10.0.0.1", end)
    assert isinstance(lookup, p.LookupReply) and lookup.volunteers == 0
    assert lookup.addresses == ()
    assert reg.expire(end - 0.5) == 0  # not yet
    assert reg.expire(end) == 1  # at the end: deleted
    assert reg.expire(end) == 0


def test_renewal_just_before_the_end_extends_and_at_the_end_is_refused() -> None:
    reg, vid = _joined()
    end = T0 + LEASE
    renewed = reg.handle(p.Renew(SITE.name, vid), "127.0.0.2", end - 1)
    assert isinstance(renewed, p.RenewReply)
    assert reg.live(SITE.name, end) != []  # the renewal moved the end on ...
    new_end = end - 1 + LEASE
    assert [v.expires for v in reg.live(SITE.name, end)] == [new_end]  # ... by one lease
    with pytest.raises(p.UnknownVolunteer):
        reg.handle(p.Renew(SITE.name, vid), "127.0.0.2", new_end)  # at the end: join again
    assert reg.live(SITE.name, new_end) == []


def test_service_expire_deletes_at_the_lease_end() -> None:
    reg, _ = _joined()
    service = BrokerService(reg)
    service.expire(T0 + LEASE - 0.5)
    assert len(reg.db.execute("SELECT * FROM volunteers").fetchall()) == 1
    service.expire(T0 + LEASE)
    assert reg.db.execute("SELECT * FROM volunteers").fetchall() == []


def test_the_dns_view_drops_a_volunteer_at_its_lease_end_though_the_answer_was_cached() -> None:
    reg, _ = _joined()
    reg.handle(p.Join(SITE.name, 4433), "127.0.0.3", T0 + 5)  # its lease ends 5 s later
    service = BrokerService(reg)
    first = service.lookup(NAME, T0 + 6)
    assert first == ("127.0.0.2", "127.0.0.3")
    assert service.lookup(NAME, T0 + 7) is first  # nothing changed: the cached tuple
    assert service.lookup(NAME, T0 + LEASE) == ("127.0.0.3",)  # .2's lease ended exactly now
    assert service.lookup("v127-0-0-2." + NAME, T0 + LEASE) is None  # its own name too
    assert service.lookup("v127-0-0-3." + NAME, T0 + LEASE) == ("127.0.0.3",)
    assert service.lookup(NAME, T0 + 5 + LEASE) == ()
    reg.handle(p.Join(SITE.name, 4433), "127.0.0.4", T0 + 20)  # a change: not the cached ()
    assert service.lookup(NAME, T0 + 20) == ("127.0.0.4",)


def test_a_ban_ends_exactly_at_its_end() -> None:
    reg = registry(lease_seconds=LEASE, ban_seconds=600)
    reg.handle(p.Join(SITE.name, 4433), "127.0.0.2", T0)
    report = reg.handle(p.Report(SITE.name, "127.0.0.2", reason="alert",
                                 token=SITE.report_token), "127.0.0.1", T0 + 1)
    assert report == p.ReportReply(1)
    with pytest.raises(p.Banned):
        reg.handle(p.Join(SITE.name, 4433), "127.0.0.2", T0 + 600.5)
    rejoined = reg.handle(p.Join(SITE.name, 4433), "127.0.0.2", T0 + 601)
    assert isinstance(rejoined, p.JoinReply)


# --- the records behind the boundaries: what a renewal keeps, what a report removes ----------


def test_a_renewal_keeps_the_registration_and_moves_only_its_end() -> None:
    reg = registry(lease_seconds=LEASE)
    joined = reg.handle(p.Join(SITE.name, 4433, capacity=160.0, cache_port=7000), "127.0.0.2", T0)
    assert isinstance(joined, p.JoinReply)
    renewed = reg.handle(p.Renew(SITE.name, joined.volunteer_id), "127.0.0.2", T0 + 4)
    assert renewed == p.RenewReply(LEASE, SITE.info)
    [v] = reg.live(SITE.name, T0 + LEASE)
    assert (v.volunteer_id, v.site, v.host, v.port, v.capacity, v.cache_port, v.expires) == (
        joined.volunteer_id, SITE.name, "127.0.0.2", 4433, 160.0, 7000, T0 + 4 + LEASE)
    lookup = reg.handle(p.Lookup(SITE.name), "10.0.0.1", T0 + LEASE)
    assert isinstance(lookup, p.LookupReply) and lookup.peers == (("127.0.0.2", 7000),)
    assert reg.handle(p.Leave(SITE.name, joined.volunteer_id), "127.0.0.2", T0 + 5) == \
        p.LeaveReply(True)  # still the same id after the renewal


def test_every_change_reaches_the_cached_dns_view() -> None:
    reg = registry(lease_seconds=LEASE)
    service = BrokerService(reg)
    a = reg.handle(p.Join(SITE.name, 4433), "127.0.0.2", T0)
    assert isinstance(a, p.JoinReply)
    assert service.lookup(NAME, T0) == ("127.0.0.2",)
    reg.handle(p.Leave(SITE.name, a.volunteer_id), "127.0.0.2", T0 + 1)
    b = reg.handle(p.Join(SITE.name, 4433), "127.0.0.3", T0 + 2)
    assert isinstance(b, p.JoinReply)
    assert service.lookup(NAME, T0 + 2) == ("127.0.0.3",)  # a leave then a join: not cached
    reg.handle(p.Join(SITE.name, 4433), "127.0.0.4", T0 + 3)
    assert service.lookup(NAME, T0 + 3) == ("127.0.0.3", "127.0.0.4")
    reg.handle(p.Leave(SITE.name, b.volunteer_id), "127.0.0.3", T0 + 4)
    assert service.lookup(NAME, T0 + 4) == ("127.0.0.4",)  # the leave, at once
    fresh = registry(lease_seconds=LEASE)
    view = BrokerService(fresh)
    only = fresh.handle(p.Join(SITE.name, 4433), "127.0.0.5", T0)
    assert isinstance(only, p.JoinReply) and view.lookup(NAME, T0) == ("127.0.0.5",)
    fresh.handle(p.Leave(SITE.name, only.volunteer_id), "127.0.0.5", T0 + 1)
    assert view.lookup(NAME, T0 + 1) == ()  # the first change after a cached answer


def test_a_report_naming_a_port_removes_only_that_registration() -> None:
    reg = registry(lease_seconds=LEASE, ban_seconds=0)
    reg.handle(p.Join(SITE.name, 4433), "127.0.0.2", T0)
    reg.handle(p.Join(SITE.name, 4434), "127.0.0.2", T0)
    report = reg.handle(p.Report(SITE.name, "127.0.0.2", 4433, "alert", SITE.report_token),
                        "127.0.0.1", T0 + 1)
    assert report == p.ReportReply(1)
    assert [(v.host, v.port) for v in reg.live(SITE.name, T0 + 1)] == [("127.0.0.2", 4434)]
    assert isinstance(reg.handle(p.Join(SITE.name, 4433), "127.0.0.2", T0 + 1), p.JoinReply)


def test_a_ban_shorter_than_a_second_still_bans_and_says_how_long() -> None:
    reg = registry(lease_seconds=LEASE, ban_seconds=0.5)
    reg.handle(p.Join(SITE.name, 4433), "127.0.0.2", T0)
    reg.handle(p.Report(SITE.name, "127.0.0.2", reason="alert", token=SITE.report_token),
               "127.0.0.1", T0)
    with pytest.raises(p.Banned) as banned:
        reg.handle(p.Join(SITE.name, 4433), "127.0.0.2", T0 + 0.25)
    assert banned.value.retry_after == 0.25
    long_ban = registry(ban_seconds=600)
    long_ban.handle(p.Join(SITE.name, 4433), "127.0.0.2", T0)
    long_ban.handle(p.Report(SITE.name, "127.0.0.2", reason="alert", token=SITE.report_token),
                    "127.0.0.1", T0)
    with pytest.raises(p.Banned, match="again in 590 s"):
        long_ban.handle(p.Join(SITE.name, 4433), "127.0.0.2", T0 + 10)


def test_expire_counts_every_site_and_an_unknown_site_has_no_volunteers() -> None:
    other = SiteConfig("sport/front", ("127.0.0.1", 9443), ("127.0.0.1", 9444), ("www.sport.test",))
    reg = Registry([SITE, other], ":memory:", lease_seconds=LEASE)
    reg.handle(p.Join(SITE.name, 4433), "127.0.0.2", T0)
    reg.handle(p.Join(other.name, 4433), "127.0.0.3", T0)
    assert reg.live("no/such-site", T0) == []
    assert reg.expire(T0 + LEASE) == 2
