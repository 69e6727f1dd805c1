"""The cluster allocator's settings and the state its agents, timer and page share.

Owned here (no Faust: :mod:`streamtrain.control.allocator` wires this to one):

* :class:`AllocatorSettings`: what ``streamtrain cluster run`` configures: Kafka, the
  pool's capacity, the declared jobs by class, the topics, the cadence (a leader tick
  every ``tick_s``; a decision when a request was accepted or refused, and at least
  every ``interval_s``: the rolling horizon), the plan step and horizon, the solver.
* :class:`AllocatorService`: decodes ``ScaleRequest`` messages (an undecodable one, an
  unknown enum value included, is counted by kind and each kind logged once), bounds
  them (:mod:`streamtrain.control.request_bounds`: counts clamped to the pool's capacity,
  requests from the future or with non-finite numbers refused; requests restored from
  the table too), hands them to the :class:`~streamtrain.cluster.book.RequestBook`
  (a refusal is logged with its reason and published with the next decision), runs
  one decision (:meth:`AllocatorService.decide`, meant for a worker thread: the MILP
  may take up to its time limit) and turns it into ``ScaleCommand`` messages (one per
  job whose count changes, key: the job; shrinking jobs first) and an
  ``AllocationDecision`` with every grant's reason. AntMan's throttle caps the
  opportunistic jobs once guarantee jobs report step times.
* The conversions between the wire and the book: :func:`request_from_proto`,
  :func:`request_to_json` / :func:`request_from_json` (the requests table's values).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamtrain.cluster.book import GrantState, Request, RequestBook, RequestRefusal
from streamtrain.cluster.greedy import greedy_allocate
from streamtrain.cluster.milp import MilpSettings, milp_allocate
from streamtrain.cluster.problem import Allocation, JobClass
from streamtrain.cluster.throttle import Throttle, ThrottleSettings
from streamtrain.config import KafkaSettings
from streamtrain.control.request_bounds import (
    MAX_NAME_CHARS,
    RequestLimits,
    bound_request,
)
from streamtrain.errors import ConfigError, SchemaError
from streamtrain.ports import check_trusted_bind
from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.units import MS_PER_S
from streamtrain.wire import DecodeFailures, decode

__all__ = [
    "AllocatorService",
    "AllocatorSettings",
    "Decided",
    "request_from_json",
    "request_from_proto",
    "request_to_json",
]

log = logging.getLogger(__name__)

_CLASS_FROM_PROTO = {
    pb.ScaleRequest.GUARANTEE: JobClass.GUARANTEE,
    pb.ScaleRequest.OPPORTUNISTIC: JobClass.OPPORTUNISTIC,
    pb.ScaleRequest.SERVING: JobClass.SERVING,
}
CLASS_TO_PROTO = {cls: value for value, cls in _CLASS_FROM_PROTO.items()}
_REASONS = {
    pb.ScaleCommand.PROACTIVE: "proactive",
    pb.ScaleCommand.FALLBACK: "fallback",
    pb.ScaleCommand.MANUAL: "manual",
}
_REASON_TO_PROTO = {text: value for value, text in _REASONS.items()}
SOLVERS = ("milp", "greedy")


@dataclass(frozen=True, slots=True, kw_only=True)
class AllocatorSettings:
    kafka: KafkaSettings
    capacity_workers: int
    guarantee_jobs: tuple[str, ...] = ()
    opportunistic_jobs: tuple[str, ...] = ()
    serving_jobs: tuple[str, ...] = ()
    power_of_two_jobs: tuple[str, ...] = ()
    app_id: str = "streamtrain-cluster"
    requests_topic: str = "streamtrain.cluster.requests"
    commands_topic: str = "streamtrain.scale.commands"
    decisions_topic: str = "streamtrain.cluster.decisions"
    tick_s: float = 5.0
    interval_s: float = 300.0
    step_s: float = 300.0
    horizon_steps: int = 5
    solver: str = "milp"
    time_limit_s: float = 0.5
    web_host: str = "127.0.0.1"
    web_port: int = 6067
    data_dir: Path | None = None
    request_timeout_s: float = 5.0
    max_clock_skew_s: float = 60.0  # requests created further in the future are refused
    trusted_network: bool = False  # the pages beyond loopback (no authentication)
    declared: dict[str, JobClass] = field(init=False)

    def __post_init__(self) -> None:
        if self.capacity_workers < 1:
            raise ConfigError(f"--capacity must be at least 1, got {self.capacity_workers}")
        declared: dict[str, JobClass] = {}
        for cls, jobs in (
            (JobClass.GUARANTEE, self.guarantee_jobs),
            (JobClass.OPPORTUNISTIC, self.opportunistic_jobs),
            (JobClass.SERVING, self.serving_jobs),
        ):
            for job in jobs:
                if job in declared:
                    raise ConfigError(f"job {job!r} is declared twice ({declared[job]}, {cls})")
                declared[job] = cls
        if not declared:
            raise ConfigError(
                "declare the pool's jobs: --guarantee-job, --opportunistic-job, --serving-job"
            )
        unknown = [j for j in self.power_of_two_jobs if j not in declared]
        if unknown:
            raise ConfigError(f"--power-of-two-job names undeclared jobs: {', '.join(unknown)}")
        if self.solver not in SOLVERS:
            raise ConfigError(f"the solver must be one of {', '.join(SOLVERS)}")
        if min(self.tick_s, self.interval_s, self.step_s, self.time_limit_s) <= 0:
            raise ConfigError("the tick, interval, plan step and time limit must be positive")
        if self.horizon_steps < 1 or not 0 < self.web_port < 65536:
            raise ConfigError("need a horizon of at least one step and a web port in 1..65535")
        check_trusted_bind(
            self.web_host,
            trusted_network=self.trusted_network,
            what="the allocator's pages",
            flag="--web-host",
        )
        RequestLimits(self.capacity_workers, self.horizon_steps, self.max_clock_skew_s)
        object.__setattr__(self, "declared", declared)

    @property
    def state_topic(self) -> str:
        return f"{self.app_id}-state"

    @property
    def request_limits(self) -> RequestLimits:
        return RequestLimits(self.capacity_workers, self.horizon_steps, self.max_clock_skew_s)


def request_from_proto(message: pb.ScaleRequest) -> Request:
    def optional(name: str) -> float | None:
        return float(getattr(message, name)) if message.HasField(name) else None

    deadline_ms = message.deadline_at_ms if message.HasField("deadline_at_ms") else None
    return Request(
        request_id=message.request_id or f"{message.job}@{message.created_at_ms}",
        job=message.job,
        job_class=_CLASS_FROM_PROTO.get(message.job_class),
        current_workers=message.current_workers,
        wanted_workers=message.wanted_workers,
        created_at_s=message.created_at_ms / MS_PER_S,
        plan=tuple(message.plan),
        min_workers=message.min_workers,
        max_workers=message.max_workers,
        pause_s=message.action_pause_s,
        remaining_work=optional("remaining_work"),
        deadline_at_s=None if deadline_ms is None else deadline_ms / MS_PER_S,
        rate_per_worker=optional("records_per_s_per_worker"),
        step_time_ms=optional("step_time_ms"),
        model_type=message.model_type,
        traffic_records_per_s=optional("traffic_records_per_s"),
        power_of_two=message.power_of_two,
        reason=_REASONS.get(message.reason, "proactive"),
        explanation=message.explanation,
    )


def request_to_json(request: Request) -> str:
    body = {k: getattr(request, k) for k in Request.__dataclass_fields__ if k != "job_class"} | {
        "job_class": None if request.job_class is None else request.job_class.value
    }
    body["plan"] = list(request.plan)
    return json.dumps(body)


def request_from_json(text: str) -> Request:
    body = json.loads(text)
    body["plan"] = tuple(body["plan"])
    body["job_class"] = None if body["job_class"] is None else JobClass(body["job_class"])
    return Request(**body)


@dataclass(frozen=True, slots=True)
class Decided:
    """One decision: the commands to send (shrinks first), the decision message, and the
    table updates (``grant:<job>`` -> JSON)."""

    commands: tuple[pb.ScaleCommand, ...]
    decision: pb.AllocationDecision
    grants: tuple[tuple[str, str], ...]


class AllocatorService:
    """See the module docstring."""

    def __init__(self, settings: AllocatorSettings) -> None:
        self.settings = settings
        self.book = RequestBook(settings.declared, default_max_workers=settings.capacity_workers)
        self.throttle = Throttle(ThrottleSettings(ceiling_workers=settings.capacity_workers))
        self.refusals: list[RequestRefusal] = []
        self.failures = DecodeFailures("scale request", log)
        self.clamped = 0  # requests whose counts were clamped to the pool's capacity
        self.accepted = 0
        self.refused = 0
        self.restored = False
        self.restored_counts = {"requests": 0, "grants": 0}
        self.dirty = False
        self.last_decided_at_s = -float("inf")
        self.last_decision: pb.AllocationDecision | None = None
        self.command_outbox: list[pb.ScaleCommand] = []

    @property
    def undecodable(self) -> int:
        return self.failures.total

    def take(self, value: bytes | None, now_s: float) -> Request | None:
        """One message of the requests topic; the accepted request, or None."""
        try:
            message = decode(pb.ScaleRequest, value)
        except SchemaError as exc:
            self.failures.add(exc, self.settings.requests_topic)
            return None
        request = request_from_proto(message)
        bounded = bound_request(request, self.settings.request_limits, now_s)
        self.dirty = True
        refusal: RequestRefusal | None
        if bounded.request is None:
            refusal = RequestRefusal(request.job, request.request_id, bounded.refusal or "", now_s)
        else:
            if bounded.clamped:
                self.clamped += 1
                log.warning(
                    "scale request %s of job %s: %s",
                    bounded.request.request_id,
                    bounded.request.job,
                    "; ".join(bounded.clamped),
                )
            request = bounded.request
            refusal = self.book.accept(request, now_s)
        if refusal is not None:
            self.refused += 1
            self.refusals.append(refusal)
            log.warning(
                "refused scale request %s for job %r: %s",
                refusal.request_id[:MAX_NAME_CHARS],
                refusal.job[:MAX_NAME_CHARS],
                refusal.reason,
            )
            return None
        self.accepted += 1
        accepted = self.book.requests[request.job]
        log.info(
            "scale request %s: %s wants %d workers",
            accepted.request_id,
            accepted.job,
            accepted.wanted_workers,
        )
        return accepted

    def due(self, now_s: float) -> bool:
        return self.dirty or now_s - self.last_decided_at_s >= self.settings.interval_s

    def _budget(self) -> int | None:
        step = self.throttle.observe(self.book.fresh_step_times())
        log.debug("throttle: %s", step.reason)
        return step.level_workers if self.throttle.signalled else None

    def _allocate(self, now_s: float) -> Allocation | None:
        s = self.settings
        problem = self.book.problem(
            now_s,
            capacity_workers=s.capacity_workers,
            step_s=s.step_s,
            horizon_steps=s.horizon_steps,
            budget_workers=self._budget(),
            power_of_two=s.power_of_two_jobs,
        )
        if problem is None:
            return None
        if s.solver == "greedy":
            return greedy_allocate(problem)
        return milp_allocate(problem, MilpSettings(time_limit_s=s.time_limit_s))

    def decide(self, now_s: float | None = None) -> Decided:
        """One decision (module docstring); run it in a worker thread."""
        now_s = time.time() if now_s is None else now_s
        s = self.settings
        self.dirty = False
        self.last_decided_at_s = now_s
        allocation = self._allocate(now_s)
        decision = pb.AllocationDecision(
            decision_id=f"{s.app_id}-{uuid.uuid4().hex}",
            decided_at_ms=int(now_s * MS_PER_S),
            capacity_workers=s.capacity_workers,
            plan_step_s=int(s.step_s),
        )
        decision.refusals.extend(
            pb.AllocationDecision.Refusal(
                job=r.job,
                request_id=r.request_id,
                reason=r.reason,
                refused_at_ms=int(r.at_s * MS_PER_S),
            )
            for r in self.refusals
        )
        self.refusals = []
        if allocation is None:
            decision.status = "no requests yet"
            self.last_decision = decision
            return Decided((), decision, ())
        if not allocation.feasible:
            log.error("the pool cannot be allocated: %s", allocation.status)
        changes = self.book.record(allocation, now_s)
        commands = {}
        for change in sorted(changes, key=lambda c: c.target_workers - c.current_workers):
            command = pb.ScaleCommand(
                command_id=f"{change.job}-alloc-{uuid.uuid4().hex}",
                job=change.job,
                current_workers=change.current_workers,
                target_workers=change.target_workers,
                reason=_REASON_TO_PROTO.get(change.request.reason, pb.ScaleCommand.PROACTIVE),
                plan=list(change.plan),
                plan_step_s=int(s.step_s),
                created_at_ms=int(now_s * MS_PER_S),
                explanation=f"cluster allocator: {change.reason}",
            )
            self.book.sent(change.job, command.command_id)
            commands[change.job] = command
            log.info(
                "allocator: %s %d -> %d (%s)",
                change.job,
                change.current_workers,
                change.target_workers,
                change.reason,
            )
        for grant in allocation.grants:
            sent = commands.get(grant.job)
            decision.grants.append(
                pb.AllocationDecision.Grant(
                    job=grant.job,
                    job_class=CLASS_TO_PROTO[grant.job_class],
                    current_workers=grant.current_workers,
                    wanted_workers=grant.wanted_workers,
                    granted_workers=grant.granted_workers,
                    plan=list(grant.plan),
                    reason=grant.reason,
                    command_id=sent.command_id if sent else "",
                )
            )
        decision.notes.extend(allocation.reasons)
        decision.solver = allocation.solver
        decision.status = allocation.status
        decision.solve_ms = allocation.solve_ms
        decision.feasible = allocation.feasible
        self.last_decision = decision
        grants = tuple(
            (
                job,
                json.dumps(
                    {
                        "workers": g.workers,
                        "decided_at_s": g.decided_at_s,
                        "command_id": g.command_id,
                    }
                ),
            )
            for job, g in self.book.grants.items()
            if job in commands
        )
        return Decided(tuple(commands.values()), decision, grants)

    def restore(
        self, requests: dict[str, str], grants: dict[str, str], now_s: float | None = None
    ) -> None:
        """The book from the tables a previous run left (values as written), each request
        bounded as a new one is (a build without the bounds may have kept an absurd one;
        one that cannot be read or is refused is dropped with a log line)."""
        now_s = time.time() if now_s is None else now_s
        kept = []
        for job, text in requests.items():
            try:
                request = request_from_json(text)
            except (ValueError, TypeError, KeyError) as exc:
                log.warning("dropping the unreadable stored request of job %r: %s", job, exc)
                continue
            bounded = bound_request(request, self.settings.request_limits, now_s)
            if bounded.request is None:
                log.warning("dropping the stored request of job %r: %s", job, bounded.refusal)
                continue
            if bounded.clamped:
                log.warning("stored request of job %r: %s", job, "; ".join(bounded.clamped))
            kept.append(bounded.request)
        self.book.restore(kept, {job: GrantState(**json.loads(v)) for job, v in grants.items()})
        self.restored = True
        self.restored_counts = {"requests": len(requests), "grants": len(grants)}
        log.info("restored %d requests and %d grants from the tables", len(requests), len(grants))

    def status_json(self) -> dict[str, Any]:
        from streamtrain.control.cluster_status import decision_json

        latest = self.last_decision
        return {
            "capacity_workers": self.settings.capacity_workers,
            "declared": {job: cls.value for job, cls in sorted(self.settings.declared.items())},
            "requests_accepted": self.accepted,
            "requests_refused": self.refused,
            "requests_undecodable": dict(self.failures.by_kind),
            "requests_clamped": self.clamped,
            "restored": self.restored_counts,
            "pending_commands": len(self.command_outbox),
            "decision": decision_json(latest) if latest is not None else None,
            "requests": {
                job: {
                    "request_id": r.request_id,
                    "wanted_workers": r.wanted_workers,
                    "current_workers": r.current_workers,
                    "created_at_s": r.created_at_s,
                }
                for job, r in sorted(self.book.requests.items())
            },
        }
