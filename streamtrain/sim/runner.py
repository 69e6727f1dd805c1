"""Running a comparison: a trace in, KALE Table 3 per seed and with intervals out.

Owned here: :class:`Window` (the part of a trace that is replayed and the history
before it), :func:`prepare` (one seed's :class:`~streamtrain.sim.engine.Workload` on its
own :class:`~streamtrain.sim.truth.JobTruth`), :func:`run_variants` (every row of a
comparison over every seed, spread over processes; with fewer seeds than keep the
processes busy, each seed's rows in slices), :func:`window_forecasts` (the
predictions a comparison shares) and :func:`simulate` (the policies
of :class:`~streamtrain.sim.settings.SimSettings`, as a :class:`SimReport`).

* **Time.** The last ``simulate_days`` of the trace are replayed; everything before is
  history the policies see from the start (gaps as no traffic, as in the window).
  Every policy starts the window with no backlog at Eq. 10's count for the true rate of
  the first 10 minutes (Adequate at its fixed count).
* **What policies are given** (:class:`~streamtrain.scale.policy.PolicyContext`): the
  pool's bounds, the profiled ``(workers, records/s)`` points of this seed's pool
  (:meth:`~streamtrain.sim.truth.JobTruth.profile`), the Eq. 6 family for a sync job,
  and the preparation and pause of a typical action in the comparison's mode: the same
  for every policy, replaced by the measured pause once an action has finished.
* **Forecasts.** One forecaster for every forecasting policy, fitted on the history
  before the window, refitted once a simulated day, fed every observed step; its
  predictions (and its quantiles at the levels the comparison's policies plan on, when
  it has them) are computed once per trace and shared by every policy and seed
  (:func:`~streamtrain.scale.policies.feed.precompute`). Each comes from the history up
  to its origin only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError
from streamtrain.forecast.trace import Trace
from streamtrain.scale.policies import FORECASTING_POLICIES, ForecastFeed, make_policy
from streamtrain.scale.policies.feed import Forecast, precompute
from streamtrain.scale.policies.feed import forecaster_factory as named_factory
from streamtrain.scale.policy import ForecasterFactory, Policy, PolicyContext
from streamtrain.sim.engine import Run, Workload, run_policy
from streamtrain.sim.execution import action_phases
from streamtrain.sim.levels import calibrates, check_levels, shared_levels
from streamtrain.sim.metrics import METRIC_NAMES, PolicyMetrics, compute_metrics
from streamtrain.sim.parallel import map_seeds, nice_beside
from streamtrain.sim.settings import SimSettings, Variant
from streamtrain.sim.stats import Interval, summarize
from streamtrain.sim.truth import JobTruth, draw_truth
from streamtrain.sim.workload import SkewSettings, partition_arrivals, partition_shares
from streamtrain.units import DAY_S, MINUTE_S

__all__ = [
    "SeedResult",
    "SimReport",
    "Window",
    "initial_workers",
    "prepare",
    "run_variants",
    "simulate",
    "window_forecasts",
    "window_of",
]

FloatArray = NDArray[np.float64]
Progress = Callable[[str], None]

# Every policy starts at Eq. 10's count for the true rate of the window's first minutes.
_START_RATE_S = 10 * MINUTE_S


@dataclass(frozen=True, slots=True, eq=False)
class Window:
    """The replayed days of a trace (``rates``) and the history before them, gaps as 0."""

    trace_name: str
    start_s: float  # epoch seconds of the window's first step
    step_s: int
    history_records_per_s: FloatArray
    rates_records_per_s: FloatArray


def window_of(trace: Trace, settings: SimSettings) -> Window:
    """The last ``settings.simulate_days`` of ``trace`` and everything before them."""
    step_s = trace.step_s
    if DAY_S % step_s:
        raise ConfigError(f"a day must be a whole number of {step_s}-s trace steps")
    window = settings.simulate_days * DAY_S // step_s
    if len(trace) < window:
        raise ConfigError(
            f"the trace covers {len(trace) * step_s / DAY_S:.2f} days; "
            f"cannot simulate its last {settings.simulate_days}"
        )
    values = trace.zero_filled()
    if not float(values.max()) > 0:
        raise ConfigError("the trace has no traffic to size the job to")
    return Window(
        trace_name=trace.name,
        start_s=trace.start_s + (len(trace) - window) * step_s,
        step_s=step_s,
        history_records_per_s=values[: len(trace) - window],
        rates_records_per_s=values[len(trace) - window :],
    )


def prepare(window: Window, settings: SimSettings, seed: int) -> tuple[Workload, JobTruth]:
    """Seed ``seed``'s workload: the partition arrivals and the true job it runs on."""
    rates = window.rates_records_per_s
    peak = float(max(rates.max(), window.history_records_per_s.max(initial=0.0)))
    truth = draw_truth(
        settings.truth,
        max_workers=settings.worker_cap,
        peak_records_per_s=peak,
        peak_workers=settings.peak_workers,
        seed=seed,
    )
    skew = SkewSettings(settings.partitions, settings.skew_sigma, seed=seed)
    shares = partition_shares(rates.shape[0], window.step_s, skew)
    per_step, cumulative = partition_arrivals(rates, shares, window.step_s, out=shares)
    workload = Workload(
        rates_records_per_s=rates,
        history_records_per_s=window.history_records_per_s,
        step_s=window.step_s,
        start_s=window.start_s,
        per_step=per_step,
        cumulative=cumulative,
        model=truth,
        max_workers=settings.worker_cap,
        tick_s=settings.tick_s,
        assignment_seed=seed,
    )
    return workload, truth


