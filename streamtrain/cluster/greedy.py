"""The ModelArts greedy allocator (§3), the baseline the MILP is measured against.

Guarantee jobs are served first and serving's ``min_scale`` next (each gets its wanted
count for the first step, capped by what the pool holds after every job's floor), as
the MILP does; the opportunistic jobs then share what is left by the paper's four
scenarios, from their current counts:

1. idle workers and a queue: the job at the front of the queue gets as many workers as
   possible (up to its max); repeated while both last;
2. idle workers and no queue: the running job with the shortest training time (its
   remaining work at its current speed) is scaled up as far as possible; repeated;
3. no idle workers and a queue: the job with the longest training time is halved and
   the released workers go to the front of the queue (once per round);
4. no idle workers and no queue: nothing changes.

Every rule keeps a running job on at least one worker, as the paper's do (a range of 1
to 16 nodes; halving stops at 1). Counts are rounded down to what a job allows (powers
of two for ModelArts' jobs). A job without remaining work (a best-effort job wanting a
count) has an unknown, so longest, training time and never gets more than it wants.
Pure; no solver.
"""

from __future__ import annotations

import math
import time

from streamtrain.cluster.problem import (
    Allocation,
    ClusterJob,
    ClusterProblem,
    Grant,
    JobClass,
    explain,
    floor_allowed,
    infeasibility,
    unchanged,
)
from streamtrain.cluster.reclaim import reclaim_workers
from streamtrain.units import s_to_ms

__all__ = ["greedy_allocate", "training_time_s"]


def training_time_s(job: ClusterJob, workers: int) -> float:
    """Remaining work at ``workers``' speed; infinite when unknown or not running."""
    speed = job.curve().at(workers)
    if job.remaining_work is None or speed <= 0:
        return math.inf
    return job.remaining_work / speed


def _ceil_allowed(wanted: int, counts: tuple[int, ...]) -> int:
    above = [c for c in counts if c >= wanted]
    return min(above) if above else counts[-1]


def _cap(job: ClusterJob) -> int:
    """The most an opportunistic job can use: its max, or its wanted count."""
    if job.remaining_work is not None and job.remaining_work <= 0:
        return 0
    return job.max_workers if job.remaining_work is not None else job.demand(1)[0]


def greedy_allocate(problem: ClusterProblem) -> Allocation:
    """One round of the greedy allocator (module docstring)."""
    started = time.perf_counter()
    why = infeasibility(problem)
    if why is not None:
        return unchanged(problem, why, "greedy", s_to_ms(time.perf_counter() - started))
    free = problem.capacity_workers[0] - sum(j.floor_workers for j in problem.jobs)
    granted: dict[str, int] = {}
    notes: dict[str, str] = {}
    for job_class in (JobClass.GUARANTEE, JobClass.SERVING):
        for job in sorted(problem.of_class(job_class), key=lambda j: (j.arrived_s, j.name)):
            wanted = _ceil_allowed(job.demand(1)[0], job.counts)
            extra = min(max(0, wanted - job.floor_workers), free)
            granted[job.name] = floor_allowed(job.floor_workers + extra, job.counts)
            free -= granted[job.name] - job.floor_workers
    opportunistic = sorted(problem.of_class(JobClass.OPPORTUNISTIC), key=lambda j: j.arrived_s)
    for job in opportunistic:
        granted[job.name] = floor_allowed(min(job.current_workers, _cap(job)), job.counts)
    free -= sum(granted[j.name] for j in opportunistic)
    free = _give_back(opportunistic, granted, free, notes)
    free = _scenarios(opportunistic, granted, free, notes)
    grants = tuple(
        _grant(job, granted[job.name], notes.get(job.name, ""), problem) for job in problem.jobs
    )
    return Allocation(grants, True, "greedy", "rules", s_to_ms(time.perf_counter() - started))


