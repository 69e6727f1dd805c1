"""The planned worker count of each job, folded from what the control plane publishes.

Owned here (pure: no Kafka, no gRPC; :mod:`streamtrain.keda.feed` feeds it, times come
from an injected clock):

* :class:`PlanSettings`: how old a plan may be, the clock skew allowed, and how workers
  are counted.
* :class:`JobPlan`, the immutable answer for one job at one moment: the planned
  workers, where the number comes from, the workers the job has, the newest command's
  id, reason and time, and when the planner was last heard.
* :class:`PlanBook`, which folds three topics (commands, planner heartbeats, throughput
  samples) into one :class:`JobPlan` per job, and refuses a stale plan rather than
  serve a dead planner's plan forever.

Anything dated beyond now + ``max_clock_skew_s`` is refused and counted (``skewed``):
a command from a clock a year ahead would otherwise look fresh for a year.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Literal

from streamtrain.errors import ConfigError, PlanUnavailableError, ScalerRequestError
from streamtrain.keda.contract import quoted
from streamtrain.proto import control_plane_pb2 as cp
from streamtrain.roster import RosterSettings, WorkerRoster
from streamtrain.units import MS_PER_S

__all__ = ["JobPlan", "PlanBook", "PlanSettings", "PlanSource"]

log = logging.getLogger(__name__)

PlanSource = Literal["command", "pool_size", "none"]
"""Where a planned count comes from: the newest ``ScaleCommand``, the workers the job
has (no command yet), or nothing yet."""


@dataclass(frozen=True, slots=True)
class PlanSettings:
    max_plan_age_s: float | None = None  # None: a plan never goes stale
    max_clock_skew_s: float = 60.0
    workers: RosterSettings = field(default_factory=RosterSettings)

    def __post_init__(self) -> None:
        age = self.max_plan_age_s
        if age is not None and not (math.isfinite(age) and age > 0):
            raise ConfigError(f"the maximum plan age must be positive, got {age} s")
        if not (math.isfinite(self.max_clock_skew_s) and self.max_clock_skew_s >= 0):
            raise ConfigError(
                f"the clock skew allowed is at least 0 s, got {self.max_clock_skew_s}"
            )


@dataclass(frozen=True, slots=True)
class JobPlan:
    """What the scaler knows about one job, at one moment."""

    job: str
    planned_workers: int | None = None  # None: nothing published for the job yet
    source: PlanSource = "none"
    reported_workers: int | None = None  # the workers the job has (streamtrain.roster)
    command_id: str = ""
    reason: str = ""  # PROACTIVE, FALLBACK or MANUAL
    planned_at_s: float | None = None  # the newest command's created_at (wall clock)
    commands: int = 0  # commands read for the job
    heard_at_s: float | None = None  # the planner's newest heartbeat or command
    planner_note: str = ""  # its newest heartbeat's note
    age_s: float | None = None  # since heard_at_s
    stale: bool = False  # not heard for longer than max_plan_age_s (module docstring)

    @property
    def active(self) -> bool | None:
        """KEDA's ``IsActive``: the plan wants at least one worker (None: unknown)."""
        return None if self.planned_workers is None else self.planned_workers > 0


@dataclass(frozen=True, slots=True)
class _Heard:
    """One job's newest command and heartbeat (replaced whole on every change)."""

    planned_workers: int | None = None
    command_id: str = ""
    reason: str = ""
    planned_at_s: float | None = None
    commands: int = 0
    beat_at_s: float | None = None
    note: str = ""


