"""The rolling-horizon MILP allocator (ModelArts §4), solved by HiGHS through
``scipy.optimize.milp``.

One solve plans every job's worker count for each of the problem's plan steps; only the
first step is applied, and the allocator solves again next round (rolling horizon).
Counts are whole in the first ``integral_steps`` steps and continuous after
(:func:`_counts_and_speed`). The objective is lexicographic in effect, each penalty
outweighing anything below it:

1. **Guarantee jobs** (online training with a lag SLO) get at least their plan, the
   count KALE Eq. 10 wants per step; a shortfall costs ``guarantee_penalty`` per
   worker-step, so a pool too small still has an answer (the shortfall, reported).
2. **Serving** gets its ``min_scale``, a shortfall costing ``serving_penalty``.
3. **Opportunistic progress** minus scaling cost (:func:`_progress_rows`) and waiting
   at 0 workers (:func:`_wait_rows`).

Every count costs a tiny ``epsilon`` per worker-step, so no worker is given where it adds
nothing. Constraints shared by all: ``Σ_i n[i,t] ≤ capacity[t]`` and, with the AntMan
throttle, ``Σ_opportunistic n[i,t] ≤ budget``. If HiGHS finds no plan, or only one
further than ``accept_gap`` from optimal, or fails, the greedy allocator answers and the
status says so; an infeasible pool (floors above capacity) is reported with its reason
(:func:`~streamtrain.cluster.problem.infeasibility`), never raised.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from streamtrain.cluster.greedy import greedy_allocate
from streamtrain.cluster.problem import (
    Allocation,
    ClusterJob,
    ClusterProblem,
    Grant,
    JobClass,
    explain,
    infeasibility,
    unchanged,
)
from streamtrain.errors import ConfigError
from streamtrain.units import s_to_ms

__all__ = ["MilpSettings", "milp_allocate"]

_EPSILON = 1e-6  # cost per worker-step: no worker where it adds nothing
_OPTIMAL, _LIMIT = 0, 1  # scipy.optimize.milp statuses


@dataclass(frozen=True, slots=True)
class MilpSettings:
    """The solver's limits and the objective's weights.

    HiGHS stops at a relative gap of ``mip_rel_gap`` (1 %: within a hundredth of the
    best plan's worth) or after ``node_limit`` branch-and-bound nodes with the best plan
    found: a count, so the same problem gets the same answer however busy the machine
    is. ``time_limit_s`` is only a safety net; the solve's wall time is measured and
    reported apart (:attr:`~streamtrain.cluster.problem.Allocation.solve_ms`, and the
    nodes in ``solver_nodes``).

    ``hard_minimum`` makes ModelArts' constraint (15), ``n ≥ n_min`` for every job at
    every step, hard, as the paper has it, for the jobs the pool can hold at their
    minimum (:func:`_hard_minimum_jobs`; over all of them it would be infeasible
    whenever more jobs wait than workers are free); the others may still wait at the
    wait penalty.
    """

    node_limit: int | None = 200  # branch-and-bound nodes: the deterministic limit
    time_limit_s: float = 30.0  # a safety net only; the wall time is reported apart
    mip_rel_gap: float = 0.01
    guarantee_penalty: float = 1_000.0  # per worker-step short of a guarantee job's plan
    serving_penalty: float = 100.0  # per worker-step short of serving's min_scale
    deadline_weight: float = 5.0  # per share of a job's work behind its deadline pace
    wait_penalty: float = 1.0  # per whole step an opportunistic job with work waits at 0
    integral_steps: int = 1  # leading steps with whole counts; the rest is an LP plan
    accept_gap: float = 0.05  # a plan cut short by the time limit further off is not used
    change_cost: float = 1e-4  # per scaling action, on top of the work its pause loses
    hard_minimum: bool = False  # ModelArts' (15) as a hard constraint (see above)

    def __post_init__(self) -> None:
        if self.time_limit_s <= 0 or not 0 <= self.mip_rel_gap < 1:
            raise ConfigError("the MILP needs a positive time limit and a gap in [0, 1)")
        if self.node_limit is not None and self.node_limit < 1:
            raise ConfigError(f"the node limit must be at least 1, got {self.node_limit}")
        if not self.guarantee_penalty > self.serving_penalty > self.deadline_weight > 0:
            raise ConfigError("penalties must fall: guarantee > serving > deadline > 0")
        if not 0 <= self.wait_penalty < self.serving_penalty:
            raise ConfigError("the wait penalty must be in [0, serving penalty)")
        if self.integral_steps < 1 or not 0 < self.accept_gap <= 1:
            raise ConfigError("need at least one integral step and an accepted gap in (0, 1]")


class _Model:
    """Columns and sparse rows of a MILP, built one at a time."""

    def __init__(self) -> None:
        self.cost: list[float] = []
        self.lower: list[float] = []
        self.upper: list[float] = []
        self.integer: list[int] = []
        self.row_index: list[int] = []
        self.col_index: list[int] = []
        self.values: list[float] = []
        self.row_lower: list[float] = []
        self.row_upper: list[float] = []

    def var(self, lower: float, upper: float, cost: float = 0.0, integer: bool = False) -> int:
        self.cost.append(cost)
        self.lower.append(lower)
        self.upper.append(upper)
        self.integer.append(1 if integer else 0)
        return len(self.cost) - 1

    def row(self, terms: list[tuple[int, float]], lower: float, upper: float) -> None:
        index = len(self.row_lower)
        for col, value in terms:
            self.row_index.append(index)
            self.col_index.append(col)
            self.values.append(value)
        self.row_lower.append(lower)
        self.row_upper.append(upper)

    def solve(self, settings: MilpSettings) -> tuple[int, str, np.ndarray | None, float, int]:
        from scipy.optimize import Bounds, LinearConstraint, milp
        from scipy.sparse import coo_array

        shape = (len(self.row_lower), len(self.cost))
        matrix = coo_array((self.values, (self.row_index, self.col_index)), shape=shape).tocsr()
        result = milp(
            np.asarray(self.cost),
            integrality=np.asarray(self.integer),
            bounds=Bounds(np.asarray(self.lower), np.asarray(self.upper)),
            constraints=LinearConstraint(
                matrix, np.asarray(self.row_lower), np.asarray(self.row_upper)
            ),
            options={
                "time_limit": settings.time_limit_s,
                "mip_rel_gap": settings.mip_rel_gap,
                "presolve": False,
                **({} if settings.node_limit is None else {"node_limit": settings.node_limit}),
            },
        )
        gap = getattr(result, "mip_gap", None)
        nodes = int(getattr(result, "mip_node_count", 0) or 0)
        return (
            int(result.status),
            str(result.message),
            result.x,
            0.0 if gap is None else gap,
            nodes,
        )


@dataclass(slots=True)
class _JobColumns:
    job: ClusterJob
    counts: list[int]  # n[t] per step
    speeds: list[list[tuple[int, float]]]  # per step: terms of the job's speed expression


def _counts_and_speed(
    model: _Model, job: ClusterJob, horizon_steps: int, integral_steps: int
) -> _JobColumns:
    """The count ``n[i,t]`` and, where needed, the speed columns of one job.

    ``n`` is a whole number in the first ``integral_steps`` steps (1 by default: the
    applied step) and continuous after (the rest of the plan is its LP relaxation: it
    still reserves room and paces progress, and keeps the solve fast; the plan's later
    steps are shown rounded). For jobs restricted to powers of two (or whose speed curve
    is not concave, or that may wait but need more than one worker to run) a one-hot
    choice ``x[i,t,k]`` over the allowed counts, with ``n = Σ k·x`` and speed
    ``Σ F(k)·x`` (ModelArts' indicator constraints (16)-(20), written as one binary per
    count); otherwise the speed ``r[i,t] ≤ F(k) + (F(k+1) - F(k))·(n - k)`` for every
    ``k`` (the chords of a concave F, exact at integer ``n``, no binaries).
    """
    counts = job.counts
    curve = job.curve()
    n_cols: list[int] = []
    speeds: list[list[tuple[int, float]]] = []
    contiguous = counts == tuple(range(counts[0], counts[-1] + 1))
    needs_speed = job.job_class is JobClass.OPPORTUNISTIC
    one_hot = not contiguous or (needs_speed and not curve.is_concave())
    upper = counts[-1]
    if job.remaining_work is not None and job.remaining_work <= 0:
        upper = counts[0]  # finished: nothing left to give workers to
    for t in range(horizon_steps):
        whole = t < integral_steps  # the first step is applied; later ones are a plan
        n = model.var(counts[0], upper, _EPSILON, integer=whole)
        n_cols.append(n)
        if one_hot:
            picks = [(k, model.var(0, 1 if k <= upper else 0, integer=whole)) for k in counts]
            model.row([(x, 1.0) for _, x in picks], 1, 1)
            model.row([(n, 1.0), *((x, -float(k)) for k, x in picks)], 0, 0)
            speeds.append([(x, curve.at(k)) for k, x in picks] if needs_speed else [])
        elif needs_speed:
            r = model.var(0, curve.at(upper))
            for k in range(counts[0], upper):
                slope = curve.at(k + 1) - curve.at(k)
                model.row([(r, 1.0), (n, -slope)], -np.inf, curve.at(k) - slope * k)
            speeds.append([(r, 1.0)])
        else:
            speeds.append([])
    return _JobColumns(job, n_cols, speeds)


def _floor_rows(model: _Model, cols: _JobColumns, demand: tuple[int, ...], penalty: float) -> None:
    """``n + short ≥ wanted`` per step, the shortfall paying ``penalty`` per worker-step."""
    for n, wanted in zip(cols.counts, demand, strict=True):
        short = model.var(0, wanted, penalty)
        model.row([(n, 1.0), (short, 1.0)], wanted, np.inf)


def _progress_rows(
    model: _Model, cols: _JobColumns, problem: ClusterProblem, settings: MilpSettings
) -> None:
    """An opportunistic job's progress and scaling cost.

    A job with remaining work ``d`` accumulates ``S[i,t] ≤ S[i,t-1] + step·F(n[i,t])``,
    ``S ≤ d``; the objective adds ``Σ_t S[i,t]/d`` (ModelArts' objective (1): progress
    as a share of the job's work, summed over the steps, which favours finishing
    sooner). A job with a deadline pays ``deadline_weight`` per unit of the share it
    falls behind a linear pace to its deadline by the horizon's end. A job without
    remaining work (a best-effort job that wants a count) earns ``F(n)/F(wanted)`` per
    step. A change of count in the first step (a binary, against the current count: the
    only step applied) costs ``change_cost`` plus the progress its measured pause loses,
    ``pause_s · F(current)`` records valued as the objective values them; later steps
    are a plan only, and a change there costs ``change_cost`` per worker moved
    (continuous, no binaries).
    """
    job, horizon_steps, step_s = cols.job, problem.horizon_steps, problem.step_s
    curve = job.curve()
    lost_records = job.pause_s * curve.at(job.current_workers)
    work = job.remaining_work
    record_value: list[float] = []
    if work is not None and work > 0:
        previous: int | None = None
        for t, terms in enumerate(cols.speeds):
            done = model.var(0, work, -1.0 / work)
            row = [(done, 1.0), *((col, -step_s * f) for col, f in terms)]
            if previous is not None:
                row.append((previous, -1.0))
            model.row(row, -np.inf, 0)
            previous = done
            record_value.append((horizon_steps - t) / work)
        if job.deadline_s is not None and previous is not None:
            share = (
                1.0 if job.deadline_s <= 0 else min(1.0, horizon_steps * step_s / job.deadline_s)
            )
            behind = model.var(0, share, settings.deadline_weight)
            model.row([(previous, 1.0 / work), (behind, 1.0)], share, np.inf)
    elif work is None:
        for terms, wanted in zip(cols.speeds, job.demand(horizon_steps), strict=True):
            full = curve.at(wanted) * step_s
            if full <= 0:
                record_value.append(0.0)
                continue
            gain = model.var(0, full, -1.0 / full)
            model.row([(gain, 1.0), *((col, -step_s * f) for col, f in terms)], -np.inf, 0)
            record_value.append(1.0 / full)
    else:
        record_value = [0.0] * horizon_steps
    _wait_rows(model, cols, job, min(horizon_steps, settings.integral_steps), settings.wait_penalty)
    big = job.max_workers + job.current_workers
    first = cols.counts[0]
    changed = model.var(0, 1, settings.change_cost + lost_records * record_value[0], integer=True)
    model.row([(first, 1.0), (changed, -big)], -np.inf, job.current_workers)
    model.row([(first, -1.0), (changed, -big)], -np.inf, -job.current_workers)
    # Later steps are only a plan (re-solved next round): a per-worker cost on changes,
    # continuous, keeps the plan from swinging without binaries.
    for t in range(1, horizon_steps):
        n, before = cols.counts[t], cols.counts[t - 1]
        moved = model.var(0, big, settings.change_cost)
        model.row([(moved, 1.0), (n, -1.0), (before, 1.0)], 0, np.inf)
        model.row([(moved, 1.0), (n, 1.0), (before, -1.0)], 0, np.inf)


def _wait_rows(
    model: _Model, cols: _JobColumns, job: ClusterJob, whole_steps: int, penalty: float
) -> None:
    """ModelArts' ``n ≥ n_min`` for every job (15), made soft and for the whole steps (a
    relaxed step could dodge it with a fraction of a worker): each whole step at 0
    workers while the job has work (or wants workers) costs ``penalty``, so that an
    overloaded pool still has an answer."""
    smallest = next((c for c in job.counts if c > 0), 0)
    finished = job.remaining_work is not None and job.remaining_work <= 0
    if penalty <= 0 or smallest == 0 or finished:
        return
    wanted = job.demand(whole_steps)
    for t in range(whole_steps):
        if job.remaining_work is None and wanted[t] <= 0:
            continue
        idle = model.var(0, 1, penalty)
        model.row([(cols.counts[t], 1.0), (idle, float(smallest))], smallest, np.inf)


def milp_allocate(problem: ClusterProblem, settings: MilpSettings | None = None) -> Allocation:
    """Solve ``problem`` (module docstring); the first step's counts are the grants."""
    settings = settings or MilpSettings()
    started = time.perf_counter()
    why = infeasibility(problem)
    if why is not None:
        return unchanged(problem, why, "milp", s_to_ms(time.perf_counter() - started))
    horizon_steps = problem.horizon_steps
    model = _Model()
    whole = min(horizon_steps, settings.integral_steps)
    columns = [_counts_and_speed(model, job, horizon_steps, whole) for job in problem.jobs]
    if settings.hard_minimum:
        for cols in columns:
            if cols.job.name in _hard_minimum_jobs(problem):
                smallest = next(c for c in cols.job.counts if c > 0)
                for n in cols.counts:
                    model.lower[n] = smallest
    for cols in columns:
        job = cols.job
        if job.job_class is JobClass.GUARANTEE:
            _floor_rows(model, cols, job.demand(horizon_steps), settings.guarantee_penalty)
        elif job.job_class is JobClass.SERVING:
            _floor_rows(model, cols, job.demand(horizon_steps), settings.serving_penalty)
        else:
            _progress_rows(model, cols, problem, settings)
    for t, capacity in enumerate(problem.capacity_workers):
        model.row([(cols.counts[t], 1.0) for cols in columns], -np.inf, capacity)
    budget = problem.opportunistic_budget_workers
    opportunistic = [c for c in columns if c.job.job_class is JobClass.OPPORTUNISTIC]
    if budget is not None and opportunistic:
        for t in range(horizon_steps):
            model.row([(c.counts[t], 1.0) for c in opportunistic], -np.inf, budget)
    status, message, x, gap, nodes = model.solve(settings)
    solve_ms = s_to_ms(time.perf_counter() - started)
    if status == _LIMIT and x is not None and gap > settings.accept_gap:
        message = f"the solve limit came with the best plan {gap:.0%} from optimal"
        x = None
    if x is None or status not in (_OPTIMAL, _LIMIT):
        fallback = greedy_allocate(problem)
        return Allocation(
            fallback.grants,
            fallback.feasible,
            "greedy",
            f"milp found no solution ({message.strip()}); greedy fallback",
            solve_ms,
            fallback.reasons,
            nodes,
        )
    plans = {c.job.name: tuple(math.floor(float(x[n]) + 0.5) for n in c.counts) for c in columns}
    given = sum(plans[j.name][0] for j in problem.of_class(JobClass.OPPORTUNISTIC))
    grants = tuple(_grant(job, plans[job.name], problem, given) for job in problem.jobs)
    words = "optimal" if status == _OPTIMAL else "solve limit (best solution found)"
    return Allocation(grants, True, "milp", words, solve_ms, _pool_notes(problem, grants), nodes)


