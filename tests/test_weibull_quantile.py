"""The error bands' quantile is numpy's 'weibull' quantile to the bit (written out so a command's start-up does
not import numpy.ma through np.quantile)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricsim.validation.error_model import weibull_quantiles

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, width=64)


@settings(max_examples=300, deadline=None)
@given(st.lists(finite, min_size=1, max_size=60), st.lists(st.floats(0.0, 1.0), min_size=1, max_size=4))
def test_equals_numpy_to_the_bit(values: list[float], quantiles: list[float]) -> None:
    ours = weibull_quantiles(np.array(values), quantiles)
    theirs = np.quantile(np.array(values), quantiles, method="weibull")
    assert ours == [float(v) for v in theirs]


def test_the_band_levels_and_nan() -> None:
    values = np.linspace(-0.3, 0.4, 37) ** 3
    assert weibull_quantiles(values, (0.1, 0.9)) == [float(v) for v in np.quantile(values, (0.1, 0.9),
                                                                                        method="weibull")]
    assert np.isnan(weibull_quantiles(np.array([1.0, np.nan]), (0.5,))[0])
