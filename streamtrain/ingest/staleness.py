"""KALE Fig. 1 measured: how much click AUC a model loses when its training lags, on
the example stream and model of this package (the curve the demo prices its lag with).

Owned here:

* :class:`StalenessConfig`: the stream (``records_per_min`` per simulated minute of
  :class:`~streamtrain.ingest.example.SyntheticCtr` records whose hidden labelling model
  turns ``drift_turns_per_day`` times a simulated day), the lags to compare, the
  warm-up and the evaluation.
* :func:`measure_staleness`: trains one :class:`~streamtrain.ingest.mmoe.MMoE` on the
  fresh stream, minute by minute, with real Adam steps. A copy held back by a lag of
  ``L`` minutes has seen exactly the records the fresh model saw up to ``L`` minutes
  ago, in the same order, so it *is* the fresh model's snapshot of then: the run keeps
  the snapshots of the last ``max(lags)`` minutes instead of training one model per
  lag. Every ``eval_every_min`` after the warm-up, each copy is scored on the same
  held-out sample of the next minute's traffic (a random stream apart from the
  training one). Returns :class:`StalenessResult`: the mean AUC per lag and the series.
* :func:`lost_auc` (pure): the AUC a run lost to its lag, given a measured curve and a
  lag series (linear interpolation between measured lags; flat past the last one).

Importing this module does not load torch (the demo's summary uses :func:`lost_auc`).
The CPU cost is about one core-second per 40,000 trained records (MMoE steps of
``batch_records`` on one torch thread).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError
from streamtrain.ingest.example import SyntheticCtr
from streamtrain.units import DAY_S, MINUTE_S

__all__ = ["StalenessConfig", "StalenessResult", "lost_auc", "measure_staleness"]

_MINUTES_PER_DAY = DAY_S // MINUTE_S
_EVAL_SEED = 9_191  # the held-out sample's random stream, apart from the training one


@dataclass(frozen=True, slots=True)
class StalenessConfig:
    drift_turns_per_day: float = 6.0
    records_per_min: int = 1_000
    minutes: int = 300
    warmup_min: int = 60
    lags_min: tuple[int, ...] = (0, 5, 10, 20, 40)
    eval_every_min: int = 5
    eval_records: int = 4_000
    batch_records: int = 200
    learning_rate: float = 2e-3
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.lags_min or min(self.lags_min) < 0 or 0 not in self.lags_min:
            raise ConfigError("the lags must be >= 0 minutes and include 0 (the fresh model)")
        if self.records_per_min < self.batch_records or self.batch_records < 1:
            raise ConfigError("a simulated minute must hold at least one batch")
        if self.warmup_min <= max(self.lags_min):
            raise ConfigError("the warm-up must be longer than the largest lag")
        if self.minutes <= self.warmup_min or self.eval_every_min < 1:
            raise ConfigError("the run must be longer than its warm-up")
        if not math.isfinite(self.drift_turns_per_day) or self.eval_records < 10:
            raise ConfigError("need a finite drift and at least 10 evaluation records")

    def phase(self, minute: float) -> float:
        """The hidden model's phase (turns) at simulated ``minute``."""
        return self.drift_turns_per_day * minute / _MINUTES_PER_DAY


@dataclass(frozen=True, slots=True)
class StalenessResult:
    config: StalenessConfig
    eval_minutes: NDArray[np.int64]
    auc: NDArray[np.float64]  # [evaluation, lag]
    trained_records: int

    @property
    def lags_min(self) -> tuple[int, ...]:
        return self.config.lags_min

    def mean_auc(self) -> dict[int, float]:
        """Mean AUC over the evaluations, per lag (minutes)."""
        means = np.nanmean(self.auc, axis=0)
        return {lag: float(v) for lag, v in zip(self.lags_min, means, strict=True)}

    def stderr_auc(self) -> dict[int, float]:
        """Standard error of the mean of the per-evaluation AUC *drop* against lag 0."""
        drops = self.auc[:, [0]] - self.auc
        errors = np.nanstd(drops, axis=0, ddof=1) / math.sqrt(max(len(self.auc), 1))
        return {lag: float(v) for lag, v in zip(self.lags_min, errors, strict=True)}


