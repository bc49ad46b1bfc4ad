"""Entry point of ``python -m tls12.https_server``, the static-file HTTPS server.

The server lives in :mod:`tls12.apps` (an application built on the TLS library, not part of
it): the command line in :mod:`tls12.apps.https_cli`, the request handler in
:mod:`tls12.apps.file_handler`, the counters in :mod:`tls12.apps.stats`,
:func:`~tls12.apps.server.start_server` in :mod:`tls12.apps.server` and the thread harness for
tests in :mod:`tls12.apps.harness`.  This module only calls
:func:`tls12.apps.https_cli.main`.
"""

from __future__ import annotations

import sys

from .apps.https_cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
