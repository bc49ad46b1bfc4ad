"""The CPU cost table: measured from the real code; the TLS model charges the right operations."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import fields

import pytest

from netsim.cpu import DEFAULT_COSTS, CostTable, Tls12Cpu, measure_costs
from tls12 import ClientConnection, ServerConnection
from tls12.certs import generate_self_signed
from tls12.config import ClientConfig, ServerConfig
from tls12.suites import CipherSuite

UNIT = CostTable(rsa_private=1.0, rsa_public=10.0, ecdhe_keygen=100.0, ecdhe_derive=1000.0,
                 handshake_message=1e-3, record_fixed=1e-6, record_per_byte=1e-9)


def test_measured_costs_are_positive_and_ordered() -> None:
    m = measure_costs(quick=True)
    assert m.source == "measured"
    for f in fields(CostTable):
        if f.name != "source":
            assert getattr(m, f.name) >= 0.0, f.name
    assert m.rsa_private > 0 and m.hash_per_byte > 0 and m.record_per_byte > 0
    # an RSA-2048 private operation costs far more than a public one (e = 65537)
    assert m.rsa_private > 3 * m.rsa_public
    assert DEFAULT_COSTS.source == "default"
    with pytest.raises(ValueError):
        CostTable(rsa_private=-1.0)


@pytest.mark.parametrize(("suite", "server_ops", "client_ops"), [
    (CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA, {"rsa_private": 1},
     {"rsa_public": 1}),
    (CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256,
     {"rsa_private": 1, "ecdhe_keygen": 1, "ecdhe_derive": 1},
     {"rsa_public": 1, "ecdhe_keygen": 1, "ecdhe_derive": 1}),
], ids=["rsa", "ecdhe"])
def test_tls_model_charges_each_public_key_operation_once(
        suite: CipherSuite, server_ops: dict[str, int], client_ops: dict[str, int]) -> None:
    r = random.Random(3)
    creds = generate_self_signed(key_size=1024)
    client = ClientConnection(ClientConfig(cipher_suites=(suite,), rng=r.randbytes))
    server = ServerConnection(ServerConfig(credentials=creds, cipher_suites=(suite,),
                                           rng=r.randbytes))
    c_cpu, s_cpu = Tls12Cpu(UNIT), Tls12Cpu(UNIT)
    c_ops: list[tuple[str, float]] = []
    s_ops: list[tuple[str, float]] = []
    to_server = client.data_to_send()
    c_ops += c_cpu.charge(b"", to_server)
    for _ in range(4):
        for i in range(0, len(to_server), 7):           # byte-by-byte-ish chunks
            server.receive_data(to_server[i : i + 7])
            s_ops += s_cpu.charge(to_server[i : i + 7], b"")
        to_client = server.data_to_send()
        s_ops += s_cpu.charge(b"", to_client)
        if to_client:                       # b"" would mean end of stream
            client.receive_data(to_client)
        to_server = client.data_to_send()
        c_ops += c_cpu.charge(to_client, to_server)
    assert client.handshake_complete and server.handshake_complete
    client.send_data(b"x" * 1000)
    record = client.data_to_send()
    c_ops += c_cpu.charge(b"", record)
    s_ops += s_cpu.charge(record, b"")
    for ops, expected in ((s_ops, server_ops), (c_ops, client_ops)):
        counts = Counter(name for name, _ in ops)
        for name in ("rsa_private", "rsa_public", "ecdhe_keygen", "ecdhe_derive"):
            assert counts[name] == expected.get(name, 0), name
        # Finished both ways, then the 1000-byte application record: sealed once, opened once
        assert counts["record_open" if ops is s_ops else "record_seal"] == 2
    seal = [s for name, s in c_ops if name == "record_seal"][-1]
    assert seal == pytest.approx(UNIT.record_fixed + (len(record) - 5) * UNIT.record_per_byte)


@pytest.mark.parametrize("suite", [CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA,
                                   CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256],
                         ids=["rsa", "ecdhe"])
def test_bound_model_charges_what_the_connection_reports_as_the_bytes_say(
        suite: CipherSuite) -> None:
    """Bound (what the driver does) the model reads the connection's trace; unbound it reads
    the bytes through tls12.trace.WireTrace.  Both give the same operations, in order."""
    r = random.Random(5)
    creds = generate_self_signed(key_size=1024)
    client = ClientConnection(ClientConfig(cipher_suites=(suite,), rng=r.randbytes))
    server = ServerConnection(ServerConfig(credentials=creds, cipher_suites=(suite,),
                                           rng=r.randbytes))
    bound = {"client": Tls12Cpu(UNIT), "server": Tls12Cpu(UNIT)}
    bound["client"].bind(client)
    bound["server"].bind(server)
    assert client.trace == [] and server.trace == []       # binding turned the traces on
    wire = {"client": Tls12Cpu(UNIT), "server": Tls12Cpu(UNIT)}
    ops: dict[str, list[tuple[str, float]]] = {k: [] for k in ("bound", "wire")}

    def step(side: str, received: bytes, sent: bytes) -> None:
        ops["bound"] += bound[side].charge(received, sent)
        ops["wire"] += wire[side].charge(received, sent)

    to_server = client.data_to_send()                # the ClientHello, built before bind
    step("client", b"", to_server)
    while to_server:
        server.receive_data(to_server)
        to_client = server.data_to_send()
        step("server", to_server, to_client)
        if not to_client:
            break
        client.receive_data(to_client)
        to_server = client.data_to_send()
        step("client", to_client, to_server)
    assert client.handshake_complete and server.handshake_complete
    client.send_data(b"y" * 3000)
    record = client.data_to_send()
    server.receive_data(record)
    step("client", b"", record)
    step("server", record, b"")
    assert ops["bound"] == ops["wire"]
    assert ("record_seal", UNIT.record(len(record) - 5)) in ops["bound"]


def test_cost_table_round_trips_through_plain_values() -> None:
    import json

    again = CostTable.from_dict(json.loads(json.dumps(DEFAULT_COSTS.to_dict())))
    assert again == DEFAULT_COSTS
    with pytest.raises(ValueError, match="unknown"):
        CostTable.from_dict({"rsa_privat": 1.0})
