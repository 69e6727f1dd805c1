"""The demo's phases and the rule that moves it through them (pure; told time and counts).

Owned here:

* :class:`Phase`: ``starting`` (before the traffic's day begins), ``running`` (the
  traffic is being produced), ``draining`` (the day is over; the workers finish what
  was produced), then one of ``done`` (every produced id was trained), ``drain timed
  out`` (``drain_timeout_s`` passed first) or ``stopped`` (ended early). The values are
  what the dashboard's ``api/state`` and the summary show.
* :class:`DayPhases`: the current phase and the drain deadline; :meth:`~DayPhases.advance`
  moves with the clock and the traffic, :meth:`~DayPhases.settle` ends the drain.
* :func:`progress_line`: the line the demo prints every ``progress_interval_s``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from streamtrain.units import MINUTE_S

__all__ = ["DayPhases", "Phase", "progress_line"]


class Phase(StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    DRAINING = "draining"
    DONE = "done"
    DRAIN_TIMED_OUT = "drain timed out"
    STOPPED = "stopped"


@dataclass(slots=True)
class DayPhases:
    """Where a run is (see the module docstring); times are wall seconds."""

    start_at_s: float
    drain_timeout_s: float
    phase: Phase = Phase.STARTING
    drain_deadline_s: float | None = None

    def advance(self, now_s: float, *, traffic_running: bool) -> str | None:
        """Starting until the day begins, running while the traffic runs, then draining
        (once: the deadline is set then). Returns a line to print when the drain starts."""
        if now_s < self.start_at_s:
            self.phase = Phase.STARTING
        elif traffic_running:
            self.phase = Phase.RUNNING
        elif self.drain_deadline_s is None:
            self.phase = Phase.DRAINING
            self.drain_deadline_s = now_s + self.drain_timeout_s
            return f"the day is over; draining (at most {self.drain_timeout_s:.0f} s)"
        return None

    def settle(self, now_s: float, *, produced: int, trained: int) -> bool:
        """While draining: done once ``trained`` (of the ids below ``produced``) covers
        every produced id, timed out at the deadline. True when the run is over."""
        if self.drain_deadline_s is None:
            return False
        if trained >= produced:
            self.phase = Phase.DONE
            return True
        if now_s >= self.drain_deadline_s:
            self.phase = Phase.DRAIN_TIMED_OUT
            return True
        return False


def progress_line(
    phase: Phase,
    *,
    simulated_s: float,
    workers: int,
    lag_s: float | None,
    trained: int,
    produced: int,
    forwarded: int,
) -> str:
    """``[phase] simulated HH:MM  workers N  lag L  trained T / produced P (F by a peer)``."""
    hours, minutes = divmod(int(simulated_s // MINUTE_S), 60)
    return (
        f"[{phase}] simulated {hours:02d}:{minutes:02d}  workers {workers}  "
        f"lag {'n/a' if lag_s is None else f'{lag_s:.1f} s'}  "
        f"trained {trained:,} / produced {produced:,} "
        f"({forwarded:,} by a peer)"
    )
