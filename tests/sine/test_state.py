"""The verifier's state machine (:mod:`sine.state`): the table the verifier really consults."""

from __future__ import annotations

import itertools

import pytest

from sine.algorithms import SigAlg, SigningKey
from sine.errors import LocalProtocolError, TruncatedDocument
from sine.state import TRANSITIONS, Input, State, transition
from sine.tag import encode_stream, sign_document
from sine.verifier import DocumentVerified, StreamVerifier

NOW = 1_700_000_000.0


@pytest.mark.parametrize(("state", "what"), list(itertools.product(State, Input)))
def test_every_pair_is_in_the_table_or_a_typed_error(state: State, what: Input) -> None:
    if (state, what) in TRANSITIONS:
        assert transition(state, what) is TRANSITIONS[state, what]
    else:
        with pytest.raises(LocalProtocolError):
            transition(state, what)


def test_closed_accepts_nothing() -> None:
    for what in Input:
        with pytest.raises(LocalProtocolError, match="^verifier is closed after an error$"):
            transition(State.CLOSED, what)


def test_a_document_walks_the_table_to_done() -> None:
    key = SigningKey.generate(SigAlg.ED25519)
    signed = sign_document(b"x" * 100, "/a", key, now=NOW, block_size=32)
    body = b"".join(encode_stream(b"x" * 100, signed))
    v = StreamVerifier("/a", NOW, public_key=key.verifying_key())
    assert v.state is State.TAG
    v.receive_data(body[:10])
    assert v.state is State.TAG
    events = v.receive_data(body[10:])
    assert v.state is State.DONE and isinstance(events[-1], DocumentVerified)
    assert v.receive_data(b"") == [] and v.state is State.DONE


def test_an_out_of_order_verdict_closes_the_verifier() -> None:
    """The verifier moves only through the table: a verdict the table does not list in the
    current state (here FA_DONE before the tag) raises and closes."""
    key = SigningKey.generate(SigAlg.ED25519)
    v = StreamVerifier("/a", NOW, public_key=key.verifying_key())
    with pytest.raises(LocalProtocolError, match="FA_DONE not allowed in TAG"):
        v._move(Input.FA_DONE)
    assert v.state is State.CLOSED
    with pytest.raises(LocalProtocolError, match="closed"):
        v.receive_data(b"x")


def test_early_end_is_the_table_closing_on_eof() -> None:
    key = SigningKey.generate(SigAlg.ED25519)
    v = StreamVerifier("/a", NOW, public_key=key.verifying_key())
    with pytest.raises(TruncatedDocument):
        v.receive_data(b"")
    assert v.state is State.CLOSED
