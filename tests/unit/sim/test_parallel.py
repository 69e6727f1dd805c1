"""Seeds spread over processes: the same results in order, the workers' priority."""

import os
from concurrent.futures import Future

import pytest

from streamtrain.errors import ConfigError
from streamtrain.sim.parallel import BACKGROUND_NICE, map_seeds, nice_beside


def _seed_and_niceness(offset: int, seed: int) -> tuple[int, int]:
    return seed + offset, os.nice(0) if hasattr(os, "nice") else 0


def test_results_come_back_in_seed_order_whatever_the_processes():
    here = map_seeds(_seed_and_niceness, 100, [3, 1, 2], jobs=1)
    there = map_seeds(_seed_and_niceness, 100, [3, 1, 2], jobs=2)
    assert [r[0] for r in here] == [r[0] for r in there] == [103, 101, 102]


@pytest.mark.skipif(not hasattr(os, "nice"), reason="no process priorities here")
def test_nice_lowers_the_workers_priority_and_never_this_process():
    mine = os.nice(0)
    plain = map_seeds(_seed_and_niceness, 0, [1, 2], jobs=2)
    nicer = map_seeds(_seed_and_niceness, 0, [1, 2], jobs=2, nice=5)
    alone = map_seeds(_seed_and_niceness, 0, [1, 2], jobs=1, nice=5)  # runs here
    assert {n for _, n in plain} == {mine}
    assert {n for _, n in nicer} == {min(19, mine + 5)}
    assert {n for _, n in alone} == {mine} and os.nice(0) == mine


@pytest.mark.parametrize("nice", [-1, 20])
def test_a_priority_out_of_range_is_refused(nice):
    with pytest.raises(ConfigError, match="nice"):
        map_seeds(_seed_and_niceness, 0, [1], nice=nice)


def test_replays_beside_pending_work_run_nicer_until_it_is_done():
    pending: Future[int] = Future()
    assert nice_beside(pending) == BACKGROUND_NICE
    assert nice_beside(pending, 15) == 15
    pending.set_result(0)
    assert nice_beside(pending) == 0
    assert nice_beside(pending, 3) == 3
