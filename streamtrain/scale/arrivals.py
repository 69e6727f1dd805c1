"""The arrival history the planner forecasts from: per-step mean arrival rates.

Owned here (pure: no clock, no Kafka; the planner feeds it, the control app persists it):

* :class:`ArrivalSteps`: the records that arrived in each ``step_s`` step (step ``k``
  covers ``[k·step_s, (k+1)·step_s)``), per second: the growth of the group's summed
  HWMs from the last lag tick before the step to its own last tick, when both ticks
  read the HWMs of the same partitions; otherwise the mean of the step's CPS readings.
  The CPS is a trailing average over the lag monitor's window (15 simulated minutes in
  the demo): when traffic jumps, it reads the step before the jump into the steps
  after it, and at the demo's start (traffic from none to midnight's rate) the first
  steps read half the traffic. A step enters the history once a later step has begun
  (:meth:`~ArrivalSteps.close`: complete steps only, as
  :class:`~streamtrain.scale.policy.Observation` promises); a reading for a step already
  complete is late (counted, dropped). A step with no reading (the app was away) repeats
  the step before it; the history keeps the last ``max_steps``.
* Persistence hooks: :meth:`~ArrivalSteps.steps_after` lists the complete steps not yet
  written, :meth:`~ArrivalSteps.restore` appends the steps a previous run wrote (a gap
  repeats the step before it, as ``close`` does), :meth:`~ArrivalSteps.seed` starts an
  empty history with a seed (:class:`~streamtrain.scale.timescale.SeedHistory`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from streamtrain.errors import ConfigError

__all__ = ["ArrivalSteps"]


@dataclass(frozen=True, slots=True)
class _Produced:
    """A tick's summed HWMs: ``records`` over the ``partitions`` whose HWM it read."""

    at_s: float
    records: float
    partitions: int


class ArrivalSteps:
    """Per-step mean arrival rates from lag readings (see the module docstring)."""

    def __init__(self, step_s: int, max_steps: int) -> None:
        self.step_s = step_s
        self._values: deque[float] = deque(maxlen=max_steps)
        self._last_step: int | None = None  # index of the newest complete step
        self._open: dict[int, list[float]] = {}
        self._open_end: dict[int, _Produced] = {}  # each open step's newest HWM sum
        self._end: _Produced | None = None  # the newest complete step's last HWM sum
        self.late = 0

    def add(
        self,
        at_s: float,
        records_per_s: float | None,
        produced_records: float | None = None,
        produced_partitions: int = 0,
    ) -> None:
        """One lag tick: its CPS and, when it read HWMs, their sum over
        ``produced_partitions`` partitions."""
        step = math.floor(at_s / self.step_s)
        produced = None
        if (
            produced_records is not None
            and math.isfinite(produced_records)
            and produced_records >= 0
            and produced_partitions > 0
        ):
            produced = _Produced(at_s, produced_records, produced_partitions)
        if self._last_step is not None and step <= self._last_step:
            # too late for its step, but where the HWMs stood before the next one
            # (a seeded history's last step: the ticks before the run's first step)
            if produced is not None and (self._end is None or at_s > self._end.at_s):
                self._end = produced
            self.late += 1
            return
        if records_per_s is not None and math.isfinite(records_per_s) and records_per_s >= 0:
            self._open.setdefault(step, []).append(records_per_s)
        if produced is not None:
            newest = self._open_end.get(step)
            if newest is None or at_s > newest.at_s:
                self._open_end[step] = produced

    def seed(self, values: tuple[float, ...], last_step: int) -> None:
        """Start an empty history with ``values``, the last of them for step ``last_step``."""
        if self._values or self._last_step is not None:
            raise ConfigError("only an empty arrival history can be seeded")
        self._values.extend(values)
        self._last_step = last_step if values else None

    def restore(self, steps: Mapping[int, float]) -> int:
        """Append persisted complete steps (step index -> mean rate) newer than the newest
        kept one, in order; a gap repeats the step before it, as :meth:`close` does.

        Readings of steps now restored are dropped. Returns how many steps were added.
        """
        added = 0
        for step in sorted(steps):
            rate = float(steps[step])
            if (self._last_step is not None and step <= self._last_step) or not (
                math.isfinite(rate) and rate >= 0
            ):
                continue
            if self._last_step is not None and self._values:
                gap = min(step - self._last_step - 1, self._values.maxlen or 0)
                self._values.extend([self._values[-1]] * gap)
            self._values.append(rate)
            self._last_step = step
            added += 1
        if self._last_step is not None:
            for stale in [s for s in self._open if s <= self._last_step]:
                del self._open[stale]
            for stale in [s for s in self._open_end if s <= self._last_step]:
                del self._open_end[stale]
        if added:
            self._end = None  # the restored steps read no HWMs
        return added

    def steps_after(self, step: int | None) -> list[tuple[int, float]]:
        """The kept complete steps after ``step`` (all for ``None``), oldest first."""
        if self._last_step is None:
            return []
        first = self._last_step - len(self._values) + 1
        start = first if step is None else max(first, step + 1)
        return [(s, self._values[s - first]) for s in range(start, self._last_step + 1)]

    @property
    def last_step(self) -> int | None:
        """The index of the newest complete step (``None``: none yet)."""
        return self._last_step

    def close(self, now_s: float) -> None:
        """Every step before the one ``now_s`` falls in is complete."""
        current = math.floor(now_s / self.step_s)
        for step in sorted({s for s in (*self._open, *self._open_end) if s < current}):
            cps = self._open.pop(step, [])
            end = self._open_end.pop(step, None)
            grown = self._grown(end)
            if grown is None and not cps:
                self._end = end
                continue  # no reading of this step to say its rate
            if self._last_step is not None:
                filler = self._values[-1] if self._values else 0.0
                self._values.extend([filler] * (step - self._last_step - 1))
            self._values.append(grown if grown is not None else sum(cps) / len(cps))
            self._last_step = step
            self._end = end

    def _grown(self, end: _Produced | None) -> float | None:
        """Records per second the HWMs grew by from the previous step's last tick to
        ``end``; ``None`` when either did not read HWMs, they read different partitions
        or the sum fell (a partition's HWM read as lower)."""
        start = self._end
        if (
            start is None
            or end is None
            or end.partitions != start.partitions
            or end.at_s <= start.at_s
            or end.records < start.records
        ):
            return None
        return (end.records - start.records) / (end.at_s - start.at_s)

    @property
    def history_start_s(self) -> float:
        if self._last_step is None:
            return 0.0
        return float((self._last_step - len(self._values) + 1) * self.step_s)

    def array(self) -> np.ndarray[Any, np.dtype[np.float64]]:
        values = np.array(self._values, dtype=np.float64)
        values.setflags(write=False)
        return values

    def __len__(self) -> int:
        return len(self._values)
