"""One exception root: every exception of :mod:`webalps_sim` is a :class:`WebAlpsError`.

The classes keep the standard bases their callers catch: the TLS connection handles
:class:`tls12.delegate.DelegateError` from the remote delegate and turns a ``ValueError`` from
``open`` into ``bad_record_mac``; configuration code catches ``ValueError`` for a bad name.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import webalps_sim
from tls12.delegate import DelegateError
from webalps_sim.aio.coprocessor import make_cost_model
from webalps_sim.aio.loadgen import FetchError
from webalps_sim.aio.remote import GuardianRefused, GuardianUnavailable, RecordRejected
from webalps_sim.app import AppUnavailable
from webalps_sim.ca import CAError
from webalps_sim.codec import ProtocolError
from webalps_sim.costmodel import CostModelError
from webalps_sim.errors import WebAlpsError
from webalps_sim.evoting import ElectionConfigError
from webalps_sim.identity import NotCertified
from webalps_sim.sealed import RollbackError, SealedStateError, TamperedError
from webalps_sim.service import GuardianFailure
from webalps_sim.state import ChannelStateError

ROOTS_BEFORE = (AppUnavailable, CAError, CostModelError, ElectionConfigError, NotCertified,
                FetchError, ProtocolError, GuardianUnavailable, GuardianRefused, RecordRejected,
                SealedStateError, GuardianFailure)


@pytest.mark.parametrize("cls", ROOTS_BEFORE, ids=lambda c: c.__name__)
def test_every_former_root_derives_from_the_package_root(cls: type) -> None:
    assert issubclass(cls, WebAlpsError)


def test_secondary_bases_stay() -> None:
    assert issubclass(GuardianUnavailable, DelegateError)
    assert issubclass(GuardianRefused, DelegateError)
    assert issubclass(RecordRejected, ValueError)
    assert issubclass(CostModelError, ValueError)
    assert issubclass(TamperedError, SealedStateError) and issubclass(RollbackError, SealedStateError)
    assert issubclass(ChannelStateError, WebAlpsError)
    with pytest.raises(ValueError):
        make_cost_model("no-such-card", environ={})


def test_no_other_exception_class_in_the_package() -> None:
    """Every exception class defined in a ``webalps_sim`` module derives from the root."""
    strays = []
    for info in pkgutil.walk_packages(webalps_sim.__path__, "webalps_sim."):
        module = importlib.import_module(info.name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if (obj.__module__ == module.__name__ and issubclass(obj, BaseException)
                    and not issubclass(obj, WebAlpsError)):
                strays.append(f"{module.__name__}.{obj.__name__}")
    assert strays == []
