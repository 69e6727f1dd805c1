"""The live allocator's book: which requests it accepts, what it asks the solver, and
what it granted.

Owned here (pure: the Faust app feeds it and publishes what it returns):

* :class:`Request`: a job's wanted count as the allocator reads it (the wire's
  ``ScaleRequest``, converted by the app), times in seconds.
* :class:`RequestBook`: the declared jobs and their classes; the newest accepted request
  and the last grant of each job.
  :meth:`~RequestBook.accept` refuses, with the reason in words, a request for a job
  not declared, one whose class is not the declared one, a negative count, bounds the
  wrong way round, and a *stale* request: created before the allocator's last
  decision for that job (it was computed without knowing that decision) or before the
  newest request already accepted (the newest delivered again is no change). A request
  that wants 0 workers before the job has ever been granted any, and says its model
  type and traffic level, gets a warm start (DLRover-RM Algorithm 1,
  :mod:`streamtrain.cluster.warmstart`) from the jobs the book has seen of that type.
  :meth:`~RequestBook.problem` builds the :class:`~streamtrain.cluster.problem.ClusterProblem`
  (a job's current count is the allocator's last grant when that is newer than the
  request); :meth:`~RequestBook.record` keeps the grants of a decision and returns the
  changes, the ScaleCommands to send; :meth:`~RequestBook.fresh_step_times` hands the
  AntMan throttle each guarantee job's reported step time once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from streamtrain.cluster.problem import Allocation, ClusterJob, ClusterProblem, JobClass, SpeedCurve
from streamtrain.cluster.warmstart import JobRecord, warm_start
from streamtrain.errors import ConfigError

__all__ = ["Change", "GrantState", "Request", "RequestBook", "RequestRefusal"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    request_id: str
    job: str
    job_class: JobClass | None  # None: whatever the allocator declared
    current_workers: int
    wanted_workers: int
    created_at_s: float
    plan: tuple[int, ...] = ()
    min_workers: int = 1
    max_workers: int = 0  # 0: no cap of its own
    pause_s: float = 0.0
    remaining_work: float | None = None
    deadline_at_s: float | None = None
    rate_per_worker: float | None = None
    step_time_ms: float | None = None
    model_type: str = ""
    traffic_records_per_s: float | None = None
    power_of_two: bool = False
    reason: str = "proactive"
    explanation: str = ""


@dataclass(frozen=True, slots=True)
class RequestRefusal:
    job: str
    request_id: str
    reason: str
    at_s: float


@dataclass(frozen=True, slots=True)
class GrantState:
    workers: int
    decided_at_s: float
    command_id: str = ""


@dataclass(frozen=True, slots=True)
class Change:
    """A grant that differs from the job's current count: a ScaleCommand to send."""

    job: str
    current_workers: int
    target_workers: int
    plan: tuple[int, ...]
    reason: str  # the grant's reason in words
    request: Request


