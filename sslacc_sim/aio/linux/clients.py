"""Four unmodified HTTPS clients fetch one file over TLS 1.2, and each response is judged byte for byte.

A fault campaign breaks the server side of a download (a node dies, a connection moves, a
record is lost) and asks what a real client makes of it. One client is not enough: curl,
Python's ``ssl``, GnuTLS and OpenSSL's ``s_client`` read a broken stream differently, and the
worst outcome -- a client that reports success over wrong bytes -- may show in one of them
only. This module starts each of them as it ships (no patches, no project code in the child
process) and judges what it wrote.

Use it in two steps, so that the campaign can break things while the client runs::

    req = Request("curl", "sacc.test", "10.88.0.100", 443, "/f3", cert, tmp / "curl.out")
    proc = start(req, wrap=lambda argv: ["ip", "netns", "exec", "client", *argv])
    ...                                   # kill a node, move a connection
    outcome = finish(proc, req, expected=file_bytes)

The clients and their exact commands (``SUITE`` is :attr:`Request.suite`, ``T`` its timeout):

``curl``
    ``curl -sS --http1.1 --tls-max 1.2 --tlsv1.2 --ciphers SUITE --cacert CERT
    --resolve HOST:PORT:ADDRESS --max-time T https://HOST:PORT/PATH -o OUT``; ``OUT`` is the
    body alone.
``python``
    ``python -I -c SCRIPT ...``: the standard library's ``ssl`` with
    ``create_default_context(cafile=CERT)`` (hostname checked against HOST), TLS 1.2 only,
    ``set_ciphers(SUITE)``, no session tickets, over a socket connected to ADDRESS with
    ``server_hostname=HOST``; it sends the request, reads to the end of the stream and writes
    the raw response to ``OUT``. ``suppress_ragged_eofs=False``: a TCP close without
    close_notify is an error (``SSLEOFError``), as it is for GnuTLS. Any exception: its text on
    stderr, exit status 1. With ``resume`` it fetches twice, the second connection passing the
    first's ``session``; it prints ``reused=1`` or ``reused=0`` (``SSLSocket.session_reused``).
``gnutls``
    ``gnutls-cli --x509cafile CERT --verify-hostname HOST --sni-hostname HOST
    --priority PRIORITY --logfile LOG --port PORT ADDRESS``, the request on standard input.
    ``PRIORITY`` names the one suite (:data:`GNUTLS_PRIORITIES`). With ``--logfile`` its status
    lines go to ``LOG`` and standard output (``OUT``) is exactly the response. gnutls-cli sends
    close_notify as soon as its standard input ends, which can cut a slow response short, so
    :func:`start` writes the request into a pipe it keeps open; gnutls-cli exits when the server
    closes (the request says ``Connection: close``) and :func:`finish` closes the pipe after.
    gnutls-cli writes what it receives one byte per ``write()``: about a second of CPU per MiB
    into a file, so it reads a large file more slowly than the others and the server sees it.
``openssl``
    ``openssl s_client -connect ADDRESS:PORT -servername HOST -verify_hostname HOST
    -CAfile CERT -verify_return_error -tls1_2 -cipher SUITE -no_ticket -quiet -ign_eof``, the
    request on standard input from a file; ``-quiet`` keeps everything but the response off
    standard output (``OUT``). With ``resume`` one ``sh -c`` runs two of them in turn: the
    first with ``-sess_out SESSION`` writing ``OUT.first``, the second with
    ``-sess_in SESSION -msg -msgfile LOG`` writing ``OUT`` (without ``-sess_in`` when the
    server gave no session ID: s_client then saves no session). ``-brief`` and ``-quiet`` print
    nothing about reuse, so the message log decides: the second handshake was a resumption
    when the server sent a ServerHello and no Certificate (an abbreviated handshake).

Files beside ``OUT`` (``OUT`` plus a suffix; :func:`start` deletes stale ones first):
``.stderr`` the client's standard error, ``.stdout`` curl's and Python's standard output,
``.request`` the request bytes, ``.log`` gnutls-cli's log or s_client's message log,
``.first`` the first response of a resumed fetch, ``.session`` s_client's saved session.

How a response is judged (:func:`finish`, :func:`judge_body`, :func:`split_response`).
curl's ``OUT`` is the body; the others' is the raw response, whose head must be
``HTTP/1.1 200`` with a ``Content-Length``. The *client reported success* when it exited 0 and
left no error text on stderr. An :class:`Outcome` is *silently wrong* when the client reported
success and the body looked complete but its bytes are not the expected ones: for curl (we do
not see its Content-Length) any difference; for the raw clients a body of exactly its
Content-Length whose bytes (or length) differ from the file. A body visibly shorter than its
Content-Length is a failure (``short body: got N of M bytes``) but not a silent one: any reader
of the response can see it. Outputs are read from disk only after the client has exited, at
most :data:`MAX_BODY` bytes of body.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

__all__ = [
    "CLIENTS", "GNUTLS_PRIORITIES", "KILL_MARGIN", "MAX_BODY", "RESUMING_CLIENTS", "Outcome",
    "RawResponse", "Request", "client_error_text", "finish", "first_difference", "judge_body",
    "openssl_resumed", "split_response", "start",
]  # fmt: skip

CLIENTS: tuple[str, ...] = ("curl", "python", "gnutls", "openssl")
"""The client programs, by the name a :class:`Request` gives them."""

RESUMING_CLIENTS: frozenset[str] = frozenset({"python", "openssl"})
"""The clients that can fetch twice, resuming the first session by its session ID."""

MAX_BODY = 16 * 1024 * 1024
"""The largest body judged (bytes); a raw response may carry up to 64 KiB of head besides."""

_MAX_HEAD = 64 * 1024

KILL_MARGIN = 5.0
"""Seconds :func:`finish` waits beyond :attr:`Request.timeout` (counted from :func:`start`)
before it kills the client's process group and reports exit status -1."""

