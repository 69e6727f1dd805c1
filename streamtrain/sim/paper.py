"""KALE Table 3's cells, as printed (SoCC '24, §4.4), to set beside the simulator's.

Owned here: :data:`TABLE3` (per policy: each metric's mean and the ± of its 95 %
confidence interval over 20 repetitions; Adequate's row has no intervals) and
:data:`TABLE3_METRICS`, the metrics the paper reports, under the names of
:class:`~streamtrain.sim.metrics.PolicyMetrics`. The paper has no streamtrain row.
Violation rates are fractions (0.1957 = 19.57 %), AUC in percent.
"""

from __future__ import annotations

__all__ = ["TABLE3", "TABLE3_METRICS"]

TABLE3_METRICS: tuple[str, ...] = (
    "violation_rate",
    "accumulated_lag_min",
    "downtime_min",
    "worker_hours",
    "auc_pct",
)

TABLE3: dict[str, dict[str, tuple[float, float]]] = {
    "adequate": {
        "violation_rate": (0.0, 0.0),
        "accumulated_lag_min": (0.0, 0.0),
        "downtime_min": (0.0, 0.0),
        "worker_hours": (672.0, 0.0),
        "auc_pct": (95.3, 0.1),
    },
    "hpa": {
        "violation_rate": (0.1957, 0.0150),
        "accumulated_lag_min": (7151.0, 150.0),
        "downtime_min": (163.0, 8.0),
        "worker_hours": (268.0, 15.0),
        "auc_pct": (95.1, 0.3),
    },
    "autopilot": {
        "violation_rate": (0.0549, 0.0105),
        "accumulated_lag_min": (4420.0, 100.0),
        "downtime_min": (269.0, 10.0),
        "worker_hours": (303.0, 10.0),
        "auc_pct": (95.2, 0.4),
    },
    "madu": {
        "violation_rate": (0.0257, 0.0041),
        "accumulated_lag_min": (2303.0, 50.0),
        "downtime_min": (190.0, 10.0),
        "worker_hours": (455.0, 20.0),
        "auc_pct": (95.3, 0.3),
    },
    "kale": {
        "violation_rate": (0.0260, 0.0032),
        "accumulated_lag_min": (2204.0, 30.0),
        "downtime_min": (109.0, 7.0),
        "worker_hours": (242.0, 8.0),
        "auc_pct": (95.8, 0.2),
    },
}
