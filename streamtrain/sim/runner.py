"""Running every policy on one trace: KALE Table 3 for any trace.

Owned here: :class:`SimSettings`, :func:`simulate` (trace in, :class:`SimReport` out),
the default throughput models and how a trace is fitted to them.

Assumptions, each a setting:

* **The job.** ``F`` is a default synchronous Eq. 6 model, M = 16,384 samples per step,
  θ = (0.02 s, 2.0 s, 0, 0.0005 s): a 20 ms fixed cost per step, 2 s of compute per
  global batch shared by the workers, 0.5 ms of coordination per worker, so F(1) ≈
  8.1k, F(24) ≈ 142k samples/s, peaking near w = 63 (``model="async"``: Eq. 9 with
  θ = (0.1, 0, 0.0005), near-linear). The job is scaled (F is linear in its batch size)
  so the trace's peak rate needs exactly ``peak_workers`` workers by Eq. 10: traces in
  any units work. One record is one sample.
* **Bounds.** ``max_workers`` defaults to ⌈7/6 · peak_workers⌉ (28 for 24, so Adequate
  holds KALE Table 3's 672 worker-hours a day); ``min_workers`` is 1.
* **Time.** The last ``simulate_days`` of the trace are replayed; everything before is
  history the policies see from the start (gaps as no traffic, as in the window).
  Every policy starts the window with no backlog at Eq. 10's count for the true rate of
  the first 10 minutes (Adequate at its fixed count).
* **What model-based policies know.** ``(workers, records/s)`` observations of the true
  F at 1..max workers, two each with 3 % Gaussian noise (KALE §4.2's profiling pairs).
* **Per-policy execution** (``shuffle=ShuffleMode.POLICY``, ``restart=RestartMode.POLICY``,
  :data:`POLICY_EXECUTION`): the baselines consume without shuffling and scale by
  pause-and-restart, as in KALE §4.4; KALE shuffles (§3.5) and pauses; streamtrain
  shuffles and scales two-phase. ``on`` / ``off`` and ``pause`` / ``two-phase`` force
  one mode on every policy.
* **Forecasts.** One forecaster for every forecasting policy (``forecaster``, a
  registry name; ``seasonal_naive`` by default, ``auto`` for the FEDformer-style model
  KALE uses), fitted on the history before the window, refitted once a simulated day,
  fed every observed step; its predictions (and its 0.8/0.9/0.95 quantiles, when it
  has them) are computed once and shared (:func:`~streamtrain.scale.policies.feed.precompute`).
  Each comes from the history up to its origin only.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError
from streamtrain.forecast.trace import Trace
from streamtrain.scale.models import ThroughputModel
from streamtrain.scale.policies import FORECASTING_POLICIES, POLICY_NAMES, ForecastFeed, make_policy
from streamtrain.scale.policies.feed import Forecast, precompute
from streamtrain.scale.policies.feed import forecaster_factory as named_factory
from streamtrain.scale.policy import ForecasterFactory, Policy, PolicyContext
from streamtrain.sim.engine import Run, Workload, run_policy
from streamtrain.sim.execution import (
    Execution,
    RestartCosts,
    RestartMode,
    ShuffleMode,
    action_phases,
)
from streamtrain.sim.metrics import SLO_LAG_S, PolicyMetrics, compute_metrics
from streamtrain.sim.workload import SkewSettings, partition_arrivals, partition_shares
from streamtrain.units import DAY_S, MINUTE_S

__all__ = [
    "DEFAULT_MODELS",
    "POLICY_EXECUTION",
    "QUANTILE_LEVELS",
    "SimReport",
    "SimSettings",
    "initial_workers",
    "prepare",
    "scaled_model",
    "simulate",
]

log = logging.getLogger(__name__)
FloatArray = NDArray[np.float64]

QUANTILE_LEVELS = (0.8, 0.9, 0.95)
# Every policy starts at Eq. 10's count for the true rate of the window's first minutes.
_START_RATE_S = 10 * MINUTE_S
# The profiling pairs' noise has its own random stream, apart from the workload's.
_PROFILING_SEED_OFFSET = 7_919
DEFAULT_MODELS: dict[str, ThroughputModel] = {
    "sync": ThroughputModel("sync", (0.02, 2.0, 0.0, 0.0005), batch_size=16_384.0),
    "async": ThroughputModel("async", (0.1, 0.0, 0.0005), batch_size=256.0),
}
# (shuffle, two-phase) per policy, when the settings leave it to the policy.
POLICY_EXECUTION: dict[str, tuple[bool, bool]] = {
    "adequate": (False, False),
    "hpa": (False, False),
    "autopilot": (False, False),
    "madu": (False, False),
    "kale": (True, False),
    "streamtrain": (True, True),
}


@dataclass(frozen=True, slots=True)
class SimSettings:
    policies: tuple[str, ...] = POLICY_NAMES
    peak_workers: int = 24
    max_workers: int | None = None
    simulate_days: int = 1
    seed: int = 0
    partitions: int = 800
    skew_sigma: float = 0.5
    tick_s: int = 15
    shuffle: ShuffleMode = ShuffleMode.POLICY
    restart: RestartMode = RestartMode.POLICY
    restart_s: float = 600.0
    model: str = "sync"
    forecaster: str = "seasonal_naive"
    slo_lag_s: float = SLO_LAG_S
    policy_settings: dict[str, dict[str, object]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = [p for p in self.policies if p not in POLICY_NAMES]
        if unknown or not self.policies:
            raise ConfigError(
                f"unknown policies {', '.join(unknown) or '(none given)'}; "
                f"use some of {', '.join(POLICY_NAMES)}"
            )
        if self.peak_workers < 2:
            raise ConfigError(f"--peak-workers must be at least 2, got {self.peak_workers}")
        if self.max_workers is not None and self.max_workers < self.peak_workers:
            raise ConfigError("max workers cannot be below peak workers")
        if self.simulate_days < 1:
            raise ConfigError(f"simulate at least one day, got {self.simulate_days}")
        try:  # plain strings are accepted and kept as the modes they name
            object.__setattr__(self, "shuffle", ShuffleMode(self.shuffle))
        except ValueError:
            raise ConfigError(f"shuffle must be policy, on or off, got {self.shuffle!r}") from None
        try:
            object.__setattr__(self, "restart", RestartMode(self.restart))
        except ValueError:
            raise ConfigError(
                f"restart must be policy, pause or two-phase, got {self.restart!r}"
            ) from None
        if self.model not in DEFAULT_MODELS:
            raise ConfigError(f"model must be one of {', '.join(DEFAULT_MODELS)}")
        named_factory(self.forecaster)  # a ConfigError for unknown names

    @property
    def worker_cap(self) -> int:
        return self.max_workers or math.ceil(self.peak_workers * 7 / 6)

    def execution(self, policy: str) -> Execution:
        shuffle, two_phase = POLICY_EXECUTION[policy]
        if self.shuffle != ShuffleMode.POLICY:
            shuffle = self.shuffle == ShuffleMode.ON
        if self.restart != RestartMode.POLICY:
            two_phase = self.restart == RestartMode.TWO_PHASE
        return Execution(shuffle, two_phase, RestartCosts.with_restart_s(self.restart_s))


@dataclass(frozen=True, slots=True, eq=False)
class SimReport:
    trace_name: str
    start_s: float  # epoch seconds of the simulated window
    step_s: int
    rates_records_per_s: FloatArray  # the window, gaps as 0
    model: ThroughputModel  # the scaled true F
    max_workers: int
    runs: dict[str, Run]
    metrics: dict[str, PolicyMetrics]

    def as_json(self) -> dict[str, object]:
        return {"policies": {name: m.as_dict() for name, m in self.metrics.items()}}


def scaled_model(
    base: ThroughputModel, peak_records_per_s: float, peak_workers: int
) -> ThroughputModel:
    """``base`` with its batch size scaled so that Eq. 10 for ``peak_records_per_s``
    gives exactly ``peak_workers``: the peak sits midway between F(n - 1) and F(n)."""
    if peak_records_per_s <= 0:
        raise ConfigError("the trace has no traffic to scale the job to")
    below, at = base.samples_per_s([peak_workers - 1, peak_workers])
    if not at > below:
        raise ConfigError(f"the {base.kind} model does not grow up to {peak_workers} workers")
    factor = peak_records_per_s / ((below + at) / 2)
    return ThroughputModel(base.kind, base.theta, base.batch_size * factor)


def _observations(
    model: ThroughputModel, max_workers: int, seed: int
) -> tuple[tuple[float, float], ...]:
    rng = np.random.default_rng(seed + _PROFILING_SEED_OFFSET)
    workers = np.repeat(np.arange(1, max_workers + 1, dtype=np.float64), 2)
    rates = model.samples_per_s(workers) * rng.normal(1.0, 0.03, workers.size)
    return tuple((float(w), float(max(r, 1e-9))) for w, r in zip(workers, rates, strict=True))


def prepare(trace: Trace, settings: SimSettings) -> Workload:
    """The workload every policy replays: the window, its history, the partition
    arrivals and the scaled true F (see the module docstring)."""
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
    history, rates = values[: len(trace) - window], values[len(trace) - window :]
    peak = float(values.max())
    max_workers = settings.worker_cap
    model = scaled_model(DEFAULT_MODELS[settings.model], peak, settings.peak_workers)
    skew = SkewSettings(settings.partitions, settings.skew_sigma, seed=settings.seed)
    per_step, cumulative = partition_arrivals(rates, partition_shares(window, step_s, skew), step_s)
    workload = Workload(
        rates_records_per_s=rates,
        history_records_per_s=history,
        step_s=step_s,
        start_s=trace.start_s + (len(trace) - window) * step_s,
        per_step=per_step,
        cumulative=cumulative,
        model=model,
        max_workers=max_workers,
        tick_s=settings.tick_s,
        assignment_seed=settings.seed,
    )
    return workload


def initial_workers(workload: Workload) -> int:
    """Eq. 10 with the true F for the true rate of the window's first 10 minutes."""
    first = float(workload.rates_records_per_s[: max(1, _START_RATE_S // workload.step_s)].mean())
    enough = np.flatnonzero(workload.capacity_records_per_s[1:] > first)
    return int(enough[0]) + 1 if enough.size else workload.max_workers


def simulate(
    trace: Trace,
    settings: SimSettings | None = None,
    *,
    forecaster_factory: ForecasterFactory | None = None,
    progress: Callable[[str], None] | None = None,
) -> SimReport:
    """Replay the last ``settings.simulate_days`` of ``trace`` against each policy."""
    settings = settings or SimSettings()
    workload = prepare(trace, settings)
    step_s, max_workers, model = workload.step_s, workload.max_workers, workload.model
    history, rates = workload.history_records_per_s, workload.rates_records_per_s
    window = rates.shape[0]
    observations = _observations(model, max_workers, settings.seed)
    factory = forecaster_factory or named_factory(settings.forecaster, step_s=step_s)
    cache: dict[int, Forecast] = {}
    if FORECASTING_POLICIES & set(settings.policies):
        if progress is not None:
            progress(f"forecasting {window} steps with {settings.forecaster}")
        seen = np.concatenate([history, rates])
        first = max(1, history.shape[0])
        cache = precompute(
            factory,
            seen,
            first,
            history.shape[0] + window,
            refit_every_steps=DAY_S // step_s,
            levels=QUANTILE_LEVELS,
            progress=progress,
        )
    runs: dict[str, Run] = {}
    metrics: dict[str, PolicyMetrics] = {}
    for name in settings.policies:
        execution = settings.execution(name)
        prep_s, pause_s = action_phases(1, 2, execution)
        context = PolicyContext(
            min_workers=1,
            max_workers=max_workers,
            step_s=step_s,
            throughput_observations=observations,
            model_kind=settings.model,
            forecaster_factory=factory,
            action_pause_s=pause_s,
            scale_up_prep_s=prep_s,
        )
        extra = dict(settings.policy_settings.get(name, {}))
        if name in FORECASTING_POLICIES:
            extra.setdefault("feed", ForecastFeed(factory, cache=cache))
        policy: Policy = make_policy(name, context, **extra)
        initial = getattr(policy, "initial_workers", None) or initial_workers(workload)
        if progress is not None:
            progress(f"simulating {name} over {settings.simulate_days} day(s)")
        run = run_policy(workload, policy, execution, initial_workers=int(initial))
        runs[name] = run
        metrics[name] = compute_metrics(run, slo_lag_s=settings.slo_lag_s)
    return SimReport(
        trace_name=trace.name,
        start_s=workload.start_s,
        step_s=step_s,
        rates_records_per_s=rates,
        model=model,
        max_workers=max_workers,
        runs=runs,
        metrics=metrics,
    )
