"""The SSL-splitting paper's experiments (§6): one function per figure, each returning a DataFrame.

Four modules, one concern each (together they would be well over 600 lines):

* :mod:`.figures` -- Figures 7, 8, 10/11 and 12 measured on the loopback testbed and modelled,
  the held-out agreement of the calibrated cost model (its table of functions is the map);
* :mod:`.calibration` -- the cost model fitted to the measurements and
  :func:`paper_comparison`, every published §6 number next to ours;
* :mod:`.traces` -- the trace statistics of §6.3 (trace table, Figure 9, repetition,
  two-week warmth) and the workloads the figures replay;
* :mod:`.link` -- Figure 12 measured with the real programs on the kernel's links (network
  namespaces, ``tc``; needs root).

Where a figure exists in more than one form, its function here takes ``variant``:

=================== ========================= ===================================================
function            ``variant``               what runs
=================== ========================= ===================================================
:func:`figure7`     ``"measured"`` (default)  real downloads on loopback, the paper's model beside
\\                   ``"model"``               the cost models alone (``measured=False``)
:func:`figure10_11` ``"measured"`` (default)  a trace chunk through the real servers and proxy
\\                   ``"model"``               the cost model's replay alone (``measured=False``)
:func:`figure12`    ``"model"`` (default)     the hand-typed flight model
                                              (:mod:`sslsplit.model_latency`) with measured and
                                              the paper's message sizes
\\                   ``"driver"``              the real objects in simulated time
                                              (:func:`sslsplit.model_driver.figure12_driver`)
\\                   ``"measured"``            the real programs on shaped kernel links
                                              (:func:`.link.figure12_measured`)
=================== ========================= ===================================================

The other keyword arguments go to the function that runs (``figure12(variant="driver",
sizes=[1000])``); without ``variant`` each call is the one it always was, so
``figure7(measured=False)`` still works.  Every other name of :mod:`.figures` is re-exported
here, so ``from sslsplit import experiments as ex; ex.figure8()`` is the notebooks' way in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import pandas as pd

from ..model_driver import figure12_driver
from . import calibration, figures, link, traces
from .figures import (
    EST_CALIBRATED,
    EST_MEASURED,
    EST_SETUP,
    EST_TRACE,
    HELD_OUT_SHAPES,
    PAPER_SIZES,
    SWEEP_SIZES,
    Download,
    PlainStream,
    Testbed,
    agreement,
    calibrated_model,
    figure8,
    held_out_agreement,
    held_out_chunk,
    ip_bytes,
    measured_wire_params,
    paper_comparison,
    replay_chunk,
    single_file_sweep,
    sweep_fit,
)

__all__ = [
    "Variant", "VARIANTS", "figure7", "figure10_11", "figure12",
    "calibration", "figures", "link", "traces",
    "Testbed", "Download", "PlainStream", "SWEEP_SIZES", "PAPER_SIZES", "ip_bytes",
    "single_file_sweep", "figure8", "calibrated_model", "sweep_fit", "measured_wire_params",
    "replay_chunk", "figure12_driver", "agreement", "HELD_OUT_SHAPES", "held_out_chunk",
    "held_out_agreement", "paper_comparison", "EST_MEASURED", "EST_CALIBRATED", "EST_SETUP",
    "EST_TRACE",
]  # fmt: skip

Variant = Literal["model", "driver", "measured"]
#: The variants each figure has (the first is the default).
VARIANTS: dict[str, tuple[str, ...]] = {
    "figure7": ("measured", "model"),
    "figure10_11": ("measured", "model"),
    "figure12": ("model", "driver", "measured"),
}


def _check(figure: str, variant: str) -> str:
    if variant not in VARIANTS[figure]:
        raise ValueError(f"{figure} has the variants {VARIANTS[figure]}, not {variant!r}")
    return variant


def figure7(*args: Any, variant: Variant | None = None, **kwargs: Any) -> pd.DataFrame:
    """Figure 7, bandwidth efficiency vs file size (:func:`.figures.figure7`); ``variant``
    ``"measured"`` or ``"model"`` stands for its ``measured=True`` / ``False``."""
    if variant is not None:
        kwargs["measured"] = _check("figure7", variant) == "measured"
    return figures.figure7(*args, **kwargs)


def figure10_11(*args: Any, variant: Variant | None = None, **kwargs: Any) -> pd.DataFrame:
    """Figures 10/11, bandwidth per byte of file throughput (:func:`.figures.figure10_11`);
    ``variant`` ``"measured"`` or ``"model"`` stands for its ``measured=True`` / ``False``."""
    if variant is not None:
        kwargs["measured"] = _check("figure10_11", variant) == "measured"
    return figures.figure10_11(*args, **kwargs)


def figure12(*args: Any, variant: Variant = "model", **kwargs: Any) -> pd.DataFrame:
    """Figure 12, latency vs file size behind the paper's ADSL line, in one of three forms.

    ``"model"`` (default): :func:`.figures.figure12`, the flight model (its own ``measured=``
    chooses measured or the paper's message sizes); ``"driver"``:
    :func:`sslsplit.model_driver.figure12_driver`; ``"measured"``:
    :func:`.link.figure12_measured` (root, network namespaces).
    """
    runs: dict[str, Callable[..., pd.DataFrame]] = {
        "model": figures.figure12, "driver": figure12_driver, "measured": link.figure12_measured}
    return runs[_check("figure12", variant)](*args, **kwargs)
