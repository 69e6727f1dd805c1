"""The metrics of KALE §4.1 / Table 3, computed from one :class:`~streamtrain.sim.engine.Run`.

* ``violation_rate``: share of time (0..1) with job lag above the SLO (KALE: lag over
  20 minutes is a violation).
* ``accumulated_lag_min``: Eq. 11, ∫ Lag(t) dt with lag in minutes and time in minutes
  ("the sum of lag per minute"), so a job lagging 5 min for an hour scores 300.
* ``downtime_min``: minutes the job was paused by scaling actions.
* ``worker_hours``: ∫ workers held dt, in hours (KALE's GPU hours: one GPU per worker).
* ``scaling_actions``: actions started.
* ``peak_lag_min``: the largest job lag seen.

The job lag is the maximum over partitions of the age of the oldest unconsumed record,
sampled at the end of every tick.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from streamtrain.errors import ConfigError
from streamtrain.sim.engine import Run
from streamtrain.units import HOUR_S, MINUTE_S

__all__ = ["SLO_LAG_S", "PolicyMetrics", "compute_metrics"]

SLO_LAG_S = 20.0 * MINUTE_S  # KALE: lag over 20 minutes is a violation


@dataclass(frozen=True, slots=True)
class PolicyMetrics:
    violation_rate: float
    accumulated_lag_min: float
    downtime_min: float
    worker_hours: float
    scaling_actions: int
    peak_lag_min: float

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def compute_metrics(run: Run, *, slo_lag_s: float = SLO_LAG_S) -> PolicyMetrics:
    """Table 3's metrics for ``run`` (see the module docstring)."""
    if slo_lag_s <= 0:
        raise ConfigError(f"the SLO lag must be positive, got {slo_lag_s} s")
    tick_min = run.tick_s / MINUTE_S
    lag = run.lag_s
    return PolicyMetrics(
        violation_rate=float(np.mean(lag > slo_lag_s)) if lag.size else 0.0,
        accumulated_lag_min=float(np.sum(lag / MINUTE_S) * tick_min),
        downtime_min=float(np.sum(run.paused) * tick_min),
        worker_hours=float(np.sum(run.workers) * run.tick_s / HOUR_S),
        scaling_actions=len(run.actions),
        peak_lag_min=float(lag.max() / MINUTE_S) if lag.size else 0.0,
    )
