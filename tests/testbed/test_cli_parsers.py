"""The argument types every program shares (:mod:`testbed.cli`), fuzzed with Hypothesis: ports,
``HOST:PORT`` and what a PEM file holds. The programs' one-line errors are swept in
``tests/test_cli_errors.py``.
"""

from __future__ import annotations

import argparse

from hypothesis import given
from hypothesis import strategies as st

from testbed import cli


@given(st.integers(0, 65535))
def test_port_accepts_every_port(n: int) -> None:
    assert cli.port(str(n)) == n


@given(st.text(max_size=12))
def test_port_rejects_everything_else_with_a_message(text: str) -> None:
    try:
        value = cli.port(text)
    except argparse.ArgumentTypeError as exc:
        assert repr(text) in str(exc)
    else:
        assert 0 <= value <= 65535 and int(text) == value


@given(st.sampled_from(["127.0.0.1", "localhost", "::1", "example.org", ""]),
       st.integers(1, 65535))
def test_hostport_round_trips(host: str, port: int) -> None:
    text = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    assert cli.hostport(text) == (host or "127.0.0.1", port)


@given(st.text(max_size=24))
def test_hostport_never_crashes(text: str) -> None:
    try:
        host, port = cli.hostport(text)
    except argparse.ArgumentTypeError as exc:
        assert "HOST:PORT" in str(exc)
    else:
        assert host and 1 <= port <= 65535 and int(text.rpartition(":")[2]) == port


@given(st.binary(max_size=200))
def test_pem_kind_never_crashes(data: bytes) -> None:
    assert isinstance(cli.pem_kind(data), str)


def test_pem_kind_names_the_block() -> None:
    assert cli.pem_kind(b"-----BEGIN PUBLIC KEY-----\n") == "a public key"
    assert cli.pem_kind(b"x\n-----BEGIN RSA PRIVATE KEY-----\n") == "a private key"
    assert cli.pem_kind(b"-----BEGIN ENCRYPTED PRIVATE KEY-----\n") == "an encrypted private key"
    assert cli.pem_kind(b"-----BEGIN CERTIFICATE-----\n") == "a certificate"
    assert cli.pem_kind(b"-----BEGIN X509 CRL-----\n") == "a PEM 'X509 CRL' block"
    assert cli.pem_kind(b"hello") == "no PEM data"
