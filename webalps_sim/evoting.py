"""The e-voting guardian of the WebALPS paper (section 5, Figure 5), as a guardian application.

A voter posts name, password and choice over TLS to the guardian. The host relays the records
but sees neither the password nor the vote: the guardian decrypts the request, and this
application authenticates the voter against a password directory, validates the choice, records
the vote once per voter, and seals the tally before it answers.

Routes (everything else returns ``None``: the guardian hands that request to the host):

=========================  ====================================================================
``GET /vote``              the ballot: an HTML form listing the candidates
``POST /vote``             ``name``, ``password``, ``choice`` (``application/x-www-form-
                           urlencoded``) -> 200 recorded, 400 malformed / unknown choice,
                           401 bad credentials, 403 election closed, 409 already voted
``POST /close``            an election officer (``name``, ``password``) closes the election
``GET /results``           the tally as JSON, **only after the election is closed** (403 before)
=========================  ====================================================================

Why results only after closing: the host sees when each client connects. If it could read the
running tally it would read it before and after each connection and learn who voted for whom,
defeating the point of keeping votes inside the guardian.

State on disk, in the guardian's state directory:

* ``election.json``: ``{"candidates": [...], "officers": [...]}`` (public configuration);
* ``voters.json``: the password directory, ``{name: {"salt", "hash", "n", "r", "p"}}`` with
  salted scrypt hashes (:func:`hash_password`); officers are entries of the same directory;
* ``evoting.sealed`` / ``evoting.counter``: the tally, the set of voters who voted and the
  closed flag, sealed by :class:`~webalps_sim.sealed.SealedStore`. The tally and the voted set
  are stored apart, so the state never links a voter to a choice.

Every vote is on disk (``fsync``) before the 200 goes out; a replayed vote request for a voter
who already voted gets 409 and changes nothing. Create an election with::

    python -m webalps_sim.evoting setup --state-dir DIR --candidates alice,bob \\
        --voters voters.txt --officer officer     # voters.txt: one "name:password" per line
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from .errors import WebAlpsError
from .sealed import SealedStore, write_atomically

__all__ = [
    "ElectionConfigError",
    "EvotingApp",
    "Tally",
    "hash_password",
    "verify_password",
    "write_election",
]

Headers = list[tuple[bytes, bytes]]
Response = tuple[int, Headers, bytes]

#: Largest accepted form body (a ballot is a few dozen bytes).
MAX_BODY = 4096
#: scrypt cost for new directories (RFC 7914 interactive-login parameters: n=2**14, r=8, p=1).
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1


class ElectionConfigError(WebAlpsError):
    """``election.json`` or ``voters.json`` is missing or malformed."""


# -- passwords ---------------------------------------------------------------------------------
def hash_password(password: str, *, salt: bytes | None = None, n: int = SCRYPT_N,
                  r: int = SCRYPT_R, p: int = SCRYPT_P) -> dict[str, str | int]:
    """A directory entry for ``password``: a fresh 16-byte salt and its scrypt hash (hex)."""
    salt = os.urandom(16) if salt is None else salt
    digest = hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, dklen=32)
    return {"salt": salt.hex(), "hash": digest.hex(), "n": n, "r": r, "p": p}


def verify_password(entry: dict[str, str | int], password: str) -> bool:
    """Constant-time comparison of ``password``'s hash with a directory entry's."""
    digest = hashlib.scrypt(
        password.encode(), salt=bytes.fromhex(str(entry["salt"])), n=int(entry["n"]),
        r=int(entry["r"]), p=int(entry["p"]), dklen=32,
    )
    return hmac.compare_digest(digest, bytes.fromhex(str(entry["hash"])))


def write_election(state_dir: str | os.PathLike[str], candidates: list[str],
                   voters: dict[str, str], officers: dict[str, str], *,
                   n: int = SCRYPT_N) -> None:
    """Write ``election.json`` and ``voters.json`` (hashing every password) into ``state_dir``."""
    if len(set(candidates)) != len(candidates) or not candidates:
        raise ValueError("candidates must be a non-empty list without duplicates")
    clash = set(voters) & set(officers)
    if clash:
        raise ValueError(f"officers cannot also be voters: {sorted(clash)}")
    directory = {name: hash_password(pw, n=n) for name, pw in {**voters, **officers}.items()}
    state = Path(state_dir)
    state.mkdir(parents=True, exist_ok=True)
    write_atomically(state / "voters.json", json.dumps(directory, indent=1).encode())
    config = {"candidates": candidates, "officers": sorted(officers)}
    write_atomically(state / "election.json", json.dumps(config, indent=1).encode(), 0o644)


# -- state -------------------------------------------------------------------------------------
@dataclass
class Tally:
    """What the guardian seals: votes per candidate, who has voted (no link), closed or not."""

    counts: dict[str, int]
    voted: set[str] = field(default_factory=set)
    closed: bool = False

    def to_bytes(self) -> bytes:
        return json.dumps({"counts": self.counts, "voted": sorted(self.voted),
                           "closed": self.closed}, sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Tally:
        raw = json.loads(data)
        return cls(dict(raw["counts"]), set(raw["voted"]), bool(raw["closed"]))


def _text(status: int, message: str) -> Response:
    body = (message + "\n").encode()
    return status, [(b"content-type", b"text/plain; charset=utf-8"),
                    (b"cache-control", b"no-store")], body


class EvotingApp:
    """A guardian application (see ``webalps_sim.app``): votes are counted inside the guardian.

    The guardian calls ``handle`` one request at a time (its server serialises every request,
    as the one card does: :class:`webalps_sim.aio.guardian.GuardianServer`), so the tally needs
    no lock of its own; a request is answered only after its effect is sealed on disk.
    """

    def __init__(self, state_dir: str | os.PathLike[str]) -> None:
        self.state_dir = Path(state_dir)
        try:
            config = json.loads((self.state_dir / "election.json").read_text())
            self.directory: dict[str, dict[str, str | int]] = json.loads(
                (self.state_dir / "voters.json").read_text()
            )
            self.candidates: list[str] = list(config["candidates"])
            self.officers: frozenset[str] = frozenset(config.get("officers", ()))
        except FileNotFoundError as exc:
            raise ElectionConfigError(
                f"no election in {self.state_dir}: {Path(exc.filename).name} missing"
                " (create one with: python -m webalps_sim.evoting setup ...)"
            ) from None
        except (ValueError, KeyError, TypeError) as exc:
            raise ElectionConfigError(f"malformed election configuration: {exc}") from None
        # A real entry's parameters, so that an unknown name costs as much as a known one.
        self._dummy = next(iter(self.directory.values()), hash_password("", n=2**10))
        self.store = SealedStore(self.state_dir, "evoting")
        saved = self.store.load()
        self.tally = Tally.from_bytes(saved) if saved else Tally({c: 0 for c in self.candidates})

    # -- the GuardianApp interface --------------------------------------------------------------
    def handle(self, method: str, target: str, headers: Headers, body: bytes) -> Response | None:
        """Answer a request for one of this application's routes, or None for the host's."""
        path = urlsplit(target).path
        routes = {"/vote": ("GET", "POST"), "/close": ("POST",), "/results": ("GET",)}
        if path not in routes:
            return None
        if method not in routes[path]:
            status, hdrs, msg = _text(405, f"{method} not allowed on {path}")
            return status, [*hdrs, (b"allow", ", ".join(routes[path]).encode())], msg
        if method == "GET" and path == "/vote":
            return self._ballot()
        if method == "GET":
            return self._results()
        form = self._form(headers, body)
        if isinstance(form, tuple):
            return form
        return self._vote(form) if path == "/vote" else self._close(form)

    # -- helpers ------------------------------------------------------------------------------
    @staticmethod
    def _form(headers: Headers, body: bytes) -> dict[str, str] | Response:
        ctype = dict((k.lower(), v) for k, v in headers).get(b"content-type", b"")
        if ctype.split(b";")[0].strip().lower() != b"application/x-www-form-urlencoded":
            return _text(415, "send the form as application/x-www-form-urlencoded")
        if len(body) > MAX_BODY:
            return _text(413, f"form larger than {MAX_BODY} bytes")
        try:
            fields = parse_qs(body.decode("utf-8"), keep_blank_values=True,
                              strict_parsing=bool(body), max_num_fields=8)
        except (UnicodeDecodeError, ValueError):
            return _text(400, "malformed form")
        if any(len(values) != 1 for values in fields.values()):
            return _text(400, "each field at most once")
        return {key: values[0] for key, values in fields.items()}

    def _authenticate(self, form: dict[str, str]) -> str | None:
        name, password = form.get("name", ""), form.get("password", "")
        entry = self.directory.get(name)
        ok = verify_password(entry or self._dummy, password)
        return name if ok and entry is not None else None

    def _commit(self, tally: Tally) -> None:
        self.store.save(tally.to_bytes())  # fsync-ed before we answer
        self.tally = tally

    def _vote(self, form: dict[str, str]) -> Response:
        name = self._authenticate(form)
        if name is None or name in self.officers:
            return _text(401, "unknown voter or wrong password")
        if self.tally.closed:
            return _text(403, "the election is closed")
        if name in self.tally.voted:
            return _text(409, "you have already voted; your first vote is the one counted")
        choice = form.get("choice", "")
        if choice not in self.tally.counts:
            return _text(400, f"no such candidate; choose one of {', '.join(self.candidates)}")
        counts = dict(self.tally.counts)
        counts[choice] += 1
        self._commit(Tally(counts, self.tally.voted | {name}, False))
        return _text(200, "your vote is recorded")

    def _close(self, form: dict[str, str]) -> Response:
        name = self._authenticate(form)
        if name is None or name not in self.officers:
            return _text(401, "only an election officer can close the election")
        if not self.tally.closed:
            self._commit(Tally(dict(self.tally.counts), set(self.tally.voted), True))
        return _text(200, "the election is closed")

    def _results(self) -> Response:
        tally = self.tally
        if not tally.closed:
            return _text(403, "results are published when the election closes")
        body = json.dumps({"counts": tally.counts, "voters": len(tally.voted)}, indent=1)
        return 200, [(b"content-type", b"application/json")], body.encode() + b"\n"

    def _ballot(self) -> Response:
        from html import escape

        options = "".join(
            f'<label><input type="radio" name="choice" value="{escape(c)}"> {escape(c)}</label><br>'
            for c in self.candidates
        )
        page = (
            "<!doctype html><title>Ballot</title><form method=post action=/vote>"
            "<input name=name placeholder=name> <input name=password type=password"
            f" placeholder=password><br>{options}<button>Vote</button></form>\n"
        )
        return 200, [(b"content-type", b"text/html; charset=utf-8")], page.encode()


def main(argv: list[str] | None = None) -> int:
    """``python -m webalps_sim.evoting setup``: create an election in a guardian state dir."""
    from testbed.cli import program_name  # here: the guardian imports this module, not testbed

    parser = argparse.ArgumentParser(prog=program_name("webalps_sim.evoting"), description=__doc__
                                     .split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    setup = sub.add_parser("setup", help="write election.json and voters.json")
    setup.add_argument("--state-dir", required=True, type=Path)
    setup.add_argument("--candidates", required=True, help="comma-separated candidate names")
    setup.add_argument("--voters", required=True, type=Path,
                       help="file with one name:password per line (officers included)")
    setup.add_argument("--officer", action="append", default=[],
                       help="a name from --voters who may close the election (repeatable)")
    args = parser.parse_args(argv)
    if args.state_dir.exists() and not args.state_dir.is_dir():
        parser.error(f"--state-dir {args.state_dir}: exists and is not a directory")
    try:
        text = args.voters.read_text(encoding="utf-8")
    except FileNotFoundError:
        parser.error(f"--voters {args.voters}: no such file")
    except IsADirectoryError:
        parser.error(f"--voters {args.voters}: is a directory, expected a file")
    except (OSError, UnicodeDecodeError) as exc:
        parser.error(f"--voters {args.voters}: cannot read: {exc}")
    entries: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            name, sep, password = line.partition(":")
            if not sep or not name:
                parser.error(f"{args.voters}:{number}: expected name:password")
            entries[name] = password
    missing = [o for o in args.officer if o not in entries]
    if missing:
        parser.error(f"officers not in {args.voters}: {', '.join(missing)}")
    officers = {o: entries.pop(o) for o in args.officer}
    try:
        write_election(args.state_dir, args.candidates.split(","), entries, officers)
    except ValueError as exc:  # duplicate candidates, an officer who also votes
        parser.error(str(exc))
    except OSError as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 1
    print(f"election with {len(entries)} voters written to {args.state_dir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
