"""The guardian channel's state table (:mod:`webalps_sim.state`) and the service that obeys it.

Every ``(state, input)`` pair either moves along :data:`TRANSITIONS` or raises
:class:`ChannelStateError` naming the pair; the guardian service consults the table for every
request, so a request out of order (application data before the client's Finished was
verified) is refused with ``UNSUPPORTED`` and leaves the channel where it was.
"""

from __future__ import annotations

import os

import pytest
from cryptography.hazmat.primitives.asymmetric import padding
from hypothesis import given
from hypothesis import strategies as st

from tls12.testing import credentials
from webalps_sim import protocol as p
from webalps_sim.errors import WebAlpsError
from webalps_sim.service import GuardianFailure, GuardianService
from webalps_sim.state import (
    TRANSITIONS,
    ChannelInput,
    ChannelState,
    ChannelStateError,
    HandleTable,
    advance,
    describe,
)

SUITE = 0x002F  # TLS_RSA_WITH_AES_128_CBC_SHA: RSA key exchange, CBC records
APPLICATION_DATA, HANDSHAKE = 23, 22


@given(st.sampled_from(list(ChannelState)), st.sampled_from(list(ChannelInput)))
def test_every_pair_moves_along_the_table_or_raises(state: ChannelState,
                                                    channel_input: ChannelInput) -> None:
    if (state, channel_input) in TRANSITIONS:
        assert advance(state, channel_input) is TRANSITIONS[state, channel_input]
        return
    with pytest.raises(ChannelStateError) as info:
        advance(state, channel_input)
    assert (info.value.state, info.value.input) == (state, channel_input)
    assert isinstance(info.value, WebAlpsError)


def test_application_data_waits_for_the_clients_finished() -> None:
    keyed = advance(ChannelState.NEW, ChannelInput.DERIVE)
    assert keyed is ChannelState.KEYED
    for refused in (ChannelInput.SEAL_APPLICATION, ChannelInput.OPEN_APPLICATION):
        with pytest.raises(ChannelStateError, match="before the client's Finished was verified"):
            advance(keyed, refused)
    assert advance(keyed, ChannelInput.OPEN_HANDSHAKE) is ChannelState.KEYED
    established = advance(keyed, ChannelInput.CLIENT_FINISHED_VERIFIED)
    assert established is ChannelState.ESTABLISHED
    assert advance(established, ChannelInput.OPEN_APPLICATION) is ChannelState.ESTABLISHED
    assert advance(ChannelState.NEW, ChannelInput.DERIVE_FINISH) is ChannelState.ESTABLISHED


def test_released_is_final_and_only_creation_leaves_new() -> None:
    assert not [i for i in ChannelInput if (ChannelState.RELEASED, i) in TRANSITIONS]
    leaving_new = {i for i in ChannelInput if (ChannelState.NEW, i) in TRANSITIONS}
    assert leaving_new == {ChannelInput.DERIVE, ChannelInput.DERIVE_FINISH, ChannelInput.RESUME,
                           ChannelInput.RELEASE}
    assert "**keyed**" in describe()


# -- the service consults the table ----------------------------------------------------------


def _keyed_service() -> tuple[GuardianService, int]:
    """A guardian service with one channel after ``DERIVE`` (keys, no Finished yet)."""
    creds = credentials()
    service = GuardianService(creds.private_key, tuple(creds.chain_der), b"m" * 32)
    premaster = b"\x03\x03" + os.urandom(46)
    encrypted = creds.private_key.public_key().encrypt(premaster, padding.PKCS1v15())
    reply = service.handle(p.Derive(encrypted, 0x0303, b"c" * 32, b"s" * 32, SUITE, None))
    assert isinstance(reply, p.HandleReply)
    return service, reply.handle_id


