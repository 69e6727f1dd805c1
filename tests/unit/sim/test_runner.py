"""Every policy on one trace over seeds: the window, conservation, seeds and processes,
the tools switched for everyone, gaps, and the JSON shape."""

import threading
from concurrent.futures import Future
from typing import Any

import numpy as np
import pytest

from streamtrain.config import AssignmentMode
from streamtrain.errors import ConfigError
from streamtrain.forecast.trace import Trace, synth_trace
from streamtrain.scale.policies import POLICY_NAMES
from streamtrain.scale.policies.feed import Forecast
from streamtrain.sim.execution import RestartMode, ShuffleMode
from streamtrain.sim.levels import calibrates, shared_levels
from streamtrain.sim.metrics import METRIC_NAMES
from streamtrain.sim.runner import (
    prepare,
    run_variants,
    simulate,
    window_forecasts,
    window_of,
)
from streamtrain.sim.settings import SimSettings, Variant
from streamtrain.sim.tuning import planned_levels

FAST: dict[str, Any] = dict(partitions=16, tick_s=60, forecaster="seasonal_naive")


@pytest.fixture(scope="module")
def trace():
    return synth_trace(2, seed=1)


@pytest.fixture(scope="module")
def report(trace):
    return simulate(trace, SimSettings(seeds=2, **FAST))


def test_every_policy_reports_every_metric_with_an_interval(report):
    payload = report.as_json()
    assert payload["seeds"] == 2 and payload["trace"] == "synth-2d-seed1"
    assert list(payload["policies"]) == list(POLICY_NAMES)
    for name, metrics in payload["policies"].items():
        assert set(metrics) == set(METRIC_NAMES)
        assert 0 <= metrics["violation_rate"] <= 1
        assert set(payload["ci95"][name]) == set(METRIC_NAMES)
    assert payload["ci95"]["adequate"]["worker_hours"] == 0.0
    assert "two-phase actions" in payload["tools"]


def test_adequate_holds_its_maximum_all_day(report):
    assert report.max_workers == 28  # ceil(24 x 7 / 6)
    for m in report.per_seed["adequate"]:
        assert m.scaling_actions == 0 and m.downtime_min == 0
        assert m.worker_hours == pytest.approx(28 * 24)


def test_the_window_is_the_last_day_and_runs_are_conserving(report, trace):
    np.testing.assert_array_equal(report.rates_records_per_s, trace.zero_filled()[-1440:])
    for run in report.runs.values():
        assert run.consumed_records + run.final_backlog_records == pytest.approx(
            run.arrived_records, rel=1e-9
        )


def test_seeds_draw_the_system_not_the_traffic(trace):
    settings = SimSettings(**FAST)
    window = window_of(trace, settings)
    a, truth_a = prepare(window, settings, 0)
    b, truth_b = prepare(window, settings, 1)
    np.testing.assert_array_equal(a.rates_records_per_s, b.rates_records_per_s)
    assert not np.array_equal(a.per_step, b.per_step)  # skew
    assert not np.array_equal(truth_a.speeds, truth_b.speeds)  # the pool
    assert truth_a.profile(0) != truth_b.profile(1)


def test_same_seed_same_table_other_seed_other_table(trace):
    settings = SimSettings(policies=("hpa", "kale"), **FAST)
    first = simulate(trace, settings).as_json()
    assert simulate(trace, settings).as_json() == first
    other = SimSettings(policies=("hpa", "kale"), seed=9, **FAST)
    assert simulate(trace, other).as_json() != first


def test_processes_give_the_same_results_as_one(trace):
    settings = SimSettings(policies=("hpa", "madu"), seeds=2, **FAST)
    window = window_of(trace, settings)
    variants = settings.variants()
    alone = run_variants(window, settings, variants)
    two = SimSettings(policies=("hpa", "madu"), seeds=2, jobs=2, **FAST)
    spread = run_variants(window, two, variants)
    assert [r.seed for r in spread] == [0, 1]
    for x, y in zip(alone, spread, strict=True):
        assert x.metrics == y.metrics
    assert spread[0].runs is not None and spread[1].runs is None


