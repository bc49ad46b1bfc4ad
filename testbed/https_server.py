"""Entry point of ``python -m testbed.https_server``, the static-file HTTPS server.

The server lives in :mod:`testbed.apps` (an application built on the TLS library, not part of
it): the command line in :mod:`testbed.apps.https_cli`, the request handler in
:mod:`testbed.apps.file_handler`, the counters in :mod:`testbed.apps.stats`,
:func:`~testbed.apps.server.start_server` in :mod:`testbed.apps.server` and the thread harness for
tests in :mod:`testbed.apps.harness`.  This module only calls
:func:`testbed.apps.https_cli.main`.
"""

from __future__ import annotations

import sys

from testbed.apps.https_cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
