"""What the FEDformer-style model sees: a de-noised seasonal baseline, and its residual.

Owned here, as pure numpy functions (no torch):

* :func:`seasonal_baseline`: the mean of the (log-scaled, smoothed) series one, two and
  three periods earlier (a period is a week, or a day while the history is short):
  the seasonal shape with little of any one period's minute-level noise. Beyond one
  period ahead it repeats.
* :class:`LogScale`: ``z = log1p(y / c)`` with ``c`` a tenth of the mean rate: close to
  ``log y`` (so level shifts are additive) where traffic is high, linear near zero (so
  nights at 0 records/s are fine). The model works on ``z(y) - z(baseline)``.
* :func:`coarse_means`: means over blocks of ``steps_per_block`` steps, anchored at the
  end of the series (the last block ends at the forecast origin).
* :func:`time_marks`: sin/cos of the phase in the day and in the week of each position
  (counted from the start of the history: forecasters are not told wall-clock time);
  :data:`MARK_DIM` features per position.
* :func:`interpolate_forward`: coarse block forecasts back to per-step values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from streamtrain.units import DAY_S, WEEK_S

__all__ = [
    "MARK_DIM",
    "LogScale",
    "block_centres",
    "coarse_means",
    "interpolate_forward",
    "moving_average",
    "seasonal_baseline",
    "time_marks",
]

FloatArray = NDArray[np.float64]
MARK_DIM = 4  # time features per position (see time_marks)


def moving_average(values: FloatArray, window: int) -> FloatArray:
    """Centred moving average of a complete series; shorter windows at the edges."""
    if window <= 1:
        return values.copy()
    half = window // 2
    padded = np.concatenate([[0.0], np.cumsum(values)])
    index = np.arange(values.shape[0])
    lo = np.maximum(index - half, 0)
    hi = np.minimum(index + half + 1, values.shape[0])
    result: FloatArray = (padded[hi] - padded[lo]) / (hi - lo)
    return result


def seasonal_baseline(
    smoothed_z: FloatArray,
    period: int,
    ahead: int,
    periods: int = 3,
    *,
    median: bool = False,
    start: int = 0,
) -> FloatArray:
    """Mean (or, with ``median``, the median: one holiday or outage among the periods
    does not move it) of the last ``periods`` periods' values at each of the positions
    ``start .. n + ahead - 1`` (``NaN`` where no earlier period exists). Positions more
    than one period past the end reuse the last observed period. Each position's value
    depends on ``smoothed_z`` only, so a forecast that needs the last few positions asks
    for those (``start``) and gets the same values as from the whole series."""
    n = smoothed_z.shape[0]
    target = np.arange(start, n + ahead)
    stack = np.full((periods, target.shape[0]), np.nan)
    for k in range(1, periods + 1):
        source = target - k * period
        while np.any(source >= n):
            source = np.where(source >= n, source - period, source)
        valid = source >= 0
        stack[k - 1, valid] = smoothed_z[source[valid]]
    count = (~np.isnan(stack)).sum(axis=0)
    out = np.full(target.shape[0], np.nan)
    some = count > 0
    if median:
        out[some] = np.nanmedian(stack[:, some], axis=0)
    else:
        out[some] = np.nansum(stack[:, some], axis=0) / count[some]
    return out


@dataclass(frozen=True, slots=True)
class LogScale:
    """``z = log1p(y / c)`` and back."""

    c: float

    @classmethod
    def of(cls, filled: FloatArray) -> LogScale:
        mean = float(np.mean(filled))
        return cls(0.1 * mean if mean > 0 else 1.0)

    def forward(self, values: FloatArray) -> FloatArray:
        result: FloatArray = np.log1p(np.maximum(values, 0.0) / self.c)
        return result

    def inverse(self, z: FloatArray) -> FloatArray:
        result: FloatArray = self.c * np.expm1(np.maximum(z, 0.0))
        return result


def coarse_means(values: FloatArray, steps_per_block: int) -> FloatArray:
    """Means of consecutive ``steps_per_block``-step blocks; the first
    ``n % steps_per_block`` steps are dropped. A block with a ``NaN`` is ``NaN``."""
    usable = values.shape[0] // steps_per_block * steps_per_block
    tail = values[values.shape[0] - usable :]
    result: FloatArray = tail.reshape(-1, steps_per_block).mean(axis=1)
    return result


def time_marks(positions: FloatArray, step_s: int) -> FloatArray:
    """``(len, MARK_DIM)`` features: sin/cos of the day phase and of the week phase."""
    t_s = positions * step_s
    day = 2 * np.pi * t_s / DAY_S
    week = 2 * np.pi * t_s / WEEK_S
    marks = np.stack([np.sin(day), np.cos(day), np.sin(week), np.cos(week)], axis=1)
    return marks.astype(np.float64)


def block_centres(end: int, blocks: int, steps_per_block: int) -> FloatArray:
    """Centre positions of the ``blocks`` blocks that end at position ``end`` (exclusive)."""
    starts = end - steps_per_block * np.arange(blocks, 0, -1, dtype=np.float64)
    return starts + (steps_per_block - 1) / 2


def interpolate_forward(
    past: FloatArray, future: FloatArray, steps_per_block: int, horizon_steps: int
) -> FloatArray:
    """Per-step values for steps ``0 .. horizon_steps-1`` after the origin, linear between block
    centres: ``past`` are the last observed blocks, ``future`` the forecast ones; the last
    forecast block is held beyond its centre."""
    f = steps_per_block
    knots_x = np.concatenate(
        [
            block_centres(0, past.shape[0], f),
            block_centres(f * future.shape[0], future.shape[0], f),
        ]
    )
    knots_y = np.concatenate([past, future])
    result: FloatArray = np.interp(np.arange(horizon_steps, dtype=np.float64), knots_x, knots_y)
    return result
