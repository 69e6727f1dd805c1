import io
from datetime import UTC, datetime

import numpy as np
import pytest

from streamtrain.errors import TraceError
from streamtrain.forecast.trace import (
    SYNTH_MONDAY_S,
    Trace,
    ar1_noise,
    load_trace,
    parse_timestamp_s,
    synth_trace,
    write_trace,
)
from streamtrain.units import DAY_S


def test_parse_timestamp_accepts_epoch_and_iso():
    assert parse_timestamp_s("60") == 60.0
    assert parse_timestamp_s("1970-01-01T00:01:00Z") == 60.0
    assert parse_timestamp_s("1970-01-01T00:01:00") == 60.0  # naive is UTC
    assert parse_timestamp_s("1970-01-01T01:01:00+01:00") == 60.0
    with pytest.raises(TraceError, match="neither epoch"):
        parse_timestamp_s("yesterday")


def test_load_puts_rows_on_a_grid_with_gaps_unsorted_and_averaged(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(
        "timestamp,records_per_s,extra\n"
        "180,30,x\n"
        "0,10,x\n"
        "1970-01-01T00:01:00Z,20,x\n"
        "1970-01-01T00:01:30Z,40,x\n"
    )
    trace = load_trace(path)
    assert trace.start_s == 0
    assert trace.step_s == 60
    np.testing.assert_array_equal(trace.records_per_s[[0, 1, 3]], [10, 30, 30])
    assert np.isnan(trace.records_per_s[2])
    assert trace.gaps == 1
    np.testing.assert_array_equal(trace.zero_filled(), [10, 30, 0, 30])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("time,records_per_s\n0,1\n", "'timestamp' column"),
        ("timestamp,records_per_s\n", "no rows"),
        ("timestamp,records_per_s\n0,abc\n", ":2: records_per_s 'abc' is not a number"),
        ("timestamp,records_per_s\n0,-1\n", ">= 0"),
        ("timestamp,records_per_s\nnope,1\n", ":2: timestamp 'nope'"),
        ("timestamp,records_per_s\n0\n", "too few columns"),
    ],
)
def test_malformed_traces_name_the_line(tmp_path, body, message):
    path = tmp_path / "bad.csv"
    path.write_text(body)
    with pytest.raises(TraceError, match=message):
        load_trace(path)


def test_missing_file_is_a_trace_error(tmp_path):
    with pytest.raises(TraceError, match="cannot read trace"):
        load_trace(tmp_path / "absent.csv")


def test_write_then_load_round_trips_and_skips_gaps(tmp_path):
    trace = Trace(600.0, 60, np.array([1.0, np.nan, 3.5]))
    out = io.StringIO()
    write_trace(trace, out)
    assert out.getvalue().splitlines()[0] == "timestamp,records_per_s"
    assert len(out.getvalue().splitlines()) == 3
    path = tmp_path / "rt.csv"
    path.write_text(out.getvalue())
    again = load_trace(path)
    assert again.start_s == 600.0
    np.testing.assert_array_equal(np.isnan(again.records_per_s), [False, True, False])
    assert again.records_per_s[2] == 3.5


def test_synth_has_kale_shape_and_is_seeded():
    trace = synth_trace(14, seed=3)
    assert len(trace) == 14 * DAY_S // 60
    days = trace.records_per_s.reshape(14, -1)
    monday = days[0]
    hourly = monday.reshape(24, 60).mean(axis=1)
    assert 20_000 < hourly[5] < 50_000  # early-morning trough near 34k
    assert 200_000 < hourly[21] < 330_000  # evening peak near 260k
    assert int(np.argmin(hourly)) in (4, 5, 6)
    # Weekends are higher for longer: more traffic over the day than a working day.
    assert days[5].mean() > 1.1 * days[0].mean()
    np.testing.assert_array_equal(trace.records_per_s, synth_trace(14, seed=3).records_per_s)
    assert not np.array_equal(trace.records_per_s, synth_trace(14, seed=4).records_per_s)
    assert np.all(trace.records_per_s >= 0)


def test_ar1_noise_has_the_asked_spread_and_correlation():
    noise = ar1_noise(np.random.default_rng(0), 200_000, 0.1, 0.8)
    again = ar1_noise(np.random.default_rng(0), 200_000, 0.1, 0.8)
    np.testing.assert_array_equal(noise, again)
    assert noise.std() == pytest.approx(0.1, rel=0.03)
    assert np.corrcoef(noise[:-1], noise[1:])[0, 1] == pytest.approx(0.8, abs=0.01)
    assert ar1_noise(np.random.default_rng(0), 0, 0.1, 0.8).shape == (0,)


def test_synthetic_traces_start_on_a_monday_at_midnight():
    start = datetime.fromtimestamp(SYNTH_MONDAY_S, tz=UTC)
    assert start.weekday() == 0 and (start.hour, start.minute) == (0, 0)
    assert synth_trace(1).start_s == SYNTH_MONDAY_S
