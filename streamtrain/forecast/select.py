"""Model selection per series on a validation window (the heart of ``auto``).

Owned here: :class:`SelectForecaster`. ``fit(history)`` holds out the last
``val_steps`` of the history, fits every candidate on what comes before, and walks
through the held-out steps as the live loop would: a forecast of ``horizon_steps``
every ``stride_steps``, then ``update`` with the steps that arrived. The candidate, or
the mean of the best ``k`` of them (an ensemble, for every ``k`` from two to all that
fitted), with the lowest mean absolute error on the held-out steps is kept; the rest
are dropped. The kept models have been told every
step of the history by then, so no second fit is needed: selecting costs one fit per
candidate and the validation forecasts.

Candidates are made by a callable (name -> unfitted model, from
:mod:`streamtrain.forecast.registry`), so this module knows no model. A candidate whose
fit or forecasts fail is skipped (logged); when all fail, ``fit`` raises a
:class:`~streamtrain.errors.ForecastError`. When the history is too short to hold out
a validation window for a candidate, the candidate is fitted on the whole history and
chosen only if it is the sole one left.

``chosen_`` names what was kept (``"fedformer"``, ``"fedformer+mstl"``) and
``val_mae_`` holds every candidate's validation error. Quantiles: the kept model's own;
for an ensemble, the mean of both models' quantiles at each level.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError, ForecastError
from streamtrain.forecast.base import Forecaster, as_history, as_new_points, check_horizon

__all__ = ["SelectForecaster"]

log = logging.getLogger(__name__)
FloatArray = NDArray[np.float64]
Maker = Callable[[str], Forecaster]
_FAILURES = (ForecastError, RuntimeError, ValueError, ArithmeticError)


def _quantiles(model: Forecaster, horizon: int, levels: Sequence[float]) -> dict[float, FloatArray]:
    method = getattr(model, "predict_quantiles", None)
    if method is None:
        point = model.predict(horizon)
        return {float(q): point.copy() for q in levels}
    result: dict[float, FloatArray] = method(horizon, list(levels))
    return result


class SelectForecaster:
    """The best of ``candidates`` on a validation window (see the module docstring)."""

    def __init__(
        self,
        make: Maker,
        candidates: Sequence[str],
        *,
        step_s: int = 60,
        val_steps: int = 2880,
        horizon_steps: int = 30,
        stride_steps: int = 60,
        ensemble: bool = True,
        name: str = "select",
    ) -> None:
        if not candidates:
            raise ConfigError("model selection needs at least one candidate")
        if min(val_steps, horizon_steps, stride_steps) < 1:
            raise ConfigError("val_steps, horizon_steps and stride_steps must be positive")
        self.make = make
        self.candidates = tuple(candidates)
        self.step_s = step_s
        self.val_steps = val_steps
        self.horizon_steps = horizon_steps
        self.stride_steps = stride_steps
        self.ensemble = ensemble
        self.name = name
        self.models_: dict[str, Forecaster] = {}
        self.chosen_: str | None = None
        self.val_mae_: dict[str, float] = {}

    # -- fitting ------------------------------------------------------------------------

    def _validate(self, values: FloatArray, val: int) -> dict[str, list[FloatArray]]:
        """Fit each candidate on ``values[:-val]``, forecast through the held-out part."""
        n = values.shape[0]
        start = n - val
        origins = list(range(start, n - self.horizon_steps + 1, self.stride_steps))
        forecasts: dict[str, list[FloatArray]] = {}
        for name in self.candidates:
            model = self.make(name)
            try:
                model.fit(values[:start])
                seen, outs = start, []
                for origin in origins:
                    if origin > seen:
                        model.update(values[seen:origin])
                        seen = origin
                    outs.append(np.maximum(model.predict(self.horizon_steps), 0.0))
                model.update(values[seen:])
            except _FAILURES as exc:
                log.warning("%s: candidate %s failed in validation: %s", self.name, name, exc)
                continue
            self.models_[name] = model
            forecasts[name] = outs
        return forecasts

    def _score(self, values: FloatArray, val: int, forecasts: dict[str, list[FloatArray]]) -> None:
        n = values.shape[0]
        start = n - val
        origins = range(start, n - self.horizon_steps + 1, self.stride_steps)
        actual = np.concatenate([values[o : o + self.horizon_steps] for o in origins])
        seen = ~np.isnan(actual)
        if not seen.any():
            raise ForecastError(f"{self.name}: the validation window has no observed steps")
        stacked = {k: np.concatenate(v) for k, v in forecasts.items()}
        for key, pred in stacked.items():
            self.val_mae_[key] = float(np.abs(pred - actual)[seen].mean())
        ranked = sorted(stacked, key=self.val_mae_.__getitem__)
        for k in range(2, len(ranked) + 1 if self.ensemble else 2):
            members = ranked[:k]
            mean = np.mean([stacked[m] for m in members], axis=0)
            self.val_mae_["+".join(members)] = float(np.abs(mean - actual)[seen].mean())
        self.chosen_ = min(self.val_mae_, key=self.val_mae_.__getitem__)

    def fit(self, history: FloatArray) -> Self:
        values = as_history(history)
        self.models_, self.val_mae_, self.chosen_ = {}, {}, None
        val = min(self.val_steps, values.shape[0] // 4)
        if val >= self.horizon_steps:
            forecasts = self._validate(values, val)
            if forecasts:
                self._score(values, val, forecasts)
        if self.chosen_ is None:  # no validation window: the first candidate that fits
            for name in self.candidates:
                try:
                    self.models_ = {name: self.make(name).fit(values)}
                except _FAILURES as exc:
                    log.warning("%s: candidate %s failed: %s", self.name, name, exc)
                    continue
                self.chosen_ = name
                break
        if self.chosen_ is None:
            raise ForecastError(f"{self.name}: every candidate failed to fit")
        kept = self.chosen_.split("+")
        self.models_ = {k: v for k, v in self.models_.items() if k in kept}
        log.info(
            "%s: chose %s (validation MAE %s)",
            self.name,
            self.chosen_,
            ", ".join(f"{k} {v:.4g}" for k, v in sorted(self.val_mae_.items(), key=lambda x: x[1])),
        )
        return self

    def update(self, new_points: FloatArray) -> Self:
        values = as_new_points(new_points)
        for model in self._kept():
            model.update(values)
        return self

    # -- prediction ---------------------------------------------------------------------

    def _kept(self) -> list[Forecaster]:
        if self.chosen_ is None:
            raise ForecastError(f"{self.name} is not fitted")
        return [self.models_[k] for k in self.chosen_.split("+")]

    def predict(self, horizon: int) -> FloatArray:
        check_horizon(horizon)
        outs = [np.maximum(m.predict(horizon), 0.0) for m in self._kept()]
        result: FloatArray = np.mean(outs, axis=0)
        return result

    def predict_quantiles(self, horizon: int, levels: Sequence[float]) -> dict[float, FloatArray]:
        check_horizon(horizon)
        parts = [_quantiles(m, horizon, levels) for m in self._kept()]
        return {float(q): np.mean([p[float(q)] for p in parts], axis=0) for q in levels}

    # -- persistence --------------------------------------------------------------------

    def save(self, path: str | Path) -> None:
        """A JSON manifest at ``path``; each kept model beside it (``<path>.<name>``)."""
        if self.chosen_ is None:
            raise ForecastError(f"{self.name} is not fitted; nothing to save")
        path = Path(path)
        files: dict[str, str] = {}
        for key, model in self.models_.items():
            files[key] = f"{path.name}.{key}"
            model.save(path.with_name(files[key]))
        manifest: dict[str, Any] = {
            "model": "select",
            "name": self.name,
            "step_s": self.step_s,
            "chosen": self.chosen_,
            "val_mae": self.val_mae_,
            "files": files,
        }
        try:
            path.write_text(json.dumps(manifest), encoding="utf-8")
        except OSError as exc:
            raise ForecastError(f"cannot save {self.name} to {path}: {exc}") from exc

    @classmethod
    def restore(
        cls, path: Path, state: dict[str, Any], load: Callable[[Path], Forecaster]
    ) -> SelectForecaster:
        """The model :meth:`save` wrote (``load`` reads each kept model)."""
        try:
            files = {str(k): str(v) for k, v in state["files"].items()}
            model = cls(lambda _: load(path), list(files), step_s=int(state["step_s"]))
            model.name = str(state["name"])
            model.models_ = {k: load(path.with_name(v)) for k, v in files.items()}
            model.chosen_ = str(state["chosen"])
            model.val_mae_ = {str(k): float(v) for k, v in state["val_mae"].items()}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ForecastError(f"cannot load a selected model from {path}: {exc}") from exc
        if set(model.chosen_.split("+")) != set(model.models_):
            raise ForecastError(f"{path}: the saved models do not match the choice")
        return model
