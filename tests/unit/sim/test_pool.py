"""The multi-job simulation on a small scenario: the pool's invariants under every
allocator, the online jobs' runs, determinism."""

from dataclasses import replace

import numpy as np
import pytest

from streamtrain.cluster.milp import MilpSettings
from streamtrain.sim.pool import run_pool
from streamtrain.sim.pool_inputs import build_inputs
from streamtrain.sim.pool_report import format_pool_table, pool_metrics, simulate_scenario
from streamtrain.sim.scenario import parse_scenario

SMALL = {
    "name": "small",
    "forecaster": "seasonal_naive",  # the online job's forecasts are not what is tested
    "capacity_workers": 40,
    "days": 1,
    "partitions": 8,
    "online": [{"name": "ads", "shape": "kale", "seed": 1, "peak_workers": 8}],
    "serving": {"name": "search", "shape": "web", "seed": 2, "peak_workers": 12},
    "offline": {"jobs": 8, "seed": 3, "work_worker_hours": [2, 20], "arrival_window_h": 12},
}


@pytest.fixture(scope="module")
def report():
    return simulate_scenario(parse_scenario(SMALL))


def test_the_pool_is_never_overcommitted_and_serving_never_short(report):
    capacity = report.scenario.capacity_workers
    for run in report.runs.values():
        assert int(run.occupied.max()) <= capacity, run.allocator
        assert int(run.serving_short.sum()) == 0, run.allocator
        assert int(run.overcommit.sum()) == 0, run.allocator
    for metrics in report.metrics.values():
        assert metrics.serving_shortfall_min == 0
        assert 0 < metrics.utilization <= 1


def test_sharing_the_pool_uses_more_of_it_than_a_static_partition(report):
    m = report.metrics
    assert m["milp"].utilization > m["partition"].utilization
    assert m["one-way"].utilization >= m["partition"].utilization


def test_every_offline_job_is_accounted_for(report):
    for run in report.runs.values():
        assert len(run.offline) == 8
        for outcome in run.offline:
            assert 0 <= outcome.queue_s <= outcome.completion_s
            assert outcome.waiting_s <= outcome.completion_s + 60
    assert report.metrics["milp"].offline_finished >= 1


def test_the_online_job_replays_the_same_in_the_pool_and_alone_at_equal_caps(report):
    online = report.inputs.online[0]
    assert np.array_equal(online.held_pool, online.held_alone)
    assert online.held_pool.shape[0] == 24 * 60
    assert 1 <= int(online.held_pool.min()) <= int(online.held_pool.max()) <= 10
    wanted = online.wanted(600, 5, 5, held_now=int(online.held_pool[600]))
    assert len(wanted) == 5 and wanted[0] >= int(online.held_pool[600])


def test_the_milp_runs_every_round_and_is_deterministic(report):
    assert report.metrics["milp"].rounds > 0
    # The default limit is a node count, not wall-clock time: two runs give the same
    # answers however busy the machine is (only the measured solve times differ).
    assert MilpSettings().node_limit is not None
    m = pool_metrics(run_pool(report.inputs, "milp"), report.inputs)
    again = pool_metrics(run_pool(report.inputs, "milp"), report.inputs)

    def untimed(metrics):
        return replace(metrics, solve_p50_ms=0.0, solve_p90_ms=0.0, solve_max_ms=0.0)

    assert untimed(again) == untimed(m)
    assert m == replace(report.metrics["milp"], **{k: getattr(m, k) for k in TIMED})


TIMED = ("solve_p50_ms", "solve_p90_ms", "solve_max_ms")


def test_the_milp_without_forecasts_sees_only_this_minute(report):
    """Greedy's information for the MILP: the online job and serving want this minute's
    counts over the whole horizon; the forecasting MILP gets their plans."""
    from streamtrain.cluster.milp import MilpSettings as Settings
    from streamtrain.sim.pool import _Pool

    inputs = report.inputs
    pool = _Pool(inputs, "milp-noforecast", Settings())
    minute = 600
    held = [int(inputs.online[0].held_pool[minute])]
    need = inputs.serving_need(minute)
    blind = pool._full_problem(minute, held, (), forecast=False)
    seeing = pool._full_problem(minute, held, (), forecast=True)
    horizon_steps = report.scenario.horizon_steps
    assert [j.demand(horizon_steps) for j in blind.jobs] == [
        (held[0],) * horizon_steps,
        (need,) * horizon_steps,
    ]
    step_min = report.scenario.interval_s // 60
    assert seeing.jobs[0].demand(horizon_steps) == inputs.online[0].wanted(
        minute, horizon_steps, step_min, held[0]
    )
    assert seeing.jobs[1].demand(horizon_steps) == inputs.serving_forecast(
        minute, horizon_steps, step_min
    )
    assert len(report.runs["milp-noforecast"].solve_ms) == len(report.runs["milp"].solve_ms)


def test_the_table_has_a_line_per_allocator(report):
    table = format_pool_table(report)
    for name in ("milp", "greedy", "partition", "one-way", "ads"):
        assert name in table


def test_inputs_reject_a_scenario_longer_than_its_trace(tmp_path):
    trace = tmp_path / "short.csv"
    trace.write_text("timestamp,records_per_s\n0,5\n60,6\n")
    scenario = parse_scenario(
        SMALL | {"serving": {"name": "s", "trace": str(trace), "peak_workers": 4}}
    )
    with pytest.raises(Exception, match="less than 2 days"):
        build_inputs(scenario)