def test_variants_that_do_not_forecast_run_while_the_forecasts_are_computed(trace):
    settings = SimSettings(policies=("kale", "hpa", "streamtrain", "autopilot"), seeds=2, **FAST)
    window = window_of(trace, settings)
    variants = settings.variants()
    cache = window_forecasts(window, settings, variants)
    expected = run_variants(window, settings, variants, cache=cache)
    pending: Future[dict[int, Forecast]] = Future()
    heard: list[str] = []

    def progress(message: str) -> None:
        heard.append(message)
        if message.startswith("seed 1 done") and not pending.done():
            pending.set_result(cache)  # the forecasts arrive once the baselines are done

    # Waiting for the forecasts before the baselines ran would never end: a bounded wait.
    def give_up() -> None:
        if not pending.done():
            pending.set_result({})

    backstop = threading.Timer(60.0, give_up)
    backstop.start()
    try:
        got = run_variants(window, settings, variants, cache=pending, progress=progress)
    finally:
        backstop.cancel()
    started = [m for m in heard if m.startswith("simulating")]
    assert [m.split(" x ")[0] for m in started] == [
        "simulating 2 variant(s)",  # hpa and autopilot, before the forecasts
        "simulating 2 variant(s)",  # kale and streamtrain
    ]
    assert [r.seed for r in got] == [0, 1]
    for x, y in zip(expected, got, strict=True):
        assert list(y.metrics) == ["kale", "hpa", "streamtrain", "autopilot"]
        assert x.metrics == y.metrics
    assert got[0].runs is not None and list(got[0].runs) == list(expected[0].runs or {})
    assert got[1].runs is None


def test_while_the_forecasts_are_computed_the_other_replays_run_at_a_lower_priority(trace):
    settings = SimSettings(policies=("hpa", "kale"), seeds=2, jobs=2, **FAST)
    window = window_of(trace, settings)
    variants = settings.variants()
    cache = window_forecasts(window, settings, variants)
    pending: Future[dict[int, Forecast]] = Future()
    heard: list[str] = []

    def progress(message: str) -> None:
        heard.append(message)
        if "done (2/2)" in message and not pending.done():
            pending.set_result(cache)

    def give_up() -> None:  # a bounded wait, as above
        if not pending.done():
            pending.set_result({})

    backstop = threading.Timer(60.0, give_up)
    backstop.start()
    try:
        run_variants(window, settings, variants, cache=pending, progress=progress)
    finally:
        backstop.cancel()
    started = [m for m in heard if m.startswith("simulating")]
    assert len(started) == 2
    assert started[0].endswith("in 2 process(es) at nice +10")  # hpa, beside the forecasts
    assert started[1].endswith("in 2 process(es)")  # kale, which waited for them


def test_variants_switch_a_tool_for_one_row(trace):
    settings = SimSettings(policies=("hpa",), **FAST)
    rows = [
        Variant("both", "hpa"),
        Variant("none", "hpa", shuffle=False, two_phase=False),
    ]
    (result,) = run_variants(window_of(trace, settings), settings, rows)
    both, none = result.metrics["both"], result.metrics["none"]
    assert none.forwarded_pct == 0 < both.forwarded_pct
    # Pause-and-restart pauses ≈8 min an action, two-phase ≈1 min.
    assert none.downtime_min / none.scaling_actions > 5 * both.downtime_min / both.scaling_actions


def test_gaps_are_no_traffic():
    values = np.full(2 * 1440, 100.0)
    values[-100:-50] = np.nan
    gappy = Trace(0.0, 60, values, "gappy")
    result = simulate(gappy, SimSettings(policies=("adequate",), **FAST))
    assert np.all(result.rates_records_per_s[-100:-50] == 0)
    assert result.runs["adequate"].arrived_records == pytest.approx(100.0 * 60 * 1390)


