"""One exception root: every exception class the ``sine`` package defines derives from
:class:`sine.errors.SineError` (secondary bases such as ``ValueError`` stay for callers)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import sine
from sine.errors import SineError


def _sine_modules() -> list[str]:
    return [m.name for m in pkgutil.walk_packages(sine.__path__, "sine.")
            if not m.name.endswith("__main__")]


def test_every_sine_exception_derives_from_sine_error() -> None:
    found = []
    for name in _sine_modules():
        module = importlib.import_module(name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, BaseException) and cls.__module__ == name:
                found.append(cls)
                assert issubclass(cls, SineError), f"{name}.{cls.__name__} is not a SineError"
    names = {c.__name__ for c in found}
    assert {"CacheStatusError", "FetchFailed", "HttpError", "TagFormatError"} <= names
