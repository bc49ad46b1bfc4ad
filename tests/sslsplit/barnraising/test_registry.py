"""The broker's state without sockets: joins, leases, leaves, reports, bans, rate limits,
and the SQLite database surviving a reopen."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sslsplit.barnraising import protocol as p
from sslsplit.barnraising.ratelimit import TokenBuckets
from sslsplit.barnraising.registry import ConfigError, SiteConfig, load_sites

from .helpers import SITE, registry

T0 = 1_700_000_000.0


def _hosts(reg, now: float = T0) -> list[tuple[str, int]]:  # type: ignore[no-untyped-def]
    return [(v.host, v.port) for v in reg.live(SITE.name, now)]


def test_join_returns_site_parameters_and_lease() -> None:
    reg = registry(lease_seconds=30)
    reply = reg.handle(p.Join(SITE.name, 4433, capacity=160.0), "127.0.0.2", T0)
    assert isinstance(reply, p.JoinReply)
    assert reply.lease_seconds == 30 and reply.site == SITE.info
    assert reply.site.params == {"memory_mb": 64}
    assert _hosts(reg) == [("127.0.0.2", 4433)]
    assert reg.handle(p.Lookup(SITE.name), "10.0.0.1", T0) == p.LookupReply(
        SITE.info, 1, (), (("127.0.0.2", 4433),))  # no cache_port: not in the sharing ring
    reg.handle(p.Join(SITE.name, 4433, cache_port=7000), "127.0.0.3", T0)
    lookup = reg.handle(p.Lookup(SITE.name), "10.0.0.1", T0)
    assert isinstance(lookup, p.LookupReply) and lookup.peers == (("127.0.0.3", 7000),)
    assert lookup.addresses == (("127.0.0.2", 4433), ("127.0.0.3", 4433))


def test_lease_expires_unless_renewed() -> None:
    reg = registry(lease_seconds=10)
    a = reg.handle(p.Join(SITE.name, 1), "127.0.0.2", T0)
    reg.handle(p.Join(SITE.name, 1), "127.0.0.3", T0)
    assert isinstance(a, p.JoinReply)
    reg.handle(p.Renew(SITE.name, a.volunteer_id), "127.0.0.2", T0 + 8)
    assert _hosts(reg, T0 + 12) == [("127.0.0.2", 1)]  # .3 stopped renewing
    assert reg.expire(T0 + 12) == 1
    with pytest.raises(p.UnknownVolunteer):
        reg.handle(p.Renew(SITE.name, a.volunteer_id), "127.0.0.2", T0 + 19)


def test_leave_and_rejoin_replace_registrations() -> None:
    reg = registry()
    a = reg.handle(p.Join(SITE.name, 1), "127.0.0.2", T0)
    b = reg.handle(p.Join(SITE.name, 1), "127.0.0.2", T0 + 1)  # same address: replaces
    assert isinstance(a, p.JoinReply) and isinstance(b, p.JoinReply)
    assert len(reg.live(SITE.name, T0 + 1)) == 1
    assert reg.handle(p.Leave(SITE.name, a.volunteer_id), "127.0.0.2", T0) == p.LeaveReply(False)
    assert reg.handle(p.Leave(SITE.name, b.volunteer_id), "127.0.0.2", T0) == p.LeaveReply(True)
    assert _hosts(reg) == []


def test_report_removes_and_bans() -> None:
    reg = registry(ban_seconds=100)
    reg.handle(p.Join(SITE.name, 1), "127.0.0.2", T0)
    reg.handle(p.Join(SITE.name, 2), "127.0.0.2", T0)
    reg.handle(p.Join(SITE.name, 1), "127.0.0.3", T0)
    with pytest.raises(p.Forbidden):
        reg.handle(p.Report(SITE.name, "127.0.0.2", token="guess"), "127.0.0.1", T0)
    assert len(reg.live(SITE.name, T0)) == 3
    reply = reg.handle(p.Report(SITE.name, "127.0.0.2", token="origin-secret"), "127.0.0.1", T0)
    assert reply == p.ReportReply(2)
    assert _hosts(reg) == [("127.0.0.3", 1)]
    with pytest.raises(p.Banned) as info:
        reg.handle(p.Join(SITE.name, 1), "127.0.0.2", T0 + 50)
    assert info.value.retry_after == pytest.approx(50)
    assert isinstance(reg.handle(p.Join(SITE.name, 1), "127.0.0.2", T0 + 101), p.JoinReply)


def test_declared_address_needs_trust() -> None:
    with pytest.raises(p.Forbidden):
        registry().handle(p.Join(SITE.name, 1, host="192.0.2.7"), "127.0.0.2", T0)
    reg = registry(trust_declared=True)
    reg.handle(p.Join(SITE.name, 1, host="192.0.2.7"), "127.0.0.2", T0)
    assert _hosts(reg) == [("192.0.2.7", 1)]


def test_unknown_site() -> None:
    with pytest.raises(p.UnknownSite):
        registry().handle(p.Lookup("other"), "127.0.0.2", T0)


def test_joins_are_rate_limited_per_source() -> None:
    reg = registry(join_rate=2.0, join_burst=3.0)
    for port in (1, 2, 3):
        reg.handle(p.Join(SITE.name, port), "127.0.0.2", T0)
    with pytest.raises(p.RateLimited) as info:
        reg.handle(p.Join(SITE.name, 4), "127.0.0.2", T0)
    assert info.value.retry_after == pytest.approx(0.5)
    reg.handle(p.Join(SITE.name, 4), "127.0.0.3", T0)  # another source has its own bucket
    reg.handle(p.Join(SITE.name, 4), "127.0.0.2", T0 + 0.5)  # refilled
    assert len(reg.live(SITE.name, T0 + 1)) == 5


def test_token_buckets_refill_and_stay_bounded() -> None:
    tb = TokenBuckets(rate=10, burst=1, max_keys=3)
    assert tb.take("a", 0.0) == 0.0
    assert tb.take("a", 0.05) == pytest.approx(0.05)
    assert tb.take("a", 0.2) == 0.0
    for key in "bcde":
        tb.take(key, 1.0)
    assert len(tb) == 3
    with pytest.raises(ValueError):
        TokenBuckets(rate=0, burst=1)


def test_database_survives_reopen(tmp_path: Path) -> None:
    db = tmp_path / "broker.db"
    reg = registry(db)
    a = reg.handle(p.Join(SITE.name, 1), "127.0.0.2", T0)
    reg.handle(p.Join(SITE.name, 2), "127.0.0.3", T0)
    reg.handle(p.Report(SITE.name, "127.0.0.3", token="origin-secret"), "127.0.0.1", T0)
    reg.close()
    again = registry(db)
    assert _hosts(again) == [("127.0.0.2", 1)]
    assert isinstance(a, p.JoinReply)
    assert isinstance(again.handle(p.Renew(SITE.name, a.volunteer_id), "127.0.0.2", T0 + 1),
                      p.RenewReply)
    with pytest.raises(p.Banned):  # bans are durable too
        again.handle(p.Join(SITE.name, 2), "127.0.0.3", T0 + 1)
    assert again.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_sites_file() -> None:
    sites = load_sites('''
[sites."news/front"]
server = "127.0.0.1:8443"
store = "127.0.0.1:8444"
names = ["WWW.News.Test."]
report_token = "s"
params = { memory_mb = 64 }
''')
    assert sites == [SITE.__class__("news/front", ("127.0.0.1", 8443), ("127.0.0.1", 8444),
                                    ("www.news.test",), {"memory_mb": 64}, "s")]


@pytest.mark.parametrize("text, words", [
    ("not toml [", "not TOML"),
    ("[other]\n", "no [sites"),
    ('[sites."a"]\nserver = "h:1"\n', "store must be"),
    ('[sites."a"]\nserver = "h:1"\nstore = "h:2"\ncolour = 1\n', "unknown key"),
    ('[sites."a/../b"]\nserver = "h:1"\nstore = "h:2"\n', "segment"),
    ('[sites."a"]\nserver = "h:1"\nstore = "h:2"\nparams = { BadKey = 1 }\n', "snake_case"),
])
def test_bad_sites_files(text: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_sites(text)
    assert words in str(info.value)


_toml_value = st.one_of(st.integers(-5, 70000), st.text(max_size=12), st.booleans(),
                        st.lists(st.text(max_size=8), max_size=3),
                        st.dictionaries(st.text(max_size=8), st.integers() | st.text(max_size=5),
                                        max_size=3))


@given(st.text(max_size=200))
@settings(max_examples=400, deadline=None)
def test_sites_file_fuzz_text(text: str) -> None:
    try:
        assert all(isinstance(s, SiteConfig) for s in load_sites(text))
    except ConfigError:
        pass


@given(st.dictionaries(st.text(max_size=10), st.dictionaries(
    st.sampled_from(["server", "store", "names", "params", "report_token", "x"]), _toml_value,
    max_size=5), max_size=3))
@settings(max_examples=400, deadline=None)
def test_sites_file_fuzz_structured(sites: dict[str, dict[str, object]]) -> None:
    def toml(value: object) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, str):
            return json.dumps(value)
        if isinstance(value, list):
            return "[" + ", ".join(toml(v) for v in value) + "]"
        if isinstance(value, dict):
            return "{" + ", ".join(f"{json.dumps(k)} = {toml(v)}" for k, v in value.items()) + "}"
        return str(value)

    text = "".join(f"[sites.{json.dumps(name)}]\n"
                   + "".join(f"{k} = {toml(v)}\n" for k, v in table.items())
                   for name, table in sites.items())
    try:
        load_sites(text)
    except ConfigError:
        pass