def test_the_tools_are_the_same_for_every_policy_by_default():
    default = SimSettings()
    for policy in POLICY_NAMES:
        execution = default.execution(policy)
        assert execution.shuffle and execution.two_phase
        assert execution.assignment is AssignmentMode.GROUP
    assert default.forecaster == "auto"
    paper = SimSettings(shuffle=ShuffleMode.POLICY, restart=RestartMode.POLICY)
    assert not paper.execution("hpa").shuffle and not paper.execution("hpa").two_phase
    assert paper.execution("kale").shuffle and not paper.execution("kale").two_phase
    assert paper.execution("streamtrain").two_phase
    off = SimSettings(shuffle=ShuffleMode.OFF, restart=RestartMode.PAUSE)
    assert not off.execution("streamtrain").shuffle
    assert not off.execution("streamtrain").two_phase
    assert SimSettings(seed=5).execution("hpa", 7).seed == 7


def test_modes_are_typed_and_checked():
    settings = SimSettings(shuffle="on", restart="pause", assignment="shards")  # type: ignore[arg-type]
    assert settings.shuffle is ShuffleMode.ON and settings.restart is RestartMode.PAUSE
    assert settings.assignment is AssignmentMode.SHARDS
    with pytest.raises(ConfigError, match="shuffle must be"):
        SimSettings(shuffle="sideways")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="restart must be"):
        SimSettings(restart="reboot")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="assignment must be"):
        SimSettings(assignment="lottery")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"policies": ("oracle",)},
        {"policies": ()},
        {"peak_workers": 1},
        {"max_workers": 10},
        {"simulate_days": 0},
        {"seeds": 0},
        {"jobs": 0},
        {"model": "linear"},
        {"forecaster": "crystal_ball"},
    ],
)
def test_bad_settings(kwargs):
    with pytest.raises(ConfigError):
        SimSettings(**kwargs)


def test_a_trace_shorter_than_the_window(trace):
    with pytest.raises(ConfigError, match="cannot simulate"):
        simulate(trace, SimSettings(simulate_days=3, **FAST))


def test_a_trace_without_traffic():
    silent = Trace(0.0, 60, np.zeros(2 * 1440), "silent")
    with pytest.raises(ConfigError, match="no traffic"):
        simulate(silent, SimSettings(policies=("hpa",), **FAST))


def test_duplicate_variant_labels_are_refused(trace):
    settings = SimSettings(policies=("hpa",), **FAST)
    with pytest.raises(ConfigError, match="distinct"):
        run_variants(window_of(trace, settings), settings, [Variant("x", "hpa")] * 2)


def test_few_seeds_are_split_into_variant_slices_that_keep_every_process_busy():
    from streamtrain.sim.runner import _tasks

    # Enough seeds: one task a seed.
    assert _tasks(range(20), 3, 2) == tuple((s, (0, 1, 2)) for s in range(20))
    # Three tuning seeds of ten variants on two processes: six tasks of five.
    tasks = _tasks([7, 8, 9], 10, 2)
    assert len(tasks) == 6 and {len(v) for _, v in tasks} == {5}
    for seed in (7, 8, 9):
        covered = [k for s, v in tasks if s == seed for k in v]
        assert covered == list(range(10))
    # Never more slices than variants.
    assert _tasks([0], 2, 8) == ((0, (0,)), (0, (1,)))


