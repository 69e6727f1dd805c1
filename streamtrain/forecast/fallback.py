"""The fallback wrapper: a main forecaster backed by a seasonal naive (``auto``).

Owned here: :class:`FallbackForecaster`. ``predict`` uses the main model unless it is
not fitted (its ``fit`` failed, or the history was too short for it), it fails while
predicting (an error, or a non-finite forecast), or its recent error hands the forecast
to the naive (:func:`~streamtrain.forecast.base.hands_over`): every ``update`` scores
the forecasts both models made at the previous origin against the points that arrived
(the first ``track_steps`` of them), over the last ``window_steps`` scored points once
``min_tracked`` exist. In every such case the naive answers (the season
:func:`~streamtrain.forecast.base.naive_period_s` picks), ``source_`` says which model
answered and ``reason_`` why, and a warning is logged when the source changes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ForecastError
from streamtrain.forecast.base import (
    Forecaster,
    SeasonalNaive,
    as_history,
    as_new_points,
    check_levels,
    hands_over,
    is_trusted,
    naive_period_s,
    seasonal_scale,
)
from streamtrain.forecast.tracking import RecentErrors
from streamtrain.units import DAY_S

__all__ = ["FallbackForecaster"]

log = logging.getLogger(__name__)
FloatArray = NDArray[np.float64]
# What a model may raise when it breaks: our own error, torch's RuntimeError, numpy's
# ValueError/ArithmeticError. Anything else is a bug and propagates.
_FAILURES = (ForecastError, RuntimeError, ValueError, ArithmeticError)


class FallbackForecaster:
    """``main`` with a seasonal-naive safety net (see the module docstring). The tracked
    errors are cleared at each ``fit`` unless ``carry_errors``."""

    def __init__(
        self,
        main: Forecaster,
        *,
        step_s: int = 60,
        track_steps: int = 30,
        window_steps: int = 1440,
        min_tracked: int = 120,
        name: str = "auto",
        trust_validated: bool = True,
        carry_errors: bool = False,
    ) -> None:
        self.errors = RecentErrors(track_steps, window_steps, min_tracked)
        self.main = main
        self.step_s = step_s
        self.track_steps = track_steps
        self.window_steps = window_steps
        self.min_tracked = min_tracked
        self.name = name
        self.trust_validated = trust_validated
        self.carry_errors = carry_errors
        self.fallback_: SeasonalNaive | None = None
        self.main_ok_ = False
        self.main_error_: str | None = None
        self.source_: str | None = None
        self.reason_: str | None = None
        self._scale = float("nan")
        # The last forecast and its horizon, until the next fit or update: asked again
        # from the same state (a point forecast, then its quantiles) it is not remade.
        self._last: tuple[int, FloatArray] | None = None

    # -- fitting and updates ------------------------------------------------------------

    def fit(self, history: FloatArray) -> Self:
        values = as_history(history)
        self._last = None
        period_s = naive_period_s(values.shape[0], self.step_s)
        self.fallback_ = SeasonalNaive(period_s, step_s=self.step_s).fit(values)
        self._scale = seasonal_scale(values, DAY_S // self.step_s)
        if not self.carry_errors:
            self.errors.clear()
        try:
            self.main.fit(values)
        except _FAILURES as exc:
            self._main_failed(f"fit failed: {exc}")
        else:
            self.main_ok_ = True
            self.main_error_ = None
        self.track_origin()
        return self

    def update(self, new_points: FloatArray) -> Self:
        if self.fallback_ is None:
            raise ForecastError(f"{self.name} is not fitted")
        values = as_new_points(new_points)
        self._last = None
        self.errors.score(values)
        self.fallback_.update(values)
        if self.main_ok_:
            try:
                self.main.update(values)
            except _FAILURES as exc:
                self._main_failed(f"update failed: {exc}")
        self.track_origin()
        return self

    def _main_failed(self, why: str) -> None:
        self.main_ok_ = False
        self.main_error_ = why
        log.warning("%s: %s %s; using %s", self.name, self.main.name, why, self._fb_name())

    def _fb_name(self) -> str:
        return self.fallback_.name if self.fallback_ is not None else "the seasonal naive"

    def track_origin(self) -> None:
        """Remember both models' forecasts at this origin, to score at the next update."""
        if self.fallback_ is None:
            raise ForecastError(f"{self.name} is not fitted")
        main = self._try_main(self.track_steps) if self.main_ok_ else None
        self.errors.remember(main, self.fallback_.predict(self.track_steps))

    @property
    def trusted_(self) -> bool:
        """Whether the recent error may not hand the forecast to the naive: with
        ``trust_validated``, while the main model says it is trusted (``auto``: a
        statsforecast model that beat the seasonal naive in validation). A few hours of
        recent error do not overrule a week of validation; the live planner still
        refits such a model when its recent error is worse
        (:class:`~streamtrain.forecast.live.LiveForecaster`)."""
        return self.trust_validated and is_trusted(self.main)

    def recent_mae(self) -> tuple[float, float] | None:
        """(main, naive) mean absolute error over the tracked window, once long enough
        (:class:`~streamtrain.forecast.tracking.RecentErrors`)."""
        return self.errors.mae()

    # -- prediction ---------------------------------------------------------------------

    def _try_main(self, horizon_steps: int) -> FloatArray | None:
        try:
            forecast = np.asarray(self.main.predict(horizon_steps), dtype=np.float64)
        except _FAILURES as exc:
            self.main_error_ = f"predict failed: {exc}"
            return None
        if forecast.shape != (horizon_steps,) or not np.all(np.isfinite(forecast)):
            self.main_error_ = "predict returned a malformed or non-finite forecast"
            return None
        return np.maximum(forecast, 0.0)

    def _choose(self, horizon_steps: int) -> tuple[FloatArray | None, str | None]:
        if not self.main_ok_:
            return None, f"{self.main.name} is not fitted ({self.main_error_})"
        recent = self.recent_mae()
        if recent is not None and hands_over(recent, self._scale, self):
            return None, (
                f"{self.main.name}'s recent MAE {recent[0]:.4g} exceeds "
                f"{self._fb_name()}'s {recent[1]:.4g}"
            )
        forecast = self._try_main(horizon_steps)
        if forecast is None:
            return None, f"{self.main.name} failed: {self.main_error_}"
        return forecast, None

    def predict(self, horizon_steps: int) -> FloatArray:
        if self.fallback_ is None:
            raise ForecastError(f"{self.name} is not fitted")
        if self._last is not None and self._last[0] == horizon_steps:
            return self._last[1].copy()
        forecast, reason = self._choose(horizon_steps)
        source = self.main.name if forecast is not None else self._fb_name()
        if source != self.source_:
            if reason is not None:
                log.warning("%s: falling back to %s: %s", self.name, source, reason)
            elif self.source_ is not None:
                log.warning("%s: back on %s", self.name, source)
        self.source_, self.reason_ = source, reason
        if forecast is None:
            forecast = self.fallback_.predict(horizon_steps)
        self._last = (horizon_steps, forecast.copy())
        return forecast

    def predict_quantiles(
        self, horizon_steps: int, levels: Sequence[float]
    ) -> dict[float, FloatArray]:
        """The main model's quantiles when it answers and has them; otherwise the point
        forecast of whichever model answers, for every level."""
        levels = check_levels(levels)
        point = self.predict(horizon_steps)
        if self.source_ == self.main.name:
            try:
                result = self.main.predict_quantiles(horizon_steps, levels)
            except _FAILURES as exc:
                log.warning("%s: quantiles failed (%s); using the point forecast", self.name, exc)
            else:
                return result
        return {level: point.copy() for level in levels}

    # -- persistence --------------------------------------------------------------------

    def save(self, path: str | Path) -> None:
        """A JSON manifest at ``path``, the models beside it (``<path>.main``, ``.naive``)."""
        if self.fallback_ is None:
            raise ForecastError(f"{self.name} is not fitted; nothing to save")
        path = Path(path)
        manifest: dict[str, Any] = {
            "model": "auto",
            "name": self.name,
            "step_s": self.step_s,
            "track_steps": self.track_steps,
            "window_steps": self.window_steps,
            "min_tracked": self.min_tracked,
            "trust_validated": self.trust_validated,
            "carry_errors": self.carry_errors,
            "naive": path.name + ".naive",
            "main": path.name + ".main" if self.main_ok_ else None,
            "main_kind": type(self.main).__name__,
        }
        self.fallback_.save(path.with_name(manifest["naive"]))
        if self.main_ok_:
            self.main.save(path.with_name(manifest["main"]))
        try:
            path.write_text(json.dumps(manifest), encoding="utf-8")
        except OSError as exc:
            raise ForecastError(f"cannot save {self.name} to {path}: {exc}") from exc
