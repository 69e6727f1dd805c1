"""sim: deterministic replay of traffic traces against scaling policies (KALE Table 3).

Modules: ``workload`` (partition skew that drifts), ``execution`` (restart costs,
pause-and-restart vs two-phase, shuffle, and the modes a simulation may force),
``engine`` (the tick loop, vectorized over partitions), ``metrics`` (Table 3's
metrics), ``runner`` (every policy on one trace), ``report`` (text tables) and ``plot``
(matplotlib, optional). The policies themselves live in
:mod:`streamtrain.scale.policies`, shared with the live control app."""

from streamtrain.sim.engine import Action, Run, Workload, run_policy
from streamtrain.sim.execution import (
    Execution,
    RestartCosts,
    RestartMode,
    ShuffleMode,
    action_phases,
)
from streamtrain.sim.metrics import SLO_LAG_S, PolicyMetrics, compute_metrics
from streamtrain.sim.report import format_markdown, format_table
from streamtrain.sim.runner import DEFAULT_MODELS, SimReport, SimSettings, scaled_model, simulate
from streamtrain.sim.workload import SkewSettings, partition_arrivals, partition_shares

__all__ = [
    "DEFAULT_MODELS",
    "SLO_LAG_S",
    "Action",
    "Execution",
    "PolicyMetrics",
    "RestartCosts",
    "RestartMode",
    "Run",
    "ShuffleMode",
    "SimReport",
    "SimSettings",
    "SkewSettings",
    "Workload",
    "action_phases",
    "compute_metrics",
    "format_markdown",
    "format_table",
    "partition_arrivals",
    "partition_shares",
    "run_policy",
    "scaled_model",
    "simulate",
]