def measure_staleness(
    config: StalenessConfig, *, progress: Callable[[int], None] | None = None
) -> StalenessResult:
    """Run the experiment (module docstring); ``progress(minute)`` after each minute."""
    import torch  # here, so the pure parts load without it

    from streamtrain.ingest.mmoe import MmoeCtrApp, click_auc, ctr_loss

    lags = sorted(set(config.lags_min))
    if lags[0] != 0 or tuple(lags) != tuple(config.lags_min):
        raise ConfigError("give the lags in increasing order without repeats")
    source = SyntheticCtr(seed=config.seed)
    app = MmoeCtrApp(learning_rate=config.learning_rate, seed=config.seed)
    model, optimizer = app.model, app.optimizer
    held_back = copy.deepcopy(model)
    snapshots: dict[int, dict[str, Any]] = {}
    eval_minutes: list[int] = []
    rows: list[list[float]] = []
    trained = 0
    for minute in range(config.minutes):
        table = source.sample(
            config.records_per_min,
            first_id=minute * config.records_per_min,
            phase=config.phase(minute),
        )
        model.train()
        for start in range(0, len(table), config.batch_records):
            part = table[start : start + config.batch_records]
            sparse, dense, click, conversion = (
                torch.from_numpy(np.array(part[name], order="C"))
                for name in ("sparse", "dense", "click", "conversion")
            )
            optimizer.zero_grad(set_to_none=True)
            loss = ctr_loss(model(sparse, dense), click, conversion)
            torch.autograd.backward(loss)
            optimizer.step()
        trained += len(table)
        # After minute m the fresh model has seen minutes 0..m; keep it for the lags.
        snapshots[minute] = {k: v.detach().clone() for k, v in model.state_dict().items()}
        snapshots.pop(minute - lags[-1] - 1, None)
        due = minute + 1 - config.warmup_min
        if due >= 0 and due % config.eval_every_min == 0:
            held_out = source.sample(
                config.eval_records,
                first_id=(minute + 1) * config.records_per_min,
                phase=config.phase(minute + 1),
                seed=_EVAL_SEED,
            )
            row = []
            for lag in lags:
                held_back.load_state_dict(snapshots[minute - lag])
                row.append(click_auc(held_back, held_out))
            eval_minutes.append(minute + 1)
            rows.append(row)
        if progress is not None:
            progress(minute)
    return StalenessResult(
        config=config,
        eval_minutes=np.asarray(eval_minutes, dtype=np.int64),
        auc=np.asarray(rows, dtype=np.float64).reshape(-1, len(lags)),
        trained_records=trained,
    )


def lost_auc(
    curve: dict[int, float] | dict[float, float],
    lag_min: Sequence[float] | NDArray[np.float64],
    weights_s: Sequence[float] | NDArray[np.float64] | None = None,
) -> float:
    """The mean AUC lost to lag: ``curve[0] - curve(lag)`` averaged over ``lag_min``
    (weighted by ``weights_s``, e.g. each lag's duration; default equal). ``curve`` maps
    lag minutes to AUC (it must hold lag 0); between measured lags it is interpolated
    linearly, below 0 and past the last lag it stays at the end value. NaN without lags."""
    if 0 not in curve:
        raise ConfigError("the AUC-against-lag curve must include lag 0")
    points = sorted((float(k), float(v)) for k, v in curve.items())
    xs = np.array([p[0] for p in points])
    ys = np.array([p[1] for p in points])
    lags = np.asarray(lag_min, dtype=np.float64)
    if lags.size == 0:
        return float("nan")
    weights = np.ones_like(lags) if weights_s is None else np.asarray(weights_s, np.float64)
    if weights.shape != lags.shape or (weights < 0).any() or weights.sum() <= 0:
        raise ConfigError("need one non-negative weight per lag, not all zero")
    losses = float(curve[0]) - np.interp(np.nan_to_num(lags, nan=0.0), xs, ys)
    return float(np.sum(losses * weights) / np.sum(weights))
