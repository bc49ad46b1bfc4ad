"""Four unmodified HTTPS clients fetch or upload over TLS 1.2, and each response is judged byte for byte.

A fault campaign breaks the server side of a transfer (a node dies, a connection moves, a
record is lost) and asks what a real client makes of it. One client is not enough: curl,
Python's ``ssl``, GnuTLS and OpenSSL's ``s_client`` read a broken stream differently, and the
worst outcome -- a client that reports success over wrong bytes -- may show in one of them
only. This module starts each of them as it ships (no patches, no project code in the child
process) and judges what it wrote.

Use it in two steps, so that the campaign can break things while the client runs::

    req = Request("curl", "sacc.test", "10.88.0.100", 443, "/f3", cert, tmp / "curl.out")
    proc = start(req, wrap=lambda argv: ["ip", "netns", "exec", "client", *argv])
    ...                                   # kill a node, move a connection
    outcome = finish(proc, req, expected=expected_body(req, file_bytes))

A :class:`Request` is a download (``GET PATH``) or, with ``upload=FILE``, an upload: ``POST
PATH`` with ``Content-Type: application/octet-stream``, ``Content-Length: N`` and FILE's N bytes
(no ``Expect: 100-continue``), answered by a receipt of what arrived (:func:`upload_receipt`).
With ``repeat=R`` the client makes R identical requests on one persistent connection. The raw
clients (python, gnutls, openssl) send ``OUT.request``, written by :func:`start` from
:meth:`Request.request_chunks`: the R requests at once (pipelined), only the last saying
``Connection: close``, so the server closes after its answer and the client reads to the end.
The clients and their exact commands (``SUITE`` is :attr:`Request.suite`, ``T`` its timeout):

``curl``
    ``curl -sS --http1.1 --tls-max 1.2 --tlsv1.2 --ciphers SUITE --cacert CERT
    --resolve HOST:PORT:ADDRESS --max-time T [UP] [-w %{num_connects}\\n] URL -o OUT
    [URL -o OUT.2 ... URL -o OUT.R]``, URL ``https://HOST:PORT/PATH`` once per request, each
    output the body alone; ``UP`` is ``--data-binary @FILE -H "Content-Type:
    application/octet-stream" -H "Expect:"``. curl composes its own requests and reuses the
    connection; ``-w`` (when R > 1) prints how many connections each transfer opened: one in
    all, or the outcome is not ok. ``--max-time`` bounds each transfer, not all R.
``python``
    ``python -I -c SCRIPT ...``: the standard library's ``ssl`` with
    ``create_default_context(cafile=CERT)`` (hostname checked against HOST), TLS 1.2 only,
    ``set_ciphers(SUITE)``, no session tickets, over a socket connected to ADDRESS with
    ``server_hostname=HOST``; it sends ``OUT.request`` (reading it itself), reads to the end of
    the stream and writes the raw responses to ``OUT``. ``suppress_ragged_eofs=False``: a TCP
    close without close_notify is an error (``SSLEOFError``), as it is for GnuTLS. Any
    exception: its text on stderr, exit status 1. With ``resume`` it makes the connection
    twice, the second passing the first's ``session``; it prints ``reused=1`` or ``reused=0``
    (``SSLSocket.session_reused``).
``gnutls``
    ``gnutls-cli --x509cafile CERT --verify-hostname HOST --sni-hostname HOST
    --priority PRIORITY --logfile LOG --port PORT ADDRESS``, the requests on standard input.
    ``PRIORITY`` names the one suite (:data:`GNUTLS_PRIORITIES`). With ``--logfile`` its status
    lines go to ``LOG`` and standard output (``OUT``) is exactly the responses. gnutls-cli
    sends close_notify as soon as its standard input ends, which can cut a slow response
    short, so standard input is a pipe that stays open: a thread started by :func:`start`
    copies ``OUT.request`` into it (an upload does not fit a pipe's buffer), gnutls-cli exits
    when the server closes, and :func:`finish` closes the pipe after. gnutls-cli writes what it
    receives one byte per ``write()``: about a second of CPU per MiB into a file, so it reads a
    large file more slowly than the others and the server sees it.
``openssl``
    ``openssl s_client -connect ADDRESS:PORT -servername HOST -verify_hostname HOST
    -CAfile CERT -verify_return_error -tls1_2 -cipher SUITE -no_ticket -quiet -ign_eof``,
    ``OUT.request`` on standard input; ``-quiet`` keeps everything but the responses off
    standard output (``OUT``). With ``resume`` one ``sh -c`` runs two of them in turn: the
    first with ``-sess_out SESSION`` writing ``OUT.first``, the second with
    ``-sess_in SESSION -msg -msgfile LOG`` writing ``OUT`` (without ``-sess_in`` when the
    server gave no session ID: s_client then saves no session). ``-brief`` and ``-quiet`` print
    nothing about reuse, so the message log decides: the second handshake was a resumption
    when the server sent a ServerHello and no Certificate (an abbreviated handshake).

Files beside ``OUT`` (``OUT`` plus a suffix; :func:`start` deletes stale ones first):
``.stderr`` the client's standard error, ``.stdout`` curl's and Python's standard output,
``.request`` the raw clients' request bytes, ``.log`` gnutls-cli's log or s_client's message
log, ``.first`` the first response of a resumed fetch, ``.session`` s_client's saved session,
``.2`` to ``.R`` curl's later bodies.

How responses are judged (:func:`finish`, :func:`judge_body`, :func:`split_responses`).
``expected`` is the body of every response. curl's outputs are the R bodies; the others'
``OUT`` is the raw stream, split by Content-Length into R responses (:func:`split_responses`),
each of which must be ``HTTP/1.1 200`` with one valid ``Content-Length`` and a body of exactly
that length; a missing response, or bytes after the R-th, are failures. The *client reported
success* when it exited 0 and left no error text on stderr. An :class:`Outcome` is *silently
wrong* when the client reported success and some response looked complete on its own but its
bytes are not the expected ones: for curl (we do not see its Content-Length) any output that
differs; for the raw clients a response whose body is exactly its Content-Length and differs
from ``expected`` in bytes or length. One such response is enough, even if a later one is
visibly broken: a reader of the stream has taken the wrong body before it meets the break. A
body visibly shorter than its Content-Length, or a missing response, is a failure but not a
silent one. Outputs are read from disk only after the client has exited, at most
:data:`MAX_BODY` bytes of body per response.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ._responses import (
    MAX_HEAD,
    RawResponse,
    Verdict,
    first_difference,
    judge_body,
    judge_stream,
    split_response,
    split_responses,
)
from .docroot import receipt

__all__ = [
    "CLIENTS", "GNUTLS_PRIORITIES", "KILL_MARGIN", "MAX_BODY", "MAX_REPEAT", "RESUMING_CLIENTS",
    "Outcome", "RawResponse", "Request", "client_error_text", "expected_body", "finish",
    "first_difference", "judge_body", "openssl_resumed", "split_response", "split_responses",
    "start", "upload_receipt",
]  # fmt: skip

CLIENTS: tuple[str, ...] = ("curl", "python", "gnutls", "openssl")
"""The client programs, by the name a :class:`Request` gives them."""

RESUMING_CLIENTS: frozenset[str] = frozenset({"python", "openssl"})
"""The clients that can fetch twice, resuming the first session by its session ID."""

MAX_BODY = 16 * 1024 * 1024
"""The largest body judged (bytes); a raw response may carry up to 64 KiB of head besides."""

MAX_REPEAT = 16
"""The most requests :attr:`Request.repeat` puts on one connection."""

KILL_MARGIN = 5.0
"""Seconds :func:`finish` waits beyond :attr:`Request.timeout` (counted from :func:`start`)
before it kills the client's process group and reports exit status -1."""