def test_the_service_refuses_application_data_on_a_keyed_channel() -> None:
    service, handle = _keyed_service()
    channel = service._channels[handle]
    assert channel.state is ChannelState.KEYED
    early = p.Seal(handle, SUITE, False, ((APPLICATION_DATA, 0x0303, 0, b"too early"),))
    with pytest.raises(GuardianFailure, match="before the client's Finished") as info:
        service.handle(early)
    assert info.value.code == p.ErrorCode.UNSUPPORTED
    assert channel.state is ChannelState.KEYED and channel.write_seq == 0  # nothing advanced
    # a handshake record in the same state is the table's to allow: sealed, seq advances
    sealed = service.handle(p.Seal(handle, SUITE, False, ((HANDSHAKE, 0x0303, 0, b"\x14"),)))
    assert isinstance(sealed, p.Sealed) and sealed.records and channel.write_seq == 1
    # a wrong client Finished keeps the channel keyed
    wrong = service.handle(p.CheckFinished(handle, SUITE, True, b"t" * 32, b"v" * 12))
    assert wrong == p.BoolReply(False) and channel.state is ChannelState.KEYED
    # RELEASE moves to released: the handle is gone
    assert service.handle(p.Release(handle)) == p.Ok()
    assert handle not in service._channels


def test_the_error_frame_carries_the_tables_refusal() -> None:
    service, handle = _keyed_service()
    request = p.Open(handle, SUITE, True, ((0, APPLICATION_DATA, 0x0303, b"x" * 48),))
    reply = service.handle_frame(p.Frame(p.FrameType.OPEN, 9, request.to_payload()))
    (frame,) = p.FrameDecoder().feed(reply)
    message = p.decode_message(frame)
    assert isinstance(message, p.Error) and message.code == p.ErrorCode.UNSUPPORTED
    assert "before the client's Finished was verified" in message.message
    assert service._channels[handle].read_seq == 0


# -- the handle table: bounded, owned, idle expiry (issue 21) ----------------------------------

LIMIT, LIFETIME = 4, 10.0

#: one step of a table's life: ("add", owner) | ("use", index) | ("pop", index)
#: | ("tick", seconds) | ("drop", owner)
_steps = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(0, 2)),
    st.tuples(st.just("use"), st.integers(0, 30)),
    st.tuples(st.just("pop"), st.integers(0, 30)),
    st.tuples(st.just("tick"), st.sampled_from([1.0, 4.0, 9.5, 10.0, 25.0])),
    st.tuples(st.just("drop"), st.integers(0, 2)),
), max_size=60)


@given(_steps)
def test_the_handle_table_is_an_lru_with_owners_and_idle_expiry(steps: list[tuple[str, float]]
                                                                ) -> None:
    """Against a plain model: a list of ``[id, owner, last_used]`` in order of last use."""
    now = [0.0]
    dropped: list[int] = []
    table: HandleTable[str] = HandleTable(LIMIT, LIFETIME, lambda: now[0], dropped.append)
    model: list[list[float]] = []
    expected_drops: list[int] = []

    def expire() -> None:
        for entry in [e for e in model if e[2] <= now[0] - LIFETIME]:
            model.remove(entry)
            expected_drops.append(int(entry[0]))

    for number, (op, arg) in enumerate(steps):
        if op == "add":
            expire()
            table.add(number, f"v{number}", arg)
            model.append([number, arg, now[0]])
            while len(model) > LIMIT:
                expected_drops.append(int(model.pop(0)[0]))
        elif op in ("use", "pop"):
            handle = int(arg)
            if op == "use":
                expire()
                entry = next((e for e in model if e[0] == handle), None)
                assert table.use(handle) == (None if entry is None else f"v{handle}")
                if entry is not None:
                    model.remove(entry)
                    model.append([handle, entry[1], now[0]])
            else:
                entry = next((e for e in model if e[0] == handle), None)
                assert table.pop(handle) == (None if entry is None else f"v{handle}")
                if entry is not None:
                    model.remove(entry)
        elif op == "tick":
            now[0] += arg
        else:
            mine = [e for e in model if e[1] == arg]
            assert table.drop_owner(arg) == len(mine)
            for entry in mine:
                model.remove(entry)
            expected_drops += sorted(int(e[0]) for e in mine)
            dropped[len(dropped) - len(mine):] = sorted(dropped[len(dropped) - len(mine):])
        assert list(table) == [int(e[0]) for e in model]
        assert dropped == expected_drops
        for owner in range(3):
            assert table.owned_by(owner) == sum(1 for e in model if e[1] == owner)
    assert table == {int(e[0]): f"v{int(e[0])}" for e in model}  # a read-only Mapping


def test_the_handle_table_refuses_a_useless_bound() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        HandleTable(0, 1.0, lambda: 0.0, lambda _: None)
    with pytest.raises(ValueError, match="positive"):
        HandleTable(1, 0.0, lambda: 0.0, lambda _: None)
