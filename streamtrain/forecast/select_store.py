"""Saving and loading a selected model (``auto``'s choice): a JSON manifest, no pickles.

Owned here: :func:`save_select` and :func:`restore_select` (what
:meth:`SelectForecaster.save <streamtrain.forecast.select.SelectForecaster.save>` writes,
and the model it wrote, for :func:`~streamtrain.forecast.registry.load_forecaster`).
The manifest names the choice, its weights, every option's validation error and
whether the choice is trusted; each kept model is saved beside it by its own ``save``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streamtrain.errors import ForecastError
from streamtrain.forecast.base import Forecaster
from streamtrain.forecast.select import SelectForecaster

__all__ = ["restore_select", "save_select"]


def save_select(model: SelectForecaster, path: str | Path) -> None:
    """A JSON manifest at ``path``; each kept model beside it (``<path>.<name>``)."""
    if model.chosen_ is None:
        raise ForecastError(f"{model.name} is not fitted; nothing to save")
    path = Path(path)
    files: dict[str, str] = {}
    for key, kept in model.models_.items():
        files[key] = f"{path.name}.{key}"
        kept.save(path.with_name(files[key]))
    manifest: dict[str, Any] = {
        "model": "select",
        "name": model.name,
        "step_s": model.step_s,
        "chosen": model.chosen_,
        "weights": model.weights_,
        "val_mae": model.val_mae_,
        "trusted": model.trusted_,
        "files": files,
    }
    try:
        path.write_text(json.dumps(manifest), encoding="utf-8")
    except OSError as exc:
        raise ForecastError(f"cannot save {model.name} to {path}: {exc}") from exc


def restore_select(
    path: Path, state: dict[str, Any], load: Callable[[Path], Forecaster]
) -> SelectForecaster:
    """The model :func:`save_select` wrote (``load`` reads each kept model); a manifest
    saved before ensembles were weighted gives its members equal weights."""
    try:
        files = {str(k): str(v) for k, v in state["files"].items()}
        model = SelectForecaster(lambda _: load(path), list(files), step_s=int(state["step_s"]))
        model.name = str(state["name"])
        model.models_ = {k: load(path.with_name(v)) for k, v in files.items()}
        model.chosen_ = str(state["chosen"])
        members = model.chosen_.split("+")
        saved = state.get("weights") or {m: 1.0 / len(members) for m in members}
        model.weights_ = {str(k): float(v) for k, v in saved.items()}
        model.val_mae_ = {str(k): float(v) for k, v in state["val_mae"].items()}
        model.trusted_ = bool(state.get("trusted", False))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ForecastError(f"cannot load a selected model from {path}: {exc}") from exc
    if set(model.weights_) != set(model.models_) or set(members) != set(model.models_):
        raise ForecastError(f"{path}: the saved models do not match the choice")
    return model
