"""Entry point of ``python -m testbed.demo``: curl downloads from the HTTPS server, every suite.

The demo lives in :mod:`testbed.apps.demo` (an application built on the TLS library, not part of
it); this module only calls :func:`testbed.apps.demo.main`.
"""

from __future__ import annotations

import sys

from testbed.apps.demo import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