def _hard_minimum_jobs(problem: ClusterProblem) -> frozenset[str]:
    """The opportunistic jobs ModelArts' (15) holds at their minimum: running ones, then
    the queue in arrival order, while their minimums fit in what the guarantee and
    serving jobs leave of the first step."""
    room = problem.capacity_workers[0] - sum(
        j.demand(1)[0] for j in problem.jobs if j.job_class is not JobClass.OPPORTUNISTIC
    )
    candidates = [
        j
        for j in problem.of_class(JobClass.OPPORTUNISTIC)
        if not (j.remaining_work is not None and j.remaining_work <= 0)
        and (j.remaining_work is not None or j.demand(1)[0] > 0)
    ]
    candidates.sort(key=lambda j: (j.current_workers == 0, j.arrived_s, j.name))
    chosen = []
    for job in candidates:
        smallest = next(c for c in job.counts if c > 0)
        if smallest > room:
            break
        room -= smallest
        chosen.append(job.name)
    return frozenset(chosen)


def _grant(
    job: ClusterJob, plan: tuple[int, ...], problem: ClusterProblem, opportunistic: int
) -> Grant:
    granted = plan[0]
    if job.job_class is JobClass.OPPORTUNISTIC:
        wanted = job.demand(1)[0] if job.remaining_work is None else job.max_workers
        short = 0
        why = _opportunistic_why(granted, wanted, problem, opportunistic)
    else:
        wanted = job.demand(1)[0]
        short = max(0, wanted - granted)
        why = _floor_why(job, problem) if short else ""
    return Grant(
        job=job.name,
        job_class=job.job_class,
        current_workers=job.current_workers,
        wanted_workers=wanted,
        granted_workers=granted,
        plan=plan,
        shortfall_workers=short,
        reason=explain(job, granted, wanted, why_short=why),
    )


