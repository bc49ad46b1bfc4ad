"""The splicer's transition table (``sslsplit.state``) and the splicer that consults it."""

from __future__ import annotations

import itertools

import pytest

from sslsplit.errors import DataAfterEnd, SplicerMisuse, SplicerStateError, SslSplitError
from sslsplit.splicer import PayloadNeeded, StreamEnded
from sslsplit.state import SERVER_INPUTS, SPLICER_TRANSITIONS, SplicerInput, SplicerState, advance
from tests.sslsplit.test_splicer_sansio import recorded_session, seeded_splicer
from tls12.errors import DecodeError

S, In = SplicerState, SplicerInput


def test_every_state_is_reachable_from_open_and_ended_is_final() -> None:
    seen, frontier = {S.OPEN}, [S.OPEN]
    while frontier:
        state = frontier.pop()
        for (src, _), dst in SPLICER_TRANSITIONS.items():
            if src is state and dst not in seen:
                seen.add(dst)
                frontier.append(dst)
    assert seen == set(SplicerState)
    assert {dst for (src, _), dst in SPLICER_TRANSITIONS.items() if src is S.ENDED} == {S.ENDED}


@pytest.mark.parametrize(("state", "event"), [
    pair for pair in itertools.product(SplicerState, SplicerInput) if pair not in SPLICER_TRANSITIONS
])
def test_every_pair_off_the_table_raises_by_blame(state: SplicerState, event: SplicerInput) -> None:
    expected = DataAfterEnd if event in SERVER_INPUTS else SplicerMisuse
    with pytest.raises(expected) as info:
        advance(state, event)
    assert isinstance(info.value, SplicerStateError | SslSplitError)
    assert (info.value.state, info.value.event) == (state, event)
    assert isinstance(info.value, DecodeError if event in SERVER_INPUTS else ValueError)


def test_data_is_illegal_exactly_once_the_server_stream_ended() -> None:
    closed = {S.CLOSING, S.CLOSING_AWAITING_PAYLOAD, S.ENDED}
    for state in SplicerState:
        if state in closed:
            with pytest.raises(DataAfterEnd):
                advance(state, In.DATA)
        else:
            assert advance(state, In.DATA) is state


def test_the_splicer_walks_the_table() -> None:
    """A recorded session: OPEN, a digest stub, the payload, the end of stream."""
    chain, stream = recorded_session()
    s = seeded_splicer()
    assert s.state is S.OPEN
    with pytest.raises(SplicerMisuse):
        s.resume(b"")                                # nothing pending: state unchanged
    assert s.state is S.OPEN
    (needed,) = s.receive_data(stream)
    assert isinstance(needed, PayloadNeeded) and s.state is S.AWAITING_PAYLOAD
    assert s.receive_data(b"") == [] and s.state is S.CLOSING_AWAITING_PAYLOAD
    with pytest.raises(DataAfterEnd):
        s.receive_data(b"late")
    events = s.supply(needed.stub, chain.store.get(needed.stub.ident))  # type: ignore[arg-type]
    while not isinstance(events[-1], StreamEnded):
        assert s.state is S.CLOSING_AWAITING_PAYLOAD
        stub = events[-1].stub                       # type: ignore[attr-defined]
        events = s.supply(stub, chain.store.get(stub.ident))  # type: ignore[arg-type]
    assert s.state is S.ENDED
    assert s.receive_data(b"") == [] and s.state is S.ENDED


def test_a_misplaced_supply_names_the_state_and_the_input() -> None:
    """``supply()`` with a stub that is not the pending one: the error carries where the splicer
    was and what it was given (the state stays), like every refusal of the table."""
    chain, stream = recorded_session()
    s = seeded_splicer()
    (needed,) = s.receive_data(stream)
    other = seeded_splicer()
    (foreign,) = other.receive_data(stream)
    with pytest.raises(SplicerMisuse) as refused:
        s.supply(foreign.stub, chain.store.get(foreign.stub.ident))  # type: ignore[arg-type]
    assert (refused.value.state, refused.value.event) == (S.AWAITING_PAYLOAD, In.PAYLOAD)
    assert s.state is S.AWAITING_PAYLOAD
    with pytest.raises(SplicerMisuse) as early:
        seeded_splicer().supply(needed.stub, b"")
    assert (early.value.state, early.value.event) == (S.OPEN, In.PAYLOAD)
