"""How many workers a job has, from what its workers say themselves.

Owned here (pure: no Kafka, times are arguments): :class:`WorkerRoster` and its
:class:`RosterSettings`. Every worker publishes a ``ThroughputSample`` every few seconds
under its own worker id; the pool is the number of distinct ids heard within
``expiry_s`` (a worker killed with ``kill -9`` drops out after that). The broker's
description of the consumer group is not asked: the embedded broker (Tansu) describes a
group of working members as STABLE with 0 members, and a worker that reads shards or
trains data-parallel is no group member at all.

A report's ``claimed_workers`` above 0 is the worker's own statement of the pool size
(``streamtrain worker --pool-size`` / ``--pool-size-file``, e.g. the local executor's
count): it overrides the count of ids, the newest live claim winning.

Bounded whatever is sent: at most ``max_workers`` ids are kept (the least recently
heard dropped first) and ids heard longer than ``expiry_s`` before the newest report are
dropped as reports arrive. Reports from the future are the caller's to refuse (it knows
the clock skew it allows). Readers on another thread (a Prometheus scrape) call
:meth:`WorkerRoster.count`, which only copies the table.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

from streamtrain.errors import ConfigError

__all__ = ["RosterSettings", "WorkerRoster"]


@dataclass(frozen=True, slots=True)
class RosterSettings:
    expiry_s: float = 30.0  # a worker not heard for this long is gone
    max_workers: int = 10_000  # ids kept at most

    def __post_init__(self) -> None:
        if not (math.isfinite(self.expiry_s) and self.expiry_s > 0):
            raise ConfigError(f"the worker expiry must be positive, got {self.expiry_s} s")
        if self.max_workers < 1:
            raise ConfigError(f"keep at least one worker id, got {self.max_workers}")


class WorkerRoster:
    """See the module docstring. One writer; :meth:`count` may run on another thread."""

    def __init__(self, settings: RosterSettings | None = None) -> None:
        self.settings = settings or RosterSettings()
        self._heard: OrderedDict[str, tuple[float, int]] = OrderedDict()  # id -> (at, claim)
        self.newest_at_s: float | None = None  # the newest report's time
        self.dropped = 0  # ids pushed out by max_workers

    def heard(self, worker_id: str, at_s: float, claimed_workers: int = 0) -> None:
        """A report of ``worker_id`` observed at ``at_s`` (an older one than kept is ignored)."""
        if not worker_id or not math.isfinite(at_s):
            return
        kept = self._heard.get(worker_id)
        if kept is not None and kept[0] > at_s:
            return
        self._heard[worker_id] = (at_s, max(0, int(claimed_workers)))
        self._heard.move_to_end(worker_id)
        if self.newest_at_s is None or at_s > self.newest_at_s:
            self.newest_at_s = at_s
        horizon_s = self.newest_at_s - self.settings.expiry_s
        while self._heard:
            first_id, (first_at_s, _) = next(iter(self._heard.items()))
            if len(self._heard) > self.settings.max_workers:
                self.dropped += 1
            elif first_at_s >= horizon_s:
                break
            del self._heard[first_id]

    def count(self, now_s: float) -> int | None:
        """Workers alive at ``now_s``: the newest live claim, else the live ids (0 when
        every one expired); ``None`` before any report."""
        if self.newest_at_s is None:
            return None
        live = [v for v in list(self._heard.values()) if v[0] >= now_s - self.settings.expiry_s]
        claims = [(at_s, claim) for at_s, claim in live if claim > 0]
        if claims:
            return max(claims)[1]
        return len(live)

    def __len__(self) -> int:
        return len(self._heard)
