"""The FEDformer-style forecaster (``fedformer``): KALE §3.2's model, trained on CPU,
combined with statsforecast's MSTL.

Owned here: :class:`FedformerForecaster`, the :class:`~streamtrain.forecast.base.Forecaster`
wrapper (data preparation, seeded training, prediction, quantiles, save/load). Its
forecast is ``(1 - w) x transformer + w x MSTL`` per step and per quantile level; ``w``
starts at ``mstl_weight`` after each fit and, with ``adapt_weight``, follows both
halves' errors since the fit (:class:`~streamtrain.forecast.mix.MixWeights`). When MSTL
cannot fit or forecast, the transformer answers alone (logged).

The transformer forecasts a *residual*: the log of the series minus the log of a
seasonal baseline (the same time one, two and three weeks earlier, smoothed), how far
today runs above last week, which persists for hours unlike minute-level noise. It
reads and forecasts ``coarse_s`` blocks, each window anchored at its last block so that
an untrained network forecasts persistence; the forecast is interpolated back to
per-step values and added to the baseline. Training is a fixed number of seeded steps
(the fit time does not grow with the history), with an L1 loss weighted by traffic level
(MASE counts absolute errors, so the busy hours matter most).

Settings: :mod:`~streamtrain.forecast.fedformer_settings`; the network:
:mod:`~streamtrain.forecast.fedformer_model`, trained and run by
:mod:`~streamtrain.forecast.fedformer_train` (the only module that imports torch,
lazily); inputs: :mod:`~streamtrain.forecast.fedformer_data`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

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
from streamtrain.forecast.evaluate import default_horizon_steps
from streamtrain.forecast.fedformer_data import (
    LogScale,
    block_centres,
    coarse_means,
    interpolate_forward,
    moving_average,
    seasonal_baseline,
    time_marks,
)
from streamtrain.forecast.fedformer_settings import FedformerSettings
from streamtrain.forecast.fedformer_train import (
    QUANTILE_GRID,
    run_network,
    train_network,
)
from streamtrain.forecast.mix import MixWeights
from streamtrain.forecast.stats import StatsForecaster
from streamtrain.units import DAY_S, WEEK_S

if TYPE_CHECKING:
    from streamtrain.forecast.fedformer_model import FedformerNet

__all__ = ["RETRAIN_RATIO", "FedformerForecaster"]

log = logging.getLogger(__name__)
_FAILURES = (ForecastError, RuntimeError, ValueError, ArithmeticError)  # torch raises RuntimeError
FloatArray = NDArray[np.float64]
# A fine-tune whose validation error is more than this times the earlier fit's (a holiday
# or an outage entered the windows) is replaced by a fit from scratch: on the call-centre
# shape a holiday left a fine-tuned network at 3.5x the error of one trained anew.
RETRAIN_RATIO = 2.0


@dataclass(frozen=True, slots=True)
class _Window:
    """The network's input at one origin (blocks, encoder and decoder time marks), and
    the baseline from the origin on, ``ahead`` steps (at least the network's horizon)."""

    inputs: tuple[FloatArray, FloatArray, FloatArray]
    baseline_z: FloatArray
    ahead: int


@dataclass(slots=True)
class _Prepared:
    """The per-step series of one history, ready to cut into model windows."""

    residual: FloatArray  # z(y) - z(baseline), per step; NaN before one period
    baseline_z: FloatArray  # z(baseline) for the history and ``ahead`` steps after it
    observed: FloatArray  # 1.0 where the step was observed, 0.0 where it was a gap
    level: FloatArray  # the baseline in records/s, to weigh the loss by traffic


class FedformerForecaster:
    """FEDformer-style residual forecaster (see the module docstring)."""

    def __init__(
        self,
        settings: FedformerSettings | None = None,
        *,
        step_s: int = 60,
        seed: int = 0,
        name: str = "fedformer",
    ) -> None:
        self.settings = settings or FedformerSettings()
        if step_s <= 0 or DAY_S % step_s:
            raise ConfigError(f"step_s ({step_s}) must be positive and divide a day")
        block_s = step_s * max(1, round(self.settings.coarse_s / step_s))
        if DAY_S % block_s:
            raise ConfigError(f"a block of {block_s} s ({step_s}-s steps) does not divide a day")
        self.step_s = step_s
        self.seed = seed
        self.name = name
        self.net_: FedformerNet | None = None
        self.history_: FloatArray | None = None
        self.offset_ = 0  # position of history_[0] since the start of the fitted history
        self.period_ = 0
        self.scale_: LogScale | None = None
        self.error_quantiles_: FloatArray | None = None  # (99, pred_len), log scale
        self.val_mae_ = float("nan")
        self.fit_s_ = 0.0
        self.mstl_: StatsForecaster | None = None  # the statistical half (mstl_weight > 0)
        self.mix_ = MixWeights(default_horizon_steps(step_s))
        self.mstl_new_ = 0  # steps MSTL was told since its fit (a reload re-fits before them)
        self._mstl_failing = False
        # (origin, the forecast's baseline_z, residual_z) of the last network pass
        self._memo: tuple[tuple[int, int], FloatArray, FloatArray] | None = None

    # -- geometry -----------------------------------------------------------------------

    @property
    def steps_per_block(self) -> int:
        """Steps per coarse block: ``coarse_s / step_s`` rounded, at least one (a series
        coarser than the block is modelled at its own steps)."""
        return max(1, round(self.settings.coarse_s / self.step_s))

    @property
    def smooth_steps(self) -> int:
        """The baseline's moving-average window in steps (odd, at least one)."""
        steps = max(1, round(self.settings.smooth_s / self.step_s))
        return steps if steps % 2 else steps + 1 if steps > 1 else 1

    @property
    def min_history(self) -> int:
        """Steps needed to fit: one day, one input window and a day of training windows."""
        net, day = self.settings.net, DAY_S // self.step_s
        return day + (net.seq_len + net.pred_len) * self.steps_per_block + day

    def _keep(self) -> int:
        """Steps of history kept after fitting: the baseline's periods and an input window."""
        s = self.settings
        window = (s.net.seq_len + 2) * self.steps_per_block
        return s.baseline_periods * self.period_ + window + self.smooth_steps

    def _state(self) -> tuple[FedformerNet, LogScale, FloatArray, FloatArray]:
        """(net, scale, error quantiles, history), or a ForecastError when not fitted."""
        if (
            self.net_ is None
            or self.scale_ is None
            or self.error_quantiles_ is None
            or self.history_ is None
        ):
            raise ForecastError(f"{self.name} is not fitted")
        return self.net_, self.scale_, self.error_quantiles_, self.history_

    def _prepare(self, values: FloatArray, ahead: int, scale: LogScale) -> _Prepared:
        s = self.settings
        filled = fill_gaps(values, self.period_ if values.shape[0] > self.period_ else 0)
        smoothed_z = scale.forward(moving_average(filled, self.smooth_steps))
        baseline_z = seasonal_baseline(
            smoothed_z, self.period_, ahead, s.baseline_periods, median=s.baseline_median
        )
        residual = scale.forward(filled) - baseline_z[: values.shape[0]]
        observed = (~np.isnan(values)).astype(np.float64)
        level = scale.inverse(np.nan_to_num(baseline_z, nan=0.0))
        return _Prepared(residual, baseline_z, observed, level)

    # -- fitting ------------------------------------------------------------------------

    def fit(self, history: FloatArray) -> Self:
        return self._fit(history, None)

    def fit_from(self, previous: object, history: FloatArray) -> Self:
        """Fit on ``history`` starting from ``previous``'s network (a fitted model of
        the same settings on an earlier part of the same series, e.g. yesterday's):
        ``finetune_steps`` steps instead of ``train_steps`` from scratch. A previous
        model that does not match (another kind, settings, step or seasonal period, or
        not fitted) is ignored: a fit from scratch; so is a fine-tune whose validation
        error is more than ``RETRAIN_RATIO`` times the previous fit's (the new days
        hold something the old network does not fit: a holiday, an outage)."""
        values = as_history(history, min_length=self.min_history)
        net = previous.net_ if isinstance(previous, FedformerForecaster) else None
        if (
            net is None
            or not isinstance(previous, FedformerForecaster)
            or previous.settings.net != self.settings.net
            or previous.step_s != self.step_s
            or previous.period_ != self._period(values.shape[0])
        ):
            return self._fit(values, None)
        self._fit(values, net.state_dict())
        if self.val_mae_ > RETRAIN_RATIO * previous.val_mae_:
            log.info(
                "%s: fine-tuned validation MAE %.4f against %.4f before; trained from scratch",
                self.name,
                self.val_mae_,
                previous.val_mae_,
            )
            self._fit(values, None)
        return self

    def _period(self, steps: int) -> int:
        week, day = WEEK_S // self.step_s, DAY_S // self.step_s
        return week if steps >= week + 3 * day else day

    def _fit(self, history: FloatArray, init: dict[str, Any] | None) -> Self:
        values = as_history(history, min_length=self.min_history)
        started = time.perf_counter()
        s = self.settings
        self.period_ = self._period(values.shape[0])
        filled = fill_gaps(values, self.period_)
        self.scale_ = LogScale.of(filled)
        prepared = self._prepare(values, 0, self.scale_)
        f = self.steps_per_block
        blocks = coarse_means(prepared.residual, f)
        seen = coarse_means(prepared.observed, f)
        level_blocks = coarse_means(prepared.level[: values.shape[0]], f)
        level = (
            level_blocks / max(float(np.mean(level_blocks)), 1e-12) if s.weigh_by_level else None
        )
        first = values.shape[0] % f  # position of the first block's first step
        centres = first + f * np.arange(blocks.shape[0]) + (f - 1) / 2
        marks = time_marks(centres, self.step_s)
        span = s.net.seq_len + s.net.pred_len
        starts = np.array(
            [
                i
                for i in range(blocks.shape[0] - span + 1)
                if not np.isnan(blocks[i : i + span]).any()
            ],
            dtype=np.int64,
        )
        if starts.shape[0] < 20:
            raise ForecastError(
                f"{self.name}: only {starts.shape[0]} training windows in "
                f"{values.shape[0]} steps; need a longer history"
            )
        self.net_, self.error_quantiles_, self.val_mae_ = train_network(
            blocks, seen, level, marks, starts, s, self.seed, init
        )
        keep = self._keep()
        self.offset_ = max(0, values.shape[0] - keep)
        self._memo = None
        self.history_ = values[self.offset_ :].copy()
        self.mstl_ = self._fit_mstl(values) if s.mstl_weight > 0 else None
        self.mstl_new_ = 0
        self.mix_ = MixWeights(self.mix_.window)
        self._track_mix()
        self.fit_s_ = time.perf_counter() - started
        log.info(
            "%s: fitted on %d steps (period %d, %d windows%s) in %.1f s, validation MAE %.4f",
            self.name,
            values.shape[0],
            self.period_,
            starts.shape[0],
            "" if init is None else ", fine-tuned",
            self.fit_s_,
            self.val_mae_,
        )
        return self

    def _fit_mstl(self, values: FloatArray) -> StatsForecaster | None:
        """MSTL on the same history, or None (logged) when it cannot fit: the
        transformer then forecasts alone."""
        try:
            return StatsForecaster("mstl", step_s=self.step_s).fit(values)
        except (ForecastError, ConfigError) as exc:  # ConfigError: no block fits the step
            log.warning(
                "%s: MSTL could not fit (%s); the transformer forecasts alone", self.name, exc
            )
            return None

    def update(self, new_points: FloatArray) -> Self:
        """Append observations to the input window (and MSTL's); nothing is retrained.
        The share's errors are scored window by window, however long the update (a live
        catch-up after a fit or a restart scores every window it covers)."""
        if self.history_ is None:
            raise ForecastError(f"{self.name} is not fitted")
        values = as_new_points(new_points)
        while values.shape[0]:
            take = self.mix_.needed or values.shape[0]
            self._append(values[:take])
            values = values[take:]
        return self

    def _append(self, values: FloatArray) -> None:
        self.mix_.observe(values)
        if self.mstl_ is not None:
            self.mstl_.update(values)
            self.mstl_new_ += values.shape[0]
        joined = np.concatenate([self.history_, values])
        drop = max(0, joined.shape[0] - self._keep())
        self.offset_ += drop
        self.history_ = joined[drop:]
        if not self.mix_.tracking:
            self._track_mix()

    def _track_mix(self) -> None:
        """Track both halves' next window, to weigh them (:mod:`~streamtrain.forecast.mix`)."""
        if self.mstl_ is None or not self.settings.adapt_weight:
            return
        window = self.mix_.window
        try:
            self.mix_.track(self._own(window), self.mstl_.predict(window))
        except _FAILURES as exc:  # the share keeps its errors so far; forecasts go on
            log.debug("%s: no window tracked: %s", self.name, exc)

    @property
    def mstl_share(self) -> float:
        """MSTL's share of the forecast now (``mstl_weight``, or as the errors set it)."""
        if self.mstl_ is None:
            return 0.0
        prior = self.settings.mstl_weight
        return self.mix_.weight(prior) if self.settings.adapt_weight else prior

    # -- prediction ---------------------------------------------------------------------

    def _forecast_z(self, horizon_steps: int) -> tuple[FloatArray, FloatArray]:
        """``(baseline_z, residual_z)`` per step for the next ``horizon_steps`` steps.

        One network pass per origin: the result is kept for the origin (the history's
        absolute end) and sliced for any horizon up to the network's own (``pred_len``
        blocks), so the point forecast, the quantiles and the safety net's tracked
        forecast at one origin cost one pass."""
        net, _, _, history = self._state()
        key = (self.offset_ + history.shape[0], self.offset_)
        memo = self._memo
        if memo is not None and memo[0] == key and memo[1].shape[0] >= horizon_steps:
            return memo[1][:horizon_steps], memo[2][:horizon_steps]
        window = self._window(horizon_steps)
        s = self.settings
        predicted = run_network(net, *window.inputs, s.threads, s.anchor_blocks)
        residual = self._residual(window, predicted)
        self._memo = (key, window.baseline_z, residual)
        return window.baseline_z[:horizon_steps], residual[:horizon_steps]

    def _window(self, horizon_steps: int) -> _Window:
        """The network's input at the current origin. Only the last input window and
        the horizon are prepared (:func:`seasonal_baseline`'s ``start``): the same
        values as preparing the whole history, at a fraction of the cost."""
        _, scale, _, history = self._state()
        n = history.shape[0]
        if np.isnan(history).all():
            raise ForecastError(f"{self.name}: the recent history is all gaps")
        s, f = self.settings, self.steps_per_block
        seq_len, label_len, pred_len = s.net.seq_len, s.net.label_len, s.net.pred_len
        ahead = max(horizon_steps, pred_len * f)
        start = max(0, n - seq_len * f)
        filled = fill_gaps(history, self.period_ if n > self.period_ else 0)
        smoothed_z = scale.forward(moving_average(filled, self.smooth_steps))
        baseline_z = seasonal_baseline(
            smoothed_z,
            self.period_,
            ahead,
            s.baseline_periods,
            median=s.baseline_median,
            start=start,
        )
        window = scale.forward(filled[start:]) - baseline_z[: n - start]
        blocks = coarse_means(window, f)
        if blocks.shape[0] != seq_len or np.isnan(blocks).any():
            raise ForecastError(f"{self.name}: the input window is incomplete")
        centres = self.offset_ + block_centres(n, seq_len, f)
        future = self.offset_ + block_centres(n + pred_len * f, pred_len, f)
        enc_marks = time_marks(centres, self.step_s)
        dec_marks = time_marks(np.concatenate([centres[-label_len:], future]), self.step_s)
        return _Window((blocks, enc_marks, dec_marks), baseline_z[n - start :], ahead)

    def _residual(self, window: _Window, predicted: FloatArray) -> FloatArray:
        """The network's block forecast as per-step residuals from the origin."""
        blocks = window.inputs[0]
        return interpolate_forward(blocks[-2:], predicted, self.steps_per_block, window.ahead)

    def walk(
        self, values: FloatArray, start: int, origins: Sequence[int], end: int, horizon_steps: int
    ) -> list[FloatArray] | None:
        """A validation fold's forecasts in one network pass
        (:class:`~streamtrain.forecast.base.BatchWalk`): told ``values[start:origin]``
        before each origin's forecast and ``values[:end]`` in the end, as a walk of
        ``update`` and ``predict`` would be; ``None`` (nothing done) while MSTL has a
        share, whose weight follows the errors one forecast at a time."""
        if self.mstl_ is not None:
            return None
        check_horizon(horizon_steps)
        seen, windows = start, []
        for origin in origins:
            if origin > seen:
                self.update(values[seen:origin])
                seen = origin
            windows.append(self._window(horizon_steps))
        if end > seen:
            self.update(values[seen:end])
        if not windows:
            return []
        net, scale, _, _ = self._state()
        s = self.settings
        blocks, enc, dec = (np.stack([w.inputs[k] for w in windows]) for k in range(3))
        predicted = run_network(net, blocks, enc, dec, s.threads, s.anchor_blocks)
        return [
            np.maximum(scale.inverse(w.baseline_z + self._residual(w, p))[:horizon_steps], 0.0)
            for w, p in zip(windows, predicted, strict=True)
        ]

    def _with_mstl(
        self, own: FloatArray, horizon_steps: int, level: float | None = None
    ) -> FloatArray:
        """``own`` (the transformer's forecast, or its ``level`` quantile) combined with
        MSTL's, ``mstl_weight`` to MSTL; ``own`` alone when MSTL cannot answer."""
        if self.mstl_ is None:
            return own
        try:
            if level is None:
                theirs = self.mstl_.predict(horizon_steps)
            else:
                theirs = self.mstl_.predict_quantiles(horizon_steps, [level])[level]
        except _FAILURES as exc:
            if not self._mstl_failing:  # once per failing stretch, not every live tick
                log.warning(
                    "%s: MSTL could not forecast (%s); the transformer alone", self.name, exc
                )
            self._mstl_failing = True
            return own
        self._mstl_failing = False
        w = self.mstl_share
        return np.maximum((1 - w) * own + w * theirs, 0.0)

    def predict(self, horizon_steps: int) -> FloatArray:
        check_horizon(horizon_steps)
        return self._with_mstl(self._own(horizon_steps), horizon_steps)

    def _own(self, horizon_steps: int) -> FloatArray:
        """The transformer's forecast alone."""
        base_z, residual = self._forecast_z(horizon_steps)
        _, scale, _, _ = self._state()
        result: FloatArray = np.maximum(scale.inverse(base_z + residual), 0.0)
        return result

    def predict_quantiles(
        self, horizon_steps: int, levels: Sequence[float]
    ) -> dict[float, FloatArray]:
        """Forecast quantiles: the empirical quantiles of the validation errors (the last
        ``val_fraction`` of the windows) per horizon block, added in the log scale, so
        intervals widen with the lead and with the level; combined with MSTL's at the
        same level with the same ``w``."""
        check_horizon(horizon_steps)
        levels = check_levels(levels)
        base_z, residual = self._forecast_z(horizon_steps)
        _, scale, quantiles, _ = self._state()
        out: dict[float, FloatArray] = {}
        for level in levels:
            per_block = np.array([np.interp(level, QUANTILE_GRID, col) for col in quantiles.T])
            shift = interpolate_forward(np.zeros(1), per_block, self.steps_per_block, horizon_steps)
            own = np.maximum(scale.inverse(base_z + residual + shift), 0.0)
            out[level] = self._with_mstl(own, horizon_steps, level)
        return out

    # -- persistence (streamtrain.forecast.fedformer_store) ------------------------------

    def save(self, path: str | Path) -> None:
        """Weights and state to one ``.npz`` file (plain arrays, no pickles)."""
        from streamtrain.forecast.fedformer_store import save_fedformer

        save_fedformer(self, path)

    @classmethod
    def load(cls, path: str | Path) -> FedformerForecaster:
        """The model :meth:`save` wrote. MSTL is re-estimated from its kept history (as
        :meth:`StatsForecaster.load <streamtrain.forecast.stats.StatsForecaster.load>`
        does) and told the steps after its fit, so a model saved right after its fit
        (what the live planner saves) reloads as it was; one saved later gets an MSTL half
        close to, not the same as, the saved one once the history outgrows what MSTL keeps."""
        from streamtrain.forecast.fedformer_store import load_fedformer

        return load_fedformer(path)
