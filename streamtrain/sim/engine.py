"""The simulator's core: one policy, one traffic window, tick by tick, vectorized over
partitions.

Owned here: :class:`Workload` (what every policy replays: the window's rates, the
history before it, per-partition arrivals and their cumulative sums, the true
throughput model) and :func:`run_policy`, which returns a :class:`Run` (per-tick
series and the actions taken).

The model, per tick of ``tick_s`` seconds (15 s by default, HPA's sync period):

1. **Decide.** When the tick is a multiple of the policy's decision interval (rounded
   to ticks), the policy gets an :class:`~streamtrain.scale.policy.Observation` built
   from the end of the previous tick: the complete arrival steps so far (history plus
   window, never the current step), the measured max lag and backlog, utilization
   over the last ``metrics_window_s``, the measured training speed per worker, and the
   pending action. A decision to a different count starts an action unless one is in
   progress (decisions during an action are dropped; the policy sees ``pending``).
2. **Act.** An action's phases come from :func:`~streamtrain.sim.execution.action_phases`,
   rounded up to whole ticks: during ``prep`` the old workers train, during ``pause``
   nobody does, then the target count trains. The job holds ``max(from, to)`` workers
   for the whole action.
3. **Arrive.** Each partition receives its share of the step's rate, uniformly in time.
4. **Consume.** ``w`` training workers consume ``F(w)·tick_s`` records (``F`` the true
   throughput model, records/s). Shuffle on: that capacity serves the whole backlog,
   each partition drained in proportion to its backlog (an oldest-first job-wide
   queue, as KALE's global shuffling approximates). Shuffle off: partitions are
   assigned round-robin (over a fixed random order) to the ``w`` workers, each worker
   has ``F(w)/w`` and serves only its partitions, so hot partitions lag.
5. **Measure.** A partition's lag is the age of its oldest unconsumed record: the
   cumulative-arrival curve is inverted at the cumulative consumption (exact for
   arrivals uniform within a step). The job's lag is the maximum over partitions.

Deterministic: no randomness here (the workload is generated, seeded, beforehand).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError
from streamtrain.scale.models import ThroughputModel
from streamtrain.scale.policy import Observation, PendingAction, Policy
from streamtrain.sim.execution import Execution, action_phases

__all__ = ["Action", "Run", "Workload", "run_policy"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


@dataclass(frozen=True, slots=True, eq=False)
class Workload:
    """Everything a run replays. ``rates_records_per_s``: the window, one value per
    ``step_s``, gaps as 0. ``history_records_per_s``: the steps before the window (what
    policies may learn from), gaps as 0. ``per_step`` / ``cumulative``: from
    :func:`~streamtrain.sim.workload.partition_arrivals`. ``model``: the true ``F``,
    in records/s."""

    rates_records_per_s: FloatArray
    history_records_per_s: FloatArray
    step_s: int
    start_s: float  # epoch seconds of the window's first step
    per_step: FloatArray
    cumulative: FloatArray
    model: ThroughputModel
    max_workers: int
    tick_s: int = 15
    metrics_window_s: float = 60.0
    assignment_seed: int = 0
    capacity_records_per_s: FloatArray = field(init=False)

    def __post_init__(self) -> None:
        if self.tick_s <= 0 or self.step_s % self.tick_s:
            raise ConfigError(f"the tick ({self.tick_s} s) must divide the step ({self.step_s} s)")
        steps = self.rates_records_per_s.shape[0]
        if steps < 1 or self.per_step.shape[0] != steps or self.cumulative.shape[0] != steps + 1:
            raise ConfigError("the per-partition arrivals do not match the window")
        workers = np.arange(1, self.max_workers + 1, dtype=np.float64)
        table = np.concatenate([[0.0], self.model.samples_per_s(workers)])
        object.__setattr__(self, "capacity_records_per_s", table)

    @property
    def partitions(self) -> int:
        return int(self.per_step.shape[1])

    @property
    def ticks(self) -> int:
        return int(self.rates_records_per_s.shape[0]) * (self.step_s // self.tick_s)


@dataclass(frozen=True, slots=True)
class Action:
    started_s: float  # seconds since the window start
    from_workers: int
    to_workers: int
    reason: str
    prep_s: float
    pause_s: float
    explanation: str


@dataclass(frozen=True, slots=True, eq=False)
class Run:
    """Per-tick series (index i covers ``[i·tick_s, (i+1)·tick_s)`` of the window)."""

    policy: str
    tick_s: int
    lag_s: FloatArray  # job lag (max over partitions) at the end of the tick
    backlog_records: FloatArray
    workers: IntArray  # workers held (what worker-hours count)
    training_workers: IntArray  # workers training (0 while paused)
    paused: NDArray[np.bool_]
    actions: tuple[Action, ...]
    arrived_records: float
    consumed_records: float
    final_backlog_records: float


class _Partitions:
    """Per-partition queue state: cumulative consumption and the lag-inversion pointer."""

    def __init__(self, workload: Workload) -> None:
        self.w = workload
        p = workload.partitions
        self.consumed = np.zeros(p)
        self.pointer = np.zeros(p, dtype=np.int64)
        self.index = np.arange(p)
        order = np.random.default_rng(workload.assignment_seed).permutation(p)
        self.rank = np.empty(p, dtype=np.int64)
        self.rank[order] = np.arange(p)
        self.tolerance = 1e-9 * (1.0 + workload.cumulative[-1])

    def arrived(self, step: int, fraction: float) -> FloatArray:
        result: FloatArray = self.w.cumulative[step] + fraction * self.w.per_step[step]
        return result

    def consume(
        self, arrived: FloatArray, training: int, capacity_records: float, shuffle: bool
    ) -> float:
        """Consume up to ``capacity_records`` this tick; returns what was consumed."""
        backlog = np.maximum(arrived - self.consumed, 0.0)
        if training <= 0 or capacity_records <= 0:
            return 0.0
        if shuffle:
            total = float(backlog.sum())
            if total <= capacity_records:
                self.consumed = arrived.copy()
                return total
            self.consumed += backlog * (capacity_records / total)
            return capacity_records
        owner = self.rank % training
        per_worker = np.bincount(owner, weights=backlog, minlength=training)
        served = np.minimum(per_worker, capacity_records / training)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.where(per_worker > 0, served / per_worker, 1.0)
        share = ratio[owner]
        self.consumed = np.where(share >= 1.0, arrived, self.consumed + backlog * share)
        return float(served.sum())

    def max_lag_s(self, arrived: FloatArray, step: int, now_s: float) -> float:
        """Age of the oldest unconsumed record over all partitions, at ``now_s``."""
        remaining = arrived - self.consumed
        lagging = remaining > self.tolerance
        if not lagging.any():
            return 0.0
        cumulative, ptr, idx = self.w.cumulative, self.pointer, self.index
        while True:
            advance = (ptr < step) & (cumulative[np.minimum(ptr + 1, step), idx] <= self.consumed)
            if not advance.any():
                break
            ptr += advance
        per_step = self.w.per_step[ptr, idx]
        with np.errstate(invalid="ignore", divide="ignore"):
            within = np.where(per_step > 0, (self.consumed - cumulative[ptr, idx]) / per_step, 0.0)
        oldest_s = (ptr + np.clip(within, 0.0, 1.0)) * self.w.step_s
        return float(np.max(np.where(lagging, now_s - oldest_s, 0.0)))


def _ticks(seconds: float, tick_s: int) -> int:
    return max(0, math.ceil(seconds / tick_s - 1e-9))


def run_policy(
    workload: Workload, policy: Policy, execution: Execution, *, initial_workers: int
) -> Run:
    """Replay ``workload`` against ``policy`` (see the module docstring)."""
    if not 1 <= initial_workers <= workload.max_workers:
        raise ConfigError(f"initial workers must be in [1, {workload.max_workers}]")
    tick_s, step_s = workload.tick_s, workload.step_s
    per_step_ticks = step_s // tick_s
    n_ticks = workload.ticks
    interval = max(1, round(policy.decision_interval_s / tick_s))
    window_ticks = max(1, round(workload.metrics_window_s / tick_s))
    history = workload.history_records_per_s
    seen = np.concatenate([history, workload.rates_records_per_s])
    seen.setflags(write=False)
    capacity = workload.capacity_records_per_s
    state = _Partitions(workload)

    lag = np.zeros(n_ticks)
    backlog = np.zeros(n_ticks)
    held = np.zeros(n_ticks, dtype=np.int64)
    training_series = np.zeros(n_ticks, dtype=np.int64)
    paused = np.zeros(n_ticks, dtype=bool)
    consumed_ticks = np.zeros(n_ticks)
    capacity_ticks = np.zeros(n_ticks)
    actions: list[Action] = []

    workers = initial_workers
    pending: PendingAction | None = None
    phase_ends = (0, 0)  # tick where prep ends, tick where the action completes
    last_pause_s: float | None = None
    consumed_total = 0.0
    for i in range(n_ticks):
        now_s = i * tick_s
        if pending is not None and i >= phase_ends[1]:
            workers = pending.target_workers
            last_pause_s = pending.pause_s
            pending = None
        if i % interval == 0:
            obs = _observe(
                workload,
                seen,
                i,
                workers,
                pending,
                last_pause_s,
                lag,
                backlog,
                consumed_ticks,
                capacity_ticks,
                window_ticks,
                capacity,
            )
            decision = policy.decide(obs)
            if decision is not None and pending is None:
                target = max(1, min(workload.max_workers, decision.target_workers))
                if target != workers:
                    prep_s, pause_s = action_phases(workers, target, execution)
                    prep_t, pause_t = _ticks(prep_s, tick_s), _ticks(pause_s, tick_s)
                    pending = PendingAction(
                        from_workers=workers,
                        target_workers=target,
                        started_at_s=workload.start_s + now_s,
                        ready_at_s=workload.start_s + now_s + (prep_t + pause_t) * tick_s,
                        pause_s=pause_t * tick_s,
                    )
                    phase_ends = (i + prep_t, i + prep_t + pause_t)
                    actions.append(
                        Action(
                            now_s,
                            workers,
                            target,
                            decision.reason,
                            prep_t * tick_s,
                            pause_t * tick_s,
                            decision.explanation,
                        )
                    )
                    if prep_t + pause_t == 0:
                        workers, pending = target, None
        if pending is None:
            training, holding = workers, workers
        else:
            holding = max(pending.from_workers, pending.target_workers)
            training = pending.from_workers if i < phase_ends[0] else 0
        step, within = divmod(i, per_step_ticks)
        arrived = state.arrived(step, (within + 1) / per_step_ticks)
        cap = float(capacity[training]) * tick_s
        consumed_ticks[i] = state.consume(arrived, training, cap, execution.shuffle)
        consumed_total += consumed_ticks[i]
        capacity_ticks[i] = cap
        lag[i] = state.max_lag_s(arrived, step, now_s + tick_s)
        backlog[i] = max(0.0, float((arrived - state.consumed).sum()))
        held[i], training_series[i], paused[i] = holding, training, training == 0
    arrived_total = float(workload.cumulative[-1].sum())
    return Run(
        policy=policy.name,
        tick_s=tick_s,
        lag_s=lag,
        backlog_records=backlog,
        workers=held,
        training_workers=training_series,
        paused=paused,
        actions=tuple(actions),
        arrived_records=arrived_total,
        consumed_records=consumed_total,
        final_backlog_records=float(backlog[-1]),
    )


def _observe(
    workload: Workload,
    seen: FloatArray,
    i: int,
    workers: int,
    pending: PendingAction | None,
    last_pause_s: float | None,
    lag: FloatArray,
    backlog: FloatArray,
    consumed_ticks: FloatArray,
    capacity_ticks: FloatArray,
    window_ticks: int,
    capacity: FloatArray,
) -> Observation:
    """What the live system would report at the start of tick ``i``."""
    tick_s, step_s = workload.tick_s, workload.step_s
    complete = (i * tick_s) // step_s
    n_history = workload.history_records_per_s.shape[0]
    start = max(0, i - window_ticks)
    cap_sum = float(capacity_ticks[start:i].sum())
    utilization = float(consumed_ticks[start:i].sum()) / cap_sum if cap_sum > 0 else None
    training_now = workers if pending is None else 0
    per_worker = float(capacity[training_now]) / training_now if training_now else None
    return Observation(
        now_s=workload.start_s + i * tick_s,
        current_workers=workers,
        step_s=step_s,
        history_start_s=workload.start_s - n_history * step_s,
        arrivals_records_per_s=seen[: n_history + complete],
        max_lag_s=float(lag[i - 1]) if i else 0.0,
        backlog_records=float(backlog[i - 1]) if i else 0.0,
        utilization=utilization,
        throughput_per_worker_records_per_s=per_worker,
        pending=pending,
        last_pause_s=last_pause_s,
    )
