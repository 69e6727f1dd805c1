"""The metrics of KALE §4.1 / Table 3, computed from one :class:`~streamtrain.sim.engine.Run`.

* ``violation_rate``: share of time (0..1) with job lag above the SLO (KALE: lag over
  20 minutes is a violation).
* ``accumulated_lag_min``: Eq. 11, ∫ Lag(t) dt with lag in minutes and time in minutes
  ("the sum of lag per minute"), so a job lagging 5 min for an hour scores 300.
* ``downtime_min``: minutes the job was paused by scaling actions.
* ``worker_hours``: ∫ workers held dt, in hours (KALE's GPU hours: one GPU per worker).
* ``scaling_actions``: actions started.
* ``peak_lag_min``: the largest job lag seen.
* ``auc_pct``: Table 3's AUC column: the lag trace looked up on the AUC-against-lag
  curve measured with real training (:mod:`streamtrain.sim.auc`), and
  ``auc_curve_se_pp``, its standard error from that curve (percentage points).
* ``forwarded_pct`` / ``forwarded_gb``: what the shuffle forwarded, as a share of the
  records consumed and in GB (:class:`~streamtrain.sim.execution.ShuffleCosts`'s record
  size); ``shuffle_cpu_s``: the worker CPU it cost.

The job lag is the maximum over partitions of the age of the oldest unconsumed record,
sampled at the end of every tick.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import numpy as np

from streamtrain.errors import ConfigError
from streamtrain.sim.auc import StalenessCurve, auc_pct
from streamtrain.sim.engine import Run
from streamtrain.sim.execution import ShuffleCosts
from streamtrain.units import HOUR_S, MINUTE_S

__all__ = ["METRIC_NAMES", "SLO_LAG_S", "PolicyMetrics", "compute_metrics"]

SLO_LAG_S = 20.0 * MINUTE_S  # KALE: lag over 20 minutes is a violation


@dataclass(frozen=True, slots=True)
class PolicyMetrics:
    violation_rate: float
    accumulated_lag_min: float
    downtime_min: float
    worker_hours: float
    scaling_actions: int
    peak_lag_min: float
    auc_pct: float
    forwarded_pct: float
    forwarded_gb: float
    shuffle_cpu_s: float
    auc_curve_se_pp: float = 0.0

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


METRIC_NAMES: tuple[str, ...] = tuple(f.name for f in fields(PolicyMetrics))


def compute_metrics(
    run: Run,
    *,
    slo_lag_s: float = SLO_LAG_S,
    auc: StalenessCurve | None = None,
    shuffle_costs: ShuffleCosts | None = None,
) -> PolicyMetrics:
    """Table 3's metrics for ``run`` (see the module docstring)."""
    if slo_lag_s <= 0:
        raise ConfigError(f"the SLO lag must be positive, got {slo_lag_s} s")
    costs = shuffle_costs or ShuffleCosts()
    tick_min = run.tick_s / MINUTE_S
    lag = run.lag_s
    forwarded = float(run.forwarded_records.sum())
    auc_value, auc_se = auc_pct(lag, auc)
    return PolicyMetrics(
        violation_rate=float(np.mean(lag > slo_lag_s)) if lag.size else 0.0,
        accumulated_lag_min=float(np.sum(lag / MINUTE_S) * tick_min),
        downtime_min=float(np.sum(run.paused_s) / MINUTE_S),
        worker_hours=float(np.sum(run.worker_s) / HOUR_S),
        scaling_actions=len(run.actions),
        peak_lag_min=float(lag.max() / MINUTE_S) if lag.size else 0.0,
        auc_pct=auc_value,
        forwarded_pct=100.0 * forwarded / run.consumed_records if run.consumed_records else 0.0,
        forwarded_gb=forwarded * costs.record_bytes / 1e9,
        shuffle_cpu_s=forwarded * costs.forward_cpu_s,
        auc_curve_se_pp=auc_se,
    )
