"""What forecasting policies are fed: predictions from the past only, shared safely,
with empirical quantiles when the model has none."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamtrain.errors import ConfigError, ForecastError
from streamtrain.forecast.base import SeasonalNaive
from streamtrain.scale.policies.feed import (
    Forecast,
    ForecastFeed,
    forecaster_factory,
    precompute,
)
from streamtrain.scale.policy import Observation


class Spy:
    """Predicts the mean of what it was given; records how much it has seen."""

    name = "spy"
    step_s = 60

    def __init__(self, log):
        self.log = log
        self.seen = []

    def fit(self, history):
        self.seen = list(history)
        return self

    def update(self, new_points):
        self.seen += list(new_points)
        return self

    def predict(self, horizon_steps):
        self.log.append(len(self.seen))
        return np.full(horizon_steps, float(np.mean(self.seen)))

    def predict_quantiles(self, horizon_steps, levels):
        raise ForecastError("the spy has no error model")  # the protocol's way to say so

    def save(self, path):
        raise NotImplementedError


def _obs(history, now_s=None):
    history = np.asarray(history, dtype=float)
    return Observation(
        now_s=60.0 * history.size if now_s is None else now_s,
        current_workers=1,
        step_s=60,
        history_start_s=0.0,
        arrivals_records_per_s=history,
        max_lag_s=0.0,
        backlog_records=0.0,
    )


def test_precomputed_predictions_only_use_the_past():
    history = np.arange(100.0)
    log: list[int] = []
    table = precompute(
        lambda n: Spy(log), history, 10, 100, max_horizon_steps=5, refit_every_steps=30
    )
    assert sorted(table) == list(range(10, 101))
    assert log == list(range(10, 101))  # at origin n the model had seen exactly n steps
    assert table[10].point[0] == pytest.approx(np.mean(history[:10]))
    with pytest.raises(ConfigError):
        precompute(lambda n: Spy([]), history, 0, 10)


def test_model_quantiles_are_kept():
    class WithQuantiles(Spy):
        def predict_quantiles(self, horizon_steps, levels):
            return {q: np.full(horizon_steps, 100.0 * q) for q in levels}

    table = precompute(
        lambda n: WithQuantiles([]), np.ones(20), 10, 10, max_horizon_steps=3, levels=(0.8,)
    )
    np.testing.assert_allclose(table[10].quantiles[0.8], 80.0)


def test_feeds_share_a_cache_without_sharing_what_they_have_seen():
    cache = {5: Forecast(np.full(10, 7.0))}
    feed = ForecastFeed(lambda n: Spy([]), max_horizon_steps=10, cache=cache)
    np.testing.assert_allclose(feed.forecast(_obs(np.ones(5)), 3), 7.0)
    assert feed.model_ is None  # served from the cache: no model of its own was fitted
    np.testing.assert_allclose(feed.forecast(_obs(np.ones(6)), 3), 1.0)  # a miss: own model
    assert 6 in cache


def test_empirical_upper_quantile_from_past_ratios():
    # The model always says 100 while 120 arrives: after enough scored steps the 0.8
    # quantile of actual / forecast is 1.2.
    class Hundred(Spy):
        def predict(self, horizon_steps):
            return np.full(horizon_steps, 100.0)

    feed = ForecastFeed(lambda n: Hundred([]), max_horizon_steps=10)
    actual = np.full(200, 120.0)
    for n in range(1, 60):
        feed.forecast(_obs(actual[:n]), 10)
    np.testing.assert_allclose(feed.upper(_obs(actual[:60]), 10, 0.8), 120.0)
    assert feed.recent_error() == pytest.approx(0.2)
    with pytest.raises(ConfigError):
        feed.upper(_obs(actual[:60]), 10, 1.5)


def test_a_failing_model_falls_back_to_the_last_rate():
    class Broken(Spy):
        def predict(self, horizon_steps):
            raise ForecastError("boom")

    feed = ForecastFeed(lambda n: Broken([]), max_horizon_steps=4)
    np.testing.assert_allclose(feed.forecast(_obs([3.0, 5.0]), 4), 5.0)


def test_no_history_no_forecast():
    feed = ForecastFeed(lambda n: Spy([]))
    with pytest.raises(ForecastError):
        feed.forecast(_obs(np.zeros(0), now_s=0.0), 1)


def test_forecaster_names():
    factory = forecaster_factory("seasonal_naive")
    assert isinstance(factory(10), SeasonalNaive)
    assert factory(10).name == "seasonal_naive_daily"
    assert factory(3 * 7 * 1440).name == "seasonal_naive_weekly"
    with pytest.raises(ConfigError, match="unknown forecaster"):
        forecaster_factory("crystal_ball")


def test_a_sliding_capped_history_still_reaches_the_model():
    """The live history keeps its last N steps: its length stops growing, its start moves."""
    log: list[int] = []
    spy = Spy(log)
    feed = ForecastFeed(lambda n: spy, max_horizon_steps=5, refit_interval_s=1e9)
    values = np.arange(200.0)
    for end in range(50, 60):
        window = values[end - 50 : end]  # always 50 steps
        obs = Observation(
            now_s=60.0 * end,
            current_workers=1,
            step_s=60,
            history_start_s=60.0 * (end - 50),
            arrivals_records_per_s=window,
            max_lag_s=0.0,
            backlog_records=0.0,
        )
        feed.forecast(obs, 5)
    # fitted on the first 50 steps, then told each new step once
    assert spy.seen == list(values[:59])
    latest = feed.latest()
    assert latest is not None and latest[0] == 59  # the absolute index of its first step


def test_the_simulator_and_the_live_planner_share_one_factory():
    from streamtrain.scale import planner_forecast
    from streamtrain.scale.planner_settings import PlannerSettings
    from streamtrain.scale.policies import feed
    from streamtrain.sim import runner

    assert vars(runner)["named_factory"] is feed.forecaster_factory
    assert vars(planner_forecast)["forecaster_factory"] is feed.forecaster_factory
    settings = PlannerSettings(job="j", group="g", forecaster="seasonal_naive")
    live_feed, live = planner_forecast.forecast_feed(settings)
    assert live is None
    model = live_feed.factory(20160)
    assert type(model) is type(forecaster_factory("seasonal_naive")(20160))
    assert model.name == "seasonal_naive_weekly"
    _, background = planner_forecast.forecast_feed(
        PlannerSettings(job="j", group="g", forecaster="mstl")
    )
    assert background is not None and background.name == "mstl"
    with pytest.raises(ConfigError, match="unknown forecaster"):
        PlannerSettings(job="j", group="g", forecaster="prophet")
    with pytest.raises(ConfigError, match="quantile"):
        PlannerSettings(job="j", group="g", policy="kale", plan_quantile=0.8)
    quantile = PlannerSettings(job="j", group="g", plan_quantile=0.8)
    assert quantile.settings_dict["quantile"] == 0.8


@given(
    st.lists(st.floats(0.0, 10.0, allow_nan=False), min_size=1, max_size=60),
    st.floats(0.01, 0.99),
)
def test_the_fast_quantile_is_numpys_linear_one(values, level):
    from collections import deque

    from streamtrain.scale.policies.feed import _quantile

    expected = float(np.quantile(np.array(values), level))
    assert _quantile(deque(values), level) == pytest.approx(expected, rel=1e-12, abs=1e-12)


@given(
    st.lists(st.floats(0.0, 10.0, allow_nan=False), min_size=1, max_size=60),
    st.floats(0.01, 0.99),
)
def test_the_fast_quantile_equals_the_sorted_reading_exactly(values, level):
    from collections import deque

    from streamtrain.scale.policies.feed import _quantile

    ordered = sorted(values)  # the reading the simulator's pinned numbers were made with
    h = (len(ordered) - 1) * level
    lo = math.floor(h)
    expected = (
        ordered[-1]
        if lo + 1 >= len(ordered)
        else ordered[lo] + (h - lo) * (ordered[lo + 1] - ordered[lo])
    )
    assert _quantile(deque(values), level) == expected


def test_the_model_options_reach_the_background_fit():
    from concurrent.futures import Future

    from streamtrain.forecast.live_store import FitJob
    from streamtrain.scale import planner_forecast
    from streamtrain.scale.planner_settings import PlannerSettings

    jobs: list[FitJob] = []

    def submit(job: FitJob) -> Future[float]:
        jobs.append(job)
        return Future()

    settings = PlannerSettings(
        job="j", group="g", forecaster="fedformer", forecaster_options={"train_steps": 7}
    )
    _, live = planner_forecast.forecast_feed(settings, submit)
    assert live is not None
    live.fit(np.full(3 * 1440, 5.0))
    assert [(j.name, j.options) for j in jobs] == [("fedformer", {"train_steps": 7})]
    with pytest.raises(ConfigError, match="unknown option"):
        PlannerSettings(job="j", group="g", forecaster="fedformer", forecaster_options={"x": 1})


def test_model_options_parse_as_json_or_text():
    from streamtrain.commands.forecaster_options import forecaster_settings, parse_model_options

    assert parse_model_options(["train_steps=100", "mstl_weight=0.25", "name=x", "ok=true"]) == {
        "train_steps": 100,
        "mstl_weight": 0.25,
        "name": "x",
        "ok": True,
    }
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_model_options(["train_steps"])
    settings = forecaster_settings("auto", "1d", None, "30m", ("train_steps=5",))
    assert settings["forecaster_options"] == {"train_steps": 5}


def _walk_twin_feeds(jumps, seed, steps, *, grow_only):
    """A feed that scores every lead and a lean one (no ratios) over the same random
    actuals and cached forecasts, asked at histories that move by ``jumps``; after each
    observation the lean feed's one-step pairs must equal the other's (and, with
    ``grow_only``, it must not have fallen back to scanning every prediction)."""
    rng = np.random.default_rng(seed)
    actual = 50.0 + 100.0 * rng.random(steps)
    cache = {n: Forecast(100.0 * rng.random(6)) for n in range(1, steps + 1)}
    plain = ForecastFeed(lambda n: Spy([]), max_horizon_steps=6, cache=cache)
    lean = ForecastFeed(lambda n: Spy([]), max_horizon_steps=6, cache=cache, calibrate=False)
    n = 1
    for jump in jumps:
        n = min(steps, max(1, n + jump))
        for feed in (plain, lean):
            feed.forecast(_obs(actual[:n]), 6)
        assert list(lean._pairs) == list(plain._pairs)
        assert lean.recent_error() == plain.recent_error()
        assert lean._issued.ordered or not grow_only


@given(
    jumps=st.lists(st.integers(min_value=-3, max_value=4), min_size=1, max_size=40),
    seed=st.integers(min_value=0, max_value=2**16),
)
def test_a_lean_feed_keeps_the_one_step_pairs_that_scoring_every_lead_keeps(jumps, seed):
    """The one-step pairs of a feed that scores no ratios (it looks only at the
    predictions that start at a new step) equal those of one that scores every lead,
    after every observation: asked once a step, after a gap of several steps, and with
    histories that go back (then it scans every prediction)."""
    _walk_twin_feeds(jumps, seed, 200, grow_only=False)


@given(
    jumps=st.lists(st.integers(min_value=0, max_value=9), min_size=1, max_size=60),
    seed=st.integers(min_value=0, max_value=2**16),
)
def test_a_lean_feed_asked_as_a_replay_asks_finds_its_pairs_without_scanning(jumps, seed):
    """Histories that only grow (a replay, the live loop), by gaps below and above the
    predictions' length and past the stored predictions' ring: the lean feed never falls
    back to scanning every prediction, and keeps the same pairs."""
    _walk_twin_feeds(jumps, seed, 600, grow_only=True)


def test_a_feed_that_needs_no_ratios_keeps_its_pairs_and_answers_the_same():
    """``calibrate=False`` (a replay whose cache carries the level asked for): the same
    upper quantile and one-step errors, no ratios scored; asked for a level the model has
    not got, it scores them from then on."""
    rng = np.random.default_rng(3)
    actual = 100.0 + 20.0 * rng.random(120)
    cache = {n: Forecast(np.full(10, 100.0), {0.8: np.full(10, 110.0)}) for n in range(1, 121)}
    plain = ForecastFeed(lambda n: Spy([]), max_horizon_steps=10, cache=cache)
    lean = ForecastFeed(lambda n: Spy([]), max_horizon_steps=10, cache=cache, calibrate=False)
    for n in range(1, 100):
        a, b = plain.upper(_obs(actual[:n]), 10, 0.8), lean.upper(_obs(actual[:n]), 10, 0.8)
        np.testing.assert_array_equal(a, b)
        assert plain.recent_error() == lean.recent_error()
        assert plain.recent_ratio() == lean.recent_ratio()
    assert len(plain._ratios[0]) > 0  # leads 0-9: the first bucket
    assert all(len(r) == 0 for r in lean._ratios)
    lean.upper(_obs(actual[:100]), 10, 0.9)  # no 0.9 quantile cached: calibrate after all
    assert lean.calibrate
    lean.upper(_obs(actual[:101]), 10, 0.9)
    assert len(lean._ratios[0]) > 0
