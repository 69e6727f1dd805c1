"""What every allocator of a multi-job scenario replays: built once, shared by all.

Owned here: :func:`build_inputs` turns a :class:`~streamtrain.sim.scenario.Scenario` into
:class:`PoolInputs`, on a one-minute grid over the scenario's ``days``:

* **Online jobs** (guarantee class): each is replayed by the existing engine
  (:func:`streamtrain.sim.runner.simulate`, its own trace, policy and partitions) twice:
  with its cap in the pool and with its fixed cap alone (what a static partition gives
  it). A run's workers held per 15-s tick become a per-minute maximum. Their planners'
  wanted counts for the allocator's horizon are KALE Eq. 10 on a seasonal-naive
  forecast (the same minutes a day earlier; the history before the window is known)
  with the job's throughput model, never less than what the job holds.
* **Serving**: ``min_scale`` per minute from its trace, and its forecast the same way
  (the same minutes a day earlier).
* **Offline jobs**: :func:`~streamtrain.sim.scenario.offline_jobs`.

The online jobs' runs do not depend on the offline jobs: guarantee jobs are served
first. Whether the pool could in fact hold them is measured by the simulation
(``guarantee_overcommit_min``); where it could not, their metrics assumed the grant.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError
from streamtrain.forecast.series import make_trace
from streamtrain.forecast.trace import Trace, load_trace
from streamtrain.scale.models import ThroughputModel, fit
from streamtrain.scale.plan import basic_plan
from streamtrain.sim.metrics import PolicyMetrics
from streamtrain.sim.runner import prepare, simulate, window_of
from streamtrain.sim.scenario import OfflineJob, OnlineSpec, Scenario, ServingSpec, offline_jobs
from streamtrain.sim.settings import SimSettings
from streamtrain.units import DAY_S, MINUTE_S

__all__ = ["OnlineInputs", "PoolInputs", "build_inputs", "window_max"]

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]
_HISTORY_DAYS = 7  # before the window: what forecasts (and policies) learn from


@dataclass(frozen=True, slots=True, eq=False)
class OnlineInputs:
    spec: OnlineSpec
    model: ThroughputModel  # the job's true F (records/s), scaled to its trace
    rates_records_per_s: FloatArray  # per minute: a day before the window, then the window
    held_pool: IntArray  # workers held per minute, capped by its pool cap
    held_alone: IntArray  # the same, alone with its fixed cap
    metrics_pool: PolicyMetrics
    metrics_alone: PolicyMetrics

    def wanted(self, minute: int, steps: int, step_min: int, held_now: int) -> tuple[int, ...]:
        """The planner's wanted counts for ``steps`` plan steps from ``minute`` (Eq. 10
        on a seasonal-naive forecast: the same minutes a day earlier)."""
        loads = [
            float(window_max(self.rates_records_per_s, minute + k * step_min, step_min))
            for k in range(steps)
        ]
        plan = basic_plan(self.model, loads, max_workers=self.spec.pool_cap).workers
        return (max(plan[0], held_now), *plan[1:])


@dataclass(frozen=True, slots=True, eq=False)
class PoolInputs:
    scenario: Scenario
    minutes: int
    online: tuple[OnlineInputs, ...]
    serving_min_scale: IntArray  # per minute: a day before the window, then the window
    offline: tuple[OfflineJob, ...]

    def serving_need(self, minute: int) -> int:
        return int(self.serving_min_scale[DAY_S // MINUTE_S + minute])

    def serving_forecast(self, minute: int, steps: int, step_min: int) -> tuple[int, ...]:
        """``min_scale`` for ``steps`` plan steps: the same minutes a day earlier, never
        less than now for the first step."""
        ahead = [
            int(window_max(self.serving_min_scale, minute + k * step_min, step_min))
            for k in range(steps)
        ]
        return (max(ahead[0], self.serving_need(minute)), *ahead[1:])


def window_max(series: NDArray[np.generic], minute: int, width: int) -> float:
    """Max of ``series`` over ``[minute, minute + width)`` of the day *before* (the series
    starts a day before the window)."""
    start = max(0, minute)
    return float(np.max(series[start : start + max(1, width)]))


def _trace(spec: OnlineSpec | ServingSpec, days: int) -> Trace:
    if spec.shape is None:
        return load_trace(str(spec.trace), step_s=MINUTE_S)
    return make_trace(spec.shape, days + _HISTORY_DAYS, seed=spec.seed, step_s=MINUTE_S)


def _per_minute(held: NDArray[np.int64], tick_s: int) -> IntArray:
    per = MINUTE_S // tick_s
    minutes = held.shape[0] // per
    result: IntArray = held[: minutes * per].reshape(minutes, per).max(axis=1).astype(np.int64)
    return result


def _online(spec: OnlineSpec, scenario: Scenario) -> OnlineInputs:
    trace = _trace(spec, scenario.days)
    runs = {}
    metrics = {}
    for label, cap in (("pool", spec.pool_cap), ("alone", spec.alone_cap)):
        settings = SimSettings(
            policies=(spec.policy,),
            peak_workers=spec.peak_workers,
            max_workers=cap,
            simulate_days=scenario.days,
            seed=scenario.seed,
            partitions=scenario.partitions,
        )
        report = simulate(trace, settings)
        run = report.runs[spec.policy]
        runs[label] = _per_minute(run.workers, run.tick_s)
        metrics[label] = report.metrics[spec.policy]
    settings = SimSettings(
        peak_workers=spec.peak_workers, simulate_days=scenario.days, partitions=1
    )
    window = window_of(trace, settings)
    _, truth = prepare(window, settings, scenario.seed)
    # The pool plans with Eq. 6 fitted to the job's true F (the simulator's ground truth,
    # KALE Eq. 4 with stragglers) at every worker count.
    counts = np.arange(1, truth.max_workers + 1, dtype=np.float64)
    model = fit(settings.model, counts, truth.capacity_records_per_s[1:])
    day = DAY_S // MINUTE_S
    history = window.history_records_per_s
    if history.shape[0] < day:
        raise ConfigError(f"online job {spec.name}: its trace needs a day of history")
    rates = np.concatenate([history[-day:], window.rates_records_per_s])
    return OnlineInputs(
        spec,
        model,
        rates,
        runs["pool"],
        runs["alone"],
        metrics["pool"],
        metrics["alone"],
    )


def _serving(spec: ServingSpec, days: int) -> IntArray:
    values = _trace(spec, days).zero_filled()
    window = (days + 1) * DAY_S // MINUTE_S
    if values.shape[0] < window:
        raise ConfigError(f"serving {spec.name}: its trace covers less than {days + 1} days")
    values = values[-window:]
    peak = float(values.max())
    if peak <= 0:
        raise ConfigError(f"serving {spec.name}: its trace has no traffic")
    need = np.ceil(spec.peak_workers * values / peak).astype(np.int64)
    top = spec.max_workers or spec.peak_workers
    return np.clip(need, spec.min_workers, top)


def build_inputs(scenario: Scenario, progress: Callable[[str], None] | None = None) -> PoolInputs:
    """Everything the allocators replay (module docstring)."""
    # the cheap checks first: a bad serving trace or offline job fails before the replays
    serving = _serving(scenario.serving, scenario.days)
    jobs = offline_jobs(scenario.offline)
    if any(math.isinf(j.deadline_s) for j in jobs):
        raise ConfigError("offline deadlines must be finite")
    online = []
    for spec in scenario.online:
        if progress is not None:
            progress(f"replaying online job {spec.name} ({spec.policy}) alone and in the pool")
        online.append(_online(spec, scenario))
    minutes = scenario.days * DAY_S // MINUTE_S
    return PoolInputs(scenario, minutes, tuple(online), serving, jobs)
