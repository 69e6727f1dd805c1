"""How the planner's worker count is put into KEDA's external-scaler contract.

Owned here, as pure functions (no gRPC, no Kafka): the request (:func:`job_of` reads
the job from ``ScaledObjectRef.scalerMetadata``; :func:`metric_name` is the one metric
a job has) and the numbers (:func:`metric_value`, the value that makes KEDA's HPA land
on the plan; :func:`hpa_desired_replicas`, what the HPA does, for the tests and the
docs).

**HPA's tolerance**: the HPA leaves the replicas alone while
``|1 - value / (target · current)| <= tolerance`` (0.1 by default, a cluster-wide
controller-manager flag). So a plan within about 10 % of the current count is held,
not applied: from 11 workers up, one more worker is within the tolerance; one fewer
from 20 workers up (:func:`metric_value`'s low-end value moves that bound from 10 to
20). No value can avoid that and still land on the plan; set the tolerance to 0 where
the cluster allows it (see docs/integrations.md).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from streamtrain.errors import ScalerRequestError

__all__ = [
    "HPA_DEFAULT_TOLERANCE",
    "JOB_FROM_ENV_KEY",
    "JOB_KEY",
    "MAX_JOB_CHARS",
    "QUOTE_CHARS",
    "SCALE_DOWN_OFFSET",
    "TARGET_SIZE",
    "hpa_desired_replicas",
    "job_of",
    "metric_name",
    "metric_value",
    "quoted",
]

JOB_KEY = "job"
"""The ``scalerMetadata`` key (the trigger's ``metadata``) that names the job."""

JOB_FROM_ENV_KEY = "jobFromEnv"
"""The same, resolved by KEDA from an environment variable of the scale target."""

MAX_JOB_CHARS = 249
"""A job is a consumer group and names topics (``<job>.members``): Kafka's topic-name
limit bounds it."""

QUOTE_CHARS = 200
"""At most this many characters of a name are quoted in an error message: a 100 kB name
echoed whole made the answer larger than gRPC's metadata limit, and the client saw
``RESOURCE_EXHAUSTED`` instead."""

TARGET_SIZE = 1.0
"""The HPA target per replica: one unit of the metric is one planned worker."""

SCALE_DOWN_OFFSET = 0.01
"""A value of ``planned - 1 + offset`` still rounds up to ``planned``. KEDA sends
milli-units (``int64(value * 1000)``), so the offset is ten of them: truncation by one
can never take the value down to ``planned - 1``."""

HPA_DEFAULT_TOLERANCE = 0.1
"""Kubernetes' default ``--horizontal-pod-autoscaler-tolerance``."""

_MILLI = 1000


def quoted(name: str, limit: int = QUOTE_CHARS) -> str:
    """``name`` quoted for a message: its first ``limit`` characters, and its length
    when it is longer."""
    if len(name) <= limit:
        return repr(name)
    return f"{name[:limit]!r}... ({len(name):,} characters)"


def job_of(metadata: Mapping[str, str]) -> str:
    """The job a KEDA request is about, from the trigger's ``metadata``: key ``job`` (the
    control app's ``--plan-job``) or ``jobFromEnv`` (which KEDA resolves from the scale
    target's environment and passes on under that key). A missing, blank, ambiguous or
    overlong one is a :class:`~streamtrain.errors.ScalerRequestError` that says what to
    write."""
    job = metadata.get(JOB_KEY, "").strip()
    from_env = metadata.get(JOB_FROM_ENV_KEY, "").strip()
    if job and from_env and job != from_env:
        raise ScalerRequestError(
            f"scalerMetadata names two jobs: {JOB_KEY} {quoted(job)} and "
            f"{JOB_FROM_ENV_KEY} {quoted(from_env)}; give one"
        )
    job = job or from_env
    if not job:
        keys = sorted(metadata)
        given = ", ".join(quoted(k, 40) for k in keys[:10]) or "nothing"
        more = f" and {len(keys) - 10} more" if len(keys) > 10 else ""
        raise ScalerRequestError(
            f"scalerMetadata needs {JOB_KEY!r} (the control app's --plan-job) or "
            f"{JOB_FROM_ENV_KEY!r}, e.g. `metadata: {{scalerAddress: ..., {JOB_KEY}: my-job}}`; "
            f"it has {given}{more}"
        )
    if len(job) > MAX_JOB_CHARS:
        raise ScalerRequestError(
            f"job {quoted(job)} is longer than {MAX_JOB_CHARS} characters: no control app "
            "plans for such a job"
        )
    return job


def metric_name(job: str) -> str:
    """The job's metric name in ``GetMetricSpec`` and ``GetMetrics``: lower case,
    ``[a-z0-9-]`` only, as Kubernetes metric names allow."""
    slug = re.sub(r"[^a-z0-9]+", "-", job.lower()).strip("-") or "job"
    return f"streamtrain-planned-workers-{slug}"


def metric_value(planned_workers: int, current_workers: int | None) -> float:
    """The metric value that makes the HPA land on ``planned_workers``.

    KEDA builds an HPA with one External metric of type ``AverageValue`` (its default
    ``metricType``) whose target is :data:`TARGET_SIZE` = 1 per replica. For that metric
    the HPA computes ``desired = ceil(value / target)`` (value and target in the
    milli-units KEDA sends), so a value in ``(planned - 1, planned]`` lands exactly on
    the plan: ``planned`` itself when scaling up or holding, ``planned - 1 +
    SCALE_DOWN_OFFSET`` when the plan is below the workers the job reports, which moves
    HPA's ratio ``value / (target · current)`` as far from 1 as the plan allows.

    ``current_workers`` is the count the job's workers report (``None``: unknown); it
    only picks the end of ``(planned - 1, planned]``, so a stale count cannot make the
    HPA land anywhere but on the plan or, within its tolerance, where it is.
    """
    if planned_workers <= 0:
        return 0.0
    if current_workers is not None and planned_workers < current_workers:
        return planned_workers - 1 + SCALE_DOWN_OFFSET
    return float(planned_workers)


def hpa_desired_replicas(
    value: float,
    target: float,
    current_replicas: int,
    *,
    tolerance: float = HPA_DEFAULT_TOLERANCE,
    min_replicas: int = 1,
    max_replicas: int | None = None,
) -> int:
    """The replicas a Kubernetes HPA asks for on one External ``AverageValue`` metric.

    As the HPA's replica calculator does it: the value and the target in milli-units
    (KEDA's ``int64(x * 1000)``), ``ratio = value / (target · current)``; within the
    tolerance the count stays, else ``ceil(value / target)``; then clamped to
    ``[min_replicas, max_replicas]`` (HPA's scale-down stabilization window and rate
    policies are left out: they delay, they do not change where it lands).
    """
    if current_replicas < 1:
        raise ValueError("the HPA only runs with at least one replica (KEDA activates from 0)")
    value_milli = int(value * _MILLI)
    target_milli = int(target * _MILLI)
    if target_milli <= 0:
        raise ValueError(f"the HPA target must be positive, got {target}")
    replicas = current_replicas
    ratio = value_milli / (target_milli * current_replicas)
    if abs(1.0 - ratio) > tolerance:
        replicas = math.ceil(value_milli / target_milli)
    replicas = max(replicas, min_replicas)
    if max_replicas is not None:
        replicas = min(replicas, max_replicas)
    return replicas
