"""The testbed's pytest suite, one subpackage per package under test.

``tests`` is a package so that helpers are imported by their full path
(``from tests.interop.tls_peers import curl``), the same way from pytest, from a subprocess
started with ``python -m tests.interop.handover_child`` and from an interactive session at
the repository root.  Fixtures used across subpackages live in ``tests/conftest.py``; the
in-memory pipe, credentials and seeded RNGs for protocol tests in :mod:`tls12.testing`.
"""
