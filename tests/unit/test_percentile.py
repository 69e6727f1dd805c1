"""Percentiles of a sample: numpy's linear interpolation, nothing for no values."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamtrain.errors import ConfigError
from streamtrain.percentile import percentile, percentiles


def test_linear_interpolation_between_the_nearest_ranks():
    assert percentile([7.0], 99) == 7.0
    assert percentile(list(range(101)), 99) == pytest.approx(99.0)
    assert percentile([1.0, 2.0], 99) == pytest.approx(1.99)
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == pytest.approx(2.5)
    assert percentiles([4.0, 1.0, 3.0, 2.0], (0, 100)) == (1.0, 4.0)


def test_no_values_give_none_or_what_the_caller_asks():
    assert percentile([], 99) is None
    assert percentiles(np.zeros(0), (50, 99)) is None
    assert percentile([], 90, empty=0.0) == 0.0
    assert percentiles([], (50, 99), empty=0.0) == (0.0, 0.0)


@pytest.mark.parametrize("q", [-1.0, 100.5, float("nan"), float("inf")])
def test_a_percentile_outside_0_to_100_is_refused(q):
    with pytest.raises(ConfigError):
        percentile([1.0, 2.0], q)


@given(
    st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=200),
    st.lists(st.floats(0.0, 100.0), min_size=1, max_size=4),
)
def test_matches_numpy_exactly(values, qs):
    got = percentiles(values, qs)
    assert got == tuple(float(x) for x in np.percentile(np.asarray(values), qs))
    assert all(isinstance(x, float) for x in got)
