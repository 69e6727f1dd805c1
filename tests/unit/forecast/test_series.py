import numpy as np
import pytest

from streamtrain.errors import ConfigError, TraceError
from streamtrain.forecast.series import SHAPES, make_trace
from streamtrain.units import DAY_S


@pytest.mark.parametrize("shape", sorted(set(SHAPES) - {"kale"}))
def test_shapes_are_seeded_with_gaps_and_daily_rhythm(shape):
    trace = make_trace(shape, 14, seed=5)
    again = make_trace(shape, 14, seed=5)
    other = make_trace(shape, 14, seed=6)
    assert len(trace) == 14 * DAY_S // 60
    np.testing.assert_array_equal(trace.records_per_s, again.records_per_s)
    assert not np.array_equal(
        np.nan_to_num(trace.records_per_s), np.nan_to_num(other.records_per_s)
    )
    assert trace.gaps > 0
    observed = trace.records_per_s[~np.isnan(trace.records_per_s)]
    assert np.all(observed >= 0)
    hourly = np.nanmean(trace.records_per_s.reshape(14, 24, 60), axis=(0, 2))
    assert hourly.max() > 3 * hourly.min()  # a strong daily rhythm


def test_retail_and_callcentre_are_zero_at_night():
    for shape in ("retail", "callcentre"):
        days = make_trace(shape, 7, seed=1).records_per_s.reshape(7, 1440)
        night = days[:, 1 * 60 : 5 * 60]
        assert np.nansum(night) == 0, shape


def test_callcentre_is_closed_on_weekends_and_starts_on_a_tuesday():
    trace = make_trace("callcentre", 7, seed=2)
    days = trace.records_per_s.reshape(7, 1440)
    # Starts on a Tuesday: days 4 and 5 are Saturday and Sunday.
    assert np.nansum(days[4]) == 0 and np.nansum(days[5]) == 0
    assert np.nansum(days[0]) > 0


def test_make_trace_errors():
    with pytest.raises(ConfigError, match="known: kale, web"):
        make_trace("nope")
    with pytest.raises(TraceError):
        make_trace("web", 0)
