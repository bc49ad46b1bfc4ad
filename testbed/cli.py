"""Command-line plumbing shared by the testbed's programs: argument types and one-line errors.

Every program of the testbed (``python -m testbed.https_server``, ``sine.fetch``,
``sslsplit.proxy``, ``reverse_ssl.client``, ...) reports bad input the way argparse does: one
line on stderr, ``PROG: error: WHAT WAS WRONG``, and exit status 2; a failure at run time (a
refused connection, a port already in use) is reported the same way with exit status 1.  A
user never sees a traceback.  This module holds what makes that uniform:

* argparse ``type=`` functions that reject bad values with a message naming the value:
  :func:`port`, :func:`hostport`, :func:`positive_int`, :func:`positive_float`, ... ;
* :func:`read_file_arg` and :func:`load_pem_arg`, which read a file named by an option and
  say what is wrong with it (missing, a folder, a private key where a public key belongs,
  garbage between the PEM armour lines);
* :func:`add_keylog_option` and :func:`keylog_arg`: every program built on :mod:`tls12` takes
  ``--keylog FILE`` and reads ``SSLKEYLOGFILE`` (:mod:`tls12.keylog`) the same way;
* :func:`program_name`, the name usage lines and errors give the program: the console script's
  (``sine-sign``) when started as one, else ``python -m MODULE``;
* :func:`run_main`, which parses the arguments, runs the program's body and turns
  :class:`CLIError` and :class:`OSError` into that one line.

Nothing here does network I/O: the module only formats errors and reads files named on the
command line, so protocol packages may import it without pulling in sockets or event loops.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import re
import ssl
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tls12.certs import Credentials
from tls12.keylog import KEYLOG_HELP, KeyLogError, KeyLogFile, program_keylog

__all__ = [
    "CLIError",
    "UsageError",
    "port",
    "remote_port",
    "hostport",
    "rsa_bits",
    "positive_int",
    "non_negative_int",
    "positive_float",
    "non_negative_float",
    "existing_directory",
    "directory",
    "output_file",
    "pem_kind",
    "read_file_arg",
    "load_pem_arg",
    "load_credentials_arg",
    "add_keylog_option",
    "keylog_arg",
    "describe_os_error",
    "connect_error",
    "program_name",
    "run_main",
]

T = TypeVar("T")

DISTRIBUTION = "websec-testbed"
"""The installed distribution whose console scripts (``[project.scripts]``) :func:`program_name`
recognises."""

TRACEBACK_ENV = "TESTBED_TRACEBACK"
"""Set this environment variable to ``1`` to see the traceback of an unexpected error."""


class CLIError(Exception):
    """A failure to report as one line; :attr:`status` is the exit status (1: at run time)."""

    status = 1


class UsageError(CLIError):
    """The command line itself is wrong (a bad value, a file of the wrong kind): status 2."""

    status = 2


# -- argparse types ---------------------------------------------------------------------------


def _integer(text: str, what: str) -> int:
    try:
        return int(text.strip(), 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None


def port(text: str) -> int:
    """A TCP port, ``0`` to ``65535`` (``0`` asks the system for any free port)."""
    what = "a port number 0-65535"
    value = _integer(text, what)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def remote_port(text: str) -> int:
    """A port to connect to, ``1`` to ``65535``."""
    what = "a port number 1-65535"
    value = _integer(text, what)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def rsa_bits(text: str) -> int:
    """An RSA modulus size for a key to generate: 1024 to 16384 bits (what OpenSSL makes)."""
    value = _integer(text, "a key size in bits")
    if not 1024 <= value <= 16384:
        raise argparse.ArgumentTypeError(f"expected 1024 to 16384 bits, got {text!r}")
    return value


def hostport(text: str) -> tuple[str, int]:
    """``HOST:PORT`` with a port from 1 to 65535; ``:PORT`` means 127.0.0.1 and an IPv6
    address goes in brackets (``[::1]:443``)."""
    host, sep, digits = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        host = ""  # an unbracketed IPv6 address is ambiguous
        sep = ""
    if not sep or not digits.isascii() or not digits.isdigit() or not 0 < int(digits) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT (port 1-65535), got {text!r}")
    return host or "127.0.0.1", int(digits)


def positive_int(text: str) -> int:
    """An integer greater than zero."""
    value = _integer(text, "an integer > 0")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected an integer > 0, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """An integer, zero or more."""
    value = _integer(text, "an integer >= 0")
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def _real(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number greater than zero."""
    value = _real(text, "a number > 0")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number, zero or more."""
    value = _real(text, "a number >= 0")
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def existing_directory(text: str) -> Path:
    """A folder that exists (a document root, say)."""
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is not a directory")
    return path


def directory(text: str) -> Path:
    """A folder to write into: it may be missing (the program creates it) but must not be a
    file."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} exists and is not a directory")
    return path


