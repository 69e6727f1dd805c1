"""units: the time constants and the seconds/milliseconds/minutes conversions."""

import time

from streamtrain.units import (
    DAY_S,
    HOUR_S,
    MIN_PER_H,
    MINUTE_S,
    MS_PER_S,
    NS_PER_MS,
    WEEK_S,
    ms_to_s,
    now_ms,
    s_to_ms,
)


def test_constants_and_conversions_agree():
    assert (MINUTE_S, MS_PER_S, WEEK_S) == (60, 1_000, 7 * DAY_S)
    assert s_to_ms(1.5) == 1_500.0 and ms_to_s(250) == 0.25
    assert ms_to_s(s_to_ms(12.345)) == 12.345
    assert MIN_PER_H * MINUTE_S == HOUR_S and MIN_PER_H == 60
    assert NS_PER_MS * MS_PER_S == 1_000_000_000


def test_now_ms_is_the_wall_clock_in_whole_milliseconds():
    before = time.time()
    stamp = now_ms()
    after = time.time()
    assert isinstance(stamp, int)
    assert int(before * 1000) <= stamp <= int(after * 1000)
