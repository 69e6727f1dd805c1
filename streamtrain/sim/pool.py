"""Several jobs on one pool, minute by minute, under one allocator.

Owned here: :func:`run_pool` replays :class:`~streamtrain.sim.pool_inputs.PoolInputs`
under one of these allocators and returns a :class:`PoolRun`:

* ``milp``: one shared pool; every ``interval_s`` the rolling-horizon MILP
  (:mod:`streamtrain.cluster.milp`) plans all jobs over ``horizon_steps``; between
  rounds, workers the online jobs or serving need back are reclaimed from offline jobs
  by FaPES' cost/gain rule (fewest jobs disrupted).
* ``milp-noforecast``: the same MILP seeing only this minute's online and serving
  counts, held over the horizon, so the information advantage and the optimization
  can be told apart.
* ``greedy``: the ModelArts greedy rules (:mod:`streamtrain.cluster.greedy`) on one
  shared pool, reclaiming by the same FaPES rule (the paper's greedy describes none).
* ``partition``: a static partition (FaPES' dedicated partition, ``N_r^max``): each
  online job its fixed cap, serving its peak, the rest for offline jobs under the
  greedy rules; idle workers of a partition stay idle.
* ``one-way``: the partition, but serving's idle servers are loaned to offline jobs
  and taken back newest loan first, whatever that costs (FaPES' one-way baseline).

No randomness here (the inputs are generated, seeded, beforehand), and the MILP stops
at a node count, not a wall-clock limit: a run gives the same answer on a busy machine
as on a quiet one (its wall time per round is measured apart).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from streamtrain.cluster.greedy import greedy_allocate
from streamtrain.cluster.milp import MilpSettings, milp_allocate
from streamtrain.cluster.problem import (
    Allocation,
    ClusterJob,
    ClusterProblem,
    JobClass,
    SpeedCurve,
    allowed_counts,
    floor_allowed,
)
from streamtrain.cluster.reclaim import reclaim_lifo, reclaim_workers
from streamtrain.cluster.warmstart import JobRecord, warm_start
from streamtrain.errors import ConfigError
from streamtrain.sim.pool_inputs import PoolInputs
from streamtrain.sim.scenario import ALLOCATORS, SHARED, OfflineJob
from streamtrain.units import HOUR_S, MIN_PER_H, MINUTE_S

__all__ = ["DEFAULT_RATE", "OfflineOutcome", "PoolRun", "run_pool"]

DEFAULT_RATE = 1.0  # records/s per worker assumed for a job nothing is known about
IntArray = NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class OfflineOutcome:
    name: str
    arrival_s: float
    queue_s: float  # arrival to its first start (to the window's end if never started)
    waiting_s: float  # all time at 0 workers: the first wait and after preemptions
    completion_s: float  # arrival to finish, or to the window's end if unfinished
    finished: bool
    deadline_met: bool
    preemptions: int  # times its count was cut by the allocator


@dataclass(frozen=True, slots=True, eq=False)
class PoolRun:
    allocator: str
    occupied: IntArray  # workers in use per minute
    serving_short: IntArray  # serving workers short of min_scale per minute
    overcommit: IntArray  # online workers beyond the pool per minute
    offline: tuple[OfflineOutcome, ...]
    solve_ms: tuple[float, ...]
    fallback_rounds: int = 0  # MILP rounds the greedy rules answered (no plan in time)
    notes: tuple[str, ...] = ()
    solve_nodes: tuple[int, ...] = ()  # branch-and-bound nodes per MILP round


@dataclass(slots=True)
class _Job:
    spec: OfflineJob
    counts: tuple[int, ...]
    held: int = 0
    done: float = 0.0
    paused_until_s: float = 0.0
    finished_s: float | None = None
    started_s: float | None = None
    waited_s: float = 0.0
    preemptions: int = 0
    measured: bool = False

    @property
    def active(self) -> bool:
        return self.finished_s is None


@dataclass(slots=True)
class _Loan:
    job: str
    workers: int


@dataclass(slots=True)
class _Pool:
    inputs: PoolInputs
    allocator: str
    milp: MilpSettings
    jobs: list[_Job] = field(default_factory=list)
    history: list[JobRecord] = field(default_factory=list)
    loans: list[_Loan] = field(default_factory=list)  # workers granted, oldest first
    solve_ms: list[float] = field(default_factory=list)
    solve_nodes: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    reserved: int | None = None  # what the MILP's last round kept for online and serving
    fallbacks: int = 0

    @property
    def shared(self) -> bool:
        return self.allocator in SHARED

    @property
    def milp_based(self) -> bool:
        return self.allocator in ("milp", "milp-noforecast")

    # -- capacity ------------------------------------------------------------------

    def serving_partition(self) -> int:
        serving = self.inputs.scenario.serving
        return min(serving.peak_workers, serving.max_workers or serving.peak_workers)

    def offline_capacity(self, online: int, serving_need: int) -> int:
        scenario = self.inputs.scenario
        if self.shared:
            return max(0, scenario.capacity_workers - online - serving_need)
        fixed = scenario.capacity_workers - sum(o.alone_cap for o in scenario.online)
        partition = fixed - self.serving_partition()
        if self.allocator == "one-way":
            return partition + max(0, self.serving_partition() - serving_need)
        return partition

    # -- one job's count -------------------------------------------------------------

    def set_count(self, job: _Job, workers: int, now_s: float) -> None:
        spec = self.inputs.scenario.offline
        if workers == job.held:
            return
        if workers < job.held:
            job.preemptions += 1
            self._unloan(job.spec.name, job.held - workers)
        else:
            self.loans.append(_Loan(job.spec.name, workers - job.held))
        pause = spec.start_s if job.held == 0 else spec.pause_s
        job.paused_until_s = now_s + pause if workers else now_s
        if job.started_s is None and workers:
            job.started_s = now_s
        job.held = workers

    def _unloan(self, name: str, workers: int) -> None:
        for loan in reversed(self.loans):
            if workers <= 0:
                break
            if loan.job == name:
                take = min(loan.workers, workers)
                loan.workers -= take
                workers -= take
        self.loans = [loan for loan in self.loans if loan.workers > 0]

    def rate_estimate(self, job: _Job) -> float:
        """The one-worker rate the allocators plan with: the measured rate once the job
        has trained, else DLRover-RM's warm start from finished jobs of the same model
        type and a similar size (:func:`~streamtrain.cluster.warmstart.warm_start`), else
        :data:`DEFAULT_RATE`."""
        if job.measured:
            return job.spec.rate_per_worker
        guess = warm_start(self.history, job.spec.model_type, job.spec.work_records)
        return guess if guess is not None else DEFAULT_RATE

    def cluster_job(self, job: _Job, now_s: float) -> ClusterJob:
        spec = job.spec
        return ClusterJob(
            name=spec.name,
            job_class=JobClass.OPPORTUNISTIC,
            current_workers=job.held,
            min_workers=1,
            max_workers=spec.max_workers,
            speed=SpeedCurve.prior(self.rate_estimate(job), spec.max_workers),
            remaining_work=max(0.0, spec.work_records - job.done),
            deadline_s=spec.deadline_s - now_s,
            pause_s=self.inputs.scenario.offline.pause_s,
            power_of_two=spec.power_of_two,
            arrived_s=spec.arrival_s,
        )

    def waiting(self, now_s: float) -> list[_Job]:
        return [j for j in self.jobs if j.active and j.spec.arrival_s <= now_s]

    # -- the allocator's decisions --------------------------------------------------------

    def decide(self, minute: int, online_now: list[int], capacity_off: int) -> None:
        """One round (module docstring)."""
        now_s = minute * MINUTE_S
        present = self.waiting(now_s)
        if not present:
            return
        offline = tuple(self.cluster_job(j, now_s) for j in present)
        scenario = self.inputs.scenario
        if self.milp_based:
            problem = self._full_problem(
                minute, online_now, offline, forecast=self.allocator == "milp"
            )
            allocation = milp_allocate(problem, self.milp)
            self.solve_nodes.append(allocation.solver_nodes)
        else:
            problem = ClusterProblem(
                jobs=offline, capacity_workers=(capacity_off,), step_s=scenario.interval_s
            )
            allocation = greedy_allocate(problem)
        self.solve_ms.append(allocation.solve_ms)
        if self.milp_based and allocation.solver != "milp":
            self.fallbacks += 1
        if not allocation.feasible:
            self.notes.append(f"minute {minute}: {allocation.status}")
            return
        self._apply(allocation, present, now_s)
        if self.milp_based:
            names = {j.spec.name for j in present}
            self.reserved = sum(g.granted_workers for g in allocation.grants if g.job not in names)

    def _full_problem(
        self,
        minute: int,
        online_now: list[int],
        offline: tuple[ClusterJob, ...],
        *,
        forecast: bool = True,
    ) -> ClusterProblem:
        """Every job of the pool; without ``forecast`` the online jobs and serving want
        this minute's counts over the whole horizon."""
        scenario, inputs = self.inputs.scenario, self.inputs
        steps, step_min = scenario.horizon_steps, scenario.interval_s // MINUTE_S
        guarantee = tuple(
            ClusterJob(
                name=o.spec.name,
                job_class=JobClass.GUARANTEE,
                current_workers=held,
                max_workers=max(o.spec.pool_cap, held),
                demand_workers=o.wanted(minute, steps, step_min, held) if forecast else (held,),
            )
            for o, held in zip(inputs.online, online_now, strict=True)
        )
        serving_spec = scenario.serving
        need = inputs.serving_need(minute)
        serving = ClusterJob(
            name=serving_spec.name,
            job_class=JobClass.SERVING,
            current_workers=need,
            min_workers=0,
            max_workers=serving_spec.max_workers or serving_spec.peak_workers,
            demand_workers=(
                inputs.serving_forecast(minute, steps, step_min) if forecast else (need,)
            ),
        )
        return ClusterProblem(
            jobs=(*guarantee, serving, *offline),
            capacity_workers=(scenario.capacity_workers,) * steps,
            step_s=scenario.interval_s,
        )

    def _apply(self, allocation: Allocation, present: list[_Job], now_s: float) -> None:
        granted = allocation.granted()
        for job in present:
            if job.spec.name in granted:
                self.set_count(job, granted[job.spec.name], now_s)

    def reclaim(self, excess: int, now_s: float) -> None:
        """Take ``excess`` workers back from offline jobs by the allocator's rule."""
        running = {j.spec.name: j for j in self.jobs if j.held > 0}
        if self.allocator == "one-way":
            taken = reclaim_lifo([(loan.job, loan.workers) for loan in self.loans], excess)
        else:  # the same FaPES rule for the MILP and greedy (and the partition's own)
            taken = reclaim_workers({n: j.held for n, j in running.items()}, excess)
        for name, count in taken.items():
            job = running[name]
            self.set_count(job, floor_allowed(job.held - count, job.counts), now_s)

    def fill(self, idle: int, now_s: float) -> None:
        """Idle workers to the front of the queue, as many as it can use; under the MILP
        not those its last round kept for the online jobs' and serving's forecast."""
        if self.reserved is not None:
            room = self.inputs.scenario.capacity_workers - self.reserved
            idle = min(idle, room - sum(j.held for j in self.jobs))
        for job in self.waiting(now_s):
            if idle <= 0:
                break
            if job.held == 0:
                give = floor_allowed(min(idle, job.spec.max_workers), job.counts)
                if give > 0:
                    self.set_count(job, give, now_s)
                    idle -= give

    def train(self, now_s: float) -> None:
        for job in self.jobs:
            if not job.active or job.spec.arrival_s > now_s:
                continue
            if job.held == 0:
                job.waited_s += MINUTE_S
                continue
            paused = min(MINUTE_S, max(0.0, job.paused_until_s - now_s))
            train_s = MINUTE_S - paused
            w = job.held
            rate = job.spec.rate_per_worker * w * 0.8 ** math.log2(w)
            left = job.spec.work_records - job.done
            if train_s > 0:
                job.measured = True
            if rate * train_s >= left:
                job.finished_s = now_s + paused + left / rate
                job.done = job.spec.work_records
                self._unloan(job.spec.name, job.held)
                job.held = 0
                self.history.append(
                    JobRecord(job.spec.model_type, job.spec.work_records, job.spec.rate_per_worker)
                )
            else:
                job.done += rate * train_s