def test_the_quantiles_the_policies_plan_on_are_precomputed_and_no_others(trace):
    assert shared_levels([Variant("kale", "kale"), Variant("hpa", "hpa")]) == ()
    assert shared_levels([Variant("madu", "madu")]) == (0.95,)
    planned = [
        Variant("a", "streamtrain", {"quantile": 0.7}),
        Variant("b", "madu"),
        Variant("c", "streamtrain"),
        Variant("d", "kale"),
    ]
    assert shared_levels(planned) == (0.5, 0.7, 0.95)
    settings = SimSettings(policies=("kale", "madu"), **FAST)
    window = window_of(trace, settings)
    cache = window_forecasts(window, settings, settings.variants())
    assert cache and all(set(f.quantiles) == {0.95} for f in cache.values())
    alone = window_forecasts(window, settings, [Variant("kale", "kale")])
    assert all(not f.quantiles for f in alone.values())


def test_a_replayed_feed_plans_on_the_quantile_the_live_feed_asks_its_model_for():
    """The simulator credits what the live planner runs: with the forecasts precomputed,
    ``upper`` at the policy's level is the model's own quantile, as it is for a feed
    that fits its own model (the live path) (at 0.7, and at the default 0.5)."""
    from streamtrain.scale.policies.feed import ForecastFeed, forecaster_factory
    from streamtrain.scale.policy import Observation

    settings = SimSettings(policies=("streamtrain",), **FAST)
    window = window_of(synth_trace(4, seed=1), settings)  # 3 days: the naive has a spread
    history = window.history_records_per_s
    for level in (0.7, 0.5):
        variant = Variant("s", "streamtrain", {"quantile": level})
        cache = window_forecasts(window, settings, [variant])
        factory = forecaster_factory("seasonal_naive", step_s=window.step_s)
        replayed, live = ForecastFeed(factory, cache=cache), ForecastFeed(factory)
        n = history.shape[0]
        obs = Observation(
            now_s=window.start_s,
            current_workers=1,
            step_s=window.step_s,
            history_start_s=window.start_s - n * window.step_s,
            arrivals_records_per_s=history,
            max_lag_s=0.0,
            backlog_records=0.0,
        )
        assert set(cache[n].quantiles) == {level}
        np.testing.assert_allclose(replayed.upper(obs, 30, level), live.upper(obs, 30, level))


def test_the_levels_to_precompute_cover_every_tuning_point():
    base = SimSettings(policies=("hpa", "kale", "streamtrain"), **FAST)
    assert planned_levels(base) == (0.5,)  # no grid of GRIDS moves a quantile
    grids = {"streamtrain": ({"quantile": 0.8}, {"quantile": 0.9, "headroom": 0.1})}
    assert planned_levels(base, grids) == (0.5, 0.8, 0.9)
    given = SimSettings(
        policies=("madu", "streamtrain"),
        policy_settings={"madu": {"uncertainty_level": 0.9}},
        **FAST,
    )
    # madu's tuned points keep the level given; its tuning replays its grid's points alone
    assert planned_levels(given) == (0.5, 0.9, 0.95)


def test_forecasts_without_a_level_a_variant_plans_on_are_refused(trace):
    settings = SimSettings(policies=("hpa", "streamtrain"), **FAST)
    window = window_of(trace, settings)
    madu_only = window_forecasts(window, settings, [Variant("madu", "madu")])
    with pytest.raises(ConfigError, match=r"without the levels .*'streamtrain': 0\.5"):
        run_variants(window, settings, settings.variants(), cache=madu_only)
    none_asked = window_forecasts(window, settings, [Variant("kale", "kale")])
    run_variants(window, settings, settings.variants(), cache=none_asked)  # cannot tell


def test_a_replayed_feed_scores_ratios_only_for_a_level_the_forecasts_lack():
    cache = {1: Forecast(np.ones(3), {0.5: np.ones(3)})}
    assert not calibrates(Variant("s", "streamtrain"), cache)  # its median is cached
    assert calibrates(Variant("s", "streamtrain", {"quantile": 0.7}), cache)
    assert not calibrates(Variant("k", "kale"), cache)  # point forecasts only
    assert calibrates(Variant("s", "streamtrain"), {1: Forecast(np.ones(3))})
    assert calibrates(Variant("m", "madu"), {})
