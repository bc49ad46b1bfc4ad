"""The NSS key log: the debugging switch that lets Wireshark decrypt this library's connections.

Every TLS library and Wireshark share one format (NSS's ``SSLKEYLOGFILE``)::

    CLIENT_RANDOM <client random, 64 hex digits> <master secret, 96 hex digits>

one line per connection.  Give a sink -- any ``Callable[[str], None]`` -- to
``ServerConfig(keylog=...)`` or ``ClientConfig(keylog=...)`` and each connection calls it once,
with one whole line and no newline (what OpenSSL's ``SSL_CTX_set_keylog_callback`` passes), as
soon as the master secret is known: after the ClientKeyExchange in a full handshake, and in a
resumption with this connection's client random and the session's master secret -- the line
OpenSSL writes, byte for byte.  It comes before the Finished messages are checked, so a
handshake that fails there can still be decrypted.  A connection that continues an exported
state (:mod:`tls12.state`) writes nothing: its first half did.

**Off by default** (``keylog=None``), and nothing else in :mod:`tls12` ever writes key material.
Whoever reads the log can decrypt every connection in it: it is for debugging on a test
machine, never for a deployment.

Who holds the secrets writes the line.  A server whose sessions are held by a delegate
(:mod:`tls12.delegate`, WebALPS) has no master secret, so ``ServerConnection`` refuses a config
with a key log together with a delegate; :class:`tls12.delegate.LocalDelegate` takes
``keylog=`` instead and writes the same line when it derives or resumes a session's keys.

For files and programs:

* :func:`open_keylog` (:class:`KeyLogFile`) opens the file **at once**: a path that cannot be
  written is a :class:`KeyLogError` when the program starts, not a failure in the middle of a
  handshake.  Each line is appended with one ``os.write`` on a descriptor opened with
  ``O_APPEND`` (mode 0600 when created): nothing is buffered, so nothing needs a flush, and lines
  written by several threads -- or by several processes sharing one ``SSLKEYLOGFILE``, a server
  and curl -- never interleave, without a lock.  If a write fails later (a full disk), the file
  prints one warning on stderr and stops logging: a debugging switch never breaks a connection;
* :func:`keylog_from_env` reads the ``SSLKEYLOGFILE`` environment variable (unset or empty:
  ``None``, and nothing is printed) and :func:`program_keylog` prefers a program's
  ``--keylog FILE`` option to it.  Both print one warning line on stderr when the log is on::

      warning: writing TLS secrets to PATH (SSLKEYLOGFILE); anyone who reads it can decrypt these connections

A sink of the application's own is called inside ``receive_data``; an exception it raises
propagates from there (it is the application's bug, as a failing ``verify_certificate`` is).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TextIO

__all__ = [
    "KeyLog",
    "KeyLogError",
    "KeyLogFile",
    "ENV_VAR",
    "KEYLOG_HELP",
    "keylog_line",
    "open_keylog",
    "keylog_from_env",
    "program_keylog",
]

KeyLog = Callable[[str], None]
"""A key-log sink: receives one complete line, without its newline."""

ENV_VAR = "SSLKEYLOGFILE"
"""The environment variable every TLS library and browser reads for the key log's path."""

KEYLOG_HELP = ("debugging switch: append each connection's TLS secrets to FILE in the NSS key-log "
               f"format (as {ENV_VAR}), so that Wireshark can decrypt them; anyone who reads "
               f"FILE can decrypt these connections (default: ${ENV_VAR} if set, else off)")
"""The help text of a program's ``--keylog FILE`` option."""

_CLIENT_RANDOM_LENGTH = 32
_MASTER_SECRET_LENGTH = 48


class KeyLogError(ValueError):
    """The key log cannot be opened (a missing folder, no permission, a directory)."""


def keylog_line(client_random: bytes, master_secret: bytes) -> str:
    """``CLIENT_RANDOM <hex> <hex>``: the NSS key-log line of one connection (no newline)."""
    if len(client_random) != _CLIENT_RANDOM_LENGTH or len(master_secret) != _MASTER_SECRET_LENGTH:
        raise ValueError(f"a key-log line takes a {_CLIENT_RANDOM_LENGTH}-byte client random and a "
                         f"{_MASTER_SECRET_LENGTH}-byte master secret, got {len(client_random)} "
                         f"and {len(master_secret)} bytes")
    return f"CLIENT_RANDOM {client_random.hex()} {master_secret.hex()}"


def _warn(path: Path, source: str, stderr: TextIO | None) -> None:
    print(f"warning: writing TLS secrets to {path} ({source}); anyone who reads it can decrypt "
          "these connections", file=stderr if stderr is not None else sys.stderr, flush=True)


class KeyLogFile:
    """A key-log sink that appends each line to a file (see the module docstring).

    ``source`` names where the path came from in error messages (``--keylog``,
    ``SSLKEYLOGFILE``).
    """

    def __init__(self, path: str | os.PathLike[str], *, source: str = "key log") -> None:
        self.path = Path(path)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        try:
            self._fd: int | None = os.open(self.path, flags, 0o600)
        except OSError as exc:
            raise KeyLogError(f"{source} {self.path}: cannot open for writing: "
                              f"{exc.strerror or exc}") from None

    def __call__(self, line: str) -> None:
        fd = self._fd
        if fd is None:
            return
        data = (line + "\n").encode("ascii")
        try:
            if os.write(fd, data) != len(data):
                raise OSError("short write")
        except OSError as exc:
            self.close()
            print(f"warning: key log {self.path}: {exc.strerror or exc}; key logging is off",
                  file=sys.stderr, flush=True)

    @property
    def closed(self) -> bool:
        return self._fd is None

    def close(self) -> None:
        """Stop logging and close the file (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> KeyLogFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_keylog(path: str | os.PathLike[str], *, source: str = "key log") -> KeyLogFile:
    """A sink appending to ``path``, opened now (:class:`KeyLogError` if it cannot be)."""
    return KeyLogFile(path, source=source)


def keylog_from_env(environ: Mapping[str, str] | None = None, *,
                    stderr: TextIO | None = None) -> KeyLogFile | None:
    """The key log ``SSLKEYLOGFILE`` names, with its warning on stderr; ``None`` (silently)
    when the variable is unset or empty."""
    env = os.environ if environ is None else environ
    path = env.get(ENV_VAR)
    if not path:
        return None
    sink = open_keylog(path, source=ENV_VAR)
    _warn(sink.path, ENV_VAR, stderr)
    return sink


def program_keylog(path: str | os.PathLike[str] | None, environ: Mapping[str, str] | None = None,
                   *, stderr: TextIO | None = None, option: str = "--keylog") -> KeyLogFile | None:
    """What a program gives its configs: the file of its ``--keylog`` option if given, else
    :func:`keylog_from_env`; the warning line on stderr when either is on."""
    if path is None:
        return keylog_from_env(environ, stderr=stderr)
    sink = open_keylog(path, source=option)
    _warn(sink.path, option, stderr)
    return sink
