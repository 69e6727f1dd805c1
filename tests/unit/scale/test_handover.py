"""action_costs: the records x seconds an action cost, from produced and trained series."""

import numpy as np
import pytest

from streamtrain.scale.handover import action_costs, cumulative


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
