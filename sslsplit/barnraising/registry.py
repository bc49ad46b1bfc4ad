"""The broker's state: configured sites, the volunteer database (SQLite), leases, bans.

:class:`Registry` answers every join-protocol request (:meth:`Registry.handle`) and tells the
DNS responder which volunteers are live (:meth:`Registry.live`).  It is the broker without
its sockets: the asyncio front end (:mod:`.aio.broker`) only frames HTTP, and a test or a
simulation can call :meth:`~Registry.handle` directly with any ``now``.

**Durability.**  Volunteers and bans live in an SQLite database in WAL mode; every change is
committed *before* the reply leaves, so a broker killed with SIGKILL and restarted knows every
volunteer it acknowledged (``synchronous=NORMAL``: a committed WAL transaction survives a
crash of the process; ``FULL`` also survives a power cut, at an fsync per join).  An
in-memory mirror of the live rows serves reads (DNS answers) without touching the database.

**Time.**  Leases end at wall-clock times (``now`` is seconds since the epoch, as from
``time.time()``), because they must mean the same thing after a restart.  A volunteer whose
lease has ended is no longer live even before :meth:`Registry.expire` deletes its row.

**Addresses.**  A volunteer's published address is the address its join came from unless the
broker trusts declared addresses (``trust_declared``): otherwise anyone could point a site's
DNS name at a third party.  A report (from the origin, with the site's token) removes the
volunteer at once and bans its address for ``ban_seconds``; a site configured without a
token accepts no reports.
"""

from __future__ import annotations

import hmac
import secrets
import sqlite3
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .protocol import (
    Banned,
    Forbidden,
    Join,
    JoinReply,
    Leave,
    LeaveReply,
    Lookup,
    LookupReply,
    MalformedMessage,
    Params,
    RateLimited,
    Renew,
    RenewReply,
    Reply,
    Report,
    ReportReply,
    Request,
    ServiceUnavailable,
    SiteInfo,
    UnknownSite,
    check_params,
)
from .ratelimit import TokenBuckets
from .state import LeaseEvent, LeaseState, lease_after
from .uri import URIError, check_site

__all__ = ["ConfigError", "SiteConfig", "Volunteer", "Registry", "load_sites"]


@dataclass(frozen=True)
class SiteConfig:
    """One site the broker serves: where its server and store are, its DNS names, its secret."""

    name: str
    server: tuple[str, int]
    store: tuple[str, int]
    names: tuple[str, ...] = ()
    params: Params = field(default_factory=dict)
    report_token: str = ""

    def __post_init__(self) -> None:
        try:
            check_site(self.name)
        except URIError as exc:
            raise ConfigError(str(exc)) from None
        for name in self.names:
            if not name or len(name) > 253 or name.startswith(".") or ".." in name:
                raise ConfigError(f"site {self.name}: {name!r} is not a DNS name")
        try:
            check_params(self.params, f"site {self.name}")
        except MalformedMessage as exc:
            raise ConfigError(str(exc)) from None

    @property
    def info(self) -> SiteInfo:
        """The public part, as joins and lookups return it (never the token)."""
        return SiteInfo(self.name, self.server, self.store, self.names, dict(self.params))


def _endpoint(value: Any, what: str) -> tuple[str, int]:
    if isinstance(value, str):
        host, sep, port = value.rpartition(":")
        if sep and host and port.isdigit() and 1 <= int(port) <= 65535:
            return host.strip("[]"), int(port)
    raise ConfigError(f"{what} must be \"HOST:PORT\", not {value!r}")


def load_sites(text: str) -> list[SiteConfig]:
    """Sites from a TOML document, one table per site::

        [sites."news/front"]
        server = "127.0.0.1:8443"          # the splitting server
        store = "127.0.0.1:8444"           # its record store (cache misses)
        names = ["www.news.test"]          # DNS names the responder answers with volunteers
        report_token = "a long secret"     # the origin's credential for reports
        params = { memory_mb = 64 }        # handed to volunteers on join and renew

    Any other key, or a value of the wrong type, is a :class:`ConfigError`.
    """
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not TOML: {exc}") from None
    sites = doc.get("sites")
    if not isinstance(sites, dict) or not sites:
        raise ConfigError("no [sites.\"NAME\"] table")
    out = []
    for name, table in sites.items():
        if not isinstance(table, dict):
            raise ConfigError(f"sites.{name} must be a table")
        unknown = set(table) - {"server", "store", "names", "params", "report_token"}
        if unknown:
            raise ConfigError(f"site {name}: unknown key(s) {', '.join(sorted(unknown))}")
        names = table.get("names", [])
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ConfigError(f"site {name}: names must be a list of strings")
        params = table.get("params", {})
        if not isinstance(params, dict):
            raise ConfigError(f"site {name}: params must be a table")
        token = table.get("report_token", "")
        if not isinstance(token, str):
            raise ConfigError(f"site {name}: report_token must be a string")
        out.append(SiteConfig(
            name,
            _endpoint(table.get("server"), f"site {name}: server"),
            _endpoint(table.get("store"), f"site {name}: store"),
            tuple(n.lower().rstrip(".") for n in names),
            dict(params),
            token,
        ))
    return out