_ERROR_CHARS = 300

# gnutls names for (cipher, MAC, key exchange) of each OpenSSL suite name
_GNUTLS_PARTS: dict[str, tuple[str, str, str]] = {
    "AES128-SHA": ("AES-128-CBC", "SHA1", "RSA"),
    "AES256-SHA": ("AES-256-CBC", "SHA1", "RSA"),
    "AES128-SHA256": ("AES-128-CBC", "SHA256", "RSA"),
    "AES128-GCM-SHA256": ("AES-128-GCM", "AEAD", "RSA"),
    "ECDHE-RSA-AES128-SHA": ("AES-128-CBC", "SHA1", "ECDHE-RSA"),
    "ECDHE-RSA-AES128-SHA256": ("AES-128-CBC", "SHA256", "ECDHE-RSA"),
    "ECDHE-RSA-AES128-GCM-SHA256": ("AES-128-GCM", "AEAD", "ECDHE-RSA"),
}

GNUTLS_PRIORITIES: dict[str, str] = {
    name: f"NORMAL:-VERS-ALL:+VERS-TLS1.2:-CIPHER-ALL:+{c}:-MAC-ALL:+{m}:-KX-ALL:+{k}"
    for name, (c, m, k) in _GNUTLS_PARTS.items()
}
"""The gnutls-cli priority string that allows TLS 1.2 with exactly one suite, by OpenSSL name.
A :class:`Request` for ``gnutls`` with a suite not listed here is refused (``ValueError``)."""

_CIPHER_STRING = re.compile(r"[A-Za-z0-9@=:+!._-]+")
_HOST_NAME = re.compile(r"[A-Za-z0-9.-]+")
_PATH = re.compile(r"/[\x21-\x7e]*")