_ERROR_CHARS = 300
_CHUNK = 1 << 16

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
    """One transfer: which client, where to connect, what to verify, what to send, where the output goes.

    ``host`` is the name the certificate must carry (and the SNI and ``Host`` header);
    ``address`` the IP actually connected to, so a name needs no DNS. ``suite`` is an OpenSSL
    cipher name; each client is limited to TLS 1.2 and that suite. ``resume`` (``python`` and
    ``openssl`` only) fetches twice, the second connection resuming the first's session by
    its session ID. ``upload`` POSTs that file's bytes to ``path`` instead of a GET (the file
    is read when :func:`start` runs and must not change until :func:`finish`). ``repeat``
    makes that many identical requests on one connection, 1 to :data:`MAX_REPEAT`; it is not
    combined with ``resume``. Bad values fail here with ``ValueError``.
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
    upload: Path | None = None
    repeat: int = 1

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
        if type(self.repeat) is not int or not 1 <= self.repeat <= MAX_REPEAT:
            raise ValueError(f"repeat must be an int from 1 to {MAX_REPEAT}, got {self.repeat!r}")
        if self.resume and self.repeat > 1:
            raise ValueError("resume and repeat > 1 cannot be combined")

    def request_chunks(self) -> Iterator[bytes]:
        """The bytes the raw clients send, in pieces: :attr:`repeat` requests, pipelined, only
        the last with ``Connection: close``. Reads :attr:`upload` once (``OSError`` if it cannot)."""
        data = b"" if self.upload is None else self.upload.read_bytes()
        host = self.host if self.port == 443 else f"{self.host}:{self.port}"
        head = f"GET {self.path} HTTP/1.1\r\nHost: {host}\r\n"
        if self.upload is not None:
            head = (f"POST {self.path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/octet-stream\r\n"
                    f"Content-Length: {len(data)}\r\n")  # fmt: skip
        for i in range(1, self.repeat + 1):
            yield (head + ("Connection: close\r\n\r\n" if i == self.repeat else "\r\n")).encode("ascii")
            if data:
                yield data

    @property
    def request_bytes(self) -> bytes:
        """All of :meth:`request_chunks` at once (curl composes its own requests)."""
        return b"".join(self.request_chunks())

    @property
    def bracketed_address(self) -> str:
        """The address as a URL or ``host:port`` pair writes it (IPv6 in brackets)."""
        ip = ipaddress.ip_address(self.address)
        return f"[{ip}]" if ip.version == 6 else str(ip)


def upload_receipt(data: bytes) -> bytes:
    """The body the server answers an upload of ``data`` with (``docroot.receipt``: size, CRC-32)."""
    return receipt(len(data), zlib.crc32(data))


def expected_body(req: Request, file_bytes: bytes) -> bytes:
    """What :func:`finish` should expect of every response to ``req``: ``file_bytes`` for a
    download, :func:`upload_receipt` of them for an upload (then they are the uploaded bytes)."""
    return file_bytes if req.upload is None else upload_receipt(file_bytes)


@dataclass(frozen=True)
class Outcome:
    """What one client made of one transfer (see the module docstring for the judgement).

    ``exit`` is the process's exit status (-1 when :func:`finish` killed it on its timeout,
    another negative number when a signal from elsewhere ended it). ``error`` is ``''`` on
    success, else the client's own error text and/or the judgement of the responses, joined
    by ``'; '``. ``got`` counts the body bytes received over all responses of the connection
    (of the second connection when resuming), an upload's receipts included. ``resumed`` is
    ``None`` unless the request asked to resume. ``silently_wrong`` marks the worst case: the
    client reported success over bytes that are not the expected ones.
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

    def bodies(self, count: int) -> list[Path]:
        """curl's outputs: ``OUT``, then ``OUT.2`` to ``OUT.<count>``."""
        return [self.out, *(self.beside(f".{k}") for k in range(2, count + 1))]

    @property
    def all(self) -> tuple[Path, ...]:
        suffixes = (".stderr", ".stdout", ".request", ".log", ".first", ".session")
        return (*self.bodies(MAX_REPEAT), *(self.beside(s) for s in suffixes))


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
            with open(request, "rb") as f:
                while chunk := f.read(65536):
                    tls.sendall(chunk)
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


