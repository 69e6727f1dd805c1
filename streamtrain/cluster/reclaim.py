"""FaPES loan and reclaim (§3.3-3.4): which servers go back to serving, and the one-way
baseline.

Serving's idle servers (beyond its ``min_scale``) are loaned to training; when serving
needs ``N_r`` of them back, FaPES picks the servers that preempt the fewest training
jobs. Two measures per server (§3.4):

* **reclaim cost**: the number of running jobs on it not yet preempted;
* **reclaim gain**: the number of servers that become free without any further cost once
  every job on it is preempted (itself included): a preempted job's other servers
  cost nothing more.

:func:`reclaim` repeats: take the server with the largest gain that does not exceed the
servers still needed (ties: least cost, then name); when every gain exceeds it, the
least cost (then the smallest gain). Preempt its jobs; every server whose jobs are all
preempted is now free and is taken, up to the number needed. It stops when ``N_r``
servers are chosen. The worked example of Fig. 6(a) (two servers holding jobs A and B,
``N_r = 2``) reclaims those two at a total cost of 2.

:func:`reclaim_workers` applies the rule to elastic jobs at worker granularity (each
worker a server of its own; a job's last worker also carries the cost of stopping the
job): it disrupts as few jobs as possible and shrinks a job rather than stop one.
:func:`reclaim_lifo` is the one-way loaning baseline: the most recent loans go back
first, whatever they cost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from streamtrain.errors import ConfigError

__all__ = [
    "Reclaim",
    "reclaim",
    "reclaim_cost",
    "reclaim_gain",
    "reclaim_lifo",
    "reclaim_workers",
]


@dataclass(frozen=True, slots=True)
class Reclaim:
    servers: tuple[str, ...]  # in the order chosen
    preempted_jobs: frozenset[str]

    @property
    def cost(self) -> int:
        """Jobs preempted (FaPES' total reclaim cost)."""
        return len(self.preempted_jobs)


def reclaim_cost(jobs_on_server: frozenset[str], preempted: frozenset[str]) -> int:
    return len(jobs_on_server - preempted)


def reclaim_gain(
    server: str, servers: Mapping[str, frozenset[str]], preempted: frozenset[str]
) -> int:
    """Servers freed at no further cost once ``server``'s jobs are preempted."""
    after = preempted | servers[server]
    return sum(1 for jobs in servers.values() if jobs <= after)


def reclaim(servers: Mapping[str, frozenset[str]], needed: int) -> Reclaim:
    """Choose ``needed`` of ``servers`` (id -> jobs running on it) by FaPES' rule."""
    if needed < 0:
        raise ConfigError(f"cannot reclaim a negative number of servers ({needed})")
    if needed > len(servers):
        raise ConfigError(f"cannot reclaim {needed} servers: only {len(servers)} are on loan")
    left = dict(servers)
    chosen: list[str] = []
    preempted: frozenset[str] = frozenset()
    while len(chosen) < needed:
        remaining = needed - len(chosen)
        gains = {s: reclaim_gain(s, left, preempted) for s in left}
        costs = {s: reclaim_cost(left[s], preempted) for s in left}
        fitting = [s for s in left if gains[s] <= remaining]
        if fitting:
            pick = min(fitting, key=lambda s: (-gains[s], costs[s], s))
        else:
            pick = min(left, key=lambda s: (costs[s], gains[s], s))
        preempted = preempted | left[pick]
        free = [pick, *sorted(s for s in left if s != pick and left[s] <= preempted)]
        for server in free[:remaining]:
            chosen.append(server)
            del left[server]
    return Reclaim(tuple(chosen), preempted)


def reclaim_workers(workers: Mapping[str, int], needed: int) -> dict[str, int]:
    """How many workers to take from each elastic job (job -> workers it holds) to free
    ``needed``, by :func:`reclaim` with every worker a server of its own. A job keeps
    training on the workers it has left, so taking some of its workers costs one
    disruption; its last worker also carries the cost of stopping it (one more), so
    the rule shrinks jobs before it stops one."""
    servers = {}
    for job, count in workers.items():
        for index in range(count):
            jobs = {job, f"{job}\0stop"} if index == 0 else {job}
            servers[f"{job}\0{index:06d}"] = frozenset(jobs)
    taken: dict[str, int] = {}
    for server in reclaim(servers, needed).servers:
        job = server.split("\0", 1)[0]
        taken[job] = taken.get(job, 0) + 1
    return taken


def reclaim_lifo(loans: Sequence[tuple[str, int]], needed: int) -> dict[str, int]:
    """One-way loaning: take back the newest loans first. ``loans`` are (job, workers)
    in the order they were made; returns job -> workers taken."""
    if needed < 0:
        raise ConfigError(f"cannot reclaim a negative number of workers ({needed})")
    taken: dict[str, int] = {}
    for job, count in reversed(loans):
        if needed <= 0:
            break
        take = min(count, needed)
        taken[job] = taken.get(job, 0) + take
        needed -= take
    return taken
