"""Metrics per job class of a multi-job simulation, and their tables.

Owned here: :class:`PoolMetrics` (one allocator's numbers per job class: online,
serving, offline, the pool), :func:`pool_metrics` (from a
:class:`~streamtrain.sim.pool.PoolRun` and the inputs), :func:`simulate_scenario` (every
allocator of a scenario: :class:`ScenarioReport`), and the text and JSON forms.

Over seeds (:func:`summarize_pool`): every metric's mean and 95 % interval per
allocator, and :func:`paired_difference`, one allocator's metric less another's, seed
by seed (the same inputs), with its interval.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from streamtrain.cluster.milp import MilpSettings
from streamtrain.errors import ConfigError
from streamtrain.percentile import percentile
from streamtrain.sim.pool import PoolRun, run_pool
from streamtrain.sim.pool_inputs import PoolInputs, build_inputs
from streamtrain.sim.scenario import SHARED, Scenario
from streamtrain.sim.stats import Interval, interval
from streamtrain.units import MIN_PER_H, MINUTE_S

__all__ = [
    "POOL_METRICS",
    "OnlineOutcome",
    "PoolMetrics",
    "ScenarioReport",
    "format_pool_table",
    "paired_difference",
    "pool_metrics",
    "simulate_scenario",
    "summarize_pool",
]

# The metrics summarized over seeds, in table order: (field, title, format).
POOL_METRICS: tuple[tuple[str, str, str], ...] = (
    ("offline_queue_min", "queueing (min)", "{:,.1f}"),
    ("offline_waiting_min", "waiting (min)", "{:,.1f}"),
    ("offline_completion_min", "completion (min)", "{:,.0f}"),
    ("offline_finished", "finished", "{:,.1f}"),
    ("deadlines_missed", "deadlines missed", "{:,.1f}"),
    ("preemptions", "cuts", "{:,.0f}"),
    ("utilization", "utilization", "{:.1%}"),
    ("serving_shortfall_min", "serving short (min)", "{:,.1f}"),
    ("guarantee_overcommit_min", "online overcommit (min)", "{:,.1f}"),
    ("solve_p90_ms", "solve p90 (ms, wall)", "{:,.0f}"),
    ("solve_nodes_p90", "nodes p90", "{:,.0f}"),
    ("fallback_rounds", "greedy-answered rounds", "{:,.1f}"),
)


@dataclass(frozen=True, slots=True)
class OnlineOutcome:
    job: str
    violation_rate: float
    accumulated_lag_min: float
    alone_violation_rate: float
    alone_accumulated_lag_min: float


@dataclass(frozen=True, slots=True)
class PoolMetrics:
    """One allocator's numbers, per job class.

    * **online** (guarantee): each job's KALE metrics (SLO violation rate: lag above 20
      minutes; accumulated lag, Eq. 11) from its engine run: in the pool for ``milp``
      and ``greedy``, alone with its fixed cap for the partitions;
      ``guarantee_overcommit_min``: minutes the online jobs held more than the pool has
      (their runs assumed the grant).
    * **serving**: ``serving_shortfall_min``, minutes below ``min_scale`` (must be 0).
    * **offline**: mean queueing time (arrival to the first start, as ModelArts and
      FaPES count it), mean waiting time (all minutes at 0 workers: the first wait and
      every wait after a preemption), mean completion time (arrival to finish), jobs
      finished, deadlines missed, cuts (times a job's count was lowered). A job
      unfinished (or never started) at the window's end counts to the end: the means
      are lower bounds then.
    * **pool**: utilization, the mean share of the capacity in use over the arrival
      window (the first ``arrival_window_h`` hours: while offline jobs keep arriving);
      solver time per round (p50, p90, max: wall clock, the only number that depends on
      the machine's load), the branch-and-bound nodes per MILP round (p90, max) and the
      rounds the MILP gave to the greedy rules (no plan close enough to optimal within
      its node limit).
    """

    allocator: str
    offline_queue_min: float
    offline_waiting_min: float
    offline_completion_min: float
    offline_finished: int
    offline_jobs: int
    deadlines_missed: int
    preemptions: int
    utilization: float
    serving_shortfall_min: float
    guarantee_overcommit_min: float
    online: tuple[OnlineOutcome, ...]
    solve_p50_ms: float
    solve_p90_ms: float
    solve_max_ms: float
    rounds: int
    fallback_rounds: int
    solve_nodes_p90: float = 0.0  # branch-and-bound nodes per MILP round
    solve_nodes_max: int = 0

    @property
    def online_violation_rate(self) -> float:
        return max((o.violation_rate for o in self.online), default=0.0)

    def as_dict(self) -> dict[str, object]:
        body = asdict(self)
        body["online"] = [asdict(o) for o in self.online]
        return body


def pool_metrics(run: PoolRun, inputs: PoolInputs) -> PoolMetrics:
    """The metrics of one allocator's run (module docstring)."""
    scenario = inputs.scenario
    window = max(1, min(inputs.minutes, int(scenario.offline.arrival_window_h * MIN_PER_H)))
    utilization = float(np.mean(run.occupied[:window])) / scenario.capacity_workers
    finished = [o for o in run.offline if o.finished]

    def mean_min(values: list[float]) -> float:
        return float(np.mean(values)) / MINUTE_S if values else 0.0

    solve = np.asarray(run.solve_ms) if run.solve_ms else np.zeros(1)
    nodes = np.asarray(run.solve_nodes) if run.solve_nodes else np.zeros(1)
    shared = run.allocator in SHARED
    online = tuple(
        OnlineOutcome(
            job=o.spec.name,
            violation_rate=(o.metrics_pool if shared else o.metrics_alone).violation_rate,
            accumulated_lag_min=(o.metrics_pool if shared else o.metrics_alone).accumulated_lag_min,
            alone_violation_rate=o.metrics_alone.violation_rate,
            alone_accumulated_lag_min=o.metrics_alone.accumulated_lag_min,
        )
        for o in inputs.online
    )
    return PoolMetrics(
        allocator=run.allocator,
        offline_queue_min=mean_min([o.queue_s for o in run.offline]),
        offline_waiting_min=mean_min([o.waiting_s for o in run.offline]),
        offline_completion_min=mean_min([o.completion_s for o in run.offline]),
        offline_finished=len(finished),
        offline_jobs=len(run.offline),
        deadlines_missed=sum(not o.deadline_met for o in run.offline),
        preemptions=sum(o.preemptions for o in run.offline),
        utilization=utilization,
        serving_shortfall_min=float(np.sum(run.serving_short > 0)),
        guarantee_overcommit_min=float(np.sum(run.overcommit > 0)),
        online=online,
        solve_p50_ms=percentile(solve, 50, empty=0.0),
        solve_p90_ms=percentile(solve, 90, empty=0.0),
        solve_max_ms=float(np.max(solve)),
        rounds=len(run.solve_ms),
        fallback_rounds=run.fallback_rounds,
        solve_nodes_p90=percentile(nodes, 90, empty=0.0),
        solve_nodes_max=int(np.max(nodes)),
    )


@dataclass(frozen=True, slots=True, eq=False)
class ScenarioReport:
    scenario: Scenario
    inputs: PoolInputs
    runs: dict[str, PoolRun]
    metrics: dict[str, PoolMetrics]

    def as_json(self) -> dict[str, object]:
        return {
            "scenario": self.scenario.name,
            "capacity_workers": self.scenario.capacity_workers,
            "allocators": {name: m.as_dict() for name, m in self.metrics.items()},
        }


def simulate_scenario(
    scenario: Scenario,
    *,
    milp: MilpSettings | None = None,
    progress: Callable[[str], None] | None = None,
) -> ScenarioReport:
    """Every allocator of ``scenario`` on the same inputs."""
    inputs = build_inputs(scenario, progress)
    runs: dict[str, PoolRun] = {}
    metrics: dict[str, PoolMetrics] = {}
    for allocator in scenario.allocators:
        if progress is not None:
            progress(f"allocating the pool with {allocator} over {scenario.days} day(s)")
        runs[allocator] = run_pool(inputs, allocator, milp=milp, progress=progress)
        metrics[allocator] = pool_metrics(runs[allocator], inputs)
    return ScenarioReport(scenario, inputs, runs, metrics)


def format_pool_table(report: ScenarioReport) -> str:
    """One line per allocator, then each online job in the pool against alone."""
    header = (
        f"{'allocator':<15} {'queue min':>9} {'wait min':>9} {'done min':>9} {'finished':>8} "
        f"{'late':>4} "
        f"{'cuts':>5} {'util':>6} {'serving short':>13} {'online viol':>11} "
        f"{'solve p90 ms':>12}"
    )
    lines = [header, "-" * len(header)]
    for m in report.metrics.values():
        lines.append(
            f"{m.allocator:<15} {m.offline_queue_min:>9.1f} {m.offline_waiting_min:>9.1f} "
            f"{m.offline_completion_min:>9.1f} "
            f"{m.offline_finished:>4}/{m.offline_jobs:<3} {m.deadlines_missed:>4} "
            f"{m.preemptions:>5} {m.utilization:>6.1%} {m.serving_shortfall_min:>9.0f} min "
            f"{m.online_violation_rate:>11.2%} {m.solve_p90_ms:>12.1f}"
        )
    for m in report.metrics.values():
        if m.fallback_rounds:
            lines.append(
                f"{m.allocator}: {m.fallback_rounds} of {m.rounds} rounds answered by the "
                "greedy rules (no plan within the MILP's time limit)"
            )
    lines.append("")
    lines.append(
        f"{'online job':<12} {'pool viol':>9} {'pool lag-min':>12} {'alone viol':>10} "
        f"{'alone lag-min':>13}"
    )
    first = next(iter(report.metrics.values()))
    for o in first.online:
        pooled = next((m for m in report.metrics.values() if m.allocator in SHARED), first)
        mine = next(x for x in pooled.online if x.job == o.job)
        lines.append(
            f"{o.job:<12} {mine.violation_rate:>9.2%} {mine.accumulated_lag_min:>12,.0f} "
            f"{o.alone_violation_rate:>10.2%} {o.alone_accumulated_lag_min:>13,.0f}"
        )
    hours = report.scenario.offline.arrival_window_h
    lines.append(f"\nutilization: over the first {hours:g} h (while offline jobs arrive)")
    return "\n".join(lines)


def summarize_pool(runs: Sequence[Mapping[str, PoolMetrics]]) -> dict[str, dict[str, Interval]]:
    """Per allocator, per metric of :data:`POOL_METRICS`: mean and 95 % interval over the
    runs (one mapping allocator -> metrics per seed)."""
    if not runs:
        raise ConfigError("summarize at least one run")
    return {
        allocator: {
            name: interval([float(getattr(run[allocator], name)) for run in runs])
            for name, _, _ in POOL_METRICS
        }
        for allocator in runs[0]
    }


def paired_difference(
    runs: Sequence[Mapping[str, PoolMetrics]], metric: str, first: str, second: str
) -> Interval:
    """``first``'s ``metric`` less ``second``'s, seed by seed, with its 95 % interval."""
    return interval(
        [float(getattr(r[first], metric)) - float(getattr(r[second], metric)) for r in runs]
    )
