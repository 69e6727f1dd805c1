"""action_costs: the records x seconds an action cost, from produced and trained series."""

import numpy as np
import pytest

from streamtrain.scale.handover import (
    action_costs,
    action_delays,
    cumulative,
    median_delay,
    record_delays,
)


def steady(rate, start, end, step=0.1, stop=None):
    """Events of ``rate`` records/s; none while ``stop=(from, to)``, caught up at ``to``."""
    times, counts = [], []
    owed = 0.0
    for t in np.arange(start, end, step):
        if stop is not None and stop[0] <= t < stop[1]:
            owed += rate * step
            continue
        times.append(t)
        counts.append(rate * step + owed)
        owed = 0.0
    return cumulative(times, counts)


def test_an_action_that_stops_nothing_costs_nothing():
    produced = steady(100, 0, 30)
    trained = steady(100, 0.05, 30)
    [cost] = action_costs(produced, trained, [10.0], window_s=10)
    assert cost.lost_record_s == pytest.approx(0, abs=1)
    assert cost.pause_s == pytest.approx(0, abs=0.1)
    assert cost.records_per_s_before == pytest.approx(100, rel=0.05)


def test_a_full_stop_costs_rate_times_pause_squared_over_two_and_its_pause():
    produced = steady(100, 0, 30)
    trained = steady(100, 0.0, 30, stop=(10.0, 13.0))  # stopped 3 s, then caught up
    [cost] = action_costs(produced, trained, [10.0], window_s=10)
    assert cost.lost_record_s == pytest.approx(100 * 3**2 / 2, rel=0.1)
    assert cost.pause_s == pytest.approx(3, rel=0.1)
    assert cost.records_per_s_after == pytest.approx(100, rel=0.1)


def test_each_action_is_measured_until_the_next():
    produced = steady(100, 0, 40)
    trained = steady(100, 0.0, 40, stop=(20.0, 22.0))
    first, second = action_costs(produced, trained, [10.0, 20.0], window_s=15)
    assert first.window_s == pytest.approx(10)
    assert first.lost_record_s == pytest.approx(0, abs=1)
    assert second.pause_s == pytest.approx(2, rel=0.1)


def test_a_higher_steady_backlog_after_the_action_is_not_charged_to_it():
    produced = steady(100, 0, 40)
    # before: trained 0.1 s behind; after 10 s: 1 s behind for good (fewer workers)
    late = cumulative([t + (0.1 if t < 10 else 1.0) for t in np.arange(0, 40, 0.1)], [10] * 400)
    [cost] = action_costs(produced, late, [10.0], window_s=15)
    assert cost.lost_record_s < 100  # only the step's edge, not 90 records x 15 s


# -- per record: action_delays ---------------------------------------------------------


def per_record(rate, end, delay_of):
    """Records produced at ``rate`` from 0 to ``end`` (one batch each 0.01 s); each is
    trained ``delay_of(t)`` after it was produced."""
    times = np.arange(0, end, 0.01)
    counts = np.full(times.size, int(rate * 0.01))
    produced_at = np.repeat(times, counts)
    ids = np.arange(produced_at.size)
    trained = produced_at + np.array([delay_of(t) for t in produced_at])
    return (times, counts), ids, trained


def test_record_delays_take_each_records_first_training():
    produced = ([0.0, 1.0], [2, 1])  # ids 0, 1 at 0 s; id 2 at 1 s
    ids = np.array([1, 0, 1, 2])
    at = np.array([0.5, 0.2, 0.3, 1.4])
    produced_at, delay = record_delays(produced, ids, at)
    assert produced_at.tolist() == [0.0, 0.0, 1.0]
    assert delay == pytest.approx([0.2, 0.3, 0.4])
    _, missing = record_delays(([0.0], [2]), np.array([0]), np.array([0.1]))
    assert np.isnan(missing[1])


def test_without_an_action_nothing_is_lost():
    produced, ids, at = per_record(100, 30, lambda t: 0.2)
    produced_at, delay = record_delays(produced, ids, at)
    [cost] = action_delays(produced_at, delay, at, [10.0], window_s=10)
    # steps finish every 0.01 s: only the floor of such a gap, 100 * 0.01² / 2
    assert cost.lost_record_s == pytest.approx(cost.stop_record_s)
    assert cost.lost_record_s < 0.01
    assert cost.reference_s == pytest.approx(0.2)
    assert cost.records == pytest.approx(1000, abs=2)


