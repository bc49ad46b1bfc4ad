"""The guardian program's measured hash: what the WebALPS CA binds into a guardian certificate.

The 4758's outbound authentication lets a coprocessor prove *which* software runs inside it
(``webalps.md`` §3.2.2, Figure 2); the WebALPS CA certifies a guardian key only for a guardian
program it has evaluated.  Here the program is a set of Python source files, and its
measurement is a SHA-256 over them::

    measurement = SHA-256( "webalps-guardian-v1" 0x00 app-name 0x00
                           || for each file, sorted by path:
                              path 0x00 SHA-256(file contents) )

The files (:func:`guardian_sources`) are every module of this repository that the guardian
process loads: its own (:data:`GUARDIAN_FILES`: the process and its entry point, its identity, the
protocol and its codec, the service and its state table, the request router, the application
interface, the certificate helpers, the exception root, this module), the
:mod:`tls12` modules (:data:`TLS12_FILES`: importing the package loads all of these; a test
checks the lists against what a guardian process really imports) and the application's own
files (:data:`webalps_sim.app.APP_SOURCES`): a different application is a different guardian
type with a different measurement.  Not measured: the Python interpreter,
``cryptography``/OpenSSL, the compiled record extension and the cost model (a simulation aid
that a real card does not run) -- a real coprocessor measures its whole image; this measurement
shows the binding, not a trusted boot.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from .app import APP_SOURCES, AppUnavailable

__all__ = ["GUARDIAN_FILES", "TLS12_FILES", "guardian_sources", "measure", "source_root"]

GUARDIAN_FILES: tuple[str, ...] = (
    "webalps_sim/__init__.py",
    "webalps_sim/_wire.py",
    "webalps_sim/aio/__init__.py",
    "webalps_sim/aio/guardian.py",
    "webalps_sim/app.py",
    "webalps_sim/ca.py",
    "webalps_sim/codec.py",
    "webalps_sim/errors.py",
    "webalps_sim/guardian.py",
    "webalps_sim/identity.py",
    "webalps_sim/measure.py",
    "webalps_sim/protocol.py",
    "webalps_sim/router.py",
    "webalps_sim/service.py",
    "webalps_sim/state.py",
)
TLS12_FILES: tuple[str, ...] = tuple(f"tls12/{name}.py" for name in (
    "__init__", "_recordcrypto_py", "aead", "buffer", "certs", "client_connection", "config",
    "connection", "context", "delegate", "delegation", "ecdhe", "errors", "events",
    "handshake_table",
    "keyjson", "keylog", "keys", "keyschedule", "messages", "prf", "record", "recordcrypto",
    "server_connection", "session", "state", "suites", "trace",
))

_DOMAIN = b"webalps-guardian-v1"


def source_root() -> Path:
    """The directory that holds the ``webalps_sim`` and ``tls12`` packages."""
    return Path(__file__).resolve().parent.parent


def guardian_sources(app: str) -> tuple[str, ...]:
    """The files measured for a guardian running application ``app``, sorted."""
    try:
        extra = APP_SOURCES[app]
    except KeyError:
        raise AppUnavailable(f"unknown guardian application {app!r}") from None
    return tuple(sorted({*GUARDIAN_FILES, *TLS12_FILES, *extra}))


def measure(app: str, root: Path | None = None) -> bytes:
    """The 32-byte measurement of the guardian program for ``app`` (see the module docstring)."""
    base = source_root() if root is None else root
    h = hashlib.sha256(_DOMAIN + b"\x00" + app.encode() + b"\x00")
    for name in guardian_sources(app):
        try:
            digest = hashlib.sha256((base / name).read_bytes()).digest()
        except FileNotFoundError:
            raise AppUnavailable(f"guardian source {name} is missing: cannot measure") from None
        h.update(name.encode() + b"\x00" + digest)
    return h.digest()