def _floor_why(job: ClusterJob, problem: ClusterProblem) -> str:
    capacity = problem.capacity_workers[0]
    guaranteed = sum(j.demand(1)[0] for j in problem.of_class(JobClass.GUARANTEE))
    if job.job_class is JobClass.GUARANTEE:
        return f"the pool's {capacity} workers cannot hold the guarantee plans ({guaranteed})"
    return f"guarantee jobs come first ({guaranteed} wanted) and the pool holds {capacity}"


def _opportunistic_why(
    granted: int, wanted: int, problem: ClusterProblem, opportunistic: int
) -> str:
    """Why an opportunistic job got less than it could use (``opportunistic``: what all
    of them got)."""
    if granted >= wanted:
        return ""
    budget = problem.opportunistic_budget_workers
    if budget is not None and opportunistic >= budget:
        return f"opportunistic workers capped at {budget} by the interference throttle"
    return "the MILP's best use of the pool (guarantee and serving first, then progress)"


def _pool_notes(problem: ClusterProblem, grants: tuple[Grant, ...]) -> tuple[str, ...]:
    notes = []
    for grant in grants:
        if grant.job_class is JobClass.SERVING and grant.granted_workers < grant.current_workers:
            notes.append(
                f"loan: {grant.current_workers - grant.granted_workers} idle workers of "
                f"{grant.job} to other jobs"
            )
        elif grant.job_class is JobClass.SERVING and grant.granted_workers > grant.current_workers:
            notes.append(
                f"reclaim: {grant.granted_workers - grant.current_workers} workers back "
                f"to {grant.job} for its min_scale"
            )
    if problem.opportunistic_budget_workers is not None:
        notes.append(
            f"throttle: opportunistic jobs capped at {problem.opportunistic_budget_workers}"
        )
    return tuple(notes)
