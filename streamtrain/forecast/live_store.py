"""The live forecaster's background fits and what it keeps on disk.

Owned here: :class:`FitJob` and :func:`fit_and_save` (the job a worker process of the
control app runs: fit the named model, save it, return the fit's seconds),
:class:`Manifest` with :func:`write_manifest` and :func:`read_manifest` (``live.json``
in the state directory: the live model's file, the absolute step its history ended
at, when and how long it was fitted), and :func:`load_model`. A fit saves to a new
file name, so nothing refers to it until the parent has loaded it; writing a manifest
replaces the old one atomically and then removes the other models' files, so a crash
at any point leaves a manifest that names a file which exists.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ForecastError
from streamtrain.forecast.base import Forecaster

__all__ = [
    "MANIFEST",
    "FitJob",
    "Manifest",
    "Submit",
    "fit_and_save",
    "load_model",
    "read_manifest",
    "write_manifest",
]

log = logging.getLogger(__name__)
FloatArray = NDArray[np.float64]
MANIFEST = "live.json"


@dataclass(frozen=True, slots=True)
class FitJob:
    """One background fit: the model named ``name`` (with its registry ``options``) on
    ``history``, saved to ``path``."""

    name: str
    step_s: int
    seed: int
    history: FloatArray
    path: str
    options: dict[str, Any] = field(default_factory=dict)


def fit_and_save(job: FitJob) -> float:
    """Fit and save (runs in a worker process); returns the fit's wall seconds."""
    from streamtrain.forecast.registry import make_forecaster

    started = time.perf_counter()
    model = make_forecaster(job.name, step_s=job.step_s, seed=job.seed, **job.options)
    model.fit(job.history)
    model.save(job.path)
    return time.perf_counter() - started


Submit = Callable[[FitJob], "Future[float]"]


def load_model(path: Path) -> Forecaster:
    """The model a fit saved at ``path`` (any registered kind)."""
    from streamtrain.forecast.registry import load_forecaster

    return load_forecaster(path)


@dataclass(frozen=True, slots=True)
class Manifest:
    """Which saved model is live (module docstring)."""

    name: str
    step_s: int
    file: str  # the model's file name in the state directory
    end_step: int  # the absolute end of the history it was told
    fitted_at_s: float
    fit_s: float


def write_manifest(state_dir: Path, manifest: Manifest) -> bool:
    """Make ``manifest`` the live one and remove the name's other model files; False
    (logged) when it cannot be written."""
    target = state_dir / MANIFEST
    try:
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(manifest)), encoding="utf-8")
        os.replace(tmp, target)
    except OSError as exc:
        log.warning("forecaster %s: cannot write %s: %s", manifest.name, target, exc)
        return False
    for old in state_dir.glob(f"{manifest.name}-*.model*"):
        if not old.name.startswith(manifest.file):
            old.unlink(missing_ok=True)
    return True


def read_manifest(state_dir: Path) -> Manifest | None:
    """The manifest in ``state_dir``, or None when there is none; a
    :class:`~streamtrain.errors.ForecastError` when it cannot be read."""
    path = state_dir / MANIFEST
    if not path.exists():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return Manifest(
            name=str(raw["name"]),
            step_s=int(raw["step_s"]),
            file=str(raw["file"]),
            end_step=int(raw["end_step"]),
            fitted_at_s=float(raw["fitted_at_s"]),
            fit_s=float(raw["fit_s"]),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ForecastError(f"cannot read {path}: {exc}") from exc