@dataclass(frozen=True)
class Request:
    """One fetch: which client, where to connect, what to verify, where the output goes.

    ``host`` is the name the certificate must carry (and the SNI and ``Host`` header);
    ``address`` the IP actually connected to, so a name needs no DNS. ``suite`` is an OpenSSL
    cipher name; each client is limited to TLS 1.2 and that suite. ``resume`` (``python`` and
    ``openssl`` only) fetches twice, the second connection resuming the first's session by
    its session ID. Bad values fail here with ``ValueError``.
    """

    client: str
    host: str
    address: str
    port: int
    path: str
    cacert: Path
    out: Path
    timeout: float = 60.0
    suite: str = "AES128-SHA"
    resume: bool = False

    def __post_init__(self) -> None:
        if self.client not in CLIENTS:
            raise ValueError(f"unknown client {self.client!r}; expected one of {CLIENTS}")
        if not _HOST_NAME.fullmatch(self.host):
            raise ValueError(f"host must be a DNS name, got {self.host!r}")
        ipaddress.ip_address(self.address)  # raises ValueError for anything but an IP
        if not 0 < self.port < 65536:
            raise ValueError(f"port out of range: {self.port}")
        if not _PATH.fullmatch(self.path):
            raise ValueError(f"path must start with '/' and hold printable ASCII only: {self.path!r}")
        if not self.timeout > 0:
            raise ValueError(f"timeout must be positive, got {self.timeout}")
        if not _CIPHER_STRING.fullmatch(self.suite):
            raise ValueError(f"not an OpenSSL cipher name: {self.suite!r}")
        if self.client == "gnutls" and self.suite not in GNUTLS_PRIORITIES:
            raise ValueError(f"no gnutls priority string for {self.suite!r}; known: {sorted(GNUTLS_PRIORITIES)}")
        if self.resume and self.client not in RESUMING_CLIENTS:
            raise ValueError(f"resume is supported by {sorted(RESUMING_CLIENTS)} only, not {self.client!r}")

    @property
    def request_bytes(self) -> bytes:
        """The HTTP/1.1 GET the raw clients send (curl composes its own)."""
        host = self.host if self.port == 443 else f"{self.host}:{self.port}"
        return f"GET {self.path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode("ascii")

    @property
    def bracketed_address(self) -> str:
        """The address as a URL or ``host:port`` pair writes it (IPv6 in brackets)."""
        ip = ipaddress.ip_address(self.address)
        return f"[{ip}]" if ip.version == 6 else str(ip)


@dataclass(frozen=True)
class Outcome:
    """What one client made of one fetch (see the module docstring for the judgement).

    ``exit`` is the process's exit status (-1 when :func:`finish` killed it on its timeout,
    another negative number when a signal from elsewhere ended it). ``error`` is ``''`` on
    success, else the client's own error text and/or the judgement of the body, joined by
    ``'; '``. ``got`` counts the body bytes received (of the second response when resuming).
    ``resumed`` is ``None`` unless the request asked to resume. ``silently_wrong`` marks the
    worst case: the client reported success over bytes that are not the file.
    """

    client: str
    path: str
    exit: int
    error: str
    body_ok: bool
    got: int
    resumed: bool | None
    silently_wrong: bool

    @property
    def ok(self) -> bool:
        """The client succeeded and every byte is right."""
        return self.body_ok and not self.error and self.exit == 0


# --- judging the bytes (pure functions) ---------------------------------------------------


@dataclass(frozen=True)
class RawResponse:
    """A raw HTTP response split at the end of its head.

    ``problem`` is ``''`` when the head is ``HTTP/1.1 200`` with one valid ``Content-Length``
    (then ``length`` holds it), else why not. ``body`` is what follows the head (``b''`` when
    no head was found).
    """

    problem: str
    length: int | None
    body: bytes