def _curl_argv(req: Request, files: _Files) -> list[str]:
    argv = [
        "curl", "-sS", "--http1.1", "--tls-max", "1.2", "--tlsv1.2", "--ciphers", req.suite,
        "--cacert", str(req.cacert),
        "--resolve", f"{req.host}:{req.port}:{req.bracketed_address}",
        "--max-time", f"{req.timeout:g}",
    ]  # fmt: skip
    if req.upload is not None:
        argv += ["--data-binary", f"@{req.upload}", "-H", "Content-Type: application/octet-stream", "-H", "Expect:"]
    if req.repeat > 1:
        argv += ["-w", r"%{num_connects}\n"]
    for body in files.bodies(req.repeat):
        argv += [f"https://{req.host}:{req.port}{req.path}", "-o", str(body)]
    return argv


def _python_argv(req: Request, files: _Files) -> list[str]:
    return [
        sys.executable, "-I", "-c", _PYTHON_CLIENT, req.host, req.address, str(req.port),
        str(files.beside(".request")), str(req.cacert), req.suite, str(req.out),
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
    """A client's process, leader of its own process group, with the time it started and the
    thread that feeds its standard input (gnutls-cli)."""

    started: float = 0.0
    feeder: threading.Thread | None = None


def _feed(stdin: BinaryIO, request: Path) -> None:
    """Copy the request file into the client's pipe, and leave the pipe open."""
    try:
        with open(request, "rb") as f:
            while chunk := f.read(_CHUNK):
                view = memoryview(chunk)
                while view:
                    view = view[stdin.write(view) or 0 :]
    except (OSError, ValueError):
        pass  # it has exited (BrokenPipeError) or finish() closed the pipe; finish() reports why


def start(
    req: Request, wrap: Callable[[list[str]], list[str]] = lambda argv: argv
) -> subprocess.Popen[bytes]:
    """Start the client of ``req``; ``wrap`` prefixes its argv (``["ip", "netns", "exec", NS, *argv]``).

    Stale output files are deleted first, and the raw clients' ``OUT.request`` is written. The
    client runs in a process group of its own, so that :func:`finish` can kill it and anything
    it started. Raises ``FileNotFoundError`` when the program (or the wrapper, or the upload) is
    not there.
    """
    files = _Files(req.out)
    for path in files.all:
        path.unlink(missing_ok=True)
    request = files.beside(".request")
    if req.client != "curl":  # the raw clients send this file
        with open(request, "wb") as f:
            f.writelines(req.request_chunks())
    elif req.upload is not None:
        req.upload.stat()  # curl reads it itself; a missing file fails here as for the others
    argv = {
        "curl": lambda: _curl_argv(req, files),
        "python": lambda: _python_argv(req, files),
        "gnutls": lambda: _gnutls_argv(req, files),
        "openssl": lambda: _openssl_argv(req, files),
    }[req.client]()
    raw_out = req.client in ("gnutls", "openssl")  # standard output is the response
    stdout_path = req.out if raw_out else files.beside(".stdout")
    with open(stdout_path, "wb") as stdout, open(files.beside(".stderr"), "wb") as stderr, \
            open(request if req.client == "openssl" else os.devnull, "rb") as stdin_file:  # fmt: skip
        stdin: int | BinaryIO = subprocess.PIPE if req.client == "gnutls" else stdin_file
        proc = _ClientProcess(wrap(argv), stdin=stdin, stdout=stdout, stderr=stderr, bufsize=0,
                              start_new_session=True)  # fmt: skip
    proc.started = time.monotonic()
    if proc.stdin is not None:  # gnutls-cli: the requests, and the pipe stays open
        proc.feeder = threading.Thread(target=_feed, args=(proc.stdin, request), daemon=True)
        proc.feeder.start()
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
        if isinstance(proc, _ClientProcess) and proc.feeder is not None:
            proc.feeder.join(timeout=KILL_MARGIN)  # the pipe's reader is gone: it ends at once
        if proc.stdin is not None:
            try:
                proc.stdin.close()
            except OSError:
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


def _judge_output(client: str, path: Path, limit: int, expected: bytes, count: int) -> list[Verdict]:
    """The verdicts on one output file: a body (curl) or a raw stream of ``count`` responses."""
    output, oversized = _read_capped(path, limit)
    if output is None:  # curl writes its file, empty or not, once a response begins
        return [Verdict("no body received" if client == "curl" else "no HTTP response head", 0, False)]
    if oversized:
        return [Verdict(f"output larger than {limit} bytes", len(output), False)]
    if client == "curl":
        return [Verdict(judge_body(output, expected), len(output), True)]
    return judge_stream(output, expected, count)


def _resumed(req: Request, files: _Files) -> bool | None:
    if not req.resume:
        return None
    if req.client == "python":
        return "reused=1" in _read_text(files.beside(".stdout")).split()
    return openssl_resumed(_read_text(files.beside(".log"), tail=1 << 20))


def _connections(req: Request, files: _Files) -> str:
    """Why curl's repeated requests were not on one connection (``''`` when they were)."""
    if req.client != "curl" or req.repeat == 1:
        return ""
    opened = sum(int(n) for n in _read_text(files.beside(".stdout")).split() if n.isascii() and n.isdigit())
    return "" if opened == 1 else f"curl reported {opened} connections for {req.repeat} requests, not one"


def _outputs(req: Request, files: _Files) -> list[tuple[str, Path]]:
    """The files judged, each with the label its problems carry."""
    if req.client == "curl":
        return [(f"response {k}: " if req.repeat > 1 else "", body) for k, body in enumerate(files.bodies(req.repeat), 1)]
    return [("first response: ", files.beside(".first"))] * req.resume + [("", req.out)]


def finish(proc: subprocess.Popen[bytes], req: Request, expected: bytes) -> Outcome:
    """Wait for the client (killing it :data:`KILL_MARGIN` s after its timeout), then judge.

    Every response (both connections' when resuming, all :attr:`Request.repeat` of them) must
    carry ``expected`` exactly (:func:`expected_body`). Raises ``ValueError`` when
    ``expected`` is larger than :data:`MAX_BODY`.
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
    count, limit = (1, MAX_BODY) if req.client == "curl" else (req.repeat, req.repeat * (MAX_BODY + MAX_HEAD))
    judged = [(label, _judge_output(req.client, path, limit, expected, count)) for label, path in _outputs(req, files)]
    verdicts = [v for _, vs in judged for v in vs]
    problems = [label + v.problem for label, vs in judged for v in vs if v.problem]
    reported_ok = status == 0 and not said
    return Outcome(
        client=req.client,
        path=req.path,
        exit=status,
        error="; ".join(text for text in [said, _connections(req, files), *problems] if text),
        body_ok=not problems,
        got=sum(v.got for _, vs in judged[req.resume :] for v in vs),
        resumed=_resumed(req, files),
        silently_wrong=reported_ok and any(v.problem and v.looked_complete for v in verdicts),
    )
