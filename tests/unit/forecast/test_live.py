"""The live forecaster: background fits, catch-up, fallback with alerts, reload."""

from concurrent.futures import Future

import numpy as np
import pytest

from streamtrain.forecast.live import LiveForecaster, LiveSettings, fit_and_save
from streamtrain.forecast.stats import StatsForecaster

HOUR = 3600
DAY = 24  # hourly steps


def _series(days, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(days * DAY)
    return 100 + 50 * np.sin(2 * np.pi * t / DAY) + rng.normal(0, 1, t.shape)


class Pool:
    """Runs fits when told to; counts submissions."""

    def __init__(self, run_at_once=True, fail=False):
        self.run_at_once, self.fail, self.jobs = run_at_once, fail, []

    def __call__(self, job):
        future: Future[float] = Future()
        self.jobs.append((job, future))
        if self.run_at_once:
            self.finish()
        return future

    def finish(self):
        for job, future in self.jobs:
            if future.done():
                continue
            if self.fail:
                future.set_exception(RuntimeError("out of memory"))
            else:
                future.set_result(fit_and_save(job))


class Clock:
    def __init__(self, now=1_000_000.0):
        self.now = now

    def __call__(self):
        return self.now


def _live(tmp_path, pool, clock, **kwargs):
    settings = LiveSettings(name="mstl", step_s=HOUR, state_dir=tmp_path, **kwargs)
    return LiveForecaster(settings, pool, clock=clock)


def test_answers_with_the_naive_until_the_background_fit_lands_then_catches_up(tmp_path):
    values = _series(10)
    pool, clock = Pool(run_at_once=False), Clock()
    live = _live(tmp_path, pool, clock)
    live.at_step(200)
    live.fit(values[:200])
    assert live.fitting and len(pool.jobs) == 1
    assert pool.jobs[0][0].history.shape == (200,)
    live.predict(3)
    assert live.source_ == "seasonal_naive" and "fitting" in (live.reason_ or "")
    # steps arrive while the fit runs; then it lands and is told them
    live.at_step(210)
    live.update(values[200:210])
    pool.finish()
    forecast = live.predict(3)
    assert live.source_ == "mstl" and not live.fitting
    assert live.model_end_step_ == 210
    reference = StatsForecaster("mstl", step_s=HOUR).fit(values[:200]).update(values[200:210])
    np.testing.assert_allclose(forecast, reference.predict(3), rtol=1e-6)
    status = live.status()
    assert status["model"] == "mstl" and status["live"] == "mstl" and status["refits"] == 1


def test_a_failed_fit_raises_an_alert_and_a_later_success_resolves_it(tmp_path):
    values = _series(10)
    pool, clock = Pool(fail=True), Clock()
    live = _live(tmp_path, pool, clock, min_refit_gap_s=0)
    live.at_step(200)
    live.fit(values[:200])
    live.predict(2)
    assert live.source_ == "seasonal_naive" and "out of memory" in (live.reason_ or "")
    alerts = live.take_alerts()
    assert len(alerts) == 1 and not alerts[0][1] and "seasonal naive" in alerts[0][0]
    assert live.take_alerts() == []
    pool.fail = False
    live.fit(values[:200])  # the feed asks again: a model is still missing, so it is due
    live.predict(2)
    assert live.source_ == "mstl"
    assert [resolved for _, resolved in live.take_alerts()] == [True]


def test_a_late_fit_raises_an_alert(tmp_path):
    values = _series(10)
    pool, clock = Pool(run_at_once=False), Clock()
    live = _live(tmp_path, pool, clock, fit_timeout_s=600)
    live.at_step(200)
    live.fit(values[:200])
    clock.now += 601
    live.predict(2)
    alerts = live.take_alerts()
    assert len(alerts) == 1 and "late" in alerts[0][0]
    pool.finish()  # it lands after all: live, and the alert resolves
    live.predict(2)
    assert live.source_ == "mstl"
    assert [resolved for _, resolved in live.take_alerts()] == [True]


def test_a_fit_is_late_on_the_wall_clock_not_the_model_clock(tmp_path):
    """The demo plans on a clock 144x the wall's: 601 model seconds are 4 wall seconds,
    and a fit that took 4 s is not late for a 600-s timeout."""
    values = _series(10)
    pool, model_clock, wall = Pool(run_at_once=False), Clock(), Clock()
    settings = LiveSettings(name="mstl", step_s=HOUR, state_dir=tmp_path, fit_timeout_s=600)
    live = LiveForecaster(settings, pool, clock=model_clock, wall_clock=wall)
    live.at_step(200)
    live.fit(values[:200])
    model_clock.now += 601
    wall.now += 601 / 144
    live.predict(2)
    assert live.take_alerts() == []
    wall.now += 600
    live.predict(2)
    assert "wall seconds ago is late" in live.take_alerts()[0][0]


def test_a_restart_reloads_the_saved_model_instead_of_refitting(tmp_path):
    values = _series(12)
    pool, clock = Pool(), Clock()
    first = _live(tmp_path, pool, clock)
    first.at_step(200)
    first.fit(values[:200])
    first.predict(2)
    assert len(pool.jobs) == 1 and (tmp_path / "live.json").exists()
    clock.now += 2 * HOUR
    again_pool = Pool()
    again = _live(tmp_path, again_pool, clock)
    again.at_step(220)
    again.fit(values[:220])  # the restarted app's history is longer
    forecast = again.predict(3)
    assert again_pool.jobs == [] and again.loaded_from_disk_ and again.source_ == "mstl"
    reference = StatsForecaster("mstl", step_s=HOUR).fit(values[:200]).update(values[200:220])
    np.testing.assert_allclose(forecast, reference.predict(3), rtol=1e-6)
    # a day later the schedule asks for a refit
    clock.now += DAY * HOUR
    again.fit(values[:220])
    assert len(again_pool.jobs) == 1


def test_a_model_worse_than_the_naive_is_skipped_and_refitted(tmp_path):
    values = _series(12)
    pool, clock = Pool(), Clock()
    live = _live(tmp_path, pool, clock, min_tracked=5, track_steps=2, min_refit_gap_s=0)
    live.at_step(200)
    live.fit(values[:200])
    live.predict(2)

    class Wrong:
        name = "wrong"

        def update(self, points):
            return self

        def predict(self, horizon_steps):
            return np.full(horizon_steps, 1e6)

    live.model_ = Wrong()
    pool.run_at_once = False
    for k in range(200, 206):
        live.at_step(k + 1)
        live.update(values[k : k + 1])
    live.predict(2)
    assert live.source_ == "seasonal_naive" and "exceeds" in (live.reason_ or "")
    assert live.fitting  # a refit was asked for
    assert live.status()["recent_mase"] > live.status()["naive_recent_mase"]


def test_bad_settings():
    with pytest.raises(Exception, match="positive"):
        LiveSettings(refit_every_s=0)


def test_fit_with_a_longer_history_is_an_update_and_keeps_the_scores(tmp_path):
    """The planner's feed hands the whole history at every step: only the new steps
    reach the model, and the recent error keeps accumulating."""
    values = _series(12)
    pool, clock = Pool(), Clock()
    live = _live(tmp_path, pool, clock, min_tracked=5, track_steps=3)
    for end in range(200, 215):
        live.at_step(end)
        live.fit(values[:end])
        live.predict(3)
    assert len(pool.jobs) == 1 and live.model_end_step_ == 214
    assert live.recent_mae() is not None
    assert live.status()["recent_mase"] is not None


@pytest.mark.parametrize("trusted", [True, False])
def test_a_trusted_model_worse_than_the_naive_answers_and_is_refitted(tmp_path, trusted):
    """auto's validated statsforecast model (``trusted_``) keeps answering while its
    recent error is worse, as in the simulator; the refit is asked for either way."""
    values = _series(12)
    pool, clock = Pool(), Clock()
    live = _live(tmp_path, pool, clock, min_tracked=5, track_steps=2, min_refit_gap_s=0)
    live.at_step(200)
    live.fit(values[:200])
    live.predict(2)  # the first fit lands

    class Wrong:
        name = "wrong"
        trusted_ = False

        def update(self, points):
            return self

        def predict(self, horizon_steps):
            return np.full(horizon_steps, 1e6)

    model = Wrong()
    model.trusted_ = trusted
    live.model_ = model
    pool.run_at_once = False
    for k in range(200, 206):
        live.at_step(k + 1)
        live.update(values[k : k + 1])
    forecast = live.predict(2)
    assert live.fitting  # a refit was asked for
    if trusted:
        assert live.source_ == "mstl" and live.reason_ is None
        np.testing.assert_array_equal(forecast, [1e6, 1e6])
    else:
        assert live.source_ == "seasonal_naive" and "exceeds" in (live.reason_ or "")
