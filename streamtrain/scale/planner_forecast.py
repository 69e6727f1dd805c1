"""The live planner's forecast: which model, fitted where, feeding the policy.

Owned here: :func:`forecast_feed`, the one place the planner's forecaster settings
(:class:`~streamtrain.scale.planner_settings.PlannerSettings`: ``forecaster``, its
``forecaster_options``, ``refit_every_s``, ``fit_timeout_s``, ``forecaster_dir``) become a
:class:`~streamtrain.scale.policies.feed.ForecastFeed`. The model comes from
:func:`~streamtrain.scale.policies.feed.forecaster_factory`, the factory the simulator's
forecast-based policies use too. The seasonal naives fit in microseconds and are
fitted in place; every other model is a
:class:`~streamtrain.forecast.live.LiveForecaster` whose fits go to ``fit_submit`` (the
control app's worker process; a one-thread pool when none is given), so a tick never
waits for a fit.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from streamtrain.forecast.live import LiveForecaster, LiveSettings, Submit, fit_and_save
from streamtrain.scale.planner_settings import PlannerSettings
from streamtrain.scale.policies.feed import ForecastFeed, forecaster_factory

__all__ = ["CHEAP_FORECASTERS", "forecast_feed"]

CHEAP_FORECASTERS = frozenset({"seasonal_naive", "seasonal_naive_daily", "seasonal_naive_weekly"})


def forecast_feed(
    settings: PlannerSettings, fit_submit: Submit | None = None
) -> tuple[ForecastFeed, LiveForecaster | None]:
    """The feed for ``settings``, and its live forecaster when the model fits in the
    background (module docstring)."""
    s = settings
    factory = forecaster_factory(s.forecaster, step_s=s.step_s, **s.forecaster_options)
    if s.forecaster in CHEAP_FORECASTERS:
        return ForecastFeed(factory, refit_interval_s=s.refit_every_s), None
    if fit_submit is None:
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="forecaster-fit")

        def submit_in_thread(job):  # type: ignore[no-untyped-def]
            return pool.submit(fit_and_save, job)

        fit_submit = submit_in_thread
    live = LiveForecaster(
        LiveSettings(
            name=s.forecaster,
            step_s=s.step_s,
            options=tuple(s.forecaster_options.items()),
            refit_every_s=s.refit_every_s,
            fit_timeout_s=s.fit_timeout_s,
            state_dir=s.forecaster_dir,
            max_history_steps=s.max_history_steps,
        ),
        fit_submit,
        clock=lambda: s.time_scale.model_s(time.time()),
        wall_clock=time.monotonic,
    )
    # The feed asks for a "fit" at every refit interval; the live forecaster decides
    # what is due (a background refit, or nothing), so the feed asks often.
    return ForecastFeed(lambda _steps: live, refit_interval_s=s.step_s), live
