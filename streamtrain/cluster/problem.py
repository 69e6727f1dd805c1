"""The allocation problem several jobs on one pool pose, and the answer an allocator gives.

Owned here, as frozen values (no I/O, no solver): :class:`JobClass`,
:class:`SpeedCurve` (a job's throughput ``F(w)``), :class:`ClusterJob` (one job as an
allocator sees it), :class:`ClusterProblem` (the jobs, the pool's capacity per plan
step, the step length and an optional cap on all opportunistic workers: the AntMan
throttle's level), and the answer, :class:`Grant` and :class:`Allocation`: per job the
granted count for the first step (the only one applied: rolling horizon), the plan
behind it, the shortfall against what it wanted, and the reason in words; for the
whole answer whether it is feasible, the solver's status and its time.

:func:`infeasibility` says in words why no allocation can exist (the floors of the
guarantee and serving jobs exceed the pool), so allocators return that reason instead
of raising. :func:`explain` writes a grant's reason; every allocator uses it, so the
live ``cluster status`` and the simulator read the same sentences.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from streamtrain.errors import ConfigError
from streamtrain.scale.models import ThroughputModel

__all__ = [
    "Allocation",
    "ClusterJob",
    "ClusterProblem",
    "Grant",
    "JobClass",
    "SpeedCurve",
    "allowed_counts",
    "explain",
    "floor_allowed",
    "infeasibility",
    "unchanged",
]


class JobClass(StrEnum):
    """``guarantee``: online training with a lag SLO, its planner's wanted counts served
    first (AntMan's resource-guarantee jobs); ``serving``: a serving pool with a
    ``min_scale`` that must be met (FaPES' inference jobs); ``opportunistic``: offline
    training with remaining work and maybe a deadline, or a best-effort job that wants
    a count (AntMan's opportunistic jobs)."""

    GUARANTEE = "guarantee"
    OPPORTUNISTIC = "opportunistic"
    SERVING = "serving"


@dataclass(frozen=True, slots=True)
class SpeedCurve:
    """``records_per_s[w]`` is F(w) for ``w = 0..max_workers``; F(0) = 0 (records/s, or
    any unit of work per second): from a fitted
    :class:`~streamtrain.scale.models.ThroughputModel` or from the ModelArts prior
    ``r1 · w · 0.8^log2(w)``."""

    records_per_s: tuple[float, ...]

    def __post_init__(self) -> None:
        values = self.records_per_s
        if len(values) < 2 or values[0] != 0.0:
            raise ConfigError("a speed curve starts with F(0) = 0 and covers at least w = 1")
        if any(not math.isfinite(v) or v < 0 for v in values):
            raise ConfigError("a speed curve's values must be finite and non-negative")

    @classmethod
    def from_model(cls, model: ThroughputModel, max_workers: int) -> SpeedCurve:
        if max_workers < 1:
            raise ConfigError(f"a speed curve needs max workers >= 1, got {max_workers}")
        values = model.samples_per_s(list(range(1, max_workers + 1)))
        return cls((0.0, *(float(v) for v in values)))

    @classmethod
    def prior(cls, single_worker_records_per_s: float, max_workers: int) -> SpeedCurve:
        """The ModelArts speed prior: F(w) = r1 · w · 0.8^log2(w)."""
        if single_worker_records_per_s <= 0 or max_workers < 1:
            raise ConfigError("the speed prior needs a positive one-worker rate and max >= 1")
        r1 = single_worker_records_per_s
        return cls((0.0, *(r1 * w * 0.8 ** math.log2(w) for w in range(1, max_workers + 1))))

    @property
    def max_workers(self) -> int:
        return len(self.records_per_s) - 1

    def at(self, workers: int) -> float:
        """F(workers), clamped to the curve's range."""
        return self.records_per_s[max(0, min(workers, self.max_workers))]

    def is_concave(self) -> bool:
        """Whether the increments never grow (then chords between integers are exact)."""
        v = self.records_per_s
        steps = [b - a for a, b in itertools.pairwise(v)]
        tolerance = 1e-9 * max(1.0, max(v))
        return all(b <= a + tolerance for a, b in itertools.pairwise(steps))


def allowed_counts(
    min_workers: int, max_workers: int, *, power_of_two: bool, allow_zero: bool
) -> tuple[int, ...]:
    """The counts a job may be given: ``[min, max]`` (powers of two only, if asked), and 0
    for jobs that may wait (opportunistic)."""
    counts = [
        w
        for w in range(max(1, min_workers), max_workers + 1)
        if not power_of_two or w & (w - 1) == 0
    ]
    if allow_zero or min_workers == 0:
        counts.insert(0, 0)
    return tuple(counts)


def floor_allowed(workers: int, counts: Sequence[int]) -> int:
    """The largest allowed count at or below ``workers`` (0 if none)."""
    below = [c for c in counts if c <= workers]
    return max(below) if below else 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterJob:
    """One job as the allocator sees it: class, current workers, bounds, wanted counts
    per plan step (guarantee: its plan by KALE Eq. 10; serving: ``min_scale`` per step;
    a best-effort opportunistic job: its wanted counts), remaining work and deadline
    (offline jobs), the measured pause per scaling action (the scaling cost), and
    whether only powers of two are allowed (ModelArts). ``demand_workers`` shorter than
    the horizon repeats its last value; empty means the current count."""

    name: str
    job_class: JobClass
    current_workers: int = 0
    min_workers: int = 1
    max_workers: int = 64
    demand_workers: tuple[int, ...] = ()
    speed: SpeedCurve | None = None
    remaining_work: float | None = None  # in F's unit times seconds (records)
    deadline_s: float | None = None  # seconds from now
    pause_s: float = 0.0  # measured pause of one scaling action
    power_of_two: bool = False
    arrived_s: float = 0.0  # queue order (FIFO) among opportunistic jobs

    def __post_init__(self) -> None:
        if not self.name:
            raise ConfigError("a cluster job needs a name")
        object.__setattr__(self, "job_class", JobClass(self.job_class))
        if self.current_workers < 0:
            raise ConfigError(f"job {self.name}: current workers cannot be negative")
        if not 0 <= self.min_workers <= self.max_workers or self.max_workers < 1:
            raise ConfigError(
                f"job {self.name}: need 0 <= min <= max and max >= 1, "
                f"got {self.min_workers}, {self.max_workers}"
            )
        if any(d < 0 for d in self.demand_workers):
            raise ConfigError(f"job {self.name}: wanted counts cannot be negative")
        if self.remaining_work is not None and self.remaining_work < 0:
            raise ConfigError(f"job {self.name}: remaining work cannot be negative")
        if self.pause_s < 0:
            raise ConfigError(f"job {self.name}: the pause per action cannot be negative")
        if self.speed is not None and self.speed.max_workers < self.max_workers:
            raise ConfigError(f"job {self.name}: its speed curve stops below max workers")
        if self.power_of_two and not allowed_counts(
            self.min_workers, self.max_workers, power_of_two=True, allow_zero=False
        ):
            raise ConfigError(f"job {self.name}: no power of two lies in [min, max]")

    @property
    def counts(self) -> tuple[int, ...]:
        return allowed_counts(
            self.min_workers,
            self.max_workers,
            power_of_two=self.power_of_two,
            allow_zero=self.job_class is JobClass.OPPORTUNISTIC,
        )

    @property
    def floor_workers(self) -> int:
        """What the job must hold at least: its min, or 0 when it may wait."""
        return 0 if self.job_class is JobClass.OPPORTUNISTIC else self.counts[0]

    def demand(self, horizon_steps: int) -> tuple[int, ...]:
        """Wanted counts for ``horizon_steps`` steps, capped at the job's max."""
        base = self.demand_workers or (self.current_workers,)
        padded = (*base, *([base[-1]] * max(0, horizon_steps - len(base))))[:horizon_steps]
        return tuple(min(d, self.max_workers) for d in padded)

    def curve(self) -> SpeedCurve:
        """Its speed curve, or the ModelArts prior with a one-worker rate of 1."""
        return self.speed or SpeedCurve.prior(1.0, self.max_workers)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterProblem:
    jobs: tuple[ClusterJob, ...]
    capacity_workers: tuple[int, ...]  # per plan step; the first is applied
    step_s: float = 300.0
    opportunistic_budget_workers: int | None = None  # the AntMan throttle's level

    def __post_init__(self) -> None:
        if not self.capacity_workers or any(c < 0 for c in self.capacity_workers):
            raise ConfigError("the pool needs a non-negative capacity for at least one step")
        if self.step_s <= 0:
            raise ConfigError(f"the plan step must be positive, got {self.step_s} s")
        names = [j.name for j in self.jobs]
        if len(set(names)) != len(names):
            raise ConfigError(f"job names must be unique, got {names}")
        budget = self.opportunistic_budget_workers
        if budget is not None and budget < 0:
            raise ConfigError("the opportunistic budget cannot be negative")

    @property
    def horizon_steps(self) -> int:
        return len(self.capacity_workers)

    def of_class(self, job_class: JobClass) -> tuple[ClusterJob, ...]:
        return tuple(j for j in self.jobs if j.job_class is job_class)


@dataclass(frozen=True, slots=True)
class Grant:
    job: str
    job_class: JobClass
    current_workers: int
    wanted_workers: int  # for the first step (opportunistic: its max, or its wanted count)
    granted_workers: int
    plan: tuple[int, ...]  # granted per plan step
    shortfall_workers: int  # wanted minus granted in the first step (guarantee, serving)
    reason: str


@dataclass(frozen=True, slots=True)
class Allocation:
    grants: tuple[Grant, ...]
    feasible: bool
    solver: str  # "milp", "greedy", ...
    status: str  # the solver's words: "optimal", "time limit", "infeasible: ..."
    solve_ms: float = 0.0
    reasons: tuple[str, ...] = field(default=())  # pool-level notes (loans, throttle)
    solver_nodes: int = 0  # branch-and-bound nodes the MILP explored (0: no solver)

    def granted(self) -> dict[str, int]:
        return {g.job: g.granted_workers for g in self.grants}

    @property
    def used_workers(self) -> int:
        return sum(g.granted_workers for g in self.grants)


def infeasibility(problem: ClusterProblem) -> str | None:
    """Why no allocation can exist, or None: the floors (guarantee and serving jobs'
    minimum counts) must fit in every step's capacity."""
    floor = sum(j.floor_workers for j in problem.jobs)
    for step, capacity in enumerate(problem.capacity_workers):
        if floor > capacity:
            holders = ", ".join(
                f"{j.name} {j.floor_workers}" for j in problem.jobs if j.floor_workers
            )
            return (
                f"infeasible: the minimum counts of the guarantee and serving jobs ({holders}; "
                f"{floor} workers) exceed the pool's {capacity} workers at step {step + 1}"
            )
    return None


def explain(job: ClusterJob, granted: int, wanted: int, *, why_short: str = "") -> str:
    """The reason of a grant in words (shared by every allocator)."""
    cls = job.job_class
    current = job.current_workers
    move = "holds" if granted == current else f"{current} -> {granted}"
    if cls is JobClass.GUARANTEE:
        if granted >= wanted:
            return f"guarantee: wanted {wanted}, granted {granted} ({move}); served first"
        return (
            f"guarantee: SHORT by {wanted - granted} of {wanted} wanted ({move})"
            f"{': ' + why_short if why_short else ''}"
        )
    if cls is JobClass.SERVING:
        if granted >= wanted:
            loaned = current - granted
            note = f"; {loaned} idle workers loaned to training" if loaned > 0 else ""
            reclaimed = granted - current
            note += f"; {reclaimed} workers reclaimed for min_scale" if reclaimed > 0 else ""
            return f"serving: min_scale {wanted} met ({move}){note}"
        return (
            f"serving: SHORT by {wanted - granted} of min_scale {wanted} ({move})"
            f"{': ' + why_short if why_short else ''}"
        )
    if granted == 0:
        if current > 0:
            return f"opportunistic: preempted ({move}){': ' + why_short if why_short else ''}"
        return f"opportunistic: queued{': ' + why_short if why_short else ''}"
    return f"opportunistic: {move} of up to {wanted}{': ' + why_short if why_short else ''}"


def unchanged(problem: ClusterProblem, why: str, solver: str, solve_ms: float) -> Allocation:
    """The answer to an infeasible problem: every job keeps its count; ``why`` says why."""
    grants = tuple(
        Grant(
            job=j.name,
            job_class=j.job_class,
            current_workers=j.current_workers,
            wanted_workers=j.demand(1)[0],
            granted_workers=j.current_workers,
            plan=(j.current_workers,) * problem.horizon_steps,
            shortfall_workers=max(0, j.demand(1)[0] - j.current_workers),
            reason=f"unchanged: {why}",
        )
        for j in problem.jobs
    )
    return Allocation(grants, False, solver, why, solve_ms, (why,))
