"""Forecasters by name: the one place that maps model names to classes.

Owned here: :data:`FORECASTER_NAMES`, :func:`make_forecaster`, :func:`fit_key` (what
names one fit in a fit cache) and :func:`load_forecaster` (any saved model, by the
``model`` field it saved). Nothing here imports torch or statsforecast (each model
imports its library when it is fitted or loaded).

* ``seasonal_naive`` (weekly once the history holds two weeks, daily before),
  ``seasonal_naive_daily``, ``seasonal_naive_weekly``:
  :class:`~streamtrain.forecast.base.SeasonalNaive`;
* ``ets``, ``mstl``: statsforecast's AutoETS and MSTL
  (:class:`~streamtrain.forecast.stats.StatsForecaster`; option ``block_s``);
* ``fedformer``: :class:`~streamtrain.forecast.fedformer.FedformerForecaster`
  (options: :meth:`~streamtrain.forecast.fedformer_settings.FedformerSettings.from_options`);
* ``auto``: the best of the others (or an ensemble of the best few) by rolling-origin
  validation (:class:`~streamtrain.forecast.select.SelectForecaster`), behind the
  seasonal-naive safety net (:class:`~streamtrain.forecast.fallback.FallbackForecaster`);
  its defaults and options are :func:`_auto`'s.
"""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from streamtrain.config import comma_list
from streamtrain.errors import ConfigError, ForecastError
from streamtrain.forecast.base import Forecaster, SeasonalNaive
from streamtrain.forecast.evaluate import default_horizon_steps
from streamtrain.forecast.fallback import FallbackForecaster
from streamtrain.forecast.fedformer import FedformerForecaster
from streamtrain.forecast.fedformer_settings import FedformerSettings
from streamtrain.forecast.select import SelectForecaster
from streamtrain.forecast.select_store import restore_select
from streamtrain.forecast.stats import StatsForecaster
from streamtrain.units import DAY_S, WEEK_S

__all__ = [
    "AUTO_CANDIDATES",
    "AUTO_TRANSFORMER",
    "FORECASTER_NAMES",
    "fit_key",
    "load_forecaster",
    "make_forecaster",
]

FORECASTER_NAMES = (
    "seasonal_naive",
    "seasonal_naive_daily",
    "seasonal_naive_weekly",
    "ets",
    "mstl",
    "fedformer",
    "auto",
)
AUTO_CANDIDATES = ("seasonal_naive", "ets", "mstl", "fedformer")
AUTO_PREFER = ("ets", "mstl")  # the safe choice unless another is clearly better
AUTO_FOLDS = 7  # daily validation folds over the last week (at most a quarter of the history)
AUTO_PARALLEL = ("fedformer",)  # validated in a worker process while the others run here
AUTO_PRELOAD = ("torch",)  # what the transformer's fits need here, imported while it trains
# auto's transformer: the fedformer's network alone (auto weighs it with MSTL itself, by
# validation; the fedformer's own MSTL half would be a near-duplicate candidate), trained
# in 300 steps from scratch and fine-tuned in 25 at twice the rate, not 400 and 50: its
# seven validation folds are the cost of an auto fit, and this training chose as well or
# better on the benchmark's nine series (docs/benchmarks.md, "Forecasters")
AUTO_TRANSFORMER = MappingProxyType(
    {
        "mstl_weight": 0.0,
        "train_steps": 300,
        "finetune_steps": 25,
        "finetune_learning_rate": 6.6e-4,
    }
)
_NAIVE_PERIODS = {
    "seasonal_naive": 0,
    "seasonal_naive_daily": DAY_S,
    "seasonal_naive_weekly": WEEK_S,
}
_FALLBACK_OPTIONS = (
    "track_steps",
    "window_steps",
    "min_tracked",
    "trust_validated",
    "carry_errors",
)
_SELECT_OPTIONS = (
    "val_steps",
    "horizon_steps",
    "stride_steps",
    "folds",
    "fold_steps",
    "ensemble",
    "refit",
    "cache",
    "workers",
)


def _fedformer(step_s: int, seed: int, options: dict[str, Any]) -> FedformerForecaster:
    settings = FedformerSettings.from_options(**options)
    return FedformerForecaster(settings, step_s=step_s, seed=seed)


def _candidates(value: Any) -> tuple[str, ...]:
    names = comma_list(value) if isinstance(value, str) else tuple(value)
    bad = [n for n in names if n not in AUTO_CANDIDATES]
    if bad or not names:
        raise ConfigError(
            f"auto: unknown candidate(s) {', '.join(bad) or '(none)'}; "
            f"known: {', '.join(AUTO_CANDIDATES)}"
        )
    return names