def initial_workers(workload: Workload) -> int:
    """Eq. 10 with the true F for the true rate of the window's first 10 minutes."""
    first = float(workload.rates_records_per_s[: max(1, _START_RATE_S // workload.step_s)].mean())
    enough = np.flatnonzero(workload.capacity_records_per_s[1:] > first)
    return int(enough[0]) + 1 if enough.size else workload.max_workers


def forecasts_for(
    window: Window,
    settings: SimSettings,
    factory: ForecasterFactory,
    progress: Progress | None = None,
    *,
    levels: Sequence[float],
) -> dict[int, Forecast]:
    """Every prediction the window's replay asks for (module docstring), with the
    model's quantiles at ``levels`` (:func:`shared_levels` of the policies replayed)."""
    history, rates = window.history_records_per_s, window.rates_records_per_s
    if progress is not None:
        progress(
            f"forecasting {rates.shape[0]} steps of {window.trace_name} with {settings.forecaster}"
        )
    seen = np.concatenate([history, rates])
    return precompute(
        factory,
        seen,
        max(1, history.shape[0]),
        history.shape[0] + rates.shape[0],
        refit_every_steps=DAY_S // window.step_s,
        levels=levels,
        progress=progress,
    )


@dataclass(frozen=True, slots=True, eq=False)
class SeedResult:
    seed: int
    metrics: dict[str, PolicyMetrics]  # by variant label
    runs: dict[str, Run] | None  # kept for the first seed only (plots)


@dataclass(frozen=True, slots=True, eq=False)
class _Comparison:
    """What every seed of a comparison shares (sent once to each process)."""

    window: Window
    settings: SimSettings
    variants: tuple[Variant, ...]
    cache: dict[int, Forecast]
    keep_runs_of: int
    factory: ForecasterFactory | None = field(default=None, repr=False)
    # Task k runs seed tasks[k][0] on the variants tasks[k][1] (indices into variants).
    tasks: tuple[tuple[int, tuple[int, ...]], ...] = ()


def _policy(
    variant: Variant, context: PolicyContext, comparison: _Comparison, factory: ForecasterFactory
) -> Policy:
    extra = dict(variant.settings)
    if variant.policy in FORECASTING_POLICIES:
        calibrate = calibrates(variant, comparison.cache)
        feed = ForecastFeed(factory, cache=comparison.cache, calibrate=calibrate)
        extra.setdefault("feed", feed)
    return make_policy(variant.policy, context, **extra)


def run_seed(
    comparison: _Comparison, seed: int, variants: Sequence[Variant] | None = None
) -> SeedResult:
    """Every variant of ``comparison`` (or ``variants``) in run ``seed``."""
    settings, window = comparison.settings, comparison.window
    factory = comparison.factory or named_factory(settings.forecaster, step_s=window.step_s)
    workload, truth = prepare(window, settings, seed)
    profiled = truth.profile(seed)
    start = initial_workers(workload)
    metrics: dict[str, PolicyMetrics] = {}
    runs: dict[str, Run] = {}
    for variant in comparison.variants if variants is None else variants:
        execution = settings.execution(variant, seed)
        typical = max(1, settings.peak_workers // 2)
        prep_s, pause_s = action_phases(typical, typical + 1, execution)
        context = PolicyContext(
            min_workers=1,
            max_workers=workload.max_workers,
            step_s=window.step_s,
            throughput_observations=profiled,
            model_kind=settings.model,
            forecaster_factory=factory,
            action_pause_s=pause_s,
            scale_up_prep_s=prep_s,
        )
        policy = _policy(variant, context, comparison, factory)
        first = getattr(policy, "initial_workers", None) or start
        run = run_policy(workload, policy, execution, initial_workers=int(first))
        metrics[variant.label] = compute_metrics(
            run, slo_lag_s=settings.slo_lag_s, shuffle_costs=settings.shuffle_costs
        )
        runs[variant.label] = run
    return SeedResult(seed, metrics, runs if seed == comparison.keep_runs_of else None)


def _run_task(comparison: _Comparison, task: int) -> SeedResult:
    seed, indices = comparison.tasks[task]
    return run_seed(comparison, seed, [comparison.variants[k] for k in indices])


def _tasks(
    seeds: Sequence[int], variants: int, jobs: int
) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """Every seed's variants in as few slices as keep ``jobs`` processes busy: one per
    seed when there are at least twice as many seeds as processes (the common case),
    else each seed's variants split so that the processes get an equal share (3 seeds of
    10 tuning variants on 2 processes: 6 tasks of 5, not 2 seeds on one process and 1
    on the other). A slice costs its seed's workload once more."""
    slices = 1
    if len(seeds) < 2 * jobs:
        slices = min(variants, -(-2 * jobs // len(seeds)))
    bounds = [round(k * variants / slices) for k in range(slices + 1)]
    return tuple(
        (seed, tuple(range(bounds[k], bounds[k + 1]))) for seed in seeds for k in range(slices)
    )


def window_forecasts(
    window: Window,
    settings: SimSettings,
    variants: Sequence[Variant],
    *,
    forecaster_factory: ForecasterFactory | None = None,
    progress: Progress | None = None,
    levels: Sequence[float] | None = None,
) -> dict[int, Forecast]:
    """The forecasts a comparison of ``variants`` on ``window`` shares (empty when none
    of them forecasts), with the quantiles at ``levels`` (default: the levels
    ``variants`` plan on; more when the variants will change, e.g. by tuning)."""
    if not FORECASTING_POLICIES & {v.policy for v in variants}:
        return {}
    factory = forecaster_factory or named_factory(settings.forecaster, step_s=window.step_s)
    levels = shared_levels(variants) if levels is None else levels
    return forecasts_for(window, settings, factory, progress, levels=levels)


def run_variants(
    window: Window,
    settings: SimSettings,
    variants: Sequence[Variant],
    *,
    seeds: Sequence[int] | None = None,
    forecaster_factory: ForecasterFactory | None = None,
    cache: dict[int, Forecast] | Future[dict[int, Forecast]] | None = None,
    progress: Progress | None = None,
    nice: int = 0,
) -> list[SeedResult]:
    """Every variant over every seed (``settings.seed_list`` unless given), in
    ``settings.jobs`` processes (one when a custom forecaster factory is given: it
    cannot be sent to another process), ``nice`` nicer than this one when they run in
    others (:func:`~streamtrain.sim.parallel.map_seeds`). ``cache`` may be a future of the
    forecasts still being computed: the variants that do not forecast run meanwhile, at
    :data:`~streamtrain.sim.parallel.BACKGROUND_NICE` at least (the forecasts come
    first: the others wait for them), the others once it is done (the same results:
    each row of a seed is replayed on its own)."""
    seeds = tuple(settings.seed_list if seeds is None else seeds)
    labels = [v.label for v in variants]
    if len(set(labels)) != len(labels) or not variants:
        raise ConfigError(f"need distinct, non-empty variant labels, got {labels}")
    if not seeds:
        raise ConfigError("run at least one seed")
    if isinstance(cache, Future):
        waiting = {v.label for v in variants if v.policy in FORECASTING_POLICIES}
        beside = nice_beside(cache, nice)
        groups: list[tuple[list[Variant], dict[int, Forecast] | None, int]] = [
            ([v for v in variants if v.label not in waiting], {}, beside),
            ([v for v in variants if v.label in waiting], None, nice),
        ]
        done = [
            run_variants(
                window,
                settings,
                group,
                seeds=seeds,
                forecaster_factory=forecaster_factory,
                cache=cache.result() if given is None else given,
                progress=progress,
                nice=level,
            )
            for group, given, level in groups
            if group
        ]
        return _joined(variants, done)
    if cache is None:
        cache = window_forecasts(
            window, settings, variants, forecaster_factory=forecaster_factory, progress=progress
        )
    check_levels(cache, variants)
    jobs = 1 if forecaster_factory is not None else settings.jobs
    tasks = _tasks(seeds, len(variants), jobs) if jobs > 1 else ()
    comparison = _Comparison(
        window, settings, tuple(variants), cache, seeds[0], forecaster_factory, tasks
    )
    processes = min(jobs, max(len(seeds), len(tasks)))
    if progress is not None:
        progress(
            f"simulating {len(variants)} variant(s) x {len(seeds)} seed(s) over "
            f"{window.rates_records_per_s.shape[0] * window.step_s / DAY_S:g} day(s) "
            f"in {processes} process(es)" + (f" at nice +{nice}" if nice and processes > 1 else "")
        )
    if len(tasks) <= len(seeds):
        return map_seeds(run_seed, comparison, seeds, jobs=jobs, progress=progress, nice=nice)
    parts = map_seeds(
        _run_task,
        comparison,
        range(len(tasks)),
        jobs=jobs,
        progress=progress,
        describe=lambda task: f"seed {tasks[task][0]} part",
        nice=nice,
    )
    results: list[SeedResult] = []
    for seed in seeds:
        mine = [part for (owner, _), part in zip(tasks, parts, strict=True) if owner == seed]
        metrics = {label: m for part in mine for label, m in part.metrics.items()}
        runs = {label: r for part in mine for label, r in (part.runs or {}).items()}
        results.append(SeedResult(seed, metrics, runs or None))
    return results


def _joined(variants: Sequence[Variant], parts: Sequence[list[SeedResult]]) -> list[SeedResult]:
    """Per seed, the rows of every part (each over the same seeds), in ``variants``'s
    order."""
    results: list[SeedResult] = []
    for k in range(len(parts[0])):
        rows = [part[k] for part in parts]
        metrics = {label: m for row in rows for label, m in row.metrics.items()}
        runs = {label: r for row in rows for label, r in (row.runs or {}).items()}
        results.append(
            SeedResult(
                rows[0].seed,
                {v.label: metrics[v.label] for v in variants},
                {v.label: runs[v.label] for v in variants if v.label in runs} or None,
            )
        )
    return results


@dataclass(frozen=True, slots=True, eq=False)
class SimReport:
    window: Window
    settings: SimSettings
    max_workers: int
    results: tuple[SeedResult, ...]
    policy_settings: dict[str, dict[str, object]]

    @property
    def trace_name(self) -> str:
        return self.window.trace_name

    @property
    def start_s(self) -> float:
        return self.window.start_s

    @property
    def step_s(self) -> int:
        return self.window.step_s

    @property
    def rates_records_per_s(self) -> FloatArray:
        return self.window.rates_records_per_s

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(r.seed for r in self.results)

    @property
    def runs(self) -> dict[str, Run]:
        """The first seed's runs."""
        return self.results[0].runs or {}

    @property
    def metrics(self) -> dict[str, PolicyMetrics]:
        """The first seed's metrics."""
        return self.results[0].metrics

    @property
    def per_seed(self) -> dict[str, list[PolicyMetrics]]:
        labels = list(self.results[0].metrics)
        return {label: [r.metrics[label] for r in self.results] for label in labels}

    def summary(self) -> dict[str, dict[str, Interval]]:
        """Per policy, per metric: mean and 95 % interval over the seeds."""
        return summarize(self.per_seed)

    def as_json(self) -> dict[str, object]:
        summary = self.summary()

        def clean(x: float) -> float | None:
            return None if math.isnan(x) else x

        return {
            "trace": self.trace_name,
            "seeds": len(self.results),
            "tools": self.settings.describe_tools(),
            "policies": {
                name: {m: cells[m].mean for m in METRIC_NAMES} for name, cells in summary.items()
            },
            "ci95": {
                name: {m: clean(cells[m].half_width) for m in METRIC_NAMES}
                for name, cells in summary.items()
            },
            "policy_settings": self.policy_settings,
        }


def simulate(
    trace: Trace,
    settings: SimSettings | None = None,
    *,
    forecaster_factory: ForecasterFactory | None = None,
    cache: dict[int, Forecast] | Future[dict[int, Forecast]] | None = None,
    progress: Progress | None = None,
) -> SimReport:
    """Replay the last ``settings.simulate_days`` of ``trace`` against each policy, once
    per seed (``cache``: the window's forecasts, when already computed, e.g. by
    :func:`window_forecasts` while the baselines were tuned, or a future of them:
    :func:`run_variants`)."""
    settings = settings or SimSettings()
    window = window_of(trace, settings)
    results = run_variants(
        window,
        settings,
        settings.variants(),
        forecaster_factory=forecaster_factory,
        cache=cache,
        progress=progress,
    )
    return SimReport(
        window=window,
        settings=settings,
        max_workers=settings.worker_cap,
        results=tuple(results),
        policy_settings={p: dict(settings.policy_settings.get(p, {})) for p in settings.policies},
    )
