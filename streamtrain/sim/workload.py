"""Spatial skew: how a topic's arrivals split over its partitions, drifting over time.

Owned here:

* :class:`SkewSettings`: ``partitions`` (KALE §4.1 uses 800), ``sigma`` (the standard
  deviation of a partition's log-share: 0 is perfectly even, 0.5 makes the hottest of
  800 partitions ≈ 4-5x the mean) and ``drift_s`` (the correlation time of a partition's
  heat: hot partitions cool down and cold ones heat up over hours, as user segments
  shift during a day, KALE §2.3).
* :func:`partition_shares`: per step, each partition's share of the arrivals (rows sum
  to 1): ``share ∝ exp(sigma·z - sigma^2/2)`` with ``z`` a unit-variance Ornstein-Uhlenbeck
  process per partition, sampled at the trace step. Seeded and deterministic.
* :func:`partition_arrivals`: records arriving per step and partition, and their
  cumulative sums at step boundaries (what the simulator inverts to get the age of the
  oldest unconsumed record).

Arrivals are uniform within a step (the trace gives one rate per step).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError
from streamtrain.units import HOUR_S

__all__ = ["SkewSettings", "partition_arrivals", "partition_shares"]

FloatArray = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class SkewSettings:
    partitions: int = 800
    sigma: float = 0.5
    drift_s: float = 6.0 * HOUR_S
    seed: int = 0

    def __post_init__(self) -> None:
        if self.partitions < 1:
            raise ConfigError(f"need at least one partition, got {self.partitions}")
        if not math.isfinite(self.sigma) or self.sigma < 0:
            raise ConfigError(f"the skew sigma must be finite and >= 0, got {self.sigma}")
        if self.drift_s <= 0:
            raise ConfigError(f"the drift time must be positive, got {self.drift_s} s")


def partition_shares(steps: int, step_s: int, settings: SkewSettings) -> FloatArray:
    """``steps x partitions`` shares, each row summing to 1 (see the module docstring)."""
    if steps < 1 or step_s <= 0:
        raise ConfigError("need at least one step of positive length")
    rng = np.random.default_rng(settings.seed)
    p = settings.partitions
    keep = math.exp(-step_s / settings.drift_s)
    innovation = math.sqrt(1.0 - keep * keep)
    # One steps x partitions array, transformed in place (z, then the weights, then the
    # shares): the arrays are large (a week of minutes x 800 partitions is 64 MB each).
    z = np.empty((steps, p))
    z[0] = rng.standard_normal(p)
    rng.standard_normal(out=z[1:])
    z[1:] *= innovation
    for k in range(1, steps):
        z[k] += keep * z[k - 1]
    z *= settings.sigma
    z -= settings.sigma**2 / 2
    np.exp(z, out=z)
    z /= z.sum(axis=1, keepdims=True)
    shares: FloatArray = z
    return shares


def partition_arrivals(
    records_per_s: FloatArray, shares: FloatArray, step_s: int, *, out: FloatArray | None = None
) -> tuple[FloatArray, FloatArray]:
    """Records per (step, partition), and cumulative arrivals at each step boundary
    (``steps + 1`` rows, the first all zero). ``out``: where to write the records per
    step (``shares`` itself when the shares are not needed after)."""
    rates = np.asarray(records_per_s, dtype=np.float64)
    if rates.ndim != 1 or shares.shape[0] != rates.shape[0]:
        raise ConfigError(f"{rates.shape[0]} rates but {shares.shape[0]} rows of shares")
    if np.any(~np.isfinite(rates)) or np.any(rates < 0):
        raise ConfigError("arrival rates must be finite and non-negative (gaps are 0)")
    per_step: FloatArray = np.multiply(rates[:, None], shares, out=out)
    per_step *= float(step_s)
    # Row by row: the same sums as np.cumsum(axis=0), which walks each column down the
    # rows (strided: several times slower on a week of minutes x 800 partitions).
    cumulative: FloatArray = np.empty((rates.shape[0] + 1, shares.shape[1]))
    cumulative[0] = 0.0
    for k in range(rates.shape[0]):
        np.add(cumulative[k], per_step[k], out=cumulative[k + 1])
    return per_step, cumulative
