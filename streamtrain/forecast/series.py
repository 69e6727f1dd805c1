"""Realistic arrival series other than KALE's, to keep the forecasters honest.

Owned here: seeded generators of per-step records/s in four shapes that differ from
:func:`streamtrain.forecast.trace.synth_trace` on purpose, each with daily and weekly
seasonality and the defects of real collection (gaps, zeros, level shifts):

* :func:`web_trace`: a consumer web service: evening peak, quieter weekends, organic
  growth of a few percent a week, a permanent level shift (a launch), traffic spikes,
  a collector outage of a few hours and scattered missing minutes.
* :func:`retail_trace`: a store chain's point-of-sale events: zero outside opening hours
  (08:00-21:00, Sunday 10:00-18:00), a lunch and an after-work peak, Saturdays busiest,
  a promotion week (+35 %), Poisson counts (discrete noise at low rates).
* :func:`callcentre_trace`: calls: open 08:00-18:00 on working days only (zero at night
  and on weekends), Monday-morning backlog, a holiday (a closed working day), an outage.
* :func:`bikeshare_trace`: trip starts: weekday commute peaks at 08:00 and 17:30, a broad
  weekend midday hump, near zero at night, and weather: each day's volume is scaled by
  a persistent random factor (rainy days at 30-60 %), with slow seasonal growth.

The start weekday differs between shapes, so nothing can rely on a series starting on
a Monday at midnight. :data:`SHAPES` maps each CLI shape name to its generator.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError, TraceError
from streamtrain.forecast.trace import SYNTH_MONDAY_S, Trace, ar1_noise, synth_trace
from streamtrain.units import DAY_S, HOUR_S, MINUTE_S

__all__ = [
    "SHAPES",
    "bikeshare_trace",
    "callcentre_trace",
    "make_trace",
    "retail_trace",
    "web_trace",
]

FloatArray = NDArray[np.float64]


def _clock(days: int, step_s: int, start_weekday: int) -> tuple[FloatArray, FloatArray]:
    """Hour of day and weekday (0 = Monday) of every step."""
    if days < 1:
        raise TraceError(f"a synthetic trace needs at least one day, got {days}")
    if DAY_S % step_s:
        raise TraceError(f"a day must be a whole number of {step_s}-s steps")
    t_s = np.arange(days * DAY_S // step_s, dtype=np.float64) * step_s
    hour = np.mod(t_s, DAY_S) / HOUR_S
    weekday = np.mod(t_s // DAY_S + start_weekday, 7)
    return hour, weekday


def _bump(hour: FloatArray, centre_h: float, width_h: float) -> FloatArray:
    return np.exp(-0.5 * ((hour - centre_h) / width_h) ** 2)


def _poisson_rate(rng: np.random.Generator, rate: FloatArray, step_s: int) -> FloatArray:
    """Observed records/s when ``rate`` records/s arrive as a Poisson process."""
    return rng.poisson(np.maximum(rate, 0.0) * step_s) / step_s


def _punch_gaps(
    rng: np.random.Generator, values: FloatArray, step_s: int, outages: int, scattered: float
) -> FloatArray:
    """NaN out ``outages`` blocks of 1-6 hours and a ``scattered`` fraction of single steps."""
    out = values.copy()
    steps = out.shape[0]
    for _ in range(outages):
        length = int(rng.uniform(HOUR_S, 6 * HOUR_S) // step_s)
        start = int(rng.integers(0, max(1, steps - length)))
        out[start : start + length] = np.nan
    out[rng.random(steps) < scattered] = np.nan
    return out


def _trace(values: FloatArray, step_s: int, start_weekday: int, name: str) -> Trace:
    # Each shape starts on another weekday than the Monday synthetic traces start on.
    return Trace(float(SYNTH_MONDAY_S + start_weekday * DAY_S), step_s, values, name)


def web_trace(days: int = 28, *, seed: int = 0, step_s: int = 60) -> Trace:
    """A consumer web service (see the module docstring); starts on a Wednesday."""
    rng = np.random.default_rng(seed)
    hour, weekday = _clock(days, step_s, start_weekday=2)
    steps = hour.shape[0]
    weekend = weekday >= 5
    daily = 0.15 + 0.45 * _bump(hour, 13.0, 3.5) + 0.75 * _bump(hour, 20.5, 2.2)
    daily = np.where(weekend, 0.15 + 0.7 * _bump(hour, 15.0, 4.5), daily)
    t_days = np.arange(steps) * step_s / DAY_S
    growth = 1.0 + 0.006 * t_days  # ≈ +4 % a week
    shift_day = rng.uniform(0.45, 0.75) * days
    level = np.where(t_days >= shift_day, 1.18, 1.0)
    day_factor = np.repeat(1 + 0.04 * rng.standard_normal(days), DAY_S // step_s)
    values = 8_000.0 * daily * growth * level * day_factor
    values *= np.exp(ar1_noise(rng, steps, 0.05, 0.9))
    for _ in range(int(rng.poisson(0.5 * days))):
        start = int(rng.integers(0, steps))
        stop = min(steps, start + int(rng.uniform(10 * MINUTE_S, HOUR_S) // step_s))
        values[start:stop] *= 1 + rng.uniform(0.3, 1.0) * np.linspace(1, 0, stop - start)
    values = _punch_gaps(rng, values, step_s, outages=max(1, days // 14), scattered=0.01)
    return _trace(values, step_s, 2, f"web-{days}d-seed{seed}")


def retail_trace(days: int = 28, *, seed: int = 0, step_s: int = 60) -> Trace:
    """Point-of-sale events of a store chain (see the module docstring); starts on a Friday."""
    rng = np.random.default_rng(seed)
    hour, weekday = _clock(days, step_s, start_weekday=4)
    steps = hour.shape[0]
    sunday = weekday == 6
    open_ = np.where(sunday, (hour >= 10) & (hour < 18), (hour >= 8) & (hour < 21))
    shape = 0.35 + 0.6 * _bump(hour, 12.5, 1.2) + 1.0 * _bump(hour, 17.8, 1.5)
    day_scale = np.select([weekday == 5, sunday, weekday == 4], [1.6, 0.7, 1.2], 1.0)
    t_days = np.arange(steps) * step_s / DAY_S
    promo_start = float(rng.integers(7, max(8, days - 7)))
    promo = np.where((t_days >= promo_start) & (t_days < promo_start + 7), 1.35, 1.0)
    day_factor = np.repeat(np.exp(0.06 * rng.standard_normal(days)), DAY_S // step_s)
    rate = 40.0 * shape * day_scale * promo * day_factor * open_
    rate *= np.exp(ar1_noise(rng, steps, 0.08, 0.7))
    values = _poisson_rate(rng, rate, step_s)
    values = _punch_gaps(rng, values, step_s, outages=max(1, days // 10), scattered=0.005)
    return _trace(values, step_s, 4, f"retail-{days}d-seed{seed}")


def callcentre_trace(days: int = 28, *, seed: int = 0, step_s: int = 60) -> Trace:
    """Incoming calls (see the module docstring); starts on a Tuesday."""
    rng = np.random.default_rng(seed)
    hour, weekday = _clock(days, step_s, start_weekday=1)
    steps = hour.shape[0]
    working = weekday < 5
    day_index = np.arange(steps) * step_s // DAY_S
    holiday = int(rng.integers(3, max(4, days - 2)))
    working &= day_index != holiday
    open_ = working & (hour >= 8) & (hour < 18)
    shape = 0.4 + 1.0 * _bump(hour, 10.5, 1.1) + 0.7 * _bump(hour, 14.5, 1.3)
    monday = np.where(weekday == 0, 1.4, np.where(weekday == 4, 0.85, 1.0))
    day_factor = np.repeat(np.exp(0.1 * rng.standard_normal(days)), DAY_S // step_s)
    rate = 3.0 * shape * monday * day_factor * open_
    rate *= np.exp(ar1_noise(rng, steps, 0.1, 0.8))
    values = _poisson_rate(rng, rate, step_s)
    values = _punch_gaps(rng, values, step_s, outages=max(1, days // 14), scattered=0.01)
    return _trace(values, step_s, 1, f"callcentre-{days}d-seed{seed}")


def bikeshare_trace(days: int = 28, *, seed: int = 0, step_s: int = 60) -> Trace:
    """Bike-share trip starts (see the module docstring); starts on a Sunday."""
    rng = np.random.default_rng(seed)
    hour, weekday = _clock(days, step_s, start_weekday=6)
    steps = hour.shape[0]
    weekend = weekday >= 5
    commute = 0.05 + 1.0 * _bump(hour, 8.0, 0.8) + 1.2 * _bump(hour, 17.5, 1.1)
    commute += 0.35 * _bump(hour, 12.5, 2.0)
    leisure = 0.05 + 0.9 * _bump(hour, 14.0, 3.0)
    shape = np.where(weekend, leisure, commute) * np.where(hour < 5.5, 0.2, 1.0)
    # Weather: a persistent daily factor (AR over days), with occasional rainy days.
    weather = np.empty(days)
    state = 0.0
    for d in range(days):
        state = 0.6 * state + 0.15 * rng.standard_normal()
        weather[d] = math.exp(state) * (rng.uniform(0.3, 0.6) if rng.random() < 0.12 else 1.0)
    t_days = np.arange(steps) * step_s / DAY_S
    rate = 12.0 * shape * np.repeat(weather, DAY_S // step_s) * (1 + 0.01 * t_days)
    rate *= np.exp(ar1_noise(rng, steps, 0.07, 0.85))
    values = _poisson_rate(rng, rate, step_s)
    values = _punch_gaps(rng, values, step_s, outages=max(1, days // 14), scattered=0.01)
    return _trace(values, step_s, 6, f"bikeshare-{days}d-seed{seed}")


def _kale(days: int = 28, *, seed: int = 0, step_s: int = 60) -> Trace:
    return synth_trace(days, seed=seed, step_s=step_s)


SHAPES: dict[str, Callable[..., Trace]] = {
    "kale": _kale,
    "web": web_trace,
    "retail": retail_trace,
    "callcentre": callcentre_trace,
    "bikeshare": bikeshare_trace,
}


def make_trace(shape: str, days: int = 28, *, seed: int = 0, step_s: int = 60) -> Trace:
    """A trace of one of :data:`SHAPES` (``kale`` is :func:`synth_trace`)."""
    try:
        generator = SHAPES[shape]
    except KeyError:
        raise ConfigError(f"unknown trace shape {shape!r}; known: {', '.join(SHAPES)}") from None
    trace: Trace = generator(days, seed=seed, step_s=step_s)
    return trace
