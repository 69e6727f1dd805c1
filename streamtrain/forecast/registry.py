"""Forecasters by name: the one place that maps ``--models`` names to classes.

Owned here: :data:`FORECASTER_NAMES`, :func:`make_forecaster` (``**options`` go to the
model: for ``fedformer`` and ``auto``, the names
:meth:`~streamtrain.forecast.fedformer_settings.FedformerSettings.from_options` takes,
the settings' fields and their network's; for ``ets``,
:class:`~streamtrain.forecast.ets.HoltWinters` keywords) and :func:`load_forecaster`
(any saved model, by the ``model`` field it saved). ``auto`` is the FEDformer-style
model wrapped in the seasonal-naive fallback. Nothing here imports torch."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

from streamtrain.errors import ConfigError, ForecastError
from streamtrain.forecast.base import Forecaster, SeasonalNaive
from streamtrain.forecast.ets import HoltWinters
from streamtrain.forecast.fallback import FallbackForecaster
from streamtrain.forecast.fedformer import FedformerForecaster
from streamtrain.forecast.fedformer_settings import FedformerSettings
from streamtrain.units import DAY_S, WEEK_S

__all__ = ["FORECASTER_NAMES", "load_forecaster", "make_forecaster"]

FORECASTER_NAMES = ("seasonal_naive_daily", "seasonal_naive_weekly", "ets", "fedformer", "auto")
_FALLBACK_OPTIONS = ("track_steps", "window_steps", "min_tracked")


def _fedformer(step_s: int, seed: int, options: dict[str, Any]) -> FedformerForecaster:
    settings = FedformerSettings.from_options(**options)
    return FedformerForecaster(settings, step_s=step_s, seed=seed)


def make_forecaster(name: str, *, step_s: int = 60, seed: int = 0, **options: Any) -> Forecaster:
    """A new, unfitted forecaster called ``name`` (one of :data:`FORECASTER_NAMES`)."""
    if name in ("seasonal_naive_daily", "seasonal_naive_weekly"):
        if options:
            raise ConfigError(f"{name} takes no options, got {', '.join(options)}")
        return SeasonalNaive(DAY_S if name.endswith("daily") else WEEK_S, step_s=step_s)
    if name == "ets":
        try:
            return HoltWinters(step_s=step_s, **options)
        except TypeError as exc:
            raise ConfigError(f"ets: {exc}") from None
    if name == "fedformer":
        return _fedformer(step_s, seed, options)
    if name == "auto":
        wrapper = {k: options.pop(k) for k in _FALLBACK_OPTIONS if k in options}
        return FallbackForecaster(_fedformer(step_s, seed, options), step_s=step_s, **wrapper)
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
    if kind == "ets":
        return HoltWinters.load(path)
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
        )
        model.fallback_ = SeasonalNaive.load(path.with_name(state["naive"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ForecastError(f"cannot load an auto model from {path}: {exc}") from exc
    model.main_ok_ = bool(state["main"])
    model.main_error_ = None if model.main_ok_ else "not fitted when saved"
    model.track_origin()
    return model
