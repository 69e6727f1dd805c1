"""Whether the job can keep up at all: the planner's ``CANNOT_KEEP_UP`` alert.

Owned here (pure: the planner calls it at every tick with its model and observation):

* :func:`max_capacity`: the highest throughput a model allows within
  ``[min_workers, max_workers]``, and the worker count that reaches it.
* :class:`KeepUpWatch`: when that ceiling does not exceed the recent arrival rate (over
  ``recent_window_s`` of complete steps), one ``CANNOT_KEEP_UP`` alert (CRITICAL); a
  resolved one (INFO) when it can again; nothing while the state holds. Inputs are on
  the planner's model clock; the alert's rates and time are on the wall clock of its
  :class:`~streamtrain.scale.timescale.TimeScale` (they are for people).
"""

from __future__ import annotations

import logging
import uuid

import numpy as np

from streamtrain.proto import control_plane_pb2 as cp
from streamtrain.scale.models import ThroughputModel
from streamtrain.scale.policy import Observation
from streamtrain.scale.timescale import TimeScale
from streamtrain.units import MS_PER_S

__all__ = ["KeepUpWatch", "max_capacity"]

log = logging.getLogger(__name__)


def max_capacity(model: ThroughputModel, min_workers: int, max_workers: int) -> tuple[int, float]:
    """``(workers, records/s)``: the count in ``[min_workers, max_workers]`` with the
    highest modelled throughput (the smallest such count), and that throughput."""
    counts = np.arange(min_workers, max_workers + 1, dtype=np.float64)
    capacity = model.samples_per_s(counts)
    return int(counts[int(np.argmax(capacity))]), float(capacity.max())


class KeepUpWatch:
    """See the module docstring; ``behind`` is the current state."""

    def __init__(
        self,
        *,
        job: str,
        group: str,
        min_workers: int,
        max_workers: int,
        recent_window_s: float,
        clock: TimeScale,
    ) -> None:
        self.job, self.group = job, group
        self.min_workers, self.max_workers = min_workers, max_workers
        self.recent_window_s = recent_window_s
        self.clock = clock
        self.behind = False

    def check(
        self, model: ThroughputModel | None, obs: Observation, source: str
    ) -> cp.Alert | None:
        """The alert when the state changes (``source``: where the model comes from)."""
        if model is None or obs.observed_steps == 0:
            return None
        best, ceiling = max_capacity(model, self.min_workers, self.max_workers)
        load = obs.recent_rate_records_per_s(self.recent_window_s)
        behind = ceiling <= load
        if behind == self.behind:
            return None
        self.behind = behind
        load, ceiling = self.clock.wall_rate(load), self.clock.wall_rate(ceiling)
        if behind:
            message = (
                f"job {self.job} cannot keep up: {load:,.1f} records/s arrive, at most "
                f"{ceiling:,.1f} records/s at {best} workers within [{self.min_workers}, "
                f"{self.max_workers}] (F from {source})"
            )
            log.error("%s", message)
        else:
            message = f"job {self.job} can keep up again: {load:,.1f} <= {ceiling:,.1f} records/s"
            log.info("%s", message)
        return cp.Alert(
            alert_id=uuid.uuid4().hex,
            kind=cp.Alert.CANNOT_KEEP_UP,
            severity=cp.Alert.CRITICAL if behind else cp.Alert.INFO,
            group=self.group,
            previous_state="ok" if behind else "cannot_keep_up",
            state="cannot_keep_up" if behind else "ok",
            message=message,
            raised_at_ms=int(self.clock.wall_s(obs.now_s) * MS_PER_S),
            resolved=not behind,
        )