class RequestBook:
    """See the module docstring. One caller at a time."""

    def __init__(self, declared: Mapping[str, JobClass], *, default_max_workers: int) -> None:
        if not declared:
            raise ConfigError("the allocator needs at least one declared job")
        if default_max_workers < 1:
            raise ConfigError("the default max workers must be at least 1")
        self.declared = {job: JobClass(cls) for job, cls in declared.items()}
        self.default_max_workers = default_max_workers
        self.requests: dict[str, Request] = {}
        self.grants: dict[str, GrantState] = {}
        self.warm_started: dict[str, float] = {}
        self._step_times_seen: dict[str, str] = {}  # job -> request id already observed

    # -- requests ----------------------------------------------------------------------

    def refusal_reason(self, request: Request) -> str | None:
        """Why ``request`` cannot be used, or None."""
        job = request.job
        declared = self.declared.get(job)
        if declared is None:
            known = ", ".join(sorted(self.declared))
            return f"unknown job {job!r}: the allocator was started for {known}"
        if request.job_class is not None and request.job_class is not declared:
            said = request.job_class.value
            return f"job {job!r} is declared {declared.value}, the request says {said}"
        if request.wanted_workers < 0:
            return f"negative worker count {request.wanted_workers}"
        if any(p < 0 for p in request.plan):
            return "a negative count in the plan"
        if request.max_workers and request.min_workers > request.max_workers:
            return f"min workers {request.min_workers} above max workers {request.max_workers}"
        grant = self.grants.get(job)
        if grant is not None and request.created_at_s < grant.decided_at_s:
            return (
                f"stale: created at {request.created_at_s:.3f}, before the last decision for "
                f"{job} at {grant.decided_at_s:.3f}"
            )
        newest = self.requests.get(job)
        if newest is not None and request.created_at_s < newest.created_at_s:
            return (
                f"stale: created at {request.created_at_s:.3f}, before request "
                f"{newest.request_id} already accepted"
            )
        return None

    def accept(self, request: Request, now_s: float) -> RequestRefusal | None:
        """Keep ``request`` as its job's newest, or return why not. The newest request
        delivered again (at-least-once) is accepted as it was, without a change."""
        newest = self.requests.get(request.job)
        if newest is not None and newest.request_id == request.request_id:
            return None
        why = self.refusal_reason(request)
        if why is not None:
            return RequestRefusal(request.job, request.request_id, why, now_s)
        if request.wanted_workers == 0 and request.job not in self.grants:
            request = self._warm_start(request)
        self.requests[request.job] = request
        return None

    def fresh_step_times(self) -> dict[str, float]:
        """The guarantee jobs' step times (ms) from requests not observed before, each
        handed out once: a throttle fed the same stale value every round would keep
        cutting on it (a planner sends a request when its target changes, not every
        round)."""
        fresh = {}
        for job, request in self.requests.items():
            if (
                request.step_time_ms is None
                or self.declared[job] is not JobClass.GUARANTEE
                or self._step_times_seen.get(job) == request.request_id
            ):
                continue
            self._step_times_seen[job] = request.request_id
            fresh[job] = request.step_time_ms
        return fresh

    def _warm_start(self, request: Request) -> Request:
        level = request.traffic_records_per_s
        if not request.model_type or level is None or level <= 0:
            return request
        guess = warm_start(self.history(exclude=request.job), request.model_type, level)
        if guess is None:
            return request
        self.warm_started[request.job] = guess
        wanted = max(request.min_workers, math.ceil(guess - 1e-9))
        note = f"warm start from similar {request.model_type} jobs: {guess:.1f} workers"
        return replace(request, wanted_workers=wanted, explanation=note)

    def history(self, *, exclude: str = "") -> list[JobRecord]:
        """What other jobs settled at: (model type, traffic level, granted workers)."""
        records = []
        for job, request in self.requests.items():
            grant = self.grants.get(job)
            level = request.traffic_records_per_s
            if job == exclude or not request.model_type or grant is None or not level:
                continue
            if level > 0 and grant.workers > 0:
                records.append(JobRecord(request.model_type, level, float(grant.workers)))
        return records

    # -- the solver's problem and its answer ----------------------------------------

    def current(self, job: str) -> int:
        """The job's count: the newest of the last grant and its request's report."""
        request = self.requests.get(job)
        grant = self.grants.get(job)
        if grant is not None and (request is None or grant.decided_at_s >= request.created_at_s):
            return grant.workers
        return request.current_workers if request is not None else 0

    def problem(
        self,
        now_s: float,
        *,
        capacity_workers: int,
        step_s: float,
        horizon_steps: int,
        budget_workers: int | None = None,
        power_of_two: Iterable[str] = (),
    ) -> ClusterProblem | None:
        """The problem for the jobs with a request; None while there are none."""
        if not self.requests:
            return None
        pow2 = set(power_of_two)
        jobs = tuple(
            self._job(self.declared[job], request, now_s, job in pow2, capacity_workers)
            for job, request in sorted(self.requests.items())
        )
        return ClusterProblem(
            jobs=jobs,
            capacity_workers=(capacity_workers,) * horizon_steps,
            step_s=step_s,
            opportunistic_budget_workers=budget_workers,
        )

    def _job(
        self, cls: JobClass, request: Request, now_s: float, pow2: bool, capacity_workers: int
    ) -> ClusterJob:
        # no job gets more than the pool: a larger cap only costs the solver time
        top = min(request.max_workers or self.default_max_workers, capacity_workers)
        low = 0 if cls is JobClass.SERVING else max(1, request.min_workers)
        top = max(top, low, 1)
        wanted = (request.wanted_workers, *request.plan[1:]) if request.plan else ()
        rate = request.rate_per_worker
        deadline = request.deadline_at_s
        return ClusterJob(
            name=request.job,
            job_class=cls,
            current_workers=self.current(request.job),
            min_workers=min(low, top),
            max_workers=top,
            demand_workers=wanted or (request.wanted_workers,),
            speed=SpeedCurve.prior(rate, top) if rate and rate > 0 else None,
            remaining_work=request.remaining_work,
            deadline_s=None if deadline is None else deadline - now_s,
            pause_s=max(0.0, request.pause_s),
            power_of_two=pow2 or request.power_of_two,
            arrived_s=request.created_at_s,
        )

    def record(self, allocation: Allocation, now_s: float) -> list[Change]:
        """Keep the grants of a feasible decision; the changes are commands to send."""
        if not allocation.feasible:
            return []
        changes = []
        for grant in allocation.grants:
            current = self.current(grant.job)
            if grant.granted_workers != current:
                changes.append(
                    Change(
                        grant.job,
                        current,
                        grant.granted_workers,
                        grant.plan,
                        grant.reason,
                        self.requests[grant.job],
                    )
                )
                self.grants[grant.job] = GrantState(grant.granted_workers, now_s)
        return changes

    def sent(self, job: str, command_id: str) -> None:
        """The command for ``job``'s grant went out with this id."""
        state = self.grants[job]
        self.grants[job] = GrantState(state.workers, state.decided_at_s, command_id)

    def restore(self, requests: Iterable[Request], grants: Mapping[str, GrantState]) -> None:
        """State a previous run kept in its tables (jobs no longer declared are dropped)."""
        for request in requests:
            if request.job in self.declared:
                self.requests[request.job] = request
        self.grants.update({j: g for j, g in grants.items() if j in self.declared})
