"""The arrival history: per-step means, gaps, late readings, persistence and restore."""

from collections.abc import Callable

import pytest

from streamtrain.errors import ConfigError
from streamtrain.scale.arrivals import ArrivalSteps

T0 = 1_700_000_000.0


def test_arrival_steps_keep_complete_steps_and_fill_gaps():
    steps = ArrivalSteps(step_s=10, max_steps=100)
    steps.add(T0 + 1, 4.0)
    steps.add(T0 + 5, 6.0)
    steps.close(T0 + 9)
    assert len(steps) == 0  # the step is not complete yet
    steps.add(T0 + 31, 8.0)  # steps 10-19 and 20-29 had no reading
    steps.close(T0 + 45)
    assert steps.array().tolist() == [5.0, 5.0, 5.0, 8.0]
    assert steps.history_start_s == T0
    steps.add(T0 + 2, 100.0)  # for a step already closed: late, ignored
    assert steps.late == 1
    assert not steps.array().flags.writeable


def test_arrival_steps_are_persisted_and_restored_in_order():
    first = ArrivalSteps(step_s=10, max_steps=100)
    for at, rate in ((T0 + 1, 4.0), (T0 + 11, 6.0), (T0 + 41, 9.0)):
        first.add(at, rate)
    first.close(T0 + 55)
    stored = dict(first.steps_after(None))
    base = int(T0 // 10)
    assert stored == {base: 4.0, base + 1: 6.0, base + 2: 6.0, base + 3: 6.0, base + 4: 9.0}
    assert first.steps_after(base + 3) == [(base + 4, 9.0)]
    assert first.steps_after(base + 4) == []

    # A restarted app: a reading of an old step arrived before the restore.
    second = ArrivalSteps(step_s=10, max_steps=100)
    second.add(T0 + 42, 50.0)
    assert second.restore({base + 4: 9.0, base: 4.0, base + 1: 6.0}) == 3
    assert second.array().tolist() == [4.0, 6.0, 6.0, 6.0, 9.0]  # the gap repeats 6.0
    assert second.last_step == base + 4
    second.close(T0 + 65)  # the stale open step is gone: nothing appended out of order
    assert second.array().tolist() == [4.0, 6.0, 6.0, 6.0, 9.0]
    assert second.restore({base + 2: 1.0, base + 6: float("nan"), base + 7: -1.0}) == 0
    second.add(T0 + 61, 7.0)
    second.close(T0 + 75)
    assert second.array().tolist() == [4.0, 6.0, 6.0, 6.0, 9.0, 9.0, 7.0]

    capped = ArrivalSteps(step_s=10, max_steps=3)
    assert capped.restore({0: 1.0, 10_000_000: 2.0}) == 2  # a huge gap costs no memory
    assert capped.array().tolist() == [1.0, 1.0, 2.0]


def test_only_an_empty_history_is_seeded():
    steps = ArrivalSteps(step_s=10, max_steps=100)
    steps.seed((1.0, 2.0), last_step=41)
    assert steps.last_step == 41 and steps.history_start_s == 400.0
    assert steps.steps_after(40) == [(41, 2.0)]
    with pytest.raises(ConfigError, match="empty"):
        steps.seed((3.0,), last_step=42)
    empty = ArrivalSteps(step_s=10, max_steps=100)
    empty.seed((), last_step=7)  # nothing to seed: still no complete step
    assert empty.last_step is None and len(empty) == 0


def _trailing_cps(rate_at: Callable[[float], float], at_s: float, window_s: float) -> float:
    """What the lag monitor's CPS reads: the mean rate over the last ``window_s``."""
    return sum(rate_at(at_s - window_s + k) for k in range(int(window_s))) / window_s


def test_a_step_is_the_records_that_arrived_in_it_not_the_trailing_cps():
    # Traffic jumps from none to 100/s at T0 + 20. The CPS (a 30-s trailing average)
    # reads a third, then two thirds of it in the next steps; the HWMs' growth reads
    # what arrived.
    def rate_at(t: float) -> float:
        return 100.0 if t >= T0 + 20 else 0.0

    def produced(t: float) -> float:
        return 100.0 * max(0.0, t - (T0 + 20))

    steps = ArrivalSteps(step_s=10, max_steps=100)
    for k in range(0, 60):
        at = T0 + k
        steps.add(at, _trailing_cps(rate_at, at, 30.0), produced(at), 16)
    steps.close(T0 + 60)
    # steps 0-9 and 10-19: nothing (the first has no tick before it: its CPS); from
    # 20-29 on, 100/s, measured between ticks (19-29: 900 records, a tick late)
    assert steps.array().tolist() == pytest.approx([0.0, 0.0, 90.0, 100.0, 100.0, 100.0])
    cps_means = [
        sum(_trailing_cps(rate_at, T0 + s + k, 30.0) for k in range(10)) / 10 for s in (20, 30)
    ]
    assert cps_means == pytest.approx([15.0, 48.333], abs=0.01)  # what the CPS read


def test_the_cps_stands_in_when_the_hwms_cannot_say():
    steps = ArrivalSteps(step_s=10, max_steps=100)
    steps.add(T0 + 9, 5.0, 1_000.0, 16)
    steps.add(T0 + 19, 7.0, 1_100.0, 15)  # one partition's HWM not read: not comparable
    steps.add(T0 + 29, 9.0, 1_050.0, 15)  # the sum fell: not an arrival count
    steps.add(T0 + 39, 11.0, None, 0)  # no HWM read at all
    steps.add(T0 + 49, 13.0, 1_300.0, 15)  # after a tick without HWMs: its CPS again
    steps.add(T0 + 59, 0.0, 1_500.0, 15)  # comparable again: 200 records in 10 s
    steps.close(T0 + 60)
    assert steps.array().tolist() == [5.0, 7.0, 9.0, 11.0, 13.0, 20.0]


def test_restored_steps_read_no_hwms_so_the_next_step_is_its_cps():
    steps = ArrivalSteps(step_s=10, max_steps=100)
    steps.add(T0 + 9, 5.0, 1_000.0, 4)
    steps.close(T0 + 10)
    steps.restore({int(T0 // 10) + 1: 6.0})
    steps.add(T0 + 29, 8.0, 2_000.0, 4)  # 1,000 records since T0 + 9, but a step between
    steps.close(T0 + 30)
    assert steps.array().tolist() == [5.0, 6.0, 8.0]


def test_the_first_step_after_a_seed_reads_the_hwms_from_the_ticks_before_it():
    # The demo seeds the days before its run; the monitor ticks before the run's first
    # step (no traffic yet) are late for the seed, but say where the HWMs stood.
    steps = ArrivalSteps(step_s=10, max_steps=100)
    first = int(T0 // 10)
    steps.seed((5.0, 5.0), last_step=first - 1)
    steps.add(T0 - 3, 0.0, 0.0, 16)  # late: its step is the seed's last
    steps.add(T0 - 1, 0.0, 0.0, 16)
    steps.add(T0 + 9, 10.0, 500.0, 16)  # the CPS trails; 500 records arrived in 10 s
    steps.close(T0 + 10)
    assert steps.array().tolist() == [5.0, 5.0, 50.0]
    assert steps.late == 2
