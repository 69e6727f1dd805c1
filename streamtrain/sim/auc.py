"""From a lag trace to an AUC, on the AUC-against-lag curve measured with real training.

Owned here: :class:`StalenessCurve` (a measured curve: the mean AUC at each measured lag
and the covariance of the mean drops against lag 0), :data:`MEASURED_CURVE` and
:func:`auc_pct`.

**Where the curve comes from**: ``python -m benchmarks.staleness`` (KALE Fig. 1
measured, :mod:`streamtrain.ingest.staleness`): one MMoE CTR model trained with real
Adam steps on a stream whose hidden labelling model turns 6 times a simulated day,
scored every 5 simulated minutes against its own snapshots of 5, 10, 20 and 40 minutes
earlier; 49 paired evaluations. :data:`MEASURED_CURVE` holds that run's means and the
covariance of its mean drops (``docs/img/staleness.csv``; a unit test recomputes both
from the file). Nothing here is fitted to KALE Table 3.

**How a lag trace becomes an AUC**: at each tick the job trains at lag ``lag`` and the
model it serves scores the curve at that lag (linear interpolation between measured
lags, flat past the last one: the curve is not extrapolated). The AUC of a run is the
time mean, ``auc(0) - Σ_k w_k · drop_k`` with ``w_k`` the mean interpolation weight of
measured lag ``k`` over the trace, so its standard error from the curve is
``sqrt(wᵀ Σ w)`` with ``Σ`` the covariance of the mean drops. The fresh model's own
level (``auc(0)``) is common to every policy and carries no error here: the column
ranks policies by how stale their training was, on a measured curve of a model that is
not KALE's (AUC ≈ 0.79, not 95 %). Shuffling adds nothing beyond the lag it removes.
Pure.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError
from streamtrain.units import MINUTE_S

__all__ = ["MEASURED_CURVE", "StalenessCurve", "auc_pct"]

FloatArray = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class StalenessCurve:
    """Mean AUC (0..1) at each of ``lags_min`` (increasing, from 0) and the covariance of
    the mean drops ``auc[0] - auc[k]`` for ``k >= 1`` (a matrix over the lags after 0)."""

    lags_min: tuple[float, ...]
    auc: tuple[float, ...]
    drop_cov: tuple[tuple[float, ...], ...]

    def __post_init__(self) -> None:
        lags = self.lags_min
        if len(lags) < 2 or lags[0] != 0 or any(b <= a for a, b in itertools.pairwise(lags)):
            raise ConfigError("a staleness curve needs increasing lags from 0 and at least two")
        if len(self.auc) != len(lags) or not all(0 <= a <= 1 for a in self.auc):
            raise ConfigError("a staleness curve needs one AUC in [0, 1] per lag")
        cov = np.asarray(self.drop_cov, dtype=np.float64)
        if cov.shape != (len(lags) - 1, len(lags) - 1) or not np.all(np.isfinite(cov)):
            raise ConfigError("the drops' covariance must be square over the lags after 0")

    @classmethod
    def from_evaluations(
        cls, lags_min: Sequence[float], auc_rows: Sequence[Sequence[float]] | FloatArray
    ) -> StalenessCurve:
        """The curve of paired evaluations (``auc_rows[evaluation][lag]``): means, and the
        covariance of the mean drops (sample covariance over the evaluations / n)."""
        rows = np.asarray(auc_rows, dtype=np.float64)
        if rows.ndim != 2 or rows.shape[1] != len(lags_min) or rows.shape[0] < 2:
            raise ConfigError("need at least two evaluations with one AUC per lag")
        drops = rows[:, [0]] - rows[:, 1:]
        cov = np.atleast_2d(np.cov(drops.T, ddof=1)) / rows.shape[0]
        return cls(
            tuple(float(x) for x in lags_min),
            tuple(float(x) for x in rows.mean(axis=0)),
            tuple(tuple(float(x) for x in row) for row in cov),
        )

    def weights(self, lag_s: FloatArray) -> FloatArray:
        """Mean interpolation weight of each measured lag over the trace ``lag_s``."""
        lags = np.asarray(self.lags_min, dtype=np.float64)
        minutes = np.clip(np.asarray(lag_s, dtype=np.float64) / MINUTE_S, 0.0, lags[-1])
        upper = np.clip(np.searchsorted(lags, minutes, side="right"), 1, len(lags) - 1)
        lower = upper - 1
        share = (minutes - lags[lower]) / (lags[upper] - lags[lower])
        out = np.zeros(len(lags), dtype=np.float64)
        if minutes.size:
            np.add.at(out, lower, 1.0 - share)
            np.add.at(out, upper, share)
            out /= minutes.size
        return out

    def auc_at(self, lag_s: FloatArray) -> float:
        """The time-mean AUC (0..1) of a job whose lag over equal steps was ``lag_s``."""
        lag = np.asarray(lag_s, dtype=np.float64)
        if lag.size == 0:
            return self.auc[0]
        return float(self.weights(lag) @ np.asarray(self.auc, dtype=np.float64))

    def auc_se(self, lag_s: FloatArray) -> float:
        """The standard error (0..1) of :meth:`auc_at` from the curve's mean drops."""
        lag = np.asarray(lag_s, dtype=np.float64)
        if lag.size == 0:
            return 0.0
        w = self.weights(lag)[1:]
        return math.sqrt(max(0.0, float(w @ np.asarray(self.drop_cov) @ w)))


# python -m benchmarks.staleness --out-dir docs/img (defaults: 6 turns a day, 1,000
# records per simulated minute, 300 minutes, 49 evaluations): docs/img/staleness.csv
MEASURED_CURVE = StalenessCurve(
    lags_min=(0.0, 5.0, 10.0, 20.0, 40.0),
    auc=(0.79111082, 0.78581673, 0.77533571, 0.73971408, 0.62582122),
    drop_cov=(
        (2.94656796e-07, 4.42331199e-07, 8.12437523e-07, 7.63866531e-07),
        (4.42331199e-07, 1.62481753e-06, 2.90857496e-06, 4.60680225e-06),
        (8.12437523e-07, 2.90857496e-06, 1.03331829e-05, 1.96636013e-05),
        (7.63866531e-07, 4.60680225e-06, 1.96636013e-05, 6.75962450e-05),
    ),
)


def auc_pct(lag_s: FloatArray, curve: StalenessCurve | None = None) -> tuple[float, float]:
    """``(AUC, its standard error from the curve)`` in percent for the lag trace
    ``lag_s`` (equal time steps) on ``curve`` (default: :data:`MEASURED_CURVE`)."""
    curve = curve or MEASURED_CURVE
    return 100.0 * curve.auc_at(lag_s), 100.0 * curve.auc_se(lag_s)
