"""Repetitions: the mean of a metric over seeds and its 95 % confidence interval.

Owned here: :class:`Interval` (mean ± half-width) and :func:`interval` (Student's t:
``mean ± t(0.975, n - 1) · s / √n``, as KALE §4.1 reports "95 % Confidence-Interval"
error bars over 20 repetitions), :func:`summarize` (every metric of every policy), and
:func:`differs` (whether two intervals do not overlap), :func:`ratio_interval` (the
ratio of two means with its 95 % interval, by the delta method). One seed has no
interval (half-width NaN). Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from streamtrain.errors import ConfigError
from streamtrain.sim.metrics import METRIC_NAMES, PolicyMetrics

__all__ = ["Interval", "differs", "interval", "ratio_interval", "summarize"]


@dataclass(frozen=True, slots=True)
class Interval:
    mean: float
    half_width: float  # NaN with a single value
    n: int

    @property
    def low(self) -> float:
        return self.mean - self.half_width

    @property
    def high(self) -> float:
        return self.mean + self.half_width

    def contains(self, value: float) -> bool:
        return not math.isnan(self.half_width) and self.low <= value <= self.high


def _t975(dof: int) -> float:
    from scipy.stats import t  # scipy is a dependency; imported when intervals are asked

    return float(t.ppf(0.975, dof))


def interval(values: Sequence[float]) -> Interval:
    """Mean and 95 % Student-t half-width of ``values``."""
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0 or not np.all(np.isfinite(data)):
        raise ConfigError("an interval needs at least one finite value")
    mean = float(data.mean())
    if data.size == 1:
        return Interval(mean, math.nan, 1)
    half = _t975(data.size - 1) * float(data.std(ddof=1)) / math.sqrt(data.size)
    return Interval(mean, half, int(data.size))


def summarize(
    per_seed: Mapping[str, Sequence[PolicyMetrics]],
) -> dict[str, dict[str, Interval]]:
    """Per policy, per metric: the interval over seeds. The AUC's half-width also holds
    the measured curve's error (``1.96 · auc_curve_se_pp``, in quadrature with the
    seeds' half-width): the lag traces vary over seeds, the curve under them does not."""
    out: dict[str, dict[str, Interval]] = {}
    for policy, runs in per_seed.items():
        cells = {name: interval([getattr(m, name) for m in runs]) for name in METRIC_NAMES}
        auc, curve = cells["auc_pct"], 1.96 * cells["auc_curve_se_pp"].mean
        seeds = 0.0 if math.isnan(auc.half_width) else auc.half_width
        cells["auc_pct"] = Interval(auc.mean, math.hypot(seeds, curve), auc.n)
        out[policy] = cells
    return out


def differs(ours: Interval, value: float, value_half_width: float = 0.0) -> bool:
    """True when ``value ± value_half_width`` lies wholly outside ``ours``."""
    half = 0.0 if math.isnan(ours.half_width) else ours.half_width
    return abs(ours.mean - value) > half + value_half_width


def ratio_interval(numerators: Sequence[float], denominators: Sequence[float]) -> Interval:
    """``mean(numerators) / mean(denominators)`` and its 95 % half-width by the delta
    method for two independent samples: ``t · R · sqrt((se_x / x)² + (se_y / y)²)``
    with Student's t at the smaller sample's degrees of freedom. NaN half-width with a
    single value on either side; a ConfigError when the denominators' mean is not
    positive."""
    x, y = interval(numerators), interval(denominators)
    if not y.mean > 0:
        raise ConfigError("a ratio needs a positive denominator mean")
    ratio = x.mean / y.mean
    n = min(x.n, y.n)
    if n < 2:
        return Interval(ratio, math.nan, n)
    se_x = float(np.std(np.asarray(numerators, dtype=np.float64), ddof=1)) / math.sqrt(x.n)
    se_y = float(np.std(np.asarray(denominators, dtype=np.float64), ddof=1)) / math.sqrt(y.n)
    relative = (se_x / x.mean) ** 2 if x.mean else 0.0
    relative += (se_y / y.mean) ** 2
    spread = abs(ratio) * math.sqrt(relative) if x.mean else se_x / y.mean
    return Interval(ratio, _t975(n - 1) * spread, n)
