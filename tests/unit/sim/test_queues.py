"""The C ticks of the simulator's partition queues (``streamtrain.sim._queues``) against
the numpy reference (``streamtrain.sim.partitions.Partitions``): the same numbers, bit
for bit, tick by tick and over whole replays."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtrain.scale.models import ThroughputModel
from streamtrain.sim import partitions as sim_partitions
from streamtrain.sim.engine import Workload, run_policy
from streamtrain.sim.execution import Execution
from streamtrain.sim.metrics import compute_metrics
from streamtrain.sim.workload import SkewSettings, partition_arrivals, partition_shares
from streamtrain.testing import ScriptedPolicy

queues = pytest.importorskip("streamtrain.sim._queues")

FIVE_PER_WORKER = ThroughputModel("async", (1.0, 0.0, 0.0), batch_size=5.0)  # F(w) = 5 w
RUN_FIELDS = (
    "lag_s",
    "backlog_records",
    "workers",
    "training_workers",
    "paused_s",
    "worker_s",
    "forwarded_records",
)


def _workload(seed, steps, partitions, max_workers=12):
    rng = np.random.default_rng(seed)
    rates = rng.uniform(0.0, 80.0, steps)
    rates[rng.random(steps) < 0.1] = 0.0  # gaps: steps without arrivals
    shares = partition_shares(steps, 60, SkewSettings(partitions, 0.9, seed=seed))
    per_step, cumulative = partition_arrivals(rates, shares, 60)
    return Workload(rates, np.zeros(0), 60, 0.0, per_step, cumulative, FIVE_PER_WORKER, max_workers)


def test_the_pairwise_sum_is_numpys():
    rng = np.random.default_rng(1)
    for n in [*range(300), 511, 800, 1000, 4096, 8191]:
        values = rng.standard_normal(n) * 10.0 ** rng.uniform(-6, 9, n)
        assert queues.pairwise_sum(values) == values.sum(), n
    assert queues.pairwise_sum(np.array([-0.0, -0.0])) == 0.0


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    partitions=st.integers(1, 150),
    ticks=st.lists(
        st.tuples(
            st.integers(0, 12),  # training workers (0: paused)
            st.floats(0.0, 2.0),  # capacity, as a share of the tick's arrivals
            st.booleans(),  # shuffle
            st.floats(0.0, 0.5),  # forward cost
        ),
        min_size=1,
        max_size=60,
    ),
)
def test_every_tick_matches_the_numpy_reference(seed, partitions, ticks):
    steps = -(-len(ticks) // 4) + 1
    workload = _workload(seed, steps, partitions)
    python = sim_partitions.Partitions(workload)
    twin = sim_partitions.Partitions(workload)  # the state the compiled queues write into
    compiled = queues.Queues(
        workload.cumulative,
        workload.per_step,
        twin.rank,
        twin.consumed,
        twin.pointer,
        twin.tolerance,
        60.0,
        workload.max_workers,
    )
    for i, (training, share, shuffle, cost) in enumerate(ticks):
        step, within = divmod(i, 4)
        capacity = share * float(workload.per_step[step].sum()) / 4
        args = (step, (within + 1) / 4, training, capacity, shuffle, cost, 15.0 * (i + 1))
        expected = python.tick(*args)
        assert compiled.tick(*args) == expected, i
        assert compiled.drained == python.drained
        np.testing.assert_array_equal(twin.consumed, python.consumed)
        np.testing.assert_array_equal(twin.pointer, python.pointer)


def test_replays_tick_in_c_when_it_is_built():
    assert sim_partitions.COMPILED
    assert isinstance(sim_partitions.new_queues(_workload(1, 3, 2)), queues.Queues)


def _runs(workload, policy, execution, monkeypatch, compiled):
    if not compiled:
        monkeypatch.setattr(sim_partitions, "Queues", None)
    return run_policy(workload, policy(), execution, initial_workers=3)


@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("two_phase", [True, False])
def test_a_replay_is_the_same_in_c(shuffle, two_phase, monkeypatch):
    workload = _workload(7, 240, 60)

    def policy():
        return ScriptedPolicy({900.0: 9, 3000.0: 2, 6000.0: 12, 9000.0: 4, 12000.0: 7})

    execution = Execution(shuffle=shuffle, two_phase=two_phase, seed=5)
    fast = _runs(workload, policy, execution, monkeypatch, compiled=True)
    slow = _runs(workload, policy, execution, monkeypatch, compiled=False)
    assert float(fast.lag_s.max()) > 60.0  # the replay lags: every path is taken
    for field in RUN_FIELDS:
        np.testing.assert_array_equal(getattr(fast, field), getattr(slow, field))
    assert fast.actions == slow.actions
    assert (fast.consumed_records, fast.final_backlog_records) == (
        slow.consumed_records,
        slow.final_backlog_records,
    )
    assert compute_metrics(fast) == compute_metrics(slow)


def test_bad_arrays_are_refused():
    workload = _workload(3, 5, 4)
    python = sim_partitions.Partitions(workload)
    good = (
        workload.cumulative,
        workload.per_step,
        python.rank,
        python.consumed,
        python.pointer,
        python.tolerance,
        60.0,
        4,
    )
    with pytest.raises(TypeError, match="rank"):
        queues.Queues(*good[:2], python.rank.astype(np.int32), *good[3:])
    with pytest.raises(ValueError, match="cumulative"):
        queues.Queues(workload.per_step, *good[1:])
    with pytest.raises(ValueError, match="partition"):
        queues.Queues(*good[:3], python.consumed[:3], *good[4:])
    with pytest.raises(ValueError):  # read-only state
        consumed = python.consumed.copy()
        consumed.setflags(write=False)
        queues.Queues(*good[:3], consumed, *good[4:])
    compiled = queues.Queues(*good)
    with pytest.raises(IndexError):
        compiled.tick(5, 0.5, 2, 10.0, True, 0.0, 15.0)
    with pytest.raises(ValueError, match="training workers"):
        compiled.tick(0, 0.5, 5, 10.0, True, 0.0, 15.0)
