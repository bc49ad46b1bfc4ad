"""Suite parameters are enums, compatible with the strings the record layer and callers use."""

from __future__ import annotations

import pytest

from tls12 import ecdhe, server_connection
from tls12.messages import NamedGroup
from tls12.recordcrypto import RecordCipher
from tls12.suites import SUITES, BulkCipher, CipherSuite, KeyExchange, MacAlgorithm


@pytest.mark.parametrize("suite", list(SUITES), ids=lambda s: s.name)
def test_suite_parameters_are_enums_that_still_read_as_strings(suite: CipherSuite) -> None:
    params = SUITES[suite]
    assert isinstance(params.key_exchange, KeyExchange)
    assert isinstance(params.cipher, BulkCipher) and isinstance(params.mac, MacAlgorithm)
    # the IANA name says what the enums say
    assert suite.name.startswith(
        "TLS_ECDHE_RSA_" if params.key_exchange is KeyExchange.ECDHE_RSA else "TLS_RSA_"
    )
    assert params.aead == suite.name.endswith("_GCM_SHA256")
    assert params.mac_length == {"sha1": 20, "sha256": 32, "aead": 0}[params.mac]
    # StrEnum: equal to the value, formatted as the value (callers compare with strings)
    assert params.cipher == params.cipher.value and f"{params.cipher}" == params.cipher.value
    if not params.aead:
        mac_key = bytes(params.mac_length)
        RecordCipher(
            params.cipher, params.mac, bytes(params.key_length), mac_key
        )  # accepted by the C layer


def test_ecdhe_helpers_live_in_their_own_module() -> None:
    assert server_connection.ecdhe_keypair is ecdhe.ecdhe_keypair  # old import path still works
    private, public = ecdhe.ecdhe_keypair(NamedGroup.X25519, bytes(range(32)))
    peer_private, peer_public = ecdhe.ecdhe_keypair(NamedGroup.SECP256R1, bytes(range(32)))
    assert len(public) == 32 and len(peer_public) == 65 and peer_public[0] == 4
    other_private, other_public = ecdhe.ecdhe_keypair(NamedGroup.X25519, bytes(range(1, 33)))
    assert ecdhe.ecdhe_shared_secret(
        NamedGroup.X25519, private, other_public
    ) == ecdhe.ecdhe_shared_secret(NamedGroup.X25519, other_private, public)
