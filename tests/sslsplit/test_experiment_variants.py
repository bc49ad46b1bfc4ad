"""``sslsplit.experiments``: one function per figure, the figure's forms chosen by ``variant``."""

from __future__ import annotations

import pandas as pd
import pytest

from sslsplit import experiments as ex
from sslsplit.experiments import figures
from sslsplit.model_driver import figure12_driver


def test_figure7_model_variant_is_the_cost_models_alone() -> None:
    pd.testing.assert_frame_equal(ex.figure7(variant="model"), figures.figure7(measured=False))
    pd.testing.assert_frame_equal(ex.figure7(measured=False), figures.figure7(measured=False))


def test_figure12_model_and_driver_variants_dispatch() -> None:
    sizes = [100, 20_000]
    pd.testing.assert_frame_equal(ex.figure12(variant="model", measured=False, sizes=sizes),
                                  figures.figure12(measured=False, sizes=sizes))
    pd.testing.assert_frame_equal(ex.figure12(measured=False, sizes=sizes),
                                  figures.figure12(measured=False, sizes=sizes))
    pd.testing.assert_frame_equal(ex.figure12(variant="driver", sizes=[1000]),
                                  figure12_driver(sizes=[1000]))


@pytest.mark.parametrize(("figure", "variant"), [
    (ex.figure7, "driver"), (ex.figure10_11, "driver"), (ex.figure12, "paper"),
])
def test_a_variant_the_figure_lacks_is_a_value_error(figure, variant) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="variants"):
        figure(variant=variant)


def test_the_variant_table_names_the_three_forms_of_figure12() -> None:
    assert ex.VARIANTS["figure12"] == ("model", "driver", "measured")
    assert ex.figure12_driver is figure12_driver
