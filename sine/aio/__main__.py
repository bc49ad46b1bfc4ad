"""Entry point of ``python -m sine.aio run-plan PLAN.json`` (internal worker of the link
experiments); the runner lives in :mod:`sine.aio.runner` and this module only imports its
:func:`~sine.aio.runner.main`."""

from __future__ import annotations

import sys

from sine.aio.runner import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
