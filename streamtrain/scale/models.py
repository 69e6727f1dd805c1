"""Resource-throughput models: how many samples/s ``w`` workers (and ``p`` parameter
servers) train, fitted by non-negative least squares (KALE §3.3, Eq. 5, 6, 8, 9).

Every model here has the form ``F(w, p) = N(w) / (θ · φ(w, p))``: a numerator ``N``
(the global batch size ``M`` for synchronous training, ``M · w`` for asynchronous) over
a step time that is linear in non-negative coefficients ``θ`` with basis ``φ``. So
``N / F_observed = θ · φ`` is a linear system, solved with ``scipy.optimize.nnls``
with rows scaled by the observation (a relative-error fit, the error MAPE measures).

Model kinds (``MODEL_KINDS``), each a basis:

* ``sync``        Eq. 6   φ = [1, 1/w, 1/w², w]
* ``sync_ps``     Eq. 5   φ = [1, 1/w, 1/p, w/p, 1/(w·p), p, w]
* ``async``       Eq. 9   φ = [1, 1/w, w]                 (N = M · w)
* ``async_ps``    Eq. 8   φ = [1, 1/p, p, w]              (N = M · w)
* ``optimus``     Optimus-style sync model, Eq. 6 without the sparse term: [1, 1/w, w]
* ``ernest``      Ernest-style: [1, 1/w, log w, w]

Pure functions and frozen values only; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError

__all__ = [
    "MODEL_KINDS",
    "FitReport",
    "ThroughputModel",
    "fit",
    "fit_report",
    "modelarts_prior",
]

FloatArray = NDArray[np.float64]
Basis = Callable[[FloatArray, FloatArray], list[FloatArray]]


def _ones(w: FloatArray) -> FloatArray:
    return np.ones_like(w)


_BASES: dict[str, Basis] = {
    "sync": lambda w, p: [_ones(w), 1 / w, 1 / w**2, w],
    "sync_ps": lambda w, p: [_ones(w), 1 / w, 1 / p, w / p, 1 / (w * p), p, w],
    "async": lambda w, p: [_ones(w), 1 / w, w],
    "async_ps": lambda w, p: [_ones(w), 1 / p, p, w],
    "optimus": lambda w, p: [_ones(w), 1 / w, w],
    "ernest": lambda w, p: [_ones(w), 1 / w, np.log(w), w],
}
_ASYNC = frozenset({"async", "async_ps"})
_USES_PS = frozenset({"sync_ps", "async_ps"})
MODEL_KINDS: tuple[str, ...] = tuple(_BASES)


def _check_kind(kind: str) -> None:
    if kind not in _BASES:
        raise ConfigError(f"unknown throughput model {kind!r}; use one of {', '.join(_BASES)}")


def _as_positive(name: str, values: Sequence[float] | FloatArray) -> FloatArray:
    array = np.atleast_1d(np.asarray(values, dtype=np.float64))
    if not np.all(np.isfinite(array)) or np.any(array <= 0):
        raise ConfigError(f"{name} must be finite and positive, got {array.tolist()}")
    return array


@dataclass(frozen=True, slots=True)
class ThroughputModel:
    """A fitted (or given) throughput model. ``batch_size`` is M, the samples per step
    across all workers for synchronous kinds and per worker for asynchronous kinds."""

    kind: str
    theta: tuple[float, ...]
    batch_size: float = 1.0

    def __post_init__(self) -> None:
        _check_kind(self.kind)
        expected = len(_BASES[self.kind](np.ones(1), np.ones(1)))
        if len(self.theta) != expected:
            raise ConfigError(
                f"model {self.kind!r} takes {expected} coefficients, got {len(self.theta)}"
            )
        if any(not math.isfinite(t) or t < 0 for t in self.theta):
            raise ConfigError(f"coefficients must be finite and non-negative: {self.theta}")
        if not math.isfinite(self.batch_size) or self.batch_size <= 0:
            raise ConfigError(f"batch size must be positive, got {self.batch_size}")

    @property
    def uses_parameter_servers(self) -> bool:
        return self.kind in _USES_PS

    def samples_per_s(
        self, workers: Sequence[float] | FloatArray, ps: Sequence[float] | FloatArray | None = None
    ) -> FloatArray:
        """F(w, p) for each worker count (and parameter-server count, for ``*_ps`` kinds)."""
        w = _as_positive("workers", workers)
        p = _as_positive("parameter servers", ps) if ps is not None else np.ones_like(w)
        if self.uses_parameter_servers and ps is None:
            raise ConfigError(f"model {self.kind!r} needs parameter-server counts")
        step = np.asarray(self.theta) @ np.vstack(_BASES[self.kind](w, p))
        numerator = self.batch_size * (w if self.kind in _ASYNC else 1.0)
        with np.errstate(divide="ignore"):
            result: FloatArray = np.where(step > 0, numerator / step, np.inf)
        return result

    def at(self, workers: int, ps: int | None = None) -> float:
        """F for one worker count."""
        return float(self.samples_per_s([workers], None if ps is None else [ps])[0])


def fit(
    kind: str,
    workers: Sequence[float] | FloatArray,
    samples_per_s: Sequence[float] | FloatArray,
    *,
    ps: Sequence[float] | FloatArray | None = None,
    batch_size: float = 1.0,
) -> ThroughputModel:
    """Fit ``kind`` to observed (workers, [ps,] samples/s) by relative-error NNLS."""
    # scipy costs ~0.6 s to import; only fitting needs it, not evaluating a model (the CLI,
    # the planner and the simulator evaluate far more often than they fit).
    from scipy.optimize import nnls

    _check_kind(kind)
    w = _as_positive("workers", workers)
    f = _as_positive("samples_per_s", samples_per_s)
    if w.shape != f.shape:
        raise ConfigError(f"{w.size} worker counts but {f.size} throughput observations")
    if kind in _USES_PS and ps is None:
        raise ConfigError(f"model {kind!r} needs a parameter-server count per observation")
    p = _as_positive("parameter servers", ps) if ps is not None else np.ones_like(w)
    if p.shape != w.shape:
        raise ConfigError(f"{w.size} worker counts but {p.size} parameter-server counts")
    basis = np.vstack(_BASES[kind](w, p)).T
    if w.size < basis.shape[1]:
        raise ConfigError(
            f"model {kind!r} has {basis.shape[1]} coefficients but only {w.size} observations"
        )
    numerator = batch_size * (w if kind in _ASYNC else 1.0)
    step = numerator / f
    theta, _ = nnls(basis / step[:, None], np.ones_like(step))
    return ThroughputModel(kind, tuple(float(t) for t in theta), batch_size)


@dataclass(frozen=True, slots=True)
class FitReport:
    model: ThroughputModel
    mae: float
    rmse: float
    mape_pct: float


def fit_report(
    model: ThroughputModel,
    workers: Sequence[float] | FloatArray,
    samples_per_s: Sequence[float] | FloatArray,
    ps: Sequence[float] | FloatArray | None = None,
) -> FitReport:
    """MAE, RMSE (samples/s) and MAPE (%) of ``model`` on observations."""
    observed = _as_positive("samples_per_s", samples_per_s)
    predicted = model.samples_per_s(workers, ps)
    error = predicted - observed
    return FitReport(
        model=model,
        mae=float(np.mean(np.abs(error))),
        rmse=float(np.sqrt(np.mean(error**2))),
        mape_pct=float(np.mean(np.abs(error) / observed) * 100),
    )


def modelarts_prior(single_worker_samples_per_s: float, workers: int) -> float:
    """The ModelArts speed curve n · 0.8^log2(n), scaled by a measured one-worker rate:
    the prior used before enough (workers, samples/s) pairs exist to fit a model."""
    if single_worker_samples_per_s <= 0 or workers < 1:
        raise ConfigError("the prior needs a positive one-worker rate and at least one worker")
    return float(single_worker_samples_per_s * workers * 0.8 ** math.log2(workers))
