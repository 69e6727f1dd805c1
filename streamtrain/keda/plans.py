"""The planned worker count of each job, folded from what the control plane publishes.

Owned here (pure: no Kafka, no gRPC; :mod:`streamtrain.keda.feed` feeds it):

* :class:`JobPlan`, the immutable answer for one job: the planned workers, where the
  number comes from, the workers the job reports, the newest command's id, reason and
  time.
* :class:`PlanBook`, which folds two topics into one :class:`JobPlan` per job:

  - ``ScaleCommand`` messages (the commands topic, key = job). The planner publishes
    one only when its target differs from the current count, so the newest command of
    a job *is* its plan until the next one. Commands are taken in the order read (one
    key lives in one partition, so that is the order the planner sent them).
  - ``ThroughputSample`` messages (the samples topic): the pool size the job's workers
    report (``workers``, 0 meaning unknown and ignored), newest by ``observed_at_ms``.
    Before a job's first command the planner holds the job where it is, so that count
    is its plan then; after it, the count only tells which way the HPA is moving
    (:func:`streamtrain.keda.contract.metric_value`).

  A job is known once a command or a sample names it, or when it is declared
  (``declared_jobs``: ``streamtrain keda serve --job``). With declared jobs only those
  are served. :attr:`PlanBook.plans` is replaced whole on every change, so another
  thread (a Prometheus scrape) reads a consistent mapping without a lock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Literal

from streamtrain.errors import PlanUnavailableError, ScalerRequestError
from streamtrain.proto import control_plane_pb2 as cp
from streamtrain.units import MS_PER_S

__all__ = ["JobPlan", "PlanBook", "PlanSource"]

PlanSource = Literal["command", "pool_size", "none"]
"""Where a planned count comes from: the newest ``ScaleCommand``, the pool size the
workers report (no command yet), or nothing yet."""


@dataclass(frozen=True, slots=True)
class JobPlan:
    """What the scaler knows about one job."""

    job: str
    planned_workers: int | None = None  # None: nothing published for the job yet
    source: PlanSource = "none"
    reported_workers: int | None = None  # newest pool size from the samples
    reported_at_s: float | None = None
    command_id: str = ""
    reason: str = ""  # PROACTIVE, FALLBACK or MANUAL
    planned_at_s: float | None = None  # the newest command's created_at (wall clock)
    commands: int = 0  # commands read for the job

    @property
    def active(self) -> bool | None:
        """KEDA's ``IsActive``: the plan wants at least one worker (None: unknown)."""
        return None if self.planned_workers is None else self.planned_workers > 0


class PlanBook:
    """See the module docstring. One writer (the feed); readers take :attr:`plans`."""

    def __init__(self, declared_jobs: Iterable[str] = ()) -> None:
        self.declared = frozenset(j for j in declared_jobs if j)
        self.plans: Mapping[str, JobPlan] = MappingProxyType(
            {job: JobPlan(job) for job in sorted(self.declared)}
        )
        self.ignored = 0  # messages for jobs not declared

    def _set(self, plan: JobPlan) -> bool:
        if self.plans.get(plan.job) == plan:
            return False
        self.plans = MappingProxyType({**self.plans, plan.job: plan})
        return True

    def _serves(self, job: str) -> bool:
        if not job or (self.declared and job not in self.declared):
            self.ignored += 1
            return False
        return True

    def add_command(self, command: cp.ScaleCommand) -> bool:
        """Take one command (the newest read so far); True when the job's plan changed."""
        if not self._serves(command.job):
            return False
        old = self.plans.get(command.job) or JobPlan(command.job)
        return self._set(
            replace(
                old,
                planned_workers=int(command.target_workers),
                source="command",
                command_id=command.command_id,
                reason=cp.ScaleCommand.Reason.Name(command.reason),
                planned_at_s=command.created_at_ms / MS_PER_S,
                commands=old.commands + 1,
            )
        )

    def add_sample(self, sample: cp.ThroughputSample) -> bool:
        """Take one worker's sample; True when the job's plan changed."""
        if not self._serves(sample.job):
            return False
        old = self.plans.get(sample.job) or JobPlan(sample.job)
        at_s = sample.observed_at_ms / MS_PER_S
        if sample.workers <= 0 or (old.reported_at_s is not None and at_s < old.reported_at_s):
            return self._set(old)  # known from now on, nothing newer to say
        new = replace(old, reported_workers=int(sample.workers), reported_at_s=at_s)
        if old.source != "command":
            new = replace(new, planned_workers=int(sample.workers), source="pool_size")
        return self._set(new)

    def plan(self, job: str) -> JobPlan:
        """The job's plan, or :class:`ScalerRequestError` for a job nobody published."""
        plan = self.plans.get(job)
        if plan is None:
            if self.declared:
                served = ", ".join(sorted(self.declared))
                raise ScalerRequestError(
                    f"job {job!r} is not served by this scaler (--job: {served})"
                )
            known = ", ".join(sorted(self.plans)) or "none yet"
            raise ScalerRequestError(
                f"unknown job {job!r}: no ScaleCommand and no ThroughputSample names it "
                f"(known jobs: {known}); set scalerMetadata.job to the control app's --plan-job"
            )
        return plan

    def planned(self, job: str) -> JobPlan:
        """The job's plan with a known count, else :class:`PlanUnavailableError`."""
        plan = self.plan(job)
        if plan.planned_workers is None:
            raise PlanUnavailableError(
                f"no plan for job {job!r} yet: the planner has sent no ScaleCommand and no "
                "worker of the job has reported its pool size"
            )
        return plan
