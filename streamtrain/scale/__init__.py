"""scale: throughput models, proactive plans, stabilization, fallback (KALE §3.3-3.4).

Modules: ``models`` (NNLS throughput models), ``physics`` (KALE Eq. 4 for synthetic
data), ``plan`` (Eq. 10 and Algorithm 1), ``fallback`` (HPA-style threshold path),
``gate`` (downtime-aware gate), ``trigger`` (when the fallback takes over), ``policy``
and ``policies`` (the policies shared with the simulator), ``policy_settings`` (the one
parser of a policy's settings), ``samples`` (throughput samples to observations, with a
prior), ``arrivals`` (the per-step arrival history), ``keep_up`` (the CANNOT_KEEP_UP
alert), ``timescale`` (a compressed model clock), ``planner_settings`` and ``planner``
(the live planner behind the control app's ``--plan-job``).

scale decides how many workers a job should have; :mod:`streamtrain.executors` (a
package of its own) makes it so and reads the commands for ``streamtrain scale apply``.
"""

from streamtrain.scale.fallback import HpaSettings, hpa_desired, stabilize_scale_down
from streamtrain.scale.models import MODEL_KINDS, FitReport, ThroughputModel, fit, fit_report
from streamtrain.scale.plan import BasicPlan, basic_plan, stabilize

__all__ = [
    "MODEL_KINDS",
    "BasicPlan",
    "FitReport",
    "HpaSettings",
    "ThroughputModel",
    "basic_plan",
    "fit",
    "fit_report",
    "hpa_desired",
    "stabilize",
    "stabilize_scale_down",
]