@pytest.mark.parametrize("stop_s", [0.5, 1.2, 3.0])
def test_a_full_stop_never_reads_zero_and_costs_about_rate_times_its_square_over_two(stop_s):
    # trained 0.1 s after production, but nothing trains in [10, 10 + stop): records
    # produced then are trained when it ends
    def delay_of(t):
        return max(0.1, 10 + stop_s - t) if 10 <= t < 10 + stop_s else 0.1

    produced, ids, at = per_record(100, 30, delay_of)
    produced_at, delay = record_delays(produced, ids, at)
    [cost] = action_delays(produced_at, delay, at, [10.0], window_s=10)
    expected = 100 * (stop_s - 0.1) ** 2 / 2
    assert cost.lost_record_s > 0
    assert cost.lost_record_s == pytest.approx(expected, rel=0.1)
    assert cost.stop_s == pytest.approx(stop_s - 0.1, abs=0.02)  # trained 0.1 s late until it


def test_a_stop_followed_by_a_higher_steady_delay_is_charged():
    """The old backlog baseline took the higher steady level after the action and read
    0 for a 1.2-s full stop followed by a slower size; per record it cannot."""

    def delay_of(t):
        if 10 <= t < 11.2:
            return 11.2 - t + 0.1
        return 0.1 if t < 10 else 0.8  # the smaller size queues 0.7 s more

    produced, ids, at = per_record(100, 30, delay_of)
    produced_at, delay = record_delays(produced, ids, at)
    [cost] = action_delays(produced_at, delay, at, [10.0], window_s=10)
    assert cost.stop_s == pytest.approx(1.2, abs=0.02)
    assert cost.lost_record_s >= 100 * 1.1**2 / 2


def test_records_never_trained_count_until_the_windows_end():
    produced, ids, at = per_record(100, 20, lambda t: 0.1)
    keep = ~((ids >= 1000) & (ids < 1100))  # records of 10-11 s never trained
    produced_at, delay = record_delays(produced, ids[keep], at[keep])
    [cost] = action_delays(produced_at, delay, at[keep], [10.0], window_s=5)
    assert cost.lost_record_s == pytest.approx(100 * (4.5 - 0.1), rel=0.05)


def test_a_reference_measured_at_rest_is_used_for_every_action():
    """A job still behind from an earlier action does not lower the next one's bar."""
    produced, ids, at = per_record(100, 30, lambda t: 0.1 if t < 10 else 1.1)
    produced_at, delay = record_delays(produced, ids, at)
    [own] = action_delays(produced_at, delay, at, [15.0], window_s=5)
    [rest] = action_delays(produced_at, delay, at, [15.0], window_s=5, reference_s=0.1)
    assert own.lost_record_s == pytest.approx(own.stop_record_s)  # no stop: its floor
    assert own.lost_record_s < 0.01
    assert rest.lost_record_s == pytest.approx(500 * 1.0, rel=0.01)
    assert median_delay(produced_at, delay, 0, 10) == pytest.approx(0.1)


@pytest.mark.parametrize("stop_s", [0.5, 1.0, 2.0])
def test_a_full_stop_shorter_than_the_delay_at_rest_still_costs_its_floor(stop_s):
    """Records wait 3 s at rest; nothing trains in [12, 12 + stop): the records it holds
    back were produced before the action at 10 s, so no record of the window waits
    beyond 3 s, yet the job stopped: the loss is the stop weighted by the arrival rate."""

    def delay_of(t):
        done = t + 3.0
        return 12 + stop_s - t if 12 <= done < 12 + stop_s else 3.0

    produced, ids, at = per_record(100, 40, delay_of)
    produced_at, delay = record_delays(produced, ids, at)
    [cost] = action_delays(produced_at, delay, at, [10.0], window_s=10, reference_s=3.0)
    assert cost.stop_s == pytest.approx(stop_s, abs=0.02)
    assert cost.stop_record_s == pytest.approx(100 * stop_s**2 / 2, rel=0.05)
    assert cost.lost_record_s >= cost.stop_record_s > 0
