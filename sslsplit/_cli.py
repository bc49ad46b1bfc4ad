"""Small helpers shared by the command-line programs."""

from __future__ import annotations

import argparse

__all__ = ["hostport"]


def hostport(text: str) -> tuple[str, int]:
    """Parse ``HOST:PORT`` (``:PORT`` means 127.0.0.1) for argparse."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host or "127.0.0.1", int(port)