def output_file(text: str) -> Path:
    """A file to write later: not a folder, and its folder exists.  Checked when the
    arguments are parsed, so a long run does not fail at its very end."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a directory, expected a file name")
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: folder {path.parent} does not exist")
    return path


# -- files named on the command line ------------------------------------------------------------

_PEM_BEGIN = re.compile(rb"-----BEGIN ([A-Z0-9 ]{1,64})-----")
_PEM_KINDS = {
    "PUBLIC KEY": "a public key",
    "RSA PUBLIC KEY": "a public key",
    "PRIVATE KEY": "a private key",
    "RSA PRIVATE KEY": "a private key",
    "EC PRIVATE KEY": "a private key",
    "ENCRYPTED PRIVATE KEY": "an encrypted private key",
    "CERTIFICATE": "a certificate",
    "TRUSTED CERTIFICATE": "a certificate",
}


def pem_kind(data: bytes) -> str:
    """What the first PEM block of ``data`` holds, for messages: ``"a public key"``,
    ``"a private key"``, ``"a certificate"``, ``"a PEM 'X509 CRL' block"`` or ``"no PEM data"``."""
    match = _PEM_BEGIN.search(data)
    if match is None:
        return "no PEM data"
    label = match.group(1).decode("ascii")
    return _PEM_KINDS.get(label, f"a PEM {label!r} block")


def read_file_arg(option: str, path: Path | str) -> bytes:
    """The bytes of the file that ``option`` names, or a :class:`UsageError` saying why not."""
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{option} {path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{option} {path}: is a directory, expected a file") from None
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot read: {describe_os_error(exc)}") from None


def load_pem_arg(option: str, path: Path | str, expected: str, loader: Callable[[bytes], T]) -> T:
    """Read ``path`` and parse it with ``loader`` (e.g. ``load_pem_public_key``).

    ``expected`` is ``"public key"``, ``"private key"`` or ``"certificate"``.  A file holding
    another kind of PEM block is refused with both kinds named (``--key k.pem: expected a PEM
    public key, got a private key``); a block of the right kind that does not parse is
    "malformed".  Encrypted private keys are refused: the programs take no passphrase.
    """
    data = read_file_arg(option, path)
    kind = pem_kind(data)
    if kind != f"a {expected}":
        raise UsageError(f"{option} {path}: expected a PEM {expected}, got {kind}")
    try:
        return loader(data)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise UsageError(f"{option} {path}: malformed {expected} ({exc})") from None


def load_credentials_arg(cert: Path | str, key: Path | str, cert_option: str = "--cert",
                         key_option: str = "--key") -> Credentials:
    """A server's certificate chain and RSA private key, each checked with a message naming
    its option: a missing file, the wrong kind of PEM, a key that is not RSA (the RSA and
    ECDHE_RSA suites need one) or that does not belong to the certificate."""
    chain = load_pem_arg(cert_option, cert, "certificate", x509.load_pem_x509_certificates)
    private = load_pem_arg(key_option, key, "private key",
                           lambda pem: serialization.load_pem_private_key(pem, password=None))
    if not isinstance(private, rsa.RSAPrivateKey):
        kind = type(private).__name__.removeprefix("_").removesuffix("PrivateKey")
        raise UsageError(f"{key_option} {key}: expected an RSA private key, got a {kind} key")
    if chain[0].public_key() != private.public_key():
        raise UsageError(f"{key_option} {key} does not match the certificate in {cert_option} {cert}")
    return Credentials(tuple(chain), private)


def add_keylog_option(parser: argparse.ArgumentParser, extra_help: str = "") -> None:
    """``--keylog FILE``, the debugging switch of :mod:`tls12.keylog` (``extra_help`` goes
    first in its help); read it with :func:`keylog_arg`."""
    parser.add_argument("--keylog", type=Path, metavar="FILE", help=extra_help + KEYLOG_HELP)


def keylog_arg(path: Path | None) -> KeyLogFile | None:
    """The key log a program gives its TLS configs: ``--keylog FILE``, else ``SSLKEYLOGFILE``,
    else ``None`` (:func:`tls12.keylog.program_keylog`: a warning on stderr when it is on).  A
    file that cannot be written is a :class:`UsageError` now, not a failure in a handshake."""
    try:
        return program_keylog(path)
    except KeyLogError as exc:
        raise UsageError(str(exc)) from None


# -- errors -------------------------------------------------------------------------------------


def describe_os_error(exc: OSError) -> str:
    """One readable line for an :class:`OSError`, naming the errno's meaning when the message
    does not (asyncio's ``Connect call failed ('127.0.0.1', 9)`` becomes ``... : Connection
    refused``)."""
    text = exc.strerror or str(exc) or type(exc).__name__
    if exc.filename is not None:
        text = f"{exc.filename}: {text}"
    if isinstance(exc, ssl.SSLError):  # its errno is an SSL_ERROR_* code, not an errno
        return str(exc)
    if isinstance(exc.errno, int) and exc.errno > 0:
        meaning = os.strerror(exc.errno)
        if meaning.lower() not in text.lower():
            text = f"{text}: {meaning}"
    elif isinstance(exc, TimeoutError) and "timed out" not in text.lower():
        text = f"{text}: timed out" if text != "TimeoutError" else "timed out"
    return text


def connect_error(where: str, exc: OSError) -> CLIError:
    """``cannot connect to WHERE: REASON`` with the errno's short meaning as the reason
    (``Connection refused``), or the TLS library's message for a failed TLS handshake."""
    if isinstance(exc, ssl.SSLError) or not (isinstance(exc.errno, int) and exc.errno > 0):
        reason = describe_os_error(exc)
    else:
        reason = os.strerror(exc.errno)
    return CLIError(f"cannot connect to {where}: {reason}")


