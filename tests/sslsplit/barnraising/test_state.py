"""A volunteer's lease as a table (``sslsplit.barnraising.state``) and the registry that asks it."""

from __future__ import annotations

import itertools

import pytest

from sslsplit.barnraising import protocol as p
from sslsplit.barnraising.errors import BarnraisingError
from sslsplit.barnraising.state import (
    LEASE_TRANSITIONS,
    LeaseEvent,
    LeaseState,
    Operation,
    lease_after,
)
from sslsplit.errors import SslSplitError

from .helpers import SITE, registry

T0 = 1_700_000_000.0


def test_the_lease_table_moves_as_documented() -> None:
    assert lease_after(LeaseState.ABSENT, LeaseEvent.JOIN, "v", "s") is LeaseState.LIVE
    assert lease_after(LeaseState.LIVE, LeaseEvent.RENEW, "v", "s") is LeaseState.LIVE
    for ending in (LeaseEvent.LEAVE, LeaseEvent.REPORT, LeaseEvent.EXPIRE):
        assert lease_after(LeaseState.LIVE, ending, "v", "s") is LeaseState.ABSENT
    assert lease_after(LeaseState.ABSENT, LeaseEvent.LEAVE, "v", "s") is LeaseState.ABSENT


@pytest.mark.parametrize(("state", "event"), [
    pair for pair in itertools.product(LeaseState, LeaseEvent) if pair not in LEASE_TRANSITIONS
])
def test_every_move_off_the_table_is_unknown_volunteer(state: LeaseState, event: LeaseEvent
                                                       ) -> None:
    with pytest.raises(p.UnknownVolunteer, match="no live volunteer v1 in a/site; .* join again"):
        lease_after(state, event, "v1", "a/site")


def test_renewing_an_absent_id_is_refused_with_its_id_and_site() -> None:
    assert (LeaseState.ABSENT, LeaseEvent.RENEW) not in LEASE_TRANSITIONS
    reg = registry(lease_seconds=10.0)
    vid = "0" * 32
    with pytest.raises(p.UnknownVolunteer) as info:
        reg.handle(p.Renew(SITE.name, vid), "127.0.0.2", T0)
    assert str(info.value) == (f"no live volunteer {vid} in {SITE.name}; "
                               "its lease ended or it was removed: join again")
    assert isinstance(info.value, BarnraisingError) and isinstance(info.value, SslSplitError)


def test_lease_events_are_the_operations_that_change_a_lease() -> None:
    assert {e.value for e in LeaseEvent} - {"expire"} == {o.value for o in Operation} - {"lookup"}
    assert p.Operation is Operation
