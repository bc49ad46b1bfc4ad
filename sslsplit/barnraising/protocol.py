"""The join protocol between volunteers (and origins) and the Barnraising broker, version 1.

Paper §5.1: a volunteer knows only a URI, ``barnraising://BROKER/some/site``; it asks the
broker to *join* the site and learns from the answer where the splitting server and its
record store are and what parameters the site wants (cache sizes, ...).  The broker hands
out a *lease*: the volunteer *renews* it well before it runs out, and a volunteer that stops
renewing (crashed, disconnected, killed) drops out of DNS when the lease ends.  A volunteer
that stops cleanly says *leave*.  The origin, which sees which volunteers fail to forward its
clients (the feedback loop of §8), *reports* a volunteer, and the broker removes it at once.
Anyone may *look up* a site's public parameters.

**Transport: JSON over HTTP/1.1.**  Each message is one ``POST /barnraising/1/OP`` whose body
is a JSON object; the answer is a JSON object with an HTTP status.  Why HTTP rather than
length-prefixed JSON over raw TCP: the framing (``Content-Length``), keep-alive, size limits
and error classes (400, 403, 404, 413, 429 with ``Retry-After``) are standard and already
implemented by h11, which the testbed depends on; the broker can be probed with ``curl``; and
the version sits in the path, so a broker can serve ``/barnraising/2/`` beside version 1.

Messages (every field is required unless a default is shown; unknown fields are an error)::

    join   {"site", "port", "host": null, "capacity": 1000.0, "cache_port": null}
           -> {"volunteer_id", "lease_seconds", "site": SITE}
    renew  {"site", "volunteer_id"}             -> {"lease_seconds", "site": SITE}
    leave  {"site", "volunteer_id"}             -> {"removed": bool}
    report {"site", "host", "port": null, "reason": "", "token"}  -> {"removed": int}
    lookup {"site"}                             -> {"site": SITE, "volunteers": int,
                                                    "peers": [[host, cache_port], ...],
                                                    "addresses": [[host, port], ...]}

    SITE = {"name", "server": [host, port], "store": [host, port], "names": [dns names],
            "params": {str: str | int | float | bool}}

``host`` in a join is the volunteer's address as clients reach it (an IP literal, because the
DNS responder publishes it as an A or AAAA record); null means "the address I connect from".
``capacity`` is the volunteer's upload capacity in kbit/s, the weight for a capacity-aware
redirection.  ``peers`` in a lookup reply lists the live volunteers that serve their cache to
each other (those that joined with a ``cache_port``), sorted: the membership of the site's
cache-sharing ring (:mod:`.ring`); a reply without it means no peers.  ``addresses`` lists
where clients reach the live volunteers (sorted), which the origin's feedback loop
(:mod:`.feedback`) redirects clients to.  ``token`` in a report is the site's shared secret: only the origin reports.

Errors are ``{"error": {"code", "message", "retry_after"?}}`` with the HTTP status of the
error class; :func:`parse_reply` turns them back into the same :class:`ProtocolError`
subclasses the broker raised, so a client handles ``RateLimited`` or ``UnknownVolunteer``
(lease lost: join again) by type.

The module is sans-IO: it maps bytes to typed messages and back (``encode_*``/``parse_*``)
and never touches a socket or a clock.  Parsers accept any bytes: everything they reject
raises a :class:`ProtocolError`; nothing else escapes (the tests fuzz them).
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .errors import (
    Banned,
    BodyTooLarge,
    Forbidden,
    MalformedMessage,
    MethodNotAllowed,
    ProtocolError,
    RateLimited,
    ServiceUnavailable,
    UnknownOperation,
    UnknownSite,
    UnknownVolunteer,
    UnsupportedVersion,
)
from .state import Operation
from .uri import URIError, check_site

__all__ = [
    "VERSION",
    "PATH_PREFIX",
    "MAX_BODY",
    "ProtocolError",
    "MalformedMessage",
    "UnsupportedVersion",
    "UnknownOperation",
    "MethodNotAllowed",
    "BodyTooLarge",
    "UnknownSite",
    "UnknownVolunteer",
    "Forbidden",
    "Banned",
    "RateLimited",
    "ServiceUnavailable",
    "ERRORS",
    "Params",
    "SiteInfo",
    "Operation",
    "Request",
    "Join",
    "Renew",
    "Leave",
    "Report",
    "Lookup",
    "Reply",
    "JoinReply",
    "RenewReply",
    "LeaveReply",
    "ReportReply",
    "LookupReply",
    "request_path",
    "encode_request",
    "parse_request",
    "encode_reply",
    "encode_error",
    "parse_reply",
    "check_ip",
    "check_params",
]

VERSION = 1
PATH_PREFIX = "/barnraising/"
MAX_BODY = 4096
"""Largest request or reply body in bytes (a join is about 150)."""
MAX_PARAMS = 32
MAX_STRING = 256
MAX_CAPACITY = 1e7
_ID = re.compile(r"[0-9a-f]{32}")
_PARAM_KEY = re.compile(r"[a-z][a-z0-9_]{0,31}")


# --- errors (classes in :mod:`.errors`) -------------------------------------------------

ERRORS: dict[str, type[ProtocolError]] = {
    cls.code: cls
    for cls in (MalformedMessage, UnsupportedVersion, UnknownOperation, MethodNotAllowed,
                BodyTooLarge, UnknownSite, UnknownVolunteer, Forbidden, Banned, RateLimited,
                ServiceUnavailable)
}  # fmt: skip


# --- field checks ------------------------------------------------------------------------

Params = dict[str, "str | int | float | bool"]


def _reject_constant(name: str) -> None:
    raise MalformedMessage(f"{name} is not valid JSON here (numbers must be finite)")


def _load_object(body: bytes, what: str) -> dict[str, Any]:
    if len(body) > MAX_BODY:
        raise BodyTooLarge(f"{what} body is {len(body)} bytes; at most {MAX_BODY}")
    try:
        value = json.loads(body.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise MalformedMessage(f"{what} body is not UTF-8") from None
    except RecursionError:
        raise MalformedMessage(f"{what} body nests too deeply") from None
    except ValueError as exc:  # json.JSONDecodeError
        raise MalformedMessage(f"{what} body is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise MalformedMessage(f"{what} body must be a JSON object")
    return value


class _Fields:
    """Pops typed fields from a decoded object; whatever is left over is an error."""

    def __init__(self, obj: dict[str, Any], what: str) -> None:
        self.obj = dict(obj)
        self.what = what

    def _get(self, name: str, default: Any, required: bool) -> Any:
        if name not in self.obj:
            if required:
                raise MalformedMessage(f"{self.what}: missing field {name!r}")
            return default
        return self.obj.pop(name)

    def string(self, name: str, *, required: bool = True, default: str | None = None,
               nullable: bool = False) -> Any:
        value = self._get(name, default, required)
        if value is None and (nullable or not required):
            return value
        if not isinstance(value, str):
            raise MalformedMessage(f"{self.what}: {name!r} must be a string")
        if len(value) > MAX_STRING:
            raise MalformedMessage(f"{self.what}: {name!r} is longer than {MAX_STRING} characters")
        return value

    def integer(self, name: str, lo: int, hi: int, *, required: bool = True,
                nullable: bool = False) -> Any:
        value = self._get(name, None, required)
        if value is None and (nullable or not required):
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise MalformedMessage(f"{self.what}: {name!r} must be an integer")
        if not lo <= value <= hi:
            raise MalformedMessage(f"{self.what}: {name!r} = {value} is outside {lo}-{hi}")
        return value

    def number(self, name: str, default: float, lo: float, hi: float) -> float:
        value = self._get(name, default, False)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise MalformedMessage(f"{self.what}: {name!r} must be a number")
        value = float(value)
        if not (math.isfinite(value) and lo < value <= hi):
            raise MalformedMessage(f"{self.what}: {name!r} = {value} is outside ({lo}, {hi}]")
        return value

    def site(self) -> str:
        value = self.string("site")
        try:
            return check_site(value)
        except URIError as exc:
            raise MalformedMessage(f"{self.what}: {exc}") from None

    def volunteer_id(self) -> str:
        value: str = self.string("volunteer_id")  # required, so never None
        if not _ID.fullmatch(value):
            raise MalformedMessage(f"{self.what}: 'volunteer_id' must be 32 lowercase hex digits")
        return value

    def done(self) -> None:
        if self.obj:
            names = ", ".join(sorted(repr(k) for k in self.obj))
            raise MalformedMessage(f"{self.what}: unknown field(s) {names}")


def check_ip(text: str, what: str = "host") -> str:
    """The canonical spelling of IP literal ``text``; :class:`MalformedMessage` if it is none."""
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise MalformedMessage(f"{what} {text[:64]!r} is not an IP address") from None


def check_params(value: Any, what: str) -> Params:
    """``value`` if it is a valid site-parameter table, else :class:`MalformedMessage`."""
    if not isinstance(value, dict):
        raise MalformedMessage(f"{what}: 'params' must be an object")
    if len(value) > MAX_PARAMS:
        raise MalformedMessage(f"{what}: more than {MAX_PARAMS} params")
    for key, item in value.items():
        if not _PARAM_KEY.fullmatch(key):
            raise MalformedMessage(f"{what}: param name {key[:40]!r} must be lower_snake_case")
        if isinstance(item, float) and not math.isfinite(item):
            raise MalformedMessage(f"{what}: param {key!r} is not finite")
        if isinstance(item, str) and len(item) > MAX_STRING:
            raise MalformedMessage(f"{what}: param {key!r} is too long")
        if not isinstance(item, str | int | float | bool):
            raise MalformedMessage(f"{what}: param {key!r} must be a string, number or boolean")
    return dict(value)


# --- messages ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SiteInfo:
    """What a volunteer needs to serve a site: its server, its store, its names, its parameters."""

    name: str
    server: tuple[str, int]
    store: tuple[str, int]
    names: tuple[str, ...] = ()
    params: Params = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "server": list(self.server), "store": list(self.store),
                "names": list(self.names), "params": dict(self.params)}

    @classmethod
    def from_json(cls, value: Any, what: str = "site") -> SiteInfo:
        if not isinstance(value, dict):
            raise MalformedMessage(f"{what} must be an object")
        f = _Fields(value, what)
        try:
            name = check_site(f.string("name"))
        except URIError as exc:
            raise MalformedMessage(f"{what}: {exc}") from None
        server = _endpoint(f._get("server", None, True), f"{what}.server")
        store = _endpoint(f._get("store", None, True), f"{what}.store")
        names = f._get("names", [], False)
        if not (isinstance(names, list) and all(isinstance(n, str) and len(n) <= 253
                                                for n in names)):
            raise MalformedMessage(f"{what}.names must be a list of DNS names")
        params = check_params(f._get("params", {}, False), what)
        f.done()
        return cls(name, server, store, tuple(names), params)


def _endpoint(value: Any, what: str) -> tuple[str, int]:
    if not (isinstance(value, list) and len(value) == 2 and isinstance(value[0], str)
            and len(value[0]) <= 253 and isinstance(value[1], int)
            and not isinstance(value[1], bool) and 1 <= value[1] <= 65535):
        raise MalformedMessage(f"{what} must be [host, port]")
    return value[0], value[1]


@dataclass(frozen=True, slots=True)
class Request:
    """Base of the five requests; :attr:`OP` is the operation (the last path segment)."""

    OP: ClassVar[Operation]
    site: str

    def to_json(self) -> dict[str, Any]:
        return {"site": self.site}


@dataclass(frozen=True, slots=True)
class Join(Request):
    OP: ClassVar[Operation] = Operation.JOIN
    port: int = 443
    host: str | None = None
    capacity: float = 1000.0
    cache_port: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"site": self.site, "port": self.port, "host": self.host,
                "capacity": self.capacity, "cache_port": self.cache_port}


@dataclass(frozen=True, slots=True)
class Renew(Request):
    OP: ClassVar[Operation] = Operation.RENEW
    volunteer_id: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"site": self.site, "volunteer_id": self.volunteer_id}


@dataclass(frozen=True, slots=True)
class Leave(Request):
    OP: ClassVar[Operation] = Operation.LEAVE
    volunteer_id: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"site": self.site, "volunteer_id": self.volunteer_id}


@dataclass(frozen=True, slots=True)
class Report(Request):
    OP: ClassVar[Operation] = Operation.REPORT
    host: str = ""
    port: int | None = None
    reason: str = ""
    token: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"site": self.site, "host": self.host, "port": self.port,
                "reason": self.reason, "token": self.token}


@dataclass(frozen=True, slots=True)
class Lookup(Request):
    OP: ClassVar[Operation] = Operation.LOOKUP


@dataclass(frozen=True, slots=True)
class Reply(ABC):
    """Base of the replies; each names the request class it answers."""

    @abstractmethod
    def to_json(self) -> dict[str, Any]:
        """The reply as the JSON object the broker sends."""


@dataclass(frozen=True, slots=True)
class JoinReply(Reply):
    volunteer_id: str
    lease_seconds: float
    site: SiteInfo

    def to_json(self) -> dict[str, Any]:
        return {"volunteer_id": self.volunteer_id, "lease_seconds": self.lease_seconds,
                "site": self.site.to_json()}


@dataclass(frozen=True, slots=True)
class RenewReply(Reply):
    lease_seconds: float
    site: SiteInfo

    def to_json(self) -> dict[str, Any]:
        return {"lease_seconds": self.lease_seconds, "site": self.site.to_json()}


@dataclass(frozen=True, slots=True)
class LeaveReply(Reply):
    removed: bool

    def to_json(self) -> dict[str, Any]:
        return {"removed": self.removed}


@dataclass(frozen=True, slots=True)
class ReportReply(Reply):
    removed: int

    def to_json(self) -> dict[str, Any]:
        return {"removed": self.removed}


@dataclass(frozen=True, slots=True)
class LookupReply(Reply):
    site: SiteInfo
    volunteers: int
    peers: tuple[tuple[str, int], ...] = ()
    addresses: tuple[tuple[str, int], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"site": self.site.to_json(), "volunteers": self.volunteers,
                "peers": [list(p) for p in self.peers],
                "addresses": [list(a) for a in self.addresses]}


REQUESTS: dict[Operation, type[Request]] = {c.OP: c for c in (Join, Renew, Leave, Report, Lookup)}


# --- requests on the wire ----------------------------------------------------------------


def request_path(op: Operation | str, version: int = VERSION) -> str:
    """``/barnraising/1/join``: the target of ``POST`` for operation ``op``."""
    return f"{PATH_PREFIX}{version}/{op}"


def encode_request(request: Request) -> tuple[str, bytes]:
    """The path and JSON body to ``POST`` for ``request``."""
    return request_path(request.OP), json.dumps(request.to_json(), separators=(",", ":")).encode()


def _operation(method: str, target: str) -> Operation:
    path = target.split("?", 1)[0]
    if not path.startswith(PATH_PREFIX):
        raise UnknownOperation(f"no such resource {path[:80]!r}; "
                               f"requests go to {PATH_PREFIX}{VERSION}/OP")
    version, _, op = path[len(PATH_PREFIX):].partition("/")
    if version != str(VERSION):
        raise UnsupportedVersion(f"protocol version {version[:16]!r} is not supported; "
                                 f"this broker speaks {VERSION}")
    if op not in REQUESTS:
        raise UnknownOperation(f"unknown operation {op[:40]!r}; one of {', '.join(REQUESTS)}")
    if method != "POST":
        raise MethodNotAllowed(f"{op} takes POST, not {method[:16]}")
    return Operation(op)


def parse_request(method: str, target: str, body: bytes) -> Request:
    """The :class:`Request` that ``METHOD TARGET`` with ``body`` carries.

    Raises a :class:`ProtocolError` subclass for anything else: a path outside the protocol,
    another version, a method other than POST, a body that is too large, not JSON, or has a
    missing, extra or ill-typed field.
    """
    op = _operation(method, target)
    f = _Fields(_load_object(body, op), op)
    site = f.site()
    request: Request
    if op is Operation.JOIN:
        host = f.string("host", required=False, nullable=True)
        request = Join(
            site,
            port=f.integer("port", 1, 65535),
            host=None if host is None else check_ip(host),
            capacity=f.number("capacity", 1000.0, 0.0, MAX_CAPACITY),
            cache_port=f.integer("cache_port", 1, 65535, required=False, nullable=True),
        )
    elif op in (Operation.RENEW, Operation.LEAVE):
        request = REQUESTS[op](site, volunteer_id=f.volunteer_id())  # type: ignore[call-arg]  # RENEW/LEAVE request classes take volunteer_id; the base does not
    elif op is Operation.REPORT:
        request = Report(
            site,
            host=check_ip(f.string("host")),
            port=f.integer("port", 1, 65535, required=False, nullable=True),
            reason=f.string("reason", required=False, default=""),
            token=f.string("token"),
        )
    else:
        request = Lookup(site)
    f.done()
    return request


# --- replies on the wire -----------------------------------------------------------------


def encode_reply(reply: Reply) -> tuple[int, bytes]:
    """HTTP status (200) and JSON body of a successful reply."""
    body = {"protocol": VERSION, **reply.to_json()}
    return 200, json.dumps(body, separators=(",", ":")).encode()


def encode_error(error: ProtocolError) -> tuple[int, bytes]:
    """HTTP status and JSON body of an error reply."""
    obj: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.retry_after is not None:
        obj["retry_after"] = round(error.retry_after, 3)
    return error.status, json.dumps({"protocol": VERSION, "error": obj}).encode()


def parse_reply(op: Operation | str, status: int, body: bytes) -> Reply:
    """The reply to operation ``op``; an error reply is raised as its :class:`ProtocolError`.

    A reply that is itself malformed (a broken or hostile broker) raises
    :class:`MalformedMessage`.
    """
    if op not in REQUESTS:
        raise ValueError(f"unknown operation {op!r}")
    op = Operation(op)
    obj = _load_object(body, f"{op} reply")
    obj.pop("protocol", None)
    if status != 200:
        err = obj.get("error")
        if not isinstance(err, dict):
            raise MalformedMessage(f"{op} reply: HTTP {status} without an error object")
        code = err.get("code")  # a missing or non-str code (even a list) is a ProtocolError
        cls = ERRORS.get(code, ProtocolError) if isinstance(code, str) else ProtocolError
        message = err.get("message")
        retry = err.get("retry_after")
        retry = float(retry) if isinstance(retry, int | float) and not isinstance(retry, bool) \
            else None
        raise cls(message if isinstance(message, str) else f"HTTP {status}", retry_after=retry)
    f = _Fields(obj, f"{op} reply")
    reply: Reply
    if op is Operation.JOIN:
        reply = JoinReply(f.volunteer_id(), f.number("lease_seconds", 0.0, 0.0, 1e9),
                          SiteInfo.from_json(f._get("site", None, True)))
    elif op is Operation.RENEW:
        reply = RenewReply(f.number("lease_seconds", 0.0, 0.0, 1e9),
                           SiteInfo.from_json(f._get("site", None, True)))
    elif op is Operation.LEAVE:
        removed = f._get("removed", None, True)
        if not isinstance(removed, bool):
            raise MalformedMessage("leave reply: 'removed' must be a boolean")
        reply = LeaveReply(removed)
    elif op is Operation.REPORT:
        reply = ReportReply(f.integer("removed", 0, 1 << 31))
    else:
        lists = []
        for key in ("peers", "addresses"):
            value = f._get(key, [], False)
            if not isinstance(value, list):
                raise MalformedMessage(f"lookup reply: {key!r} must be a list of [host, port]")
            lists.append(tuple(_endpoint(p, f"lookup reply {key}") for p in value))
        reply = LookupReply(SiteInfo.from_json(f._get("site", None, True)),
                            f.integer("volunteers", 0, 1 << 31), lists[0], lists[1])
    f.done()
    return reply
