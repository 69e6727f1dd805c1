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
waits for a fit. :func:`forecast_status` is the forecast part of the planner's status.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from streamtrain.forecast.live import LiveForecaster, LiveSettings, Submit, fit_and_save
from streamtrain.scale.planner_settings import PlannerSettings
from streamtrain.scale.policies.feed import ForecastFeed, forecaster_factory
from streamtrain.units import MS_PER_S

__all__ = ["CHEAP_FORECASTERS", "forecast_feed", "forecast_status"]

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


def forecast_status(
    settings: PlannerSettings, feed: ForecastFeed | None, live: LiveForecaster | None
) -> dict[str, Any] | None:
    """The newest point forecast (and band) on the wall clock, in records per wall
    second, with the live forecaster's state; ``None`` before the first forecast."""
    latest = feed.latest() if feed is not None else None
    if feed is None or latest is None:
        return None
    clock = settings.time_scale
    first_step, point = latest
    step_s = settings.step_s
    body: dict[str, Any] = {
        "first_step_at_ms": int(clock.wall_s(first_step * step_s) * MS_PER_S),
        "step_s": step_s / clock.factor,
        "records_per_s": [round(clock.wall_rate(float(v)), 3) for v in point],
        "model": settings.forecaster,
    }
    band = feed.band()
    if band is not None:
        low, high, levels = band
        body["quantiles"] = list(levels)
        body["low_records_per_s"] = [round(clock.wall_rate(float(v)), 3) for v in low]
        body["high_records_per_s"] = [round(clock.wall_rate(float(v)), 3) for v in high]
    if live is not None:
        body |= live.status()
    else:
        body |= {"live": settings.forecaster, "recent_mase": None}
    return body
