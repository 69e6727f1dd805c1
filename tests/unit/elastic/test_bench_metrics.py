"""benchmarks/elastic.py's metrics: rolled-back steps, pauses and lost records read from
the workers' files, on hand-made histories."""

import pytest

from benchmarks.elastic_metrics import (
    Incarnation,
    Round,
    lost_ids,
    pause_s,
    rolled_back,
    rolled_back_acked,
)


def inc(worker, pid, rounds, commits=(), acks=()):
    return Incarnation(
        worker,
        pid,
        [Round(t, step, ok, 2, 1, 2, mark) for t, step, ok, mark in rounds],
        list(commits),
        list(acks),
    )


A = (1.0, 1.0)


def test_a_restart_from_an_older_checkpoint_rolls_back_what_came_after_it():
    before = inc("w1", 1, [(1.0, 1, True, A), (2.0, 2, True, A), (3.0, 3, True, A)],
                 commits=[(1.0, 1, [0]), (2.0, 2, [1]), (3.0, 3, [2])],
                 acks=[(2.5, 1, [0])])  # fmt: skip
    after = inc("w1", 2, [(10.0, 2, True, (9.0, 9.0)), (11.0, 3, True, (8.0, 8.0))],
                commits=[(10.0, 2, [1]), (11.0, 3, [2])])  # fmt: skip
    gone = rolled_back([before, after])
    assert gone == {(1, 2), (1, 3)}  # resumed from step 1: steps 2 and 3 of pid 1 are gone
    assert rolled_back_acked([before, after], gone) == 0
    assert lost_ids(3, [before, after], gone) == 0  # retrained after the restart
    assert lost_ids(3, [before], rolled_back([before])) == 0


def test_an_acknowledged_step_that_was_rolled_back_is_counted():
    before = inc("w1", 1, [(1.0, 1, True, A), (2.0, 2, True, A)], acks=[(2.1, 2, [5, 6])])
    after = inc("w2", 2, [(10.0, 2, True, (7.0, 7.0))])
    assert rolled_back_acked([before, after], rolled_back([before, after])) == 2


def test_overlapping_workers_of_one_quorum_roll_nothing_back():
    w1 = inc("w1", 1, [(1.0, 1, True, A), (2.0, 2, True, A), (3.0, 3, True, A)])
    w3 = inc("w3", 3, [(2.9, 3, True, A)])  # a joiner logs the same step a bit earlier
    assert rolled_back([w1, w3]) == set()


def test_two_quorums_apart_lose_the_older_weights_of_a_step():
    w1 = inc("w1", 1, [(1.0, 5, True, (1.0, 1.0))], commits=[(1.0, 5, [10])])
    w2 = inc("w2", 2, [(1.2, 5, True, (2.0, 2.0))], commits=[(1.2, 5, [11])])
    gone = rolled_back([w1, w2])
    assert gone == {(1, 5)}
    assert lost_ids(12, [w1, w2], gone) == 11  # id 10 was only in the lost weights


def test_a_pause_spans_the_last_step_before_the_action_and_a_worker_that_never_steps():
    w1 = inc("w1", 1, [(t, i, True, A) for i, t in enumerate([1.0, 1.1, 1.2, 3.0, 3.1])])
    assert pause_s([w1], {"w1"}, 1.15, 3.1) == pytest.approx(1.8)
    assert pause_s([w1], {"w1"}, 3.05, 10.0) == pytest.approx(6.9)  # none since 3.1
    assert pause_s([w1], {"w9"}, 2.0, 5.0) == pytest.approx(3.0)  # never stepped: all of it
    failed = inc("w2", 2, [(1.0, 1, True, A), (2.0, 1, False, A), (4.0, 2, True, A)])
    assert pause_s([failed], {"w2"}, 1.5, 4.0) == pytest.approx(3.0)  # a failed round is no step