def split_response(raw: bytes) -> RawResponse:
    """Split a raw response into head and body; any bytes give a judgement, never an exception."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep or len(head) > _MAX_HEAD:
        return RawResponse("no HTTP response head", None, b"")
    lines = head.decode("latin-1").split("\r\n")
    status = lines[0].split(" ", 2)
    if len(status) < 2 or status[0] != "HTTP/1.1" or status[1] != "200":
        return RawResponse(f"status line {lines[0][:80]!r}, not HTTP/1.1 200", None, body)
    lengths = [value.strip() for name, colon, value in (line.partition(":") for line in lines[1:])
               if colon and name.strip().lower() == "content-length"]  # fmt: skip
    if len(lengths) != 1 or not lengths[0].isascii() or not lengths[0].isdigit():
        return RawResponse(f"no single valid Content-Length in the head ({lengths[:2]})", None, body)
    return RawResponse("", int(lengths[0]), body)


def first_difference(a: bytes, b: bytes) -> int:
    """Index of the first byte where ``a`` and ``b`` differ (the shorter length if one is a prefix)."""
    n = min(len(a), len(b))
    block = 1 << 16
    start = 0
    while start < n and a[start : start + block] == b[start : start + block]:
        start += block
    for i in range(start, min(start + block, n)):
        if a[i] != b[i]:
            return i
    return n


def judge_body(body: bytes, expected: bytes) -> str:
    """``''`` when ``body`` is exactly ``expected``, else what is wrong with it."""
    if body == expected:
        return ""
    i = first_difference(body, expected)
    if i < min(len(body), len(expected)):
        return f"body differs at byte {i}"
    if len(body) < len(expected):
        return f"short body: got {len(body)} of {len(expected)} bytes"
    return f"long body: got {len(body)} of {len(expected)} bytes"


@dataclass(frozen=True)
class _Verdict:
    problem: str
    got: int
    looked_complete: bool  # nothing visible to the client said the body was incomplete


def _judge_raw(raw: bytes, expected: bytes) -> _Verdict:
    response = split_response(raw)
    got = len(response.body)
    if response.problem or response.length is None:
        return _Verdict(response.problem, got, False)
    if got < response.length:
        return _Verdict(f"short body: got {got} of {response.length} bytes", got, False)
    if got > response.length:
        return _Verdict(f"long body: got {got} bytes, Content-Length {response.length}", got, False)
    return _Verdict(judge_body(response.body, expected), got, True)


def _judge_output(client: str, output: bytes | None, oversized: bool, expected: bytes) -> _Verdict:
    """The verdict on one output file (``None``: the client never wrote it)."""
    if output is None:  # curl writes its file, empty or not, once a response begins
        return _Verdict("no body received" if client == "curl" else "no HTTP response head", 0, False)
    if oversized:
        return _Verdict(f"output larger than {MAX_BODY + _MAX_HEAD} bytes", len(output), False)
    if client == "curl":
        return _Verdict(judge_body(output, expected), len(output), True)
    return _judge_raw(output, expected)


# --- the client's own words ---------------------------------------------------------------

# lines the clients print on success too: OpenSSL's verify trace, gnutls-cli's progress
_NOISE = re.compile(
    r"^(depth=\d+ |verify return:1$|CONNECTED\(|DONE$|Processed \d+ CA|Resolving |Connecting |- )"
)


def client_error_text(stderr: str, log: str = "") -> str:
    """What the client said went wrong, in at most ~300 characters (``''`` if it said nothing).

    The last two meaningful lines of its stderr, joined by ``' | '`` -- without the lines every
    run prints (OpenSSL's ``depth=0 ...`` / ``verify return:1``), plus gnutls-cli's ``***``
    lines from its log; for curl only its own ``curl: (N) ...`` line, not the advice after it.
    A longer text keeps its end, where OpenSSL puts the reason.
    """
    lines = [line.strip() for line in stderr.splitlines()]
    lines = [line for line in lines if line and not _NOISE.match(line)]
    lines += [line.strip() for line in log.splitlines() if line.startswith("***")]
    lines = [line for line in lines if line.startswith("curl: (")] or lines
    text = " | ".join(lines[-2:])
    return text if len(text) <= _ERROR_CHARS else "..." + text[-(_ERROR_CHARS - 3) :]


def openssl_resumed(msg_log: str) -> bool:
    """Whether an ``s_client -msg`` log shows an abbreviated handshake: ServerHello, no Certificate."""
    received = [line for line in msg_log.splitlines() if line.startswith("<<<")]
    hello = any(line.endswith(", ServerHello") for line in received)
    return hello and not any(line.endswith(", Certificate") for line in received)


# --- commands -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Files:
    """The output file and the files beside it (``OUT`` plus a suffix)."""

    out: Path

    def beside(self, suffix: str) -> Path:
        return self.out.with_name(self.out.name + suffix)

    @property
    def all(self) -> tuple[Path, ...]:
        suffixes = (".stderr", ".stdout", ".request", ".log", ".first", ".session")
        return (self.out, *(self.beside(s) for s in suffixes))


_PYTHON_CLIENT = r"""
import socket, ssl, sys
host, address, port, request, cafile, suite, out, timeout, resume = sys.argv[1:10]
ctx = ssl.create_default_context(cafile=cafile)
ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_2
ctx.set_ciphers(suite)
ctx.options |= ssl.OP_NO_TICKET
def fetch(dest, session=None):
    with socket.create_connection((address, int(port)), timeout=float(timeout)) as raw:
        with ctx.wrap_socket(raw, server_hostname=host, session=session,
                             suppress_ragged_eofs=False) as tls:
            tls.sendall(request.encode("ascii"))
            with open(dest, "wb") as f:
                while chunk := tls.recv(65536):
                    f.write(chunk)
            return tls.session, tls.session_reused
try:
    if resume == "1":
        session, _ = fetch(out + ".first")
        _, reused = fetch(out, session)
        print("reused=%d" % reused, flush=True)
    else:
        fetch(out)
except Exception as exc:
    sys.stderr.write("%s: %s\n" % (type(exc).__name__, exc))
    sys.exit(1)
"""


def _curl_argv(req: Request) -> list[str]:
    return [
        "curl", "-sS", "--http1.1", "--tls-max", "1.2", "--tlsv1.2", "--ciphers", req.suite,
        "--cacert", str(req.cacert),
        "--resolve", f"{req.host}:{req.port}:{req.bracketed_address}",
        "--max-time", f"{req.timeout:g}", f"https://{req.host}:{req.port}{req.path}",
        "-o", str(req.out),
    ]  # fmt: skip


def _python_argv(req: Request) -> list[str]:
    return [
        sys.executable, "-I", "-c", _PYTHON_CLIENT, req.host, req.address, str(req.port),
        req.request_bytes.decode("ascii"), str(req.cacert), req.suite, str(req.out),
        repr(req.timeout), "1" if req.resume else "0",
    ]  # fmt: skip


def _gnutls_argv(req: Request, files: _Files) -> list[str]:
    return [
        "gnutls-cli", "--x509cafile", str(req.cacert), "--verify-hostname", req.host,
        "--sni-hostname", req.host, "--priority", GNUTLS_PRIORITIES[req.suite],
        "--logfile", str(files.beside(".log")), "--port", str(req.port), req.address,
    ]  # fmt: skip


def _openssl_argv(req: Request, files: _Files) -> list[str]:
    base = [
        "openssl", "s_client", "-connect", f"{req.bracketed_address}:{req.port}",
        "-servername", req.host, "-verify_hostname", req.host, "-CAfile", str(req.cacert), "-verify_return_error",
        "-tls1_2", "-cipher", req.suite, "-no_ticket", "-quiet", "-ign_eof",
    ]  # fmt: skip
    if not req.resume:
        return base
    session, request = str(files.beside(".session")), shlex.quote(str(files.beside(".request")))
    first = shlex.join([*base, "-sess_out", session])
    second = [*base, "-msg", "-msgfile", str(files.beside(".log"))]
    resuming, fresh = shlex.join([*second, "-sess_in", session]), shlex.join(second)
    first_out = shlex.quote(str(files.beside(".first")))
    # no session file when the server gave no session ID: the second fetch starts afresh
    return ["sh", "-c", f"{first} <{request} >{first_out} || exit $?; "
            f"if [ -s {shlex.quote(session)} ]; then exec {resuming} <{request}; "
            f"else exec {fresh} <{request}; fi"]  # fmt: skip


class _ClientProcess(subprocess.Popen[bytes]):
    """A client's process, leader of its own process group, with the time it started."""

    started: float = 0.0


def start(
    req: Request, wrap: Callable[[list[str]], list[str]] = lambda argv: argv
) -> subprocess.Popen[bytes]:
    """Start the client of ``req``; ``wrap`` prefixes its argv (``["ip", "netns", "exec", NS, *argv]``).

    Stale output files are deleted first. The client runs in a process group of its own, so
    that :func:`finish` can kill it and anything it started. Raises ``FileNotFoundError``
    when the program (or the wrapper) is not installed.
    """
    files = _Files(req.out)
    for path in files.all:
        path.unlink(missing_ok=True)
    files.beside(".request").write_bytes(req.request_bytes)
    argv = {
        "curl": lambda: _curl_argv(req),
        "python": lambda: _python_argv(req),
        "gnutls": lambda: _gnutls_argv(req, files),
        "openssl": lambda: _openssl_argv(req, files),
    }[req.client]()
    raw_out = req.client in ("gnutls", "openssl")  # standard output is the response
    stdout_path = req.out if raw_out else files.beside(".stdout")
    with open(stdout_path, "wb") as stdout, open(files.beside(".stderr"), "wb") as stderr, \
            open(files.beside(".request"), "rb") as request:  # fmt: skip
        stdin: int | BinaryIO = subprocess.PIPE if req.client == "gnutls" else (
            request if req.client == "openssl" else subprocess.DEVNULL)  # fmt: skip
        proc = _ClientProcess(wrap(argv), stdin=stdin, stdout=stdout, stderr=stderr,
                              start_new_session=True)  # fmt: skip
    proc.started = time.monotonic()
    if proc.stdin is not None:  # gnutls-cli: the request, and the pipe stays open
        try:
            proc.stdin.write(req.request_bytes)
            proc.stdin.flush()
        except BrokenPipeError:
            pass  # it has already exited; finish() reports why
    return proc


# --- finishing ----------------------------------------------------------------------------


def _wait(proc: subprocess.Popen[bytes], req: Request) -> tuple[int, bool]:
    """The exit status and whether we killed the client (status -1) for overrunning its timeout."""
    started = proc.started if isinstance(proc, _ClientProcess) else time.monotonic()
    remaining = max(0.0, started + req.timeout + KILL_MARGIN - time.monotonic())
    try:
        return proc.wait(timeout=remaining), False
    except subprocess.TimeoutExpired:
        try:
            if isinstance(proc, _ClientProcess):
                os.killpg(proc.pid, signal.SIGKILL)  # its own group: start_new_session
            else:
                proc.kill()
        except ProcessLookupError:
            pass
        proc.wait()
        return -1, True
    finally:
        if proc.stdin is not None:
            try:
                proc.stdin.close()
            except BrokenPipeError:
                pass


def _read_capped(path: Path, limit: int) -> tuple[bytes | None, bool]:
    """At most ``limit`` bytes of ``path`` (``None`` if it does not exist) and whether there was more."""
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except FileNotFoundError:
        return None, False
    return data[:limit], len(data) > limit


def _read_text(path: Path, tail: int = 1 << 16) -> str:
    """The last ``tail`` bytes of a text file as text (``''`` if it does not exist)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - tail))
            return f.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def _resumed(req: Request, files: _Files) -> bool | None:
    if not req.resume:
        return None
    if req.client == "python":
        return "reused=1" in _read_text(files.beside(".stdout")).split()
    return openssl_resumed(_read_text(files.beside(".log"), tail=1 << 20))


def finish(proc: subprocess.Popen[bytes], req: Request, expected: bytes) -> Outcome:
    """Wait for the client (killing it :data:`KILL_MARGIN` s after its timeout), then judge.

    The output (and, for a resumed fetch, the first response too) must equal ``expected``
    exactly. Raises ``ValueError`` when ``expected`` is larger than :data:`MAX_BODY`.
    """
    if len(expected) > MAX_BODY:
        raise ValueError(f"expected body of {len(expected)} bytes exceeds MAX_BODY ({MAX_BODY})")
    status, killed = _wait(proc, req)
    files = _Files(req.out)
    log = _read_text(files.beside(".log")) if req.client == "gnutls" else ""
    said = client_error_text(_read_text(files.beside(".stderr")), log)
    if killed:
        said = f"killed after {req.timeout + KILL_MARGIN:g} s" + (f": {said}" if said else "")
    elif status != 0 and not said:
        said = f"exit status {status}"
    limit = MAX_BODY if req.client == "curl" else MAX_BODY + _MAX_HEAD
    outputs = [("first response: ", files.beside(".first"))] if req.resume else []
    outputs.append(("", req.out))
    verdicts = [(prefix, _judge_output(req.client, *_read_capped(path, limit), expected))
                for prefix, path in outputs]  # fmt: skip
    problems = [prefix + v.problem for prefix, v in verdicts if v.problem]
    reported_ok = status == 0 and not said
    return Outcome(
        client=req.client,
        path=req.path,
        exit=status,
        error="; ".join([said, *problems] if said else problems),
        body_ok=not problems,
        got=verdicts[-1][1].got,
        resumed=_resumed(req, files),
        silently_wrong=reported_ok and any(v.problem and v.looked_complete for _, v in verdicts),
    )
