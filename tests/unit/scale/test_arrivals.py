"""The arrival history: per-step means, gaps, late readings, persistence and restore."""

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
