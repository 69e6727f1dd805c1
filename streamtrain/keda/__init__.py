"""The KEDA external scaler: the planner's worker count over KEDA's gRPC contract.

KEDA users keep KEDA (and the HPA it drives) and point a ScaledObject's ``external`` or
``external-push`` trigger at ``streamtrain keda serve``. The scaler reads the plan from
Kafka, the interface between the planes: the ``ScaleCommand`` messages the control
app's planner publishes, its heartbeats (a plan not heard of for ``--max-plan-age-s``
is stale and refused, so KEDA's ``fallback`` applies) and the workers' own samples
(how many workers a job has), never the control app's HTTP port, so it answers while
the control app restarts or fails over, and any number of scalers can run.

Modules, from the pure core out: ``contract`` (the job in ``scalerMetadata``, the metric
name, the value and target that make the HPA land on the plan), ``plans`` (the plan of
each job, folded from the topics), ``feed`` (reading the topics), ``service`` (the gRPC
methods), ``metrics`` (its Prometheus series), ``server`` (TLS, listening, running).
"""

from streamtrain.keda.contract import (
    JOB_KEY,
    TARGET_SIZE,
    hpa_desired_replicas,
    job_of,
    metric_name,
    metric_value,
)
from streamtrain.keda.plans import JobPlan, PlanBook

__all__ = [
    "JOB_KEY",
    "TARGET_SIZE",
    "JobPlan",
    "PlanBook",
    "hpa_desired_replicas",
    "job_of",
    "metric_name",
    "metric_value",
]
