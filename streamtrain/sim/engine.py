"""The simulator's core: one policy, one traffic window, tick by tick, vectorized over
partitions.

Owned here: :class:`Workload` (what every policy replays: the window's rates, the
history before it, per-partition arrivals and their cumulative sums, the true
throughput) and :func:`run_policy`, which returns a :class:`Run` (per-tick series and
the actions taken). Each tick of ``tick_s`` seconds (15 s by default, HPA's sync
period) the policy may **decide**, an action in progress **acts** (prep, pause),
records **arrive** per partition, the training workers **consume** them (with
shuffling, KALE §3.5, overflow is forwarded to workers with spare capacity), and the
lag is **measured** as the age of the oldest unconsumed record; :func:`run_policy`
says how.

Deterministic: the workload is generated, seeded, beforehand, and the pauses come from
``execution.seed``.

A tick's partition arithmetic (arrivals, consumption, lag, backlog) is
:mod:`streamtrain.sim.partitions`'s: in C when the extension is built, else in numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError
from streamtrain.scale.policy import Observation, PendingAction, Policy
from streamtrain.sim.execution import Execution, action_phases
from streamtrain.sim.partitions import new_queues

__all__ = ["Action", "Run", "Throughput", "Workload", "run_policy"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
_PAUSE_STREAM = 15_485_863  # the pauses' random stream, apart from the workload's


class Throughput(Protocol):
    """The true training speed: records/s at each worker count."""

    def samples_per_s(self, workers: FloatArray) -> FloatArray: ...


@dataclass(frozen=True, slots=True, eq=False)
class Workload:
    """Everything a run replays. ``rates_records_per_s``: the window, one value per
    ``step_s``, gaps as 0. ``history_records_per_s``: the steps before the window (what
    policies may learn from), gaps as 0. ``per_step`` / ``cumulative``: from
    :func:`~streamtrain.sim.workload.partition_arrivals`. ``model``: the true ``F``,
    in records/s (a :class:`~streamtrain.sim.truth.JobTruth` or any model)."""

    rates_records_per_s: FloatArray
    history_records_per_s: FloatArray
    step_s: int
    start_s: float  # epoch seconds of the window's first step
    per_step: FloatArray
    cumulative: FloatArray
    model: Throughput
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
    workers: IntArray  # workers held at the end of the tick
    training_workers: IntArray  # workers training at the end of the tick (0 while paused)
    paused: NDArray[np.bool_]  # any part of the tick paused
    paused_s: FloatArray  # seconds of the tick paused
    worker_s: FloatArray  # worker-seconds held during the tick
    forwarded_records: FloatArray  # records forwarded by the shuffle during the tick
    actions: tuple[Action, ...]
    arrived_records: float
    consumed_records: float
    final_backlog_records: float
    shuffle: bool = False


@dataclass(slots=True)
class _InFlight:
    """An action in progress, in seconds since the window start."""

    pending: PendingAction
    start_s: float
    prep_end_s: float
    end_s: float


def _overlap(t0: float, t1: float, a: float, b: float) -> float:
    return max(0.0, min(t1, b) - max(t0, a))


class _Series:
    """The per-tick series a run records, as Python lists while it runs (a float
    appended to a list costs less than one written into an array) and as arrays after
    (:meth:`arrays`)."""

    def __init__(self) -> None:
        self.lag: list[float] = []
        self.backlog: list[float] = []
        self.held: list[int] = []
        self.training: list[int] = []
        self.paused_s: list[float] = []
        self.worker_s: list[float] = []
        self.forwarded: list[float] = []
        self.consumed: list[float] = []
        self.capacity: list[float] = []

    @staticmethod
    def window_sum(values: list[float], start: int, end: int) -> float:
        """``float(np.array(values[start:end]).sum())``: numpy's pairwise sum, which for
        fewer than 8 values adds them one by one to -0.0, as here."""
        if end - start >= 8:
            return float(np.array(values[start:end], dtype=np.float64).sum())
        total = -0.0
        for value in values[start:end]:
            total += value
        return total


def run_policy(
    workload: Workload, policy: Policy, execution: Execution, *, initial_workers: int
) -> Run:
    """Replay ``workload`` against ``policy``, tick by tick.

    1. **Decide.** When the tick is a multiple of the policy's decision interval
       (rounded to ticks), the policy gets an :class:`~streamtrain.scale.policy.Observation`
       built from the end of the previous tick: the complete arrival steps so far
       (history plus window, never the current step), the measured max lag and backlog,
       utilization over the last ``metrics_window_s``, the measured training speed per
       worker, and the pending action. A decision to a different count starts an action
       unless one is in progress (decisions during an action are dropped; the policy
       sees ``pending``).
    2. **Act.** An action's phases come from
       :func:`~streamtrain.sim.execution.action_phases` with its hand-over stall drawn
       from the run's own random stream (the k-th action of every policy gets the same
       draw), in exact seconds: during ``prep`` the old workers train, during ``pause``
       nobody does, then the target count trains; a tick that an action's phase
       boundary crosses trains for the seconds of each phase. The job holds
       ``max(from, to)`` workers until the action completes.
    3. **Arrive.** Each partition receives its share of the step's rate, uniformly in
       time.
    4. **Consume** (:meth:`~streamtrain.sim.partitions.Partitions.consume`) and 5. **measure**
       (:meth:`~streamtrain.sim.partitions.Partitions.max_lag_s`).
    """
    if not 1 <= initial_workers <= workload.max_workers:
        raise ConfigError(f"initial workers must be in [1, {workload.max_workers}]")
    tick_s, step_s = workload.tick_s, workload.step_s
    per_step_ticks = step_s // tick_s
    n_ticks = workload.ticks
    interval = max(1, round(policy.decision_interval_s / tick_s))
    window_ticks = max(1, round(workload.metrics_window_s / tick_s))
    seen = np.concatenate([workload.history_records_per_s, workload.rates_records_per_s])
    seen.setflags(write=False)
    capacity = workload.capacity_records_per_s
    state = new_queues(workload)
    pauses = np.random.default_rng(execution.seed + _PAUSE_STREAM)
    series = _Series()
    actions: list[Action] = []

    workers = initial_workers
    action: _InFlight | None = None
    last_pause_s: float | None = None
    # Loop invariants as locals (the loop runs once a tick: 40,320 times a simulated week
    # at the default 15-s tick): the same arithmetic, fewer lookups. A tick's capacity at
    # a count is ``capacity[count] * tick_s`` as numpy computes it elementwise (the same
    # IEEE product as in Python).
    capacities = capacity.tolist()
    tick_capacities = (capacity * tick_s).tolist()
    forward_cpu_s = execution.shuffle_costs.forward_cpu_s
    ack_latency_s = execution.shuffle_costs.ack_latency_s
    shuffle = execution.shuffle
    queue_tick = state.tick
    lags, consumed_ticks, capacity_ticks = series.lag, series.consumed, series.capacity
    backlogs, helds, trainings = series.backlog, series.held, series.training
    paused_ticks, worker_ticks, forwarded_ticks = series.paused_s, series.worker_s, series.forwarded
    for i in range(n_ticks):
        t0 = float(i * tick_s)
        t1 = t0 + tick_s
        if action is not None and t0 >= action.end_s:
            workers = action.pending.target_workers
            last_pause_s = action.pending.pause_s
            action = None
        if i % interval == 0:
            obs = _observe(workload, seen, i, workers, action, last_pause_s, series, window_ticks)
            decision = policy.decide(obs)
            if decision is not None and action is None:
                target = max(1, min(workload.max_workers, decision.target_workers))
                if target != workers:
                    prep_s, pause_s = action_phases(workers, target, execution, pauses.random())
                    action = _InFlight(
                        PendingAction(
                            from_workers=workers,
                            target_workers=target,
                            started_at_s=workload.start_s + t0,
                            ready_at_s=workload.start_s + t0 + prep_s + pause_s,
                            pause_s=pause_s,
                        ),
                        t0,
                        t0 + prep_s,
                        t0 + prep_s + pause_s,
                    )
                    actions.append(
                        Action(
                            t0,
                            workers,
                            target,
                            decision.reason,
                            prep_s,
                            pause_s,
                            decision.explanation,
                        )
                    )
                    if action.end_s <= t0:
                        workers, last_pause_s, action = target, pause_s, None
        if action is None:
            trainers, held, cap = workers, workers, tick_capacities[workers]
            paused_s, worker_s = 0.0, float(workers * tick_s)
        else:
            old, new = action.pending.from_workers, action.pending.target_workers
            s_old = _overlap(t0, t1, action.start_s, action.prep_end_s)
            paused_s = _overlap(t0, t1, action.prep_end_s, action.end_s)
            s_new = tick_s - s_old - paused_s
            cap = capacities[old] * s_old + capacities[new] * s_new
            trainers = new if s_new > 0 else (old if s_old > 0 else 0)
            held = max(old, new) if action.end_s > t1 else new
            worker_s = max(old, new) * (s_old + paused_s) + new * s_new
        step, within = divmod(i, per_step_ticks)
        per_worker_s = cap / tick_s / trainers if trainers else 0.0
        consumed, forwarded, lag, backlog = queue_tick(
            step,
            (within + 1) / per_step_ticks,
            trainers,
            cap,
            shuffle,
            forward_cpu_s * per_worker_s,
            t1,
        )
        if forwarded > 0:
            lag += ack_latency_s
        lags.append(lag)
        consumed_ticks.append(consumed)
        capacity_ticks.append(cap)
        backlogs.append(0.0 if state.drained else max(0.0, backlog))
        helds.append(held)
        trainings.append(trainers if cap > 0 else 0)
        paused_ticks.append(paused_s)
        worker_ticks.append(worker_s)
        forwarded_ticks.append(forwarded)
    paused = np.array(series.paused_s, dtype=np.float64)
    backlog_records = np.array(series.backlog, dtype=np.float64)
    return Run(
        policy=policy.name,
        tick_s=tick_s,
        lag_s=np.array(series.lag, dtype=np.float64),
        backlog_records=backlog_records,
        workers=np.array(series.held, dtype=np.int64),
        training_workers=np.array(series.training, dtype=np.int64),
        paused=paused > 0,
        paused_s=paused,
        worker_s=np.array(series.worker_s, dtype=np.float64),
        forwarded_records=np.array(series.forwarded, dtype=np.float64),
        actions=tuple(actions),
        arrived_records=float(workload.cumulative[-1].sum()),
        consumed_records=float(np.array(series.consumed, dtype=np.float64).sum()),
        final_backlog_records=float(backlog_records[-1]),
        shuffle=execution.shuffle,
    )


def _observe(
    workload: Workload,
    seen: FloatArray,
    i: int,
    workers: int,
    action: _InFlight | None,
    last_pause_s: float | None,
    series: _Series,
    window_ticks: int,
) -> Observation:
    """What the live system would report at the start of tick ``i``."""
    tick_s, step_s = workload.tick_s, workload.step_s
    complete = (i * tick_s) // step_s
    n_history = workload.history_records_per_s.shape[0]
    start = max(0, i - window_ticks)
    cap_sum = series.window_sum(series.capacity, start, i)
    utilization = series.window_sum(series.consumed, start, i) / cap_sum if cap_sum > 0 else None
    training_now = workers if action is None else 0
    capacity = workload.capacity_records_per_s
    per_worker = float(capacity[training_now]) / training_now if training_now else None
    return Observation(
        now_s=workload.start_s + i * tick_s,
        current_workers=workers,
        step_s=step_s,
        history_start_s=workload.start_s - n_history * step_s,
        arrivals_records_per_s=seen[: n_history + complete],
        max_lag_s=float(series.lag[i - 1]) if i else 0.0,
        backlog_records=float(series.backlog[i - 1]) if i else 0.0,
        utilization=utilization,
        throughput_per_worker_records_per_s=per_worker,
        pending=None if action is None else action.pending,
        last_pause_s=last_pause_s,
    )
