"""A replay's partition queues, a tick at a time: arrivals, consumption (with the
shuffle's forwarding), the lag of the oldest unconsumed record and the backlog, over
every partition.

Owned here: :class:`Partitions` (the numpy reference), :class:`Ticker` (what the engine
calls each tick), :func:`new_queues` (a replay's queues: in the optional C extension
:mod:`streamtrain.sim._queues` when it is built, :data:`COMPILED`, else
:class:`Partitions`; both compute the same numbers, operation for operation) and
:class:`Arrivals` (what they read of a :class:`~streamtrain.sim.engine.Workload`).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from numpy.typing import NDArray

try:  # the optional C extension (setup.py); Partitions computes the same with numpy
    from streamtrain.sim._queues import Queues
except ImportError:  # pragma: no cover - built wherever a C compiler was found
    Queues = None  # type: ignore[assignment,misc]

__all__ = ["COMPILED", "Arrivals", "Partitions", "Ticker", "new_queues"]

COMPILED = Queues is not None  # whether replays run their ticks in C

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


class Arrivals(Protocol):
    """The per-partition arrivals of a replay (a :class:`~streamtrain.sim.engine.Workload`)."""

    @property
    def per_step(self) -> FloatArray: ...

    @property
    def cumulative(self) -> FloatArray: ...

    @property
    def step_s(self) -> int: ...

    @property
    def max_workers(self) -> int: ...

    @property
    def assignment_seed(self) -> int: ...

    @property
    def partitions(self) -> int: ...


class Partitions:
    """Per-partition queue state: cumulative consumption and the lag-inversion pointer."""

    def __init__(self, workload: Arrivals) -> None:
        self.w = workload
        p = workload.partitions
        self.consumed = np.zeros(p)
        self.pointer = np.zeros(p, dtype=np.int64)
        self.index = np.arange(p)
        order = np.random.default_rng(workload.assignment_seed).permutation(p)
        self.rank = np.empty(p, dtype=np.int64)
        self.rank[order] = np.arange(p)
        self.tolerance = 1e-9 * (1.0 + workload.cumulative[-1])
        self.drained = True  # every arrival so far consumed (``consumed`` is ``arrived``)
        self._owners: dict[int, IntArray] = {}

    def owner(self, training: int) -> IntArray:
        """Each partition's worker when ``training`` workers train (round-robin over
        the fixed random order), computed once per count."""
        owner = self._owners.get(training)
        if owner is None:
            owner = self._owners[training] = self.rank % training
        return owner

    def arrived(self, step: int, fraction: float) -> FloatArray:
        result: FloatArray = self.w.cumulative[step] + fraction * self.w.per_step[step]
        return result

    def consume(
        self,
        arrived: FloatArray,
        training: int,
        capacity_records: float,
        shuffle: bool,
        forward_cost: float,
    ) -> tuple[float, float]:
        """Consume up to ``capacity_records`` this tick; returns ``(consumed, forwarded)``
        records. ``forward_cost``: capacity one forwarded record uses beyond its
        training, in records.

        ``w`` training workers have ``F(w)·seconds`` of capacity (``F`` the true
        throughput, records/s), ``F(w)/w`` each. Partitions are assigned round-robin
        (over a fixed random order) to the workers; each worker first serves its own
        partitions, in proportion to their backlog. With shuffling (KALE §3.5) the
        backlog workers cannot serve (their overflow) is forwarded to workers with spare
        capacity, and each forwarded record costs ``forward_cpu_s`` of a worker's time
        (so forwarding ``x`` records uses ``x·(1 + forward_cpu_s·F(w)/w)`` records of
        capacity). Without shuffling hot partitions lag while other workers idle.
        """
        backlog = np.maximum(arrived - self.consumed, 0.0)
        if training <= 0 or capacity_records <= 0:
            self.drained = False
            return 0.0, 0.0
        owner = self.owner(training)
        per_worker = np.bincount(owner, weights=backlog, minlength=training)
        limit = capacity_records / training
        if float(per_worker.max()) <= limit:
            # Every worker serves its whole backlog: what the general case below
            # computes (ratios of exactly 1, nothing to forward), without computing it.
            self.consumed, self.drained = arrived, True
            return float(per_worker.sum()), 0.0
        self.drained = False
        local = np.minimum(per_worker, limit)
        # local / per_worker where a worker has backlog, else 1 (divided only there).
        ratio = np.divide(local, per_worker, out=np.ones_like(per_worker), where=per_worker > 0)
        served = float(local.sum())
        forwarded = 0.0
        overflow = float(per_worker.sum()) - served
        if shuffle and overflow > 0:
            spare = max(0.0, capacity_records - served)
            forwarded = min(overflow, spare / (1.0 + forward_cost))
            ratio = ratio + (1.0 - ratio) * (forwarded / overflow)
        share = ratio[owner]
        self.consumed = np.where(share >= 1.0, arrived, self.consumed + backlog * share)
        return served + forwarded, forwarded

    def tick(
        self,
        step: int,
        fraction: float,
        training: int,
        capacity_records: float,
        shuffle: bool,
        forward_cost: float,
        now_s: float,
    ) -> tuple[float, float, float, float]:
        """One tick: ``fraction`` of step ``step`` has arrived; consume (:meth:`consume`)
        and measure (:meth:`max_lag_s`). Returns ``(consumed, forwarded, lag_s,
        backlog)``: records, records, seconds (before any ACK latency) and the unconsumed
        records (0.0 when drained, else their sum, which may read a hair below 0)."""
        arrived = self.arrived(step, fraction)
        consumed, forwarded = self.consume(
            arrived, training, capacity_records, shuffle, forward_cost
        )
        lag = self.max_lag_s(arrived, step, now_s)
        backlog = 0.0 if self.drained else float((arrived - self.consumed).sum())
        return consumed, forwarded, lag, backlog

    def max_lag_s(self, arrived: FloatArray, step: int, now_s: float) -> float:
        """Age of the oldest unconsumed record over all partitions, at ``now_s``: the
        cumulative-arrival curve is inverted at the cumulative consumption (exact for
        arrivals uniform within a step). The job's lag is this maximum plus the ACK
        latency a forwarded record's commit waits for when anything was forwarded
        (added by the caller)."""
        if self.drained:
            return 0.0
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
        # The fraction of the pointer's step consumed, in [0, 1]; 0 for a step without
        # arrivals (divided only where there were some).
        within = np.divide(
            self.consumed - cumulative[ptr, idx],
            per_step,
            out=np.zeros_like(per_step),
            where=per_step > 0,
        )
        np.minimum(np.maximum(within, 0.0, out=within), 1.0, out=within)
        oldest_s = (ptr + within) * self.w.step_s
        return float(np.max(np.where(lagging, now_s - oldest_s, 0.0)))


class Ticker(Protocol):
    """A replay's partition queues, a tick at a time (:meth:`Partitions.tick`)."""

    @property
    def drained(self) -> bool: ...

    def tick(
        self,
        step: int,
        fraction: float,
        training: int,
        capacity_records: float,
        shuffle: bool,
        forward_cost: float,
        now_s: float,
    ) -> tuple[float, float, float, float]: ...


def new_queues(workload: Arrivals) -> Ticker:
    """The queues of a new replay of ``workload``: in C when the extension is built."""
    python = Partitions(workload)
    if Queues is None:
        return python
    return Queues(
        np.ascontiguousarray(workload.cumulative, dtype=np.float64),
        np.ascontiguousarray(workload.per_step, dtype=np.float64),
        python.rank,
        python.consumed,
        python.pointer,
        np.ascontiguousarray(python.tolerance, dtype=np.float64),
        float(workload.step_s),
        workload.max_workers,
    )
