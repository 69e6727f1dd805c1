"""Saving and loading the FEDformer-style forecaster: one ``.npz`` file, no pickles.

Owned here: :func:`save_fedformer` and :func:`load_fedformer` (what
:meth:`FedformerForecaster.save <streamtrain.forecast.fedformer.FedformerForecaster.save>`
and ``load`` do). The file holds the settings and state as JSON (``meta``), the kept
history, the error quantiles, the network's weights (``w:<name>``) and MSTL's kept
history, from which a load re-estimates MSTL and tells it the steps that came after its
fit (at most half the kept history), with the errors that set its share. A model saved
before the MSTL half existed loads as the transformer alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from streamtrain.errors import ConfigError, ForecastError
from streamtrain.forecast.fedformer import FedformerForecaster
from streamtrain.forecast.fedformer_data import LogScale
from streamtrain.forecast.fedformer_settings import FedformerSettings
from streamtrain.forecast.fedformer_train import build_network

__all__ = ["load_fedformer", "save_fedformer"]


def save_fedformer(model: FedformerForecaster, path: str | Path) -> None:
    """``model`` to one ``.npz`` file at ``path``."""
    net, scale, quantiles, history = model._state()
    meta = {
        "model": "fedformer",
        "name": model.name,
        "step_s": model.step_s,
        "seed": model.seed,
        "settings": model.settings.options(),
        "offset": model.offset_,
        "period": model.period_,
        "scale_c": scale.c,
        "val_mae": model.val_mae_,
        "mix": model.mix_.state(),
        "mstl_new": model.mstl_new_,
    }
    arrays = {f"w:{k}": v.detach().numpy() for k, v in net.state_dict().items()}
    if model.mstl_ is not None and model.mstl_.history_ is not None:
        arrays["mstl_history"] = model.mstl_.history_
    try:
        with Path(path).open("wb") as handle:
            np.savez(
                handle,
                meta=np.array(json.dumps(meta)),
                history=history,
                error_quantiles=quantiles,
                **arrays,
            )
    except OSError as exc:
        raise ForecastError(f"cannot save {model.name} to {path}: {exc}") from exc


def load_fedformer(path: str | Path) -> FedformerForecaster:
    """The model :func:`save_fedformer` wrote at ``path``."""
    import torch

    try:
        with np.load(Path(path), allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            options = dict(meta["settings"])
            options.setdefault("mstl_weight", 0.0)  # saved before the MSTL half: none
            model = FedformerForecaster(
                FedformerSettings.from_options(**options),
                step_s=int(meta["step_s"]),
                seed=int(meta["seed"]),
                name=str(meta["name"]),
            )
            model.history_ = np.asarray(data["history"], dtype=np.float64)
            model.error_quantiles_ = np.asarray(data["error_quantiles"], dtype=np.float64)
            weights = {k[2:]: torch.from_numpy(data[k]) for k in data.files if k[:2] == "w:"}
            mstl_history = data["mstl_history"] if "mstl_history" in data.files else None
        model.offset_ = int(meta["offset"])
        model.period_ = int(meta["period"])
        model.scale_ = LogScale(float(meta["scale_c"]))
        model.val_mae_ = float(meta["val_mae"])
        net = build_network(model.settings.net)
        net.load_state_dict(weights)
    except (OSError, ValueError, KeyError, TypeError, RuntimeError, ConfigError) as exc:
        raise ForecastError(f"cannot load a fedformer model from {path}: {exc}") from exc
    net.eval()
    model.net_ = net
    if mstl_history is not None:  # re-estimated from its saved history, as stats' load
        kept = np.asarray(mstl_history, dtype=np.float64)
        new = min(int(meta.get("mstl_new", 0)), kept.shape[0] // 2)
        model.mstl_ = model._fit_mstl(kept[: kept.shape[0] - new])
        if model.mstl_ is not None and new:
            model.mstl_.update(kept[kept.shape[0] - new :])
            model.mstl_new_ = new
        if "mix" in meta:
            model.mix_.restore(meta["mix"])
        model._track_mix()
    return model
