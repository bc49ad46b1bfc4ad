"""Entry point of ``python -m tls12.demo``: curl downloads from the HTTPS server, every suite.

The demo lives in :mod:`tls12.apps.demo` (an application built on the TLS library, not part of
it); this module only calls :func:`tls12.apps.demo.main`.
"""

from __future__ import annotations

import sys

from .apps.demo import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