class PlanBook:
    """Each job's plan from three topics. One writer (the feed, on the event loop);
    :meth:`snapshot` may run on another thread (a Prometheus scrape): each job's state
    is replaced whole.

    A job is known once a command, a heartbeat or a sample names it, or when it is
    declared (``declared_jobs``: ``streamtrain keda serve --job``). With declared jobs
    only those are served.
    """

    def __init__(
        self,
        declared_jobs: Iterable[str] = (),
        settings: PlanSettings | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings or PlanSettings()
        self.declared = frozenset(j for j in declared_jobs if j)
        self._clock = clock
        self._heard: dict[str, _Heard] = {job: _Heard() for job in sorted(self.declared)}
        self._rosters: dict[str, WorkerRoster] = {}
        self.ignored = 0  # messages for jobs not declared
        self.skewed = 0  # messages dated beyond now + the clock skew allowed
        self.refused = 0  # samples stating an absurd pool size

    # -- writing (the feed) ------------------------------------------------------------

    def _serves(self, job: str) -> bool:
        if not job or (self.declared and job not in self.declared):
            self.ignored += 1
            return False
        return True

    def _from_the_future(self, what: str, job: str, at_ms: int) -> bool:
        skew_s = self.settings.max_clock_skew_s
        ahead_s = at_ms / MS_PER_S - self._clock()
        if ahead_s <= skew_s:
            return False
        self.skewed += 1
        log.warning(
            "refusing a %s of job %s dated %.0f s in the future (clock skew allowed: %g s)",
            what,
            quoted(job),
            ahead_s,
            skew_s,
        )
        return True

    def add_command(self, command: cp.ScaleCommand) -> bool:
        """Take one command (the newest read so far); True when the job's plan changed.

        The planner publishes a ``ScaleCommand`` (key = job) only when its target
        differs from the current count, so the newest command of a job *is* its plan
        until the next one. Commands are taken in the order read (one key lives in one
        partition, so that is the order the planner sent them).
        """
        job = command.job
        if not self._serves(job) or self._from_the_future("command", job, command.created_at_ms):
            return False
        old = self._heard.get(job) or _Heard()
        self._heard[job] = replace(
            old,
            planned_workers=int(command.target_workers),
            command_id=command.command_id,
            reason=_reason_name(command.reason),
            planned_at_s=command.created_at_ms / MS_PER_S,
            commands=old.commands + 1,
        )
        return old.planned_workers != command.target_workers

    def add_heartbeat(self, beat: cp.PlannerHeartbeat) -> bool:
        """Take one planner heartbeat; True when the job was not known before.

        The planner says it is alive every few seconds, changed plan or not. The newest
        of a heartbeat and a command is when the planner was last *heard*; with
        ``max_plan_age_s`` a plan not heard of for longer is **stale**: :meth:`planned`
        refuses it (the scaler answers an error, so KEDA's ``fallback`` applies). A
        declared job whose planner was never heard is stale too.
        """
        job = beat.job
        if not self._serves(job) or self._from_the_future("heartbeat", job, beat.sent_at_ms):
            return False
        old = self._heard.get(job)
        at_s = beat.sent_at_ms / MS_PER_S
        base = old or _Heard()
        if base.beat_at_s is not None and at_s < base.beat_at_s:
            return False
        self._heard[job] = replace(base, beat_at_s=at_s, note=beat.note[:500])
        return old is None

    def add_sample(self, sample: cp.ThroughputSample) -> bool:
        """Take one worker's sample; True when the job's plan may have changed.

        Samples count the workers the job has from the workers themselves
        (:class:`~streamtrain.roster.WorkerRoster`: distinct worker ids heard within the
        expiry, or the pool size they state), never from the broker's group
        description. Before a job's first command the planner holds the job where it
        is, so that count is its plan then; after it, the count only tells which way the
        HPA is moving (:func:`streamtrain.keda.contract.metric_value`).
        """
        job = sample.job
        if not self._serves(job) or self._from_the_future("sample", job, sample.observed_at_ms):
            return False
        limit = self.settings.workers.max_workers
        if sample.workers > limit:
            self.refused += 1
            log.warning(
                "refusing a sample of job %s stating a pool of %d workers (at most %d)",
                quoted(job),
                sample.workers,
                limit,
            )
            return False
        roster = self._rosters.get(job)
        if roster is None:
            roster = self._rosters[job] = WorkerRoster(self.settings.workers)
        before = roster.count(self._clock())
        roster.heard(sample.worker_id, sample.observed_at_ms / MS_PER_S, int(sample.workers))
        return roster.count(self._clock()) != before

    # -- reading -----------------------------------------------------------------------

    @property
    def jobs(self) -> list[str]:
        return sorted({*self._heard, *self._rosters})

    def _job_plan(self, job: str, now_s: float) -> JobPlan:
        heard = self._heard.get(job) or _Heard()
        roster = self._rosters.get(job)
        reported = roster.count(now_s) if roster is not None else None
        source: PlanSource = "command"
        planned = heard.planned_workers
        if planned is None:
            planned, source = (reported or None), "pool_size"
        if planned is None:
            source = "none"
        times = [t for t in (heard.beat_at_s, heard.planned_at_s) if t is not None]
        heard_at = max(times, default=None)
        age = None if heard_at is None else max(0.0, now_s - heard_at)
        limit = self.settings.max_plan_age_s
        stale = limit is not None and (
            (age is not None and age > limit) or (age is None and job in self.declared)
        )
        return JobPlan(
            job=job,
            planned_workers=planned,
            source=source,
            reported_workers=reported,
            command_id=heard.command_id,
            reason=heard.reason,
            planned_at_s=heard.planned_at_s,
            commands=heard.commands,
            heard_at_s=heard_at,
            planner_note=heard.note,
            age_s=age,
            stale=stale,
        )

    def snapshot(self, now_s: float | None = None) -> dict[str, JobPlan]:
        """Every known job's plan at ``now_s`` (default: the clock)."""
        now_s = self._clock() if now_s is None else now_s
        return {job: self._job_plan(job, now_s) for job in self.jobs}

    def known(self, job: str) -> bool:
        return job in self._heard or job in self._rosters

    def check_served(self, job: str) -> None:
        """:class:`ScalerRequestError` for a job a scaler with ``--job`` does not serve."""
        if self.declared and job not in self.declared:
            served = ", ".join(quoted(j) for j in sorted(self.declared))
            raise ScalerRequestError(
                f"job {quoted(job)} is not served by this scaler (--job: {served})"
            )

    def plan(self, job: str, now_s: float | None = None) -> JobPlan:
        """The job's plan; :class:`ScalerRequestError` for a job this scaler does not
        serve, :class:`PlanUnavailableError` for one nothing named yet (it may appear:
        a planner or a worker starting later)."""
        self.check_served(job)
        if not self.known(job):
            known = ", ".join(quoted(j) for j in self.jobs[:20]) or "none yet"
            raise PlanUnavailableError(
                f"no plan for job {quoted(job)} yet: no ScaleCommand, heartbeat or "
                f"ThroughputSample names it (known jobs: {known}); check that "
                "scalerMetadata.job is the control app's --plan-job"
            )
        return self._job_plan(job, self._clock() if now_s is None else now_s)

    def planned(self, job: str, now_s: float | None = None) -> JobPlan:
        """The job's plan with a known, fresh count, else :class:`PlanUnavailableError`."""
        plan = self.plan(job, now_s)
        name = quoted(job)
        if plan.stale:
            if plan.age_s is None:
                raise PlanUnavailableError(
                    f"the planner of job {name} has not been heard (no heartbeat or "
                    f"ScaleCommand): is `lag run --plan-job` running for it?"
                )
            raise PlanUnavailableError(
                f"the plan of job {name} is stale: the planner was last heard {plan.age_s:.0f} s "
                f"ago (--max-plan-age-s {self.settings.max_plan_age_s:g}); is `lag run "
                "--plan-job` running for it?"
            )
        if plan.planned_workers is None:
            why = f" (the planner says: {plan.planner_note})" if plan.planner_note else ""
            raise PlanUnavailableError(
                f"no plan for job {name} yet: the planner has sent no ScaleCommand and no "
                f"worker of the job has reported{why}"
            )
        return plan


def _reason_name(value: int) -> str:
    """A command's reason in words; one this build does not know is named by its number
    (the wire refuses such commands; a command made in code may still hold one)."""
    try:
        return cp.ScaleCommand.Reason.Name(value)
    except ValueError:
        return f"UNKNOWN({value})"