def program_name(module: str) -> str:
    """The ``prog`` of ``module``'s argument parser: how the user started the program.

    Started as a console script of the installed distribution (``sine-sign``, whose entry
    point is in ``module`` or below it), the program is named by the script; otherwise
    (``python -m sine.sign``, or ``main()`` called from Python) it is ``python -m MODULE``.
    Errors then read ``sine-sign: error: ...`` or ``python -m sine.sign: error: ...``.
    """
    script = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    script = script.removesuffix(".exe")  # Windows launchers
    if script and not script.endswith(".py"):  # python -m sets argv[0] to the module's file
        try:
            entry_points = importlib.metadata.distribution(DISTRIBUTION).entry_points
        except importlib.metadata.PackageNotFoundError:  # run from a checkout, not installed
            entry_points = importlib.metadata.EntryPoints()
        for entry in entry_points.select(group="console_scripts", name=script):
            if entry.module == module or entry.module.startswith(module + "."):
                return script
    return f"python -m {module}"


def _fail(parser: argparse.ArgumentParser, status: int, message: str) -> int:
    if status == 2:
        parser.print_usage(sys.stderr)
    print(f"{parser.prog}: error: {message}", file=sys.stderr, flush=True)
    return status


def run_main(
    parser: argparse.ArgumentParser,
    body: Callable[[argparse.Namespace], int],
    argv: list[str] | None = None,
) -> int:
    """Parse ``argv`` and run ``body(args)``; return the exit status.

    :class:`CLIError` becomes its message and status, :class:`OSError` (refused connection,
    port in use, unwritable file) a one-line description and status 1, Ctrl-C status 130.  An
    unexpected exception is a bug: it is still reported as one line (status 1), with the hint
    that ``TESTBED_TRACEBACK=1`` shows the traceback.
    """
    args = parser.parse_args(argv)
    try:
        return body(args)
    except CLIError as exc:
        return _fail(parser, exc.status, str(exc))
    except KeyboardInterrupt:
        return 130
    except OSError as exc:
        return _fail(parser, 1, describe_os_error(exc))
    except Exception as exc:
        if os.environ.get(TRACEBACK_ENV) == "1":
            raise
        return _fail(parser, 1, f"internal error (a bug, please report it): "
                                f"{type(exc).__name__}: {exc}; set {TRACEBACK_ENV}=1 to see where")