@dataclass(frozen=True, slots=True)
class Volunteer:
    """A live registration: where clients reach the volunteer and until when its lease runs."""

    volunteer_id: str
    site: str
    host: str
    port: int
    capacity: float
    cache_port: int | None
    expires: float


_SCHEMA = """
CREATE TABLE IF NOT EXISTS volunteers (
    volunteer_id TEXT PRIMARY KEY,
    site TEXT NOT NULL,
    host TEXT NOT NULL,
    port INTEGER NOT NULL,
    capacity REAL NOT NULL,
    cache_port INTEGER,
    expires REAL NOT NULL,
    UNIQUE (site, host, port)
);
CREATE TABLE IF NOT EXISTS bans (
    site TEXT NOT NULL,
    host TEXT NOT NULL,
    until REAL NOT NULL,
    reason TEXT NOT NULL,
    PRIMARY KEY (site, host)
);
"""


class Registry:
    """Sites, volunteers and bans; answers requests (:meth:`handle`) at time ``now``."""

    def __init__(
        self,
        sites: Iterable[SiteConfig],
        database: str | Path = ":memory:",
        *,
        lease_seconds: float = 30.0,
        ban_seconds: float = 600.0,
        join_rate: float = 10.0,
        join_burst: float = 20.0,
        trust_declared: bool = False,
        synchronous: str = "NORMAL",
        new_id: Callable[[], str] = lambda: secrets.token_hex(16),
    ) -> None:
        self.sites = {s.name: s for s in sites}
        if not self.sites:
            raise ConfigError("a broker needs at least one site")
        if not lease_seconds > 0:
            raise ValueError("lease_seconds must be positive")
        if synchronous.upper() not in ("NORMAL", "FULL"):
            raise ValueError("synchronous must be NORMAL or FULL")
        self.lease_seconds = float(lease_seconds)
        self.ban_seconds = float(ban_seconds)
        self.trust_declared = trust_declared
        self.limiter = TokenBuckets(join_rate, join_burst)
        self.new_id = new_id
        self.db = sqlite3.connect(str(database))  # implicit BEGIN; `with db` commits
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(f"PRAGMA synchronous={synchronous.upper()}")
        self.db.executescript(_SCHEMA)
        self._live: dict[str, dict[str, Volunteer]] = {name: {} for name in self.sites}
        self._version = 0
        for row in self.db.execute("SELECT * FROM volunteers"):
            v = Volunteer(*row)
            if v.site in self._live:
                self._live[v.site][v.volunteer_id] = v

    def close(self) -> None:
        self.db.close()

    @property
    def version(self) -> int:
        """Incremented by every change of the live set (a cheap cache key for readers)."""
        return self._version

    # --- reads ---------------------------------------------------------------------------

    def live(self, site: str, now: float) -> list[Volunteer]:
        """The site's volunteers whose lease runs past ``now``, oldest registration first."""
        return [v for v in self._live.get(site, {}).values() if v.expires > now]

    # --- requests ------------------------------------------------------------------------

    def handle(self, request: Request, source: str, now: float) -> Reply:
        """Answer ``request`` that arrived from IP address ``source`` at wall-clock ``now``.

        Raises the :class:`~.protocol.ProtocolError` to send back; changes are committed
        before this returns.
        """
        site = self.sites.get(request.site)
        if site is None:
            raise UnknownSite(f"this broker serves no site {request.site!r}")
        try:
            if isinstance(request, Join):
                return self._join(site, request, source, now)
            if isinstance(request, Renew):
                return self._renew(site, request, now)
            if isinstance(request, Leave):
                return LeaveReply(self._remove_ids(site.name, [request.volunteer_id]) > 0)
            if isinstance(request, Report):
                return self._report(site, request, now)
            if isinstance(request, Lookup):
                live = self.live(site.name, now)
                peers = sorted({(v.host, v.cache_port) for v in live if v.cache_port})
                addresses = sorted({(v.host, v.port) for v in live})
                return LookupReply(site.info, len(live), tuple(peers), tuple(addresses))
        except sqlite3.Error as exc:
            raise ServiceUnavailable(f"volunteer database failed: {exc}") from None
        raise TypeError(f"not a request: {request!r}")

    def _join(self, site: SiteConfig, req: Join, source: str, now: float) -> JoinReply:
        wait = self.limiter.take(source, now)
        if wait > 0:
            raise RateLimited(f"too many joins from {source}; retry in {wait:.2f} s",
                              retry_after=wait)
        host = source if req.host is None else req.host
        if host != source and not self.trust_declared:
            raise Forbidden(f"join declares address {host} but comes from {source}; "
                            "a volunteer registers the address it connects from")
        row = self.db.execute("SELECT until FROM bans WHERE site=? AND host=?",
                              (site.name, host)).fetchone()
        if row is not None and row[0] > now:
            raise Banned(f"{host} was reported; it may join {site.name} again in "
                         f"{row[0] - now:.0f} s", retry_after=row[0] - now)
        v = Volunteer(self.new_id(), site.name, host, req.port, req.capacity, req.cache_port,
                      now + self.lease_seconds)
        with self.db:
            old = [r[0] for r in self.db.execute(
                "SELECT volunteer_id FROM volunteers WHERE site=? AND host=? AND port=?",
                (site.name, host, req.port))]
            self.db.execute("DELETE FROM volunteers WHERE site=? AND host=? AND port=?",
                            (site.name, host, req.port))
            self.db.execute("INSERT INTO volunteers VALUES (?,?,?,?,?,?,?)",
                            (v.volunteer_id, v.site, v.host, v.port, v.capacity, v.cache_port,
                             v.expires))
        for vid in old:
            self._live[site.name].pop(vid, None)
        self._live[site.name][v.volunteer_id] = v
        self._version += 1
        return JoinReply(v.volunteer_id, self.lease_seconds, site.info)

    def _renew(self, site: SiteConfig, req: Renew, now: float) -> RenewReply:
        v = self._live[site.name].get(req.volunteer_id)
        state = LeaseState.LIVE if v is not None and v.expires > now else LeaseState.ABSENT
        lease_after(state, LeaseEvent.RENEW, req.volunteer_id, site.name)  # UnknownVolunteer
        assert v is not None
        expires = now + self.lease_seconds
        with self.db:
            self.db.execute("UPDATE volunteers SET expires=? WHERE volunteer_id=?",
                            (expires, v.volunteer_id))
        self._live[site.name][v.volunteer_id] = Volunteer(
            v.volunteer_id, v.site, v.host, v.port, v.capacity, v.cache_port, expires)
        return RenewReply(self.lease_seconds, site.info)

    def _report(self, site: SiteConfig, req: Report, now: float) -> ReportReply:
        if not site.report_token or not hmac.compare_digest(req.token.encode(),
                                                            site.report_token.encode()):
            raise Forbidden(f"wrong report token for {site.name}")
        victims = [v.volunteer_id for v in self._live[site.name].values()
                   if v.host == req.host and (req.port is None or v.port == req.port)]
        with self.db:
            if self.ban_seconds > 0:
                self.db.execute("INSERT OR REPLACE INTO bans VALUES (?,?,?,?)",
                                (site.name, req.host, now + self.ban_seconds, req.reason))
        return ReportReply(self._remove_ids(site.name, victims))

    def _remove_ids(self, site: str, ids: list[str]) -> int:
        ids = [i for i in ids if i in self._live[site]]
        if not ids:
            return 0
        with self.db:
            self.db.executemany("DELETE FROM volunteers WHERE volunteer_id=?",
                                [(i,) for i in ids])
        for i in ids:
            del self._live[site][i]
        self._version += 1
        return len(ids)

    def expire(self, now: float) -> int:
        """Delete every volunteer whose lease ended by ``now``; return how many."""
        removed = 0
        for site in self._live:
            removed += self._remove_ids(site, [v.volunteer_id for v in self._live[site].values()
                                               if v.expires <= now])
        return removed
