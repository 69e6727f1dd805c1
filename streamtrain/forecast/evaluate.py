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
Each fit is reported to ``on_fit`` (a progress meter; :func:`planned_fits` says how
many there will be), or else as a ``progress`` line.
:func:`default_horizon_steps` is ``forecast eval``'s default horizon: 30 minutes, or two
steps on series of 15-minute steps and coarser. :class:`Scores` also holds the MASE of
each horizon step (``mase_by_step``).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError, ForecastError
from streamtrain.forecast.base import Forecaster, quantiles_or_point
from streamtrain.units import s_to_ms

__all__ = [
    "EvalSettings",
    "Scores",
    "Trail",
    "by_step",
    "default_horizon_steps",
    "evaluate",
    "mase_scale",
    "planned_fits",
    "rolling_origin",
    "score",
]

FloatArray = NDArray[np.float64]
Progress = Callable[[str], None]
OnFit = Callable[[str, int, float], None]  # (model, history steps, fit seconds)


def default_horizon_steps(step_s: int) -> int:
    """30 minutes, or two steps when a step is 15 minutes or longer."""
    return 2 if step_s >= 900 else max(1, round(1800 / step_s))


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


@dataclass(frozen=True, slots=True, eq=False)
class Trail:
    """What a model forecast over the test period (for plots): per origin, its first
    step and ``horizon_steps`` values of the point forecast and of the band's two quantiles
    (the point forecast when the model has no quantiles)."""

    origins: NDArray[np.int64]
    point: FloatArray  # (origins, horizon_steps)
    low: FloatArray
    high: FloatArray
    levels: tuple[float, float]


@dataclass(frozen=True, slots=True)
class Scores:
    """Errors of one model over every scored (origin, step) pair; ``mase_by_step[h]``
    is the MASE of the forecasts ``h + 1`` steps ahead."""

    mase: float
    mae: float
    rmse: float
    smape_pct: float
    mape_pct: float | None
    fit_s: float
    predict_ms: float
    points: int
    fits: int
    mase_by_step: tuple[float, ...] = ()
    trail: Trail | None = None

    def as_dict(self) -> dict[str, float | list[float] | None]:
        return {
            "mase": self.mase,
            "mae": self.mae,
            "rmse": self.rmse,
            "smape_pct": self.smape_pct,
            "mape_pct": self.mape_pct,
            "fit_s": self.fit_s,
            "predict_ms": self.predict_ms,
            "mase_by_step": list(self.mase_by_step),
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


def _band(model: Forecaster, horizon_steps: int, levels: tuple[float, float]) -> list[FloatArray]:
    raw = quantiles_or_point(model, horizon_steps, levels)  # no error model: a zero-width band
    return [np.maximum(np.asarray(raw[q], dtype=np.float64), 0.0) for q in levels]


def by_step(actual: FloatArray, forecast: FloatArray, scale: float) -> tuple[float, ...]:
    """MASE per horizon step of ``(origins, horizon_steps)`` arrays (gaps skipped)."""
    err = np.abs(forecast - actual)
    seen = ~np.isnan(err)
    total = np.where(seen, err, 0.0).sum(axis=0)
    count = seen.sum(axis=0)
    return tuple(
        float(t / c / scale) if c else float("nan") for t, c in zip(total, count, strict=True)
    )


def planned_fits(n: int, settings: EvalSettings) -> int:
    """How many fits :func:`rolling_origin` makes of one model on ``n`` steps."""
    count, fitted_at = 0, None
    for origin in _origins(n, settings):
        due = settings.refit_every_steps > 0 and fitted_at is not None
        if fitted_at is None or (due and origin - fitted_at >= settings.refit_every_steps):
            count, fitted_at = count + 1, origin
    return count


def rolling_origin(
    values: FloatArray,
    factory: Callable[[], Forecaster],
    settings: EvalSettings,
    *,
    name: str = "model",
    progress: Progress | None = None,
    band: tuple[float, float] | None = None,
    on_fit: OnFit | None = None,
) -> Scores:
    """Evaluate the models ``factory`` makes on ``values`` (see the module docstring);
    with ``band``, also keep the forecasts and those quantiles (:class:`Trail`)."""
    origins = _origins(values.shape[0], settings)
    scale = mase_scale(values[: origins[0]], settings.season_steps)
    actuals: list[FloatArray] = []
    forecasts: list[FloatArray] = []
    fit_times: list[float] = []
    predict_times: list[float] = []
    bands: list[list[FloatArray]] = []
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
                if on_fit is not None:
                    on_fit(name, origin, fit_times[-1])
                elif progress is not None:
                    progress(f"{name}: fitted on {origin} steps ({fit_times[-1]:.1f} s)")
            elif origin > seen:
                model.update(values[seen:origin])
            seen = origin
            started = time.perf_counter()
            forecast = model.predict(settings.horizon_steps)
            predict_times.append(time.perf_counter() - started)
            if band is not None:
                bands.append(_band(model, settings.horizon_steps, band))
        except ForecastError as exc:
            raise ForecastError(f"{name} failed at origin step {origin}: {exc.message}") from exc
        forecasts.append(np.maximum(np.asarray(forecast, dtype=np.float64), 0.0))
        actuals.append(values[origin : origin + settings.horizon_steps])
        if progress is not None and (count + 1) % 50 == 0:
            progress(f"{name}: {count + 1}/{len(origins)} origins")
    result = score(
        np.concatenate(actuals),
        np.concatenate(forecasts),
        scale,
        fit_s=float(np.mean(fit_times)),
        predict_ms=s_to_ms(float(np.mean(predict_times))),
        fits=len(fit_times),
    )
    points = np.stack(forecasts)
    trail = None
    if band is not None:
        trail = Trail(
            np.asarray(list(origins), dtype=np.int64),
            points,
            np.stack([b[0] for b in bands]),
            np.stack([b[1] for b in bands]),
            band,
        )
    return dataclasses.replace(
        result, mase_by_step=by_step(np.stack(actuals), points, scale), trail=trail
    )


def evaluate(
    values: FloatArray,
    factories: Mapping[str, Callable[[], Forecaster]],
    settings: EvalSettings,
    *,
    progress: Progress | None = None,
    band: tuple[float, float] | None = None,
    on_fit: OnFit | None = None,
) -> dict[str, Scores]:
    """:func:`rolling_origin` for each named model, on the same split and scale."""
    results: dict[str, Scores] = {}
    for index, (name, factory) in enumerate(factories.items(), start=1):
        if progress is not None:
            progress(f"[{index}/{len(factories)}] {name}")
        results[name] = rolling_origin(
            values, factory, settings, name=name, progress=progress, band=band, on_fit=on_fit
        )
    return results
