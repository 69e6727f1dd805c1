"""scale: throughput models, proactive plans, stabilization, fallback, executors (KALE §3.3-3.4).

Landed so far (issue #7 is open): the NNLS throughput models (``models``), the physical
Eq. 4 model for synthetic data (``physics``), the basic plan of Eq. 10 and Algorithm 1
stabilization (``plan``), the HPA-style threshold fallback (``fallback``), and the
executors (``executors``: local process pool, Kubernetes, webhook/command, and the
idempotent ``CommandApplier``). Still to come: the downtime-aware gate, the fallback
trigger, ScaleCommand emission and the Faust planner agent.
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
