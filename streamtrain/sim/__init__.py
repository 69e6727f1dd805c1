"""sim: deterministic replay of traffic traces against scaling policies (KALE Table 3).

Modules: ``truth`` (the job's true throughput: KALE Eq. 4 with stragglers, and the
profiled points policies learn from), ``handover`` (the live system's measured
preparation and hand-over stall per assignment mode), ``execution`` (the action and
shuffle costs, and the switches every policy gets alike), ``workload`` (partition skew
that drifts), ``engine`` (the tick loop, vectorized over partitions), ``metrics``
(Table 3's metrics) with ``auc`` (lag to AUC), ``settings`` and ``runner`` (every
policy over seeds), ``parallel`` (seeds over processes), ``stats`` (intervals),
``tuning`` (the baselines' grid search), ``paper`` (Table 3's printed cells),
``report`` (text tables) and ``plot`` (matplotlib, optional). The policies themselves
live in :mod:`streamtrain.scale.policies`, shared with the live control app."""

from streamtrain.sim.auc import MEASURED_CURVE, StalenessCurve, auc_pct
from streamtrain.sim.engine import Action, Run, Workload, run_policy
from streamtrain.sim.execution import (
    ActionCosts,
    Execution,
    RestartMode,
    ShuffleCosts,
    ShuffleMode,
    action_phases,
)
from streamtrain.sim.handover import ModeCost, measured_mode_costs
from streamtrain.sim.metrics import METRIC_NAMES, SLO_LAG_S, PolicyMetrics, compute_metrics
from streamtrain.sim.report import (
    format_markdown,
    format_paper_table,
    format_table,
    headline_ratios,
)
from streamtrain.sim.runner import SimReport, Window, run_variants, simulate, window_of
from streamtrain.sim.settings import SimSettings, Variant
from streamtrain.sim.stats import Interval, interval, summarize
from streamtrain.sim.truth import JobTruth, TruthSettings, draw_truth
from streamtrain.sim.workload import SkewSettings, partition_arrivals, partition_shares

__all__ = [
    "MEASURED_CURVE",
    "METRIC_NAMES",
    "SLO_LAG_S",
    "Action",
    "ActionCosts",
    "Execution",
    "Interval",
    "JobTruth",
    "ModeCost",
    "PolicyMetrics",
    "RestartMode",
    "Run",
    "ShuffleCosts",
    "ShuffleMode",
    "SimReport",
    "SimSettings",
    "SkewSettings",
    "StalenessCurve",
    "TruthSettings",
    "Variant",
    "Window",
    "Workload",
    "action_phases",
    "auc_pct",
    "compute_metrics",
    "draw_truth",
    "format_markdown",
    "format_paper_table",
    "format_table",
    "headline_ratios",
    "interval",
    "measured_mode_costs",
    "partition_arrivals",
    "partition_shares",
    "run_policy",
    "run_variants",
    "simulate",
    "summarize",
    "window_of",
]