def _auto(step_s: int, seed: int, options: dict[str, Any]) -> FallbackForecaster:
    """``auto``: the best of ``seasonal_naive``, ``ets``, ``mstl`` and ``fedformer``'s
    transformer alone, with a shorter training (``AUTO_TRANSFORMER``; any fedformer
    option overrides it), or an inverse-MAE weighted ensemble of the best few, validated
    over the last week of the history (at most a quarter of it: a window of every
    weekday, so a closed weekend cannot decide alone) in daily folds (``AUTO_FOLDS``,
    each candidate fitted at the start of each day, as the daily refits do), keeping the
    better of ``ets`` and ``mstl`` unless another option is better on every scored day
    (``AUTO_PREFER``), at ``forecast eval``'s horizon
    (:func:`~streamtrain.forecast.evaluate.default_horizon_steps`).

    Options: the fedformer's, ``candidates`` (a comma-separated string or a sequence),
    the selection's ``val_steps``, ``horizon_steps``, ``stride_steps``, ``folds``,
    ``fold_steps`` (0: the validation window in ``folds`` equal parts), ``ensemble``,
    ``refit``, ``cache`` (a :class:`~streamtrain.forecast.fitcache.FitCache` keyed by
    :func:`fit_key`: a rolling origin's daily fits reuse the previous day's folds),
    ``workers`` (processes for the validation; default two where the machine has two
    cores: the transformer's folds run in the second, ``AUTO_PARALLEL``, and torch is
    imported in the first while they run, ``AUTO_PRELOAD``), and the safety
    net's ``track_steps``, ``window_steps``, ``min_tracked``, ``trust_validated``,
    ``carry_errors``."""
    wrapper = {k: options.pop(k) for k in _FALLBACK_OPTIONS if k in options}
    select = {k: options.pop(k) for k in _SELECT_OPTIONS if k in options}
    candidates = _candidates(options.pop("candidates", AUTO_CANDIDATES))
    FedformerSettings.from_options(**options)  # unknown options fail now, not at fit
    select.setdefault("val_steps", WEEK_S // step_s)
    select.setdefault("folds", AUTO_FOLDS)
    select.setdefault("fold_steps", DAY_S // step_s)
    select.setdefault("horizon_steps", default_horizon_steps(step_s))
    select.setdefault("stride_steps", select["horizon_steps"])

    make = _Candidates(step_s, seed, {**AUTO_TRANSFORMER, **options})
    select.setdefault("prefer", tuple(c for c in candidates if c in AUTO_PREFER))
    select.setdefault("baseline", "seasonal_naive")
    select.setdefault("workers", min(2, os.cpu_count() or 1))
    select.setdefault("parallel", tuple(c for c in candidates if c in AUTO_PARALLEL))
    select.setdefault("preload", AUTO_PRELOAD if select["parallel"] else ())
    chooser = SelectForecaster(make, candidates, step_s=step_s, cache_key=make.key, **select)
    return FallbackForecaster(chooser, step_s=step_s, **wrapper)


@dataclass(frozen=True, slots=True)
class _Candidates:
    """``auto``'s candidates by name (a plain object, so that a worker process can make
    them too: :func:`~streamtrain.forecast.folds.run_plans`)."""

    step_s: int
    seed: int
    transformer: dict[str, Any]

    def own(self, name: str) -> dict[str, Any]:
        return self.transformer if name == "fedformer" else {}

    def __call__(self, name: str) -> Forecaster:
        return make_forecaster(name, step_s=self.step_s, seed=self.seed, **self.own(name))

    def key(self, name: str) -> str:
        return fit_key(name, step_s=self.step_s, seed=self.seed, **self.own(name))


def fit_key(name: str, *, step_s: int = 60, seed: int = 0, **options: Any) -> str:
    """What names one fit of ``make_forecaster(name, step_s=..., seed=..., **options)``
    in a :class:`~streamtrain.forecast.fitcache.FitCache` (with the history's digest)."""
    extra = ",".join(f"{k}={options[k]!r}" for k in sorted(options))
    return f"{name}|step_s={step_s}|seed={seed}|{extra}"


def make_forecaster(name: str, *, step_s: int = 60, seed: int = 0, **options: Any) -> Forecaster:
    """A new, unfitted forecaster called ``name`` (one of :data:`FORECASTER_NAMES`)."""
    if name in _NAIVE_PERIODS:
        if options:
            raise ConfigError(f"{name} takes no options, got {', '.join(options)}")
        return SeasonalNaive(_NAIVE_PERIODS[name], step_s=step_s)
    if name in ("ets", "mstl"):
        unknown = set(options) - {"block_s"}
        if unknown:
            raise ConfigError(
                f"{name}: unknown option(s) {', '.join(sorted(unknown))}; known: block_s"
            )
        return StatsForecaster(name, step_s=step_s, **options)
    if name == "fedformer":
        return _fedformer(step_s, seed, options)
    if name == "auto":
        try:
            return _auto(step_s, seed, dict(options))
        except TypeError as exc:
            raise ConfigError(f"auto: {exc}") from None
    raise ConfigError(f"unknown forecaster {name!r}; known: {', '.join(FORECASTER_NAMES)}")


def load_forecaster(path: str | Path) -> Forecaster:
    """Load a model saved by any forecaster's ``save``."""
    path = Path(path)
    if zipfile.is_zipfile(path):  # .npz: the FEDformer-style model
        return FedformerForecaster.load(path)
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        kind = state["model"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ForecastError(f"cannot load a forecaster from {path}: {exc}") from exc
    if kind == "seasonal_naive":
        return SeasonalNaive.load(path)
    if kind == "stats":
        return StatsForecaster.load(path)
    if kind == "select":
        return restore_select(path, state, load_forecaster)
    if kind == "auto":
        return _load_auto(path, state)
    raise ForecastError(f"{path}: unknown saved model kind {kind!r}")


def _load_auto(path: Path, state: dict[str, Any]) -> FallbackForecaster:
    try:
        main: Forecaster = (
            load_forecaster(path.with_name(state["main"]))
            if state["main"]
            else FedformerForecaster(step_s=int(state["step_s"]))
        )
        model = FallbackForecaster(
            main,
            step_s=int(state["step_s"]),
            track_steps=int(state["track_steps"]),
            window_steps=int(state["window_steps"]),
            min_tracked=int(state["min_tracked"]),
            name=str(state["name"]),
            trust_validated=bool(state.get("trust_validated", True)),
            carry_errors=bool(state.get("carry_errors", False)),
        )
        model.fallback_ = SeasonalNaive.load(path.with_name(state["naive"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ForecastError(f"cannot load an auto model from {path}: {exc}") from exc
    model.main_ok_ = bool(state["main"])
    model.main_error_ = None if model.main_ok_ else "not fitted when saved"
    model.track_origin()
    return model
