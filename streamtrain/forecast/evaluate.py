"""The rolling-origin evaluation harness and its error metrics (pure: no I/O, no prints).

Owned here:

* the metrics: MASE (primary: mean absolute error over a scale, the mean absolute
  daily-seasonal difference of the training data), MAE, RMSE, sMAPE (a point where
  actual and forecast are both 0 counts 0) and MAPE (over points with actual > 0);
* :func:`rolling_origin`: train on the past, forecast the next ``horizon_steps``,
  slide by ``stride_steps`` through the test period (the last ``test_steps``). A model
  is refitted every ``refit_every_steps`` (0 = fitted once, at the first origin) and
  told the new observations through ``update`` in between, as the simulator uses it.
  Every forecast is clipped at 0; gap steps in the actuals are not scored.
* :func:`evaluate`: :func:`rolling_origin` for several models on the same split.

Fit time is the mean wall time of a ``fit``; predict time the mean of a ``predict``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError, ForecastError
from streamtrain.forecast.base import Forecaster

__all__ = [
    "EvalSettings",
    "Scores",
    "evaluate",
    "mase_scale",
    "rolling_origin",
    "score",
]

FloatArray = NDArray[np.float64]
Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class EvalSettings:
    """A rolling-origin split of a series, in steps of the series."""

    horizon_steps: int
    test_steps: int
    stride_steps: int
    season_steps: int
    refit_every_steps: int = 0

    def __post_init__(self) -> None:
        if self.horizon_steps < 1 or self.stride_steps < 1 or self.season_steps < 1:
            raise ConfigError("horizon, stride and season must be at least one step")
        if self.test_steps < self.horizon_steps:
            raise ConfigError(
                f"the test period ({self.test_steps} steps) is shorter than the horizon "
                f"({self.horizon_steps} steps)"
            )
        if self.refit_every_steps < 0:
            raise ConfigError("the refit interval cannot be negative")


@dataclass(frozen=True, slots=True)
class Scores:
    """Errors of one model over every scored (origin, step) pair."""

    mase: float
    mae: float
    rmse: float
    smape_pct: float
    mape_pct: float | None
    fit_s: float
    predict_ms: float
    points: int
    fits: int

    def as_dict(self) -> dict[str, float | None]:
        return {
            "mase": self.mase,
            "mae": self.mae,
            "rmse": self.rmse,
            "smape_pct": self.smape_pct,
            "mape_pct": self.mape_pct,
            "fit_s": self.fit_s,
            "predict_ms": self.predict_ms,
        }


def mase_scale(train: FloatArray, season_steps: int) -> float:
    """Mean absolute seasonal difference of ``train``, skipping pairs with a gap."""
    if train.shape[0] <= season_steps:
        raise ConfigError(
            f"the training part ({train.shape[0]} steps) must be longer than one season "
            f"({season_steps} steps) to scale MASE"
        )
    diff = np.abs(train[season_steps:] - train[:-season_steps])
    diff = diff[~np.isnan(diff)]
    if diff.size == 0 or float(diff.mean()) == 0.0:
        raise ConfigError("the training part has no seasonal variation to scale MASE by")
    return float(diff.mean())


def score(
    actual: FloatArray,
    forecast: FloatArray,
    scale: float,
    *,
    fit_s: float = 0.0,
    predict_ms: float = 0.0,
    fits: int = 0,
) -> Scores:
    """The metrics of ``forecast`` against ``actual`` (NaN actuals are skipped)."""
    keep = ~np.isnan(actual)
    a, f = actual[keep], forecast[keep]
    if a.size == 0:
        raise ConfigError("no observed actuals to score in the test period")
    err = np.abs(f - a)
    mae = float(err.mean())
    denom = np.abs(a) + np.abs(f)
    ratio = np.divide(2 * err, denom, out=np.zeros_like(err), where=denom > 0)
    positive = a > 0
    mape = float(100 * (err[positive] / a[positive]).mean()) if positive.any() else None
    return Scores(
        mase=mae / scale,
        mae=mae,
        rmse=float(math.sqrt(float((err**2).mean()))),
        smape_pct=float(100 * ratio.mean()),
        mape_pct=mape,
        fit_s=fit_s,
        predict_ms=predict_ms,
        points=int(a.size),
        fits=fits,
    )


def _origins(n: int, settings: EvalSettings) -> range:
    first = n - settings.test_steps
    if first <= settings.season_steps:
        raise ConfigError(
            f"the series ({n} steps) leaves {first} steps before the test period; "
            f"need more than one season ({settings.season_steps} steps)"
        )
    return range(first, n - settings.horizon_steps + 1, settings.stride_steps)


def rolling_origin(
    values: FloatArray,
    factory: Callable[[], Forecaster],
    settings: EvalSettings,
    *,
    name: str = "model",
    progress: Progress | None = None,
) -> Scores:
    """Evaluate the models ``factory`` makes on ``values`` (see the module docstring)."""
    origins = _origins(values.shape[0], settings)
    scale = mase_scale(values[: origins[0]], settings.season_steps)
    actuals: list[FloatArray] = []
    forecasts: list[FloatArray] = []
    fit_times: list[float] = []
    predict_times: list[float] = []
    model: Forecaster | None = None
    fitted_at = seen = 0
    for count, origin in enumerate(origins):
        refit = model is None or (
            settings.refit_every_steps > 0 and origin - fitted_at >= settings.refit_every_steps
        )
        try:
            if model is None or refit:
                model = factory()
                started = time.perf_counter()
                model.fit(values[:origin])
                fit_times.append(time.perf_counter() - started)
                fitted_at = origin
                if progress is not None:
                    progress(f"{name}: fitted on {origin} steps ({fit_times[-1]:.1f} s)")
            elif origin > seen:
                model.update(values[seen:origin])
            seen = origin
            started = time.perf_counter()
            forecast = model.predict(settings.horizon_steps)
            predict_times.append(time.perf_counter() - started)
        except ForecastError as exc:
            raise ForecastError(f"{name} failed at origin step {origin}: {exc.message}") from exc
        forecasts.append(np.maximum(np.asarray(forecast, dtype=np.float64), 0.0))
        actuals.append(values[origin : origin + settings.horizon_steps])
        if progress is not None and (count + 1) % 100 == 0:
            progress(f"{name}: {count + 1}/{len(origins)} origins")
    return score(
        np.concatenate(actuals),
        np.concatenate(forecasts),
        scale,
        fit_s=float(np.mean(fit_times)),
        predict_ms=1000 * float(np.mean(predict_times)),
        fits=len(fit_times),
    )


def evaluate(
    values: FloatArray,
    factories: Mapping[str, Callable[[], Forecaster]],
    settings: EvalSettings,
    *,
    progress: Progress | None = None,
) -> dict[str, Scores]:
    """:func:`rolling_origin` for each named model, on the same split and scale."""
    return {
        name: rolling_origin(values, factory, settings, name=name, progress=progress)
        for name, factory in factories.items()
    }