def _halvable(job: ClusterJob, granted: int) -> int:
    """The job's count halved, never below its smallest running count (0 if none)."""
    smallest = next((c for c in job.counts if c > 0), 0)
    return max(floor_allowed(granted // 2, job.counts), smallest)


def _give_back(
    jobs: list[ClusterJob], granted: dict[str, int], free: int, notes: dict[str, str]
) -> int:
    """Workers back for guarantee and serving jobs, which the paper does not have: while
    they need more than the opportunistic jobs leave, halve the job with the longest
    training time among those on two or more workers (scenario 3's rule, never below
    one); only if every job is down to its minimum are whole jobs stopped, by FaPES'
    rule (:func:`~streamtrain.cluster.reclaim.reclaim_workers`: the fewest jobs
    disrupted, the same reclaim the MILP's pool uses between rounds); a job stopped so
    waits for the next round."""
    while free < 0:
        halvable = [j for j in jobs if _halvable(j, granted[j.name]) < granted[j.name]]
        if not halvable:
            break
        longest = max(halvable, key=lambda j: training_time_s(j, granted[j.name]))
        before = granted[longest.name]
        granted[longest.name] = _halvable(longest, before)
        free += before - granted[longest.name]
        notes[longest.name] = "halved (longest training time) for guarantee and serving jobs"
    if free < 0:
        running = {j.name: granted[j.name] for j in jobs if granted[j.name] > 0}
        for name, count in reclaim_workers(running, -free).items():
            job = next(j for j in jobs if j.name == name)
            before = granted[name]
            granted[name] = floor_allowed(before - count, job.counts)
            free += before - granted[name]
            notes[name] = "stopped (fewest jobs disrupted) for guarantee and serving jobs"
    return free


def _scenarios(
    jobs: list[ClusterJob], granted: dict[str, int], free: int, notes: dict[str, str]
) -> int:
    """Scenarios 1-3 on the opportunistic jobs; returns the workers left idle."""
    # A job preempted this round waits for the next one (not restarted at once).
    queue = [j for j in jobs if granted[j.name] == 0 < _cap(j) and j.name not in notes]
    started_any = False
    while free > 0 and queue:  # scenario 1
        front = queue[0]
        give = floor_allowed(min(free, _cap(front)), front.counts)
        if give <= 0:
            break
        granted[front.name] = give
        free -= give
        notes[front.name] = "front of the queue: as many workers as possible"
        queue.pop(0)
        started_any = True
    if free > 0 and not queue:  # scenario 2
        running = [j for j in jobs if granted[j.name] > 0]
        for job in sorted(running, key=lambda j: training_time_s(j, granted[j.name])):
            bigger = floor_allowed(min(_cap(job), granted[job.name] + free), job.counts)
            if bigger > granted[job.name]:
                free -= bigger - granted[job.name]
                granted[job.name] = bigger
                notes[job.name] = "idle workers: shortest training time scaled up"
            if free <= 0:
                break
    elif queue and not started_any:  # scenario 3
        running = [j for j in jobs if _halvable(j, granted[j.name]) < granted[j.name]]
        if running:
            longest = max(running, key=lambda j: training_time_s(j, granted[j.name]))
            before = granted[longest.name]
            granted[longest.name] = _halvable(longest, before)
            released = free + before - granted[longest.name]
            front = queue[0]
            give = floor_allowed(min(released, _cap(front)), front.counts)
            granted[front.name] = give
            free = released - give
            notes[longest.name] = "halved (longest training time) for the queue"
            if give:
                notes[front.name] = "front of the queue: the halved job's workers"
    return free


def _grant(job: ClusterJob, granted: int, note: str, problem: ClusterProblem) -> Grant:
    if job.job_class is JobClass.OPPORTUNISTIC:
        wanted = _cap(job)
        short = 0
        why = note or ("pool full" if granted < wanted else "")
    else:
        wanted = job.demand(1)[0]
        short = max(0, wanted - granted)
        why = f"the pool holds {problem.capacity_workers[0]}" if short else ""
    return Grant(
        job=job.name,
        job_class=job.job_class,
        current_workers=job.current_workers,
        wanted_workers=wanted,
        granted_workers=granted,
        plan=(granted,) * problem.horizon_steps,
        shortfall_workers=short,
        reason=explain(job, granted, wanted, why_short=why),
    )
