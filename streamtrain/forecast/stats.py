"""statsforecast's models behind the project's forecaster contract (``ets``, ``mstl``).

Owned here: :class:`StatsForecaster`. statsforecast (Nixtla) is the library this
field uses for these baselines; this module adapts it to a per-step records/s series
with gaps, at any resolution:

* ``ets``: ``AutoETS`` (model selected by AICc) with a daily season. ETS cannot take a
  season longer than 24 points (statsforecast, like R's ``ets``, then drops it), so the
  model runs on hourly blocks (or the series' own steps when they are an hour or
  longer).
* ``mstl``: ``MSTL`` with a daily and, once the history holds two weeks, a weekly
  season (its trend by ``AutoETS``, statsforecast's default), on 30-minute blocks (or
  the series' own steps when they are longer): on one-minute steps a fit would take
  minutes.

Both see block means of the gap-filled series (:func:`~streamtrain.forecast.base.fill_gaps`),
blocks anchored to the first step of the fitted history so that they stay put as new
steps arrive. A forecast goes from the observed level (the last complete block and the
mean of the current, partial one) to the model's block forecasts by linear
interpolation between block centres, as the FEDformer-style model does.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from statistics import NormalDist
from typing import Any, Self

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError, ForecastError
from streamtrain.forecast.base import (
    as_history,
    as_new_points,
    check_horizon,
    check_levels,
    fill_gaps,
)
from streamtrain.units import DAY_S, HOUR_S, WEEK_S

__all__ = ["STATS_KINDS", "StatsForecaster"]

log = logging.getLogger(__name__)
FloatArray = NDArray[np.float64]
STATS_KINDS = ("ets", "mstl")
_DEFAULT_BLOCK_S = {"ets": HOUR_S, "mstl": 1800}
_KEEP_S = 5 * WEEK_S  # history kept for forward(): the weekly season needs two weeks
_Z80 = NormalDist().inv_cdf(0.9)


def _block_steps(step_s: int, block_s: int) -> int:
    return max(1, round(block_s / step_s))


class StatsForecaster:
    """A statsforecast model on block means (see the module docstring)."""

    def __init__(
        self,
        kind: str = "mstl",
        *,
        step_s: int = 60,
        block_s: int | None = None,
        name: str | None = None,
    ) -> None:
        if kind not in STATS_KINDS:
            raise ConfigError(
                f"unknown statistical model {kind!r}; known: {', '.join(STATS_KINDS)}"
            )
        if step_s <= 0 or DAY_S % step_s:
            raise ConfigError(f"step_s ({step_s}) must be positive and divide a day")
        self.kind = kind
        self.step_s = step_s
        self.block_s = block_s or _DEFAULT_BLOCK_S[kind]
        self.f = _block_steps(step_s, self.block_s)
        if DAY_S % (self.f * step_s):
            raise ConfigError(f"a block of {self.f} x {step_s} s does not divide a day")
        self.name = name or kind
        self.model_: Any = None
        self.history_: FloatArray | None = None  # raw steps (NaN = gap), oldest first
        self.phase_ = 0  # steps of history_ before its first whole block
        self.seasons_: tuple[int, ...] = ()
        self.dropped_blocks_ = 0  # whole blocks trimmed from the front since the fit
        self.fit_first_block_ = 0  # absolute index of the first block the model was fitted on
        self.components_: FloatArray | None = None  # MSTL: (seasons, fitted blocks)
        self._cache: tuple[int, dict[str, FloatArray]] | None = None
        self._prepared: tuple[tuple[int, int, int], FloatArray, FloatArray] | None = None

    # -- geometry -----------------------------------------------------------------------

    @property
    def day_blocks(self) -> int:
        return DAY_S // (self.f * self.step_s)

    @property
    def min_history(self) -> int:
        """Two days of steps (two seasons of the daily block season)."""
        return 2 * self.day_blocks * self.f

    def _blocks(self) -> tuple[FloatArray, FloatArray]:
        """(complete block means of the gap-filled history, the partial block's steps);
        kept until the history changes (a point forecast and its quantiles at one origin
        prepare the blocks once)."""
        if self.history_ is None:
            raise ForecastError(f"{self.name} is not fitted")
        key = (self.dropped_blocks_, self.phase_, self.history_.shape[0])
        if self._prepared is not None and self._prepared[0] == key:
            return self._prepared[1], self._prepared[2]
        day = DAY_S // self.step_s
        filled = fill_gaps(self.history_, day if self.history_.shape[0] > day else 0)
        body = filled[self.phase_ :]
        whole = body.shape[0] // self.f * self.f
        blocks = body[:whole].reshape(-1, self.f).mean(axis=1)
        self._prepared = (key, blocks, body[whole:])
        return blocks, body[whole:]

    # -- fitting ------------------------------------------------------------------------

    def _model(self, blocks: int) -> Any:
        from statsforecast.models import MSTL, AutoETS

        day = self.day_blocks
        if self.kind == "ets":
            season = day if day <= 24 and blocks >= 2 * day else 1
            self.seasons_ = (season,)
            return AutoETS(season_length=season)
        week = WEEK_S // (self.f * self.step_s)
        seasons = [day, week] if blocks >= 2 * week else [day]
        self.seasons_ = tuple(seasons)
        return MSTL(season_length=seasons)

    def fit(self, history: FloatArray) -> Self:
        values = as_history(history, min_length=self.min_history)
        self.phase_ = values.shape[0] % self.f
        self.history_ = values.copy()
        self.dropped_blocks_ = 0
        self._prepared = None
        self._trim()
        blocks, _ = self._blocks()
        model = self._model(blocks.shape[0])
        try:
            self.model_ = model.fit(y=blocks)
        except (ValueError, ArithmeticError, np.linalg.LinAlgError) as exc:
            raise ForecastError(f"{self.name}: statsforecast could not fit: {exc}") from exc
        self.fit_first_block_ = self.dropped_blocks_
        if self.kind == "mstl":
            parts = self.model_.model_
            self.components_ = np.stack(
                [
                    parts[f"seasonal{m}" if len(self.seasons_) > 1 else "seasonal"].to_numpy()
                    for m in self.seasons_
                ]
            ).astype(np.float64)
        self._cache = None
        log.info(
            "%s: fitted on %d blocks of %d s (seasons %s)",
            self.name,
            blocks.shape[0],
            self.f * self.step_s,
            self.seasons_,
        )
        return self

    def _trim(self) -> None:
        if self.history_ is None:
            return
        keep = _KEEP_S // self.step_s
        excess = self.history_.shape[0] - keep
        if excess > 0:
            drop = excess + (self.phase_ - excess) % self.f  # keep the blocks where they are
            self.history_ = self.history_[drop:]
            self.dropped_blocks_ += (drop - self.phase_) // self.f
            self.phase_ = 0

    def update(self, new_points: FloatArray) -> Self:
        """Append observations; the model's parameters stay. The model is re-run on the
        new complete blocks with its fitted parameters (``forward``: no re-estimation), at
        most once per block. For MSTL the fit's seasonal components are kept (and
        continued period by period past its end) and only its trend model (AutoETS) is
        re-run on the seasonally adjusted blocks, as MSTL's own forecast does:
        statsforecast's ``MSTL.forward`` would decompose the whole history again (about a
        second on four weeks of 30-minute blocks) at every new block."""
        if self.history_ is None:
            raise ForecastError(f"{self.name} is not fitted")
        values = as_new_points(new_points)
        self.history_ = np.concatenate([self.history_, values])
        self._trim()
        return self

    # -- prediction ---------------------------------------------------------------------

    def _block_forecast(
        self, blocks: FloatArray, ahead: int, spread: bool = True
    ) -> dict[str, FloatArray]:
        """The model's forecast of the next ``ahead`` blocks (``mean``) and, with
        ``spread``, the standard deviation its 80 % interval implies (``sigma``); kept
        until a block completes. A point forecast asks for no interval: statsforecast's
        intervals build a scipy distribution per call, which cost a validation walk
        (a forecast at every origin) more than the forecasts themselves."""
        count = self.dropped_blocks_ + blocks.shape[0]
        if self._cache is not None and self._cache[0] == count:
            cached = self._cache[1]
            if cached["mean"].shape[0] >= ahead and (not spread or "sigma" in cached):
                return cached
        if self.model_ is None:
            raise ForecastError(f"{self.name} is not fitted")
        ahead = max(ahead, self.day_blocks // 4, 4)
        level = {"level": [80]} if spread else {}
        try:
            if self.components_ is not None:
                first = self.dropped_blocks_ - self.fit_first_block_
                seasonal = self._seasonal(first, blocks.shape[0] + ahead)
                raw = self.model_.trend_forecaster.forward(
                    y=blocks - seasonal[: blocks.shape[0]], h=ahead, **level
                )
                raw = {k: v + seasonal[blocks.shape[0] :] for k, v in raw.items()}
            else:
                raw = self.model_.forward(y=blocks, h=ahead, **level)
        except (ValueError, ArithmeticError, np.linalg.LinAlgError) as exc:
            raise ForecastError(f"{self.name}: statsforecast could not forecast: {exc}") from exc
        mean = np.asarray(raw["mean"], dtype=np.float64)
        if not np.all(np.isfinite(mean)):
            raise ForecastError(f"{self.name}: statsforecast returned a non-finite forecast")
        result = {"mean": mean}
        if spread:
            sigma = (np.asarray(raw["hi-80"], dtype=np.float64) - mean) / _Z80
            if not np.all(np.isfinite(sigma)):
                raise ForecastError(f"{self.name}: statsforecast returned a non-finite forecast")
            result["sigma"] = np.maximum(sigma, 0.0)
        self._cache = (count, result)
        return result

    def _seasonal(self, first: int, count: int) -> FloatArray:
        """MSTL's summed seasonal components at the blocks ``first .. first + count - 1``
        (counted from the first fitted block); past the fit each repeats its last period."""
        if self.components_ is None:
            raise ForecastError(f"{self.name} is not fitted")
        fitted = self.components_.shape[1]
        index = first + np.arange(count)
        total = np.zeros(count)
        for row, period in zip(self.components_, self.seasons_, strict=True):
            past = index >= fitted
            source = np.where(past, fitted - period + (index - fitted) % period, index)
            total += row[np.clip(source, 0, fitted - 1)]
        return total

    def _per_step(self, horizon_steps: int, shift_sigmas: float) -> FloatArray:
        check_horizon(horizon_steps)
        blocks, partial = self._blocks()
        f = self.f
        done = partial.shape[0]  # steps of the current block already observed
        ahead = math.ceil((done + horizon_steps) / f) + 1
        spread = shift_sigmas != 0.0  # the point forecast asks for no interval
        forecast = self._block_forecast(blocks, ahead, spread=spread)
        shift = shift_sigmas * forecast["sigma"][:ahead] if spread else np.zeros(ahead)
        future = forecast["mean"][:ahead] + shift
        # Knots relative to the first step of the current block, then shifted to the origin.
        past_x = list(-f * np.arange(2, 0, -1) + (f - 1) / 2)
        past_y = list(blocks[-2:])
        future_x = list(f * np.arange(ahead) + (f - 1) / 2)
        future_y = list(future)
        if done:
            past_x.append((done - 1) / 2)
            past_y.append(float(partial.mean()) + float(shift[0]))
            future_x, future_y = future_x[1:], future_y[1:]
        steps = done + np.arange(horizon_steps, dtype=np.float64)
        result: FloatArray = np.interp(steps, past_x + future_x, past_y + future_y)
        return np.maximum(result, 0.0)

    def predict(self, horizon_steps: int) -> FloatArray:
        return self._per_step(horizon_steps, 0.0)

    def predict_quantiles(
        self, horizon_steps: int, levels: Sequence[float]
    ) -> dict[float, FloatArray]:
        """Quantiles from statsforecast's prediction intervals per block (normal),
        converted to any level by the standard deviation they imply, interpolated to
        steps like the point forecast."""
        normal = NormalDist()
        return {q: self._per_step(horizon_steps, normal.inv_cdf(q)) for q in check_levels(levels)}

    # -- persistence --------------------------------------------------------------------

    def save(self, path: str | Path) -> None:
        if self.history_ is None:
            raise ForecastError(f"{self.name} is not fitted; nothing to save")
        state = {
            "model": "stats",
            "kind": self.kind,
            "name": self.name,
            "step_s": self.step_s,
            "block_s": self.block_s,
            "phase": self.phase_,
            "history": [None if math.isnan(v) else v for v in self.history_.tolist()],
        }
        try:
            Path(path).write_text(json.dumps(state), encoding="utf-8")
        except OSError as exc:
            raise ForecastError(f"cannot save {self.name} to {path}: {exc}") from exc

    @classmethod
    def load(cls, path: str | Path) -> StatsForecaster:
        """Re-estimate the saved model from its saved history (``save`` writes JSON: the
        settings and the kept history, no pickle)."""
        try:
            state = json.loads(Path(path).read_text(encoding="utf-8"))
            model = cls(
                str(state["kind"]),
                step_s=int(state["step_s"]),
                block_s=int(state["block_s"]),
                name=str(state["name"]),
            )
            history = np.array(
                [np.nan if v is None else float(v) for v in state["history"]], dtype=np.float64
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ForecastError(f"cannot load a statistical model from {path}: {exc}") from exc
        model.fit(history)
        return model
