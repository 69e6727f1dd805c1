"""The forecaster contract and the seasonal-naive models every other model must beat.

Owned here:

* :class:`Forecaster`: the protocol every model follows (statsforecast's shape), with
  :func:`check_levels`, :func:`check_horizon` and :func:`quantiles_or_point`;
  :class:`WarmStart`, :class:`BatchWalk` and :class:`Validated`, the optional parts
  some models add.
* :func:`fill_gaps`: the one gap rule shared by models that need a complete series.
* :class:`SeasonalNaive` and :func:`naive_period_s`, the one rule for which season a
  seasonal naive repeats, used by every safety net and policy.
* :func:`worse_than_naive` and :func:`hands_over`: the safety net's one rule for when a
  model's recent error hands the forecast to the seasonal naive (``auto`` and the live
  planner).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, Self, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError, ForecastError
from streamtrain.units import DAY_S, WEEK_S

__all__ = [
    "NAIVE_MARGIN",
    "NAIVE_MARGIN_MASE",
    "NAIVE_NAMES",
    "QUANTILE_GRID",
    "BatchWalk",
    "Forecaster",
    "SeasonalNaive",
    "Validated",
    "WarmStart",
    "as_history",
    "as_new_points",
    "check_horizon",
    "check_levels",
    "fill_gaps",
    "hands_over",
    "is_trusted",
    "naive_period_s",
    "quantiles_or_point",
    "seasonal_scale",
    "worse_than_naive",
]

FloatArray = NDArray[np.float64]
NAIVE_MARGIN = 0.1  # of the naive's recent MAE
NAIVE_MARGIN_MASE = 0.05  # of the series' MASE scale (mean absolute daily difference)


@runtime_checkable
class Forecaster(Protocol):
    """A univariate records/s forecaster: ``fit(history) -> self``,
    ``predict(horizon_steps) -> ndarray``, ``predict_quantiles(horizon_steps, levels) ->
    {level: ndarray}``, ``update(new_points) -> self`` (append observations without
    retraining), fitted state in trailing-underscore attributes, ``save(path)`` /
    ``load(path)``.

    ``history`` is a regular series of records/s, one value per ``step_s`` (60 s by
    default), oldest first, with ``NaN`` for missing steps; forecasts are never negative.
    A model with no error model of its own raises :class:`ForecastError` from
    ``predict_quantiles``, and each caller does what suits it (the policies' feed scales
    the point forecast by its past errors; a wrapper or an ensemble answers the point
    forecast at every level: :func:`quantiles_or_point`)."""

    name: str
    step_s: int

    def fit(self, history: FloatArray) -> Self: ...

    def predict(self, horizon_steps: int) -> FloatArray: ...

    def predict_quantiles(
        self, horizon_steps: int, levels: Sequence[float]
    ) -> dict[float, FloatArray]: ...

    def update(self, new_points: FloatArray) -> Self: ...

    def save(self, path: str | Path) -> None: ...


def quantiles_or_point(
    model: Forecaster, horizon_steps: int, levels: Sequence[float]
) -> dict[float, FloatArray]:
    """``model``'s quantiles at ``levels``; its point forecast at every level when it has
    no error model of its own (what a wrapper or an ensemble answers for it)."""
    levels = check_levels(levels)
    try:
        return model.predict_quantiles(horizon_steps, levels)
    except ForecastError:
        point = model.predict(horizon_steps)
        return {q: point.copy() for q in levels}


def check_levels(levels: Sequence[float]) -> list[float]:
    """``levels`` as floats; a :class:`ConfigError` unless every one is in (0, 1). The one
    check of quantile levels."""
    out = [float(q) for q in levels]
    bad = [q for q in out if not 0 < q < 1]  # NaN fails too
    if bad:
        raise ConfigError(f"quantile levels must be in (0, 1), got {bad}")
    return out


# The names of the two seasonal naives, by the season they repeat.
NAIVE_NAMES = {DAY_S: "seasonal_naive_daily", WEEK_S: "seasonal_naive_weekly"}


def naive_period_s(history_steps: int, step_s: int) -> int:
    """The season a seasonal naive repeats after ``history_steps`` steps of ``step_s``:
    the week from two weeks of history (so that the week's seasonal differences exist for
    its quantiles), the day before."""
    return WEEK_S if history_steps * step_s >= 2 * WEEK_S else DAY_S


def as_history(history: FloatArray | list[float], *, min_length: int = 1) -> FloatArray:
    """Validate a history: 1-D, at least ``min_length`` steps, values finite >= 0 or NaN."""
    values = np.asarray(history, dtype=np.float64)
    if values.ndim != 1:
        raise ForecastError("a history is a one-dimensional series")
    if values.shape[0] < min_length:
        raise ForecastError(f"need at least {min_length} steps of history, got {values.shape[0]}")
    observed = values[~np.isnan(values)]
    if observed.size == 0:
        raise ForecastError("the history has no observed values")
    if np.any(~np.isfinite(observed)) or np.any(observed < 0):
        raise ForecastError("history values must be finite, non-negative records/s (NaN = gap)")
    return values


def fill_gaps(history: FloatArray, season: int) -> FloatArray:
    """A copy of ``history`` without ``NaN``: a missing step takes the value one season
    earlier, else one season later, else is linearly interpolated between its neighbours."""
    values = np.array(history, dtype=np.float64)
    missing = np.isnan(values)
    if not missing.any():
        return values
    if season > 0:
        for shift in (season, -season):
            source = np.roll(values, shift)
            if shift > 0:
                source[:shift] = np.nan
            else:
                source[shift:] = np.nan
            take = np.isnan(values) & ~np.isnan(source)
            values[take] = source[take]
    still = np.isnan(values)
    if still.all():
        raise ForecastError("the history has no observed values")
    if still.any():
        index = np.arange(values.shape[0])
        values[still] = np.interp(index[still], index[~still], values[~still])
    return values


# The levels at which a model keeps its error quantiles (1 %, 2 %, ..., 99 %).
QUANTILE_GRID = np.linspace(0.01, 0.99, 99)


def _spread(diffs: FloatArray) -> FloatArray:
    observed = diffs[~np.isnan(diffs)]
    if observed.size == 0:
        return np.zeros(QUANTILE_GRID.size)
    result: FloatArray = np.quantile(observed, QUANTILE_GRID)
    return result


def as_new_points(new_points: FloatArray | list[float]) -> FloatArray:
    """Validate points for ``update``: 1-D, finite >= 0 or NaN (may be empty or all gaps)."""
    values = np.asarray(new_points, dtype=np.float64)
    if values.ndim != 1:
        raise ForecastError("new points are a one-dimensional series")
    observed = values[~np.isnan(values)]
    if np.any(~np.isfinite(observed)) or np.any(observed < 0):
        raise ForecastError("new points must be finite, non-negative records/s (NaN = gap)")
    return values


def check_horizon(horizon_steps: int) -> None:
    """A :class:`ConfigError` unless ``horizon_steps`` is at least one step."""
    if horizon_steps < 1:
        raise ConfigError(f"the forecast horizon must be at least one step, got {horizon_steps}")


class SeasonalNaive:
    """Repeat the last observed season: y(t + h) = y(t + h - k·period)
    (``seasonal_naive_daily``, ``seasonal_naive_weekly``).

    ``period_s=0`` (``seasonal_naive``): the season of :func:`naive_period_s`, the week
    once the history holds two weeks, else the day. Its quantiles are the empirical
    quantiles of the seasonal differences ``y(t) - y(t - season)`` over the last four
    seasons, added to the point forecast."""

    def __init__(self, period_s: int = DAY_S, *, step_s: int = 60, name: str | None = None) -> None:
        if step_s <= 0 or period_s < 0 or (period_s and period_s % step_s) or DAY_S % step_s:
            raise ConfigError(
                f"the period ({period_s} s) must be a whole number of steps ({step_s} s)"
            )
        self.adaptive = period_s == 0
        self.period_s = period_s or DAY_S
        self.step_s = step_s
        fallback = "seasonal_naive" if self.adaptive else f"seasonal_naive_{period_s}s"
        self.name = name or (
            "seasonal_naive" if self.adaptive else NAIVE_NAMES.get(period_s, fallback)
        )
        self.last_season_: FloatArray | None = None
        self.spread_: FloatArray | None = None  # quantiles of seasonal differences

    @property
    def season(self) -> int:
        return self.period_s // self.step_s

    def fit(self, history: FloatArray) -> Self:
        values = as_history(history)
        if self.adaptive:
            self.period_s = naive_period_s(values.shape[0], self.step_s)
        season = self.season
        if values.shape[0] < season:
            # Less than one season: the best naive guess is the last value, flat.
            observed = values[~np.isnan(values)]
            self.last_season_ = np.full(season, observed[-1])
            diffs = np.diff(observed)
            self.spread_ = _spread(diffs)
            return self
        filled = fill_gaps(values, season)
        self.last_season_ = filled[-season:]
        recent = values[-5 * season :]
        self.spread_ = _spread(recent[season:] - recent[:-season])
        return self

    def predict_quantiles(
        self, horizon_steps: int, levels: Sequence[float]
    ) -> dict[float, FloatArray]:
        """The point forecast plus the seasonal differences' quantiles (class docstring)."""
        levels = check_levels(levels)
        point = self.predict(horizon_steps)
        spread = self.spread_ if self.spread_ is not None else np.zeros(QUANTILE_GRID.size)
        return {
            float(q): np.maximum(point + float(np.interp(q, QUANTILE_GRID, spread)), 0.0)
            for q in levels
        }

    def predict(self, horizon_steps: int) -> FloatArray:
        check_horizon(horizon_steps)
        if self.last_season_ is None:
            raise ForecastError(f"{self.name} is not fitted")
        reps = -(-horizon_steps // self.season)
        return np.maximum(np.tile(self.last_season_, reps)[:horizon_steps], 0.0)

    def update(self, new_points: FloatArray) -> Self:
        """Append observations; a gap takes the value one season earlier."""
        if self.last_season_ is None:
            raise ForecastError(f"{self.name} is not fitted")
        values = as_new_points(new_points)
        season = self.season
        window = np.concatenate([self.last_season_, values])
        for i in range(season, window.shape[0]):
            if np.isnan(window[i]):
                window[i] = window[i - season]
        self.last_season_ = window[-season:]
        return self

    def save(self, path: str | Path) -> None:
        if self.last_season_ is None:
            raise ForecastError(f"{self.name} is not fitted; nothing to save")
        state = {
            "model": "seasonal_naive",
            "name": self.name,
            "period_s": self.period_s,
            "step_s": self.step_s,
            "last_season": self.last_season_.tolist(),
            "spread": None if self.spread_ is None else self.spread_.tolist(),
        }
        Path(path).write_text(json.dumps(state), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> SeasonalNaive:
        try:
            state = json.loads(Path(path).read_text(encoding="utf-8"))
            model = cls(
                int(state["period_s"]), step_s=int(state["step_s"]), name=str(state["name"])
            )
            model.last_season_ = np.asarray(state["last_season"], dtype=np.float64)
            spread = state.get("spread")
            model.spread_ = None if spread is None else np.asarray(spread, dtype=np.float64)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ForecastError(f"cannot load a seasonal-naive model from {path}: {exc}") from exc
        if model.last_season_.shape != (model.season,):
            raise ForecastError(f"{path}: the saved season has the wrong length")
        return model


def seasonal_scale(values: FloatArray, season: int) -> float:
    """Mean absolute ``season``-step difference of ``values`` (MASE's scale), skipping
    gaps; NaN when there is none."""
    if season < 1 or values.shape[0] <= season:
        return float("nan")
    diff = np.abs(values[season:] - values[:-season])
    diff = diff[~np.isnan(diff)]
    return float(diff.mean()) if diff.size else float("nan")


def worse_than_naive(model_mae: float, naive_mae: float, scale: float) -> bool:
    """Whether a model's recent MAE is clearly above the seasonal naive's: above it by
    ``NAIVE_MARGIN`` of the naive's error plus ``NAIVE_MARGIN_MASE`` of the series' MASE
    ``scale`` (:func:`seasonal_scale`), so a 1e-5 miss beside a naive that is exact on a
    closed day, or a 1 % difference, does not hand the forecast to the naive."""
    floor = NAIVE_MARGIN_MASE * scale if math.isfinite(scale) and scale > 0 else 0.0
    return model_mae > naive_mae * (1 + NAIVE_MARGIN) + floor


@runtime_checkable
class WarmStart(Protocol):
    """A model that can fit starting from an earlier fit of the same model on an earlier
    part of the same series (the transformer: fine-tuned from its weights instead of
    trained from scratch). ``fit_from`` with a ``previous`` that does not match fits
    from scratch."""

    def fit_from(self, previous: object, history: FloatArray) -> Self: ...


@runtime_checkable
class BatchWalk(Protocol):
    """A model that forecasts a validation fold's origins at once (the transformer: one
    network pass for the fold instead of one per origin): told ``values[start:origin]``
    before each origin's forecast and ``values[:end]`` in the end, as ``update`` and
    ``predict`` in turn would do, with the same forecasts; ``None`` when it cannot (the
    caller walks it one origin at a time)."""

    def walk(
        self, values: FloatArray, start: int, origins: Sequence[int], end: int, horizon_steps: int
    ) -> list[FloatArray] | None: ...


@runtime_checkable
class Validated(Protocol):
    """A model that says whether its validation earned it trust (``auto``'s selection)."""

    @property
    def trusted_(self) -> bool: ...


def is_trusted(model: object) -> bool:
    """Whether ``model`` is :class:`Validated` and says it is trusted. An attribute
    lookup, not ``isinstance``: a runtime-checkable protocol's check costs tens of
    microseconds, and the safety net asks at every forecast."""
    return bool(getattr(model, "trusted_", False))


def hands_over(recent: tuple[float, float], scale: float, model: object) -> bool:
    """The safety net's rule: whether the (model, naive) ``recent`` MAE hands the forecast
    to the seasonal naive: the model is clearly worse (:func:`worse_than_naive`) and not
    trusted (:class:`Validated`: ``auto``'s kept statsforecast model that beat the naive
    in validation keeps the forecast; its recent error still asks the live planner for a
    refit)."""
    if is_trusted(model):
        return False
    return worse_than_naive(*recent, scale)
