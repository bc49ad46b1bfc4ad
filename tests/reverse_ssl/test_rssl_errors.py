"""One exception root: everything :mod:`reverse_ssl.errors` defines is a :class:`ReverseSSLError`.

The second bases stay what the connection machinery and the callers catch: a refusal is a
:class:`tls12.errors.RemoteProtocolError` carrying its alert, a misused one-time key a
:class:`tls12.errors.LocalProtocolError`.
"""

from __future__ import annotations

import inspect

from reverse_ssl import errors
from reverse_ssl.errors import ReverseSSLError
from tls12.errors import LocalProtocolError, RemoteProtocolError


def _defined_here() -> list[type[BaseException]]:
    return [c for _, c in inspect.getmembers(errors, inspect.isclass)
            if issubclass(c, BaseException) and c.__module__ == errors.__name__]


def test_every_reverse_ssl_exception_derives_from_the_root() -> None:
    classes = _defined_here()
    assert len(classes) == len(errors.__all__)
    assert all(issubclass(c, ReverseSSLError) for c in classes)


def test_refusals_keep_their_tls12_base() -> None:
    assert issubclass(errors.PuzzleReplayed, RemoteProtocolError)
    assert issubclass(errors.BadOfflineSignature, RemoteProtocolError)
    assert issubclass(errors.OneTimeKeyReused, LocalProtocolError)
