"""Holt-Winters exponential smoothing (``ets``): additive error, damped trend, one season.

Owned here: :class:`HoltWinters`, written for this project (no statsmodels): the
error-correction form of additive Holt-Winters with a damped trend,

    forecast  f(t)   = l + phi·b + s[t mod m]
    error     e      = y(t) - f(t)          (0 at a gap: the state coasts)
    level     l      <- l + phi·b + alpha·e
    trend     b      <- phi·b + beta·e
    season    s[t]   <- s[t] + gamma·e

with ``m`` the steps in ``period_s`` (a day by default). ``alpha, beta, gamma, phi`` minimise the
in-sample one-step squared error (L-BFGS-B, bounded) over the last ``fit_days`` of
the history; the state is initialised from the first two seasons of that span.
``update`` runs the recursion over new points with the fitted parameters, so it is
cheap. The h-step forecast is ``l + (phi + … + phi^h)·b + s[(t+h) mod m]``, clipped at 0.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Self

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError, ForecastError
from streamtrain.forecast.base import as_history, as_new_points, check_horizon, fill_gaps
from streamtrain.units import DAY_S

__all__ = ["HoltWinters"]

log = logging.getLogger(__name__)
FloatArray = NDArray[np.float64]
_BOUNDS = ((1e-3, 0.999), (0.0, 0.3), (0.0, 0.5), (0.8, 0.999))
_START = (0.3, 0.01, 0.1, 0.98)


def _run(
    values: FloatArray,
    params: tuple[float, float, float, float],
    level: float,
    trend: float,
    season: FloatArray,
    phase: int,
) -> tuple[float, float, float, int]:
    """Run the recursion over ``values`` in place on ``season``; returns (sse, l, b, phase)."""
    alpha, beta, gamma, phi = params
    m = season.shape[0]
    s = season.tolist()
    sse = 0.0
    for y in values.tolist():
        fitted = level + phi * trend + s[phase]
        if y != y:  # NaN: a gap, the state coasts
            error = 0.0
        else:
            error = y - fitted
            sse += error * error
        level = level + phi * trend + alpha * error
        trend = phi * trend + beta * error
        s[phase] += gamma * error
        phase = (phase + 1) % m
    season[:] = s
    return sse, level, trend, phase


class HoltWinters:
    """Additive damped Holt-Winters over one season (see the module docstring)."""

    def __init__(
        self,
        period_s: int = DAY_S,
        *,
        step_s: int = 60,
        fit_days: float = 14.0,
        name: str = "ets",
    ) -> None:
        if step_s <= 0 or period_s <= 0 or period_s % step_s:
            raise ConfigError(
                f"the period ({period_s} s) must be a whole number of {step_s}-s steps"
            )
        if fit_days <= 0:
            raise ConfigError("fit_days must be positive")
        self.period_s = period_s
        self.step_s = step_s
        self.fit_days = fit_days
        self.name = name
        self.params_: tuple[float, float, float, float] | None = None
        self.level_ = 0.0
        self.trend_ = 0.0
        self.season_: FloatArray | None = None
        self.phase_ = 0

    @property
    def season_steps(self) -> int:
        return self.period_s // self.step_s

    def fit(self, history: FloatArray) -> Self:
        from scipy.optimize import minimize

        m = self.season_steps
        values = as_history(history, min_length=2 * m)
        span = max(2 * m, int(self.fit_days * DAY_S // self.step_s))
        values = values[-span:]
        filled = fill_gaps(values, m)
        level0 = float(filled[:m].mean())
        trend0 = float(filled[m : 2 * m].mean() - level0) / m
        season0 = filled[:m] - level0
        scale = max(float(np.mean(np.abs(filled))), 1e-12)
        train = values / scale

        def objective(x: FloatArray) -> float:
            params = (float(x[0]), float(x[1]), float(x[2]), float(x[3]))
            season = season0 / scale
            sse, *_ = _run(train, params, level0 / scale, trend0 / scale, season, 0)
            return float(sse / train.shape[0])

        result = minimize(
            objective, np.array(_START), method="L-BFGS-B", bounds=_BOUNDS, options={"maxiter": 25}
        )
        params = tuple(float(v) for v in result.x)
        self.params_ = (params[0], params[1], params[2], params[3])
        season = season0.copy()
        _, self.level_, self.trend_, self.phase_ = _run(
            values, self.params_, level0, trend0, season, 0
        )
        self.season_ = season
        log.info("%s: fitted alpha=%.3f beta=%.4f gamma=%.3f phi=%.3f", self.name, *self.params_)
        return self

    def update(self, new_points: FloatArray) -> Self:
        if self.params_ is None or self.season_ is None:
            raise ForecastError(f"{self.name} is not fitted")
        values = as_new_points(new_points)
        _, self.level_, self.trend_, self.phase_ = _run(
            values, self.params_, self.level_, self.trend_, self.season_, self.phase_
        )
        return self

    def predict(self, horizon: int) -> FloatArray:
        check_horizon(horizon)
        if self.params_ is None or self.season_ is None:
            raise ForecastError(f"{self.name} is not fitted")
        phi = self.params_[3]
        steps = np.arange(1, horizon + 1)
        damped = phi * (1 - phi**steps) / (1 - phi) if phi < 1 else steps.astype(np.float64)
        index = (self.phase_ + steps - 1) % self.season_steps
        forecast = self.level_ + damped * self.trend_ + self.season_[index]
        return np.maximum(forecast, 0.0)

    def save(self, path: str | Path) -> None:
        if self.params_ is None or self.season_ is None:
            raise ForecastError(f"{self.name} is not fitted; nothing to save")
        state = {
            "model": "ets",
            "name": self.name,
            "period_s": self.period_s,
            "step_s": self.step_s,
            "fit_days": self.fit_days,
            "params": list(self.params_),
            "level": self.level_,
            "trend": self.trend_,
            "season": self.season_.tolist(),
            "phase": self.phase_,
        }
        try:
            Path(path).write_text(json.dumps(state), encoding="utf-8")
        except OSError as exc:
            raise ForecastError(f"cannot save {self.name} to {path}: {exc}") from exc

    @classmethod
    def load(cls, path: str | Path) -> HoltWinters:
        try:
            state = json.loads(Path(path).read_text(encoding="utf-8"))
            model = cls(
                int(state["period_s"]),
                step_s=int(state["step_s"]),
                fit_days=float(state["fit_days"]),
                name=str(state["name"]),
            )
            a, b, g, p = (float(v) for v in state["params"])
            model.params_ = (a, b, g, p)
            model.level_ = float(state["level"])
            model.trend_ = float(state["trend"])
            model.season_ = np.asarray(state["season"], dtype=np.float64)
            model.phase_ = int(state["phase"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ForecastError(f"cannot load an ets model from {path}: {exc}") from exc
        if model.season_.shape != (model.season_steps,):
            raise ForecastError(f"{path}: the saved season has the wrong length")
        return model