def run_pool(
    inputs: PoolInputs,
    allocator: str,
    *,
    milp: MilpSettings | None = None,
    progress: Callable[[str], None] | None = None,
) -> PoolRun:
    """Replay ``inputs`` under ``allocator`` (module docstring).

    Each minute: offline arrivals join the queue; the online jobs hold what their runs
    held (the pool runs for ``milp``/``greedy``, the alone runs for the partitions);
    serving holds its ``min_scale``; at a round the allocator decides; offline jobs
    above what is left give workers back (the allocator's reclaim rule); idle workers
    go to the front of the queue, as many as it can use (ModelArts' simulation does
    this between rounds for every allocator; under the MILP, not the room its last
    round kept for the online jobs' and serving's forecast); then offline jobs train.
    An offline job pauses ``pause_s`` after every change of its count and ``start_s``
    after a start, trains at F(n) = r1 · n · 0.8^log2(n) with its true one-worker rate
    r1, and is preempted (back to the queue) when its count reaches 0.
    """
    if allocator not in ALLOCATORS:
        raise ConfigError(f"unknown allocator {allocator!r}; use one of {', '.join(ALLOCATORS)}")
    scenario = inputs.scenario
    pool = _Pool(inputs, allocator, milp or MilpSettings())
    pool.jobs = [
        _Job(
            spec,
            allowed_counts(1, spec.max_workers, power_of_two=spec.power_of_two, allow_zero=True),
        )
        for spec in inputs.offline
    ]
    capacity = scenario.capacity_workers
    minutes = inputs.minutes
    interval_min = scenario.interval_s // MINUTE_S
    occupied = np.zeros(minutes, dtype=np.int64)
    serving_short = np.zeros(minutes, dtype=np.int64)
    overcommit = np.zeros(minutes, dtype=np.int64)
    started = time.perf_counter()
    for minute in range(minutes):
        now_s = minute * MINUTE_S
        online_now = [
            int((o.held_pool if pool.shared else o.held_alone)[minute]) for o in inputs.online
        ]
        online = sum(online_now)
        need = inputs.serving_need(minute)
        capacity_off = pool.offline_capacity(online, need)
        if minute % interval_min == 0:
            pool.decide(minute, online_now, capacity_off)
        held = sum(j.held for j in pool.jobs)
        if held > capacity_off:
            pool.reclaim(held - capacity_off, now_s)
        held = sum(j.held for j in pool.jobs)
        if held < capacity_off:
            pool.fill(capacity_off - held, now_s)
        held = sum(j.held for j in pool.jobs)
        pool.train(now_s)
        room = capacity - min(capacity, online)
        serving = min(need, room) if pool.shared else min(need, pool.serving_partition())
        serving_short[minute] = need - serving
        overcommit[minute] = max(0, online - capacity)
        occupied[minute] = min(capacity, online) + serving + held
        if progress is not None and minute and minute % (6 * HOUR_S // MINUTE_S) == 0:
            spent_s = time.perf_counter() - started
            progress(f"{allocator}: {minute / MIN_PER_H:.0f} h simulated in {spent_s:.0f} s")
    end_s = float(minutes * MINUTE_S)
    outcomes = tuple(
        OfflineOutcome(
            name=j.spec.name,
            arrival_s=j.spec.arrival_s,
            queue_s=(j.started_s if j.started_s is not None else end_s) - j.spec.arrival_s,
            waiting_s=j.waited_s,
            completion_s=(j.finished_s if j.finished_s is not None else end_s) - j.spec.arrival_s,
            finished=j.finished_s is not None,
            deadline_met=j.finished_s is not None and j.finished_s <= j.spec.deadline_s,
            preemptions=j.preemptions,
        )
        for j in pool.jobs
    )
    return PoolRun(
        allocator,
        occupied,
        serving_short,
        overcommit,
        outcomes,
        tuple(pool.solve_ms),
        pool.fallbacks,
        tuple(pool.notes),
        tuple(pool.solve_nodes),
    )
