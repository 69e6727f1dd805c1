"""What a scaling action cost the job, from what was produced and trained (pure).

Two measures, each per action over the window until the next action (at most
``window_s``):

* :func:`action_costs` (an :class:`ActionCost`), from the cumulative records produced
  and trained over time (two step series): the backlog's extra area and peak. Used by
  the demo's summary and the applier's outcome.
* :func:`action_delays` (an :class:`ActionDelay`), when every record's production and
  training times are known (the scaling benchmark's ids; :func:`record_delays` gives
  each record's wait, produced to first trained): the delay records suffered beyond
  the job's delay without an action, and the full stop measured directly.

Tested without a broker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "ActionCost",
    "ActionDelay",
    "action_costs",
    "action_delays",
    "cumulative",
    "median_delay",
    "record_delays",
]

_GRID_S = 0.05


@dataclass(frozen=True, slots=True)
class ActionCost:
    """One action's cost from the backlog (produced - trained).

    ``lost_record_s``: the extra waiting the action caused, in records x seconds: the
    integral of the backlog above the backlog the job had in steady state just before
    the action (``baseline_s``). A job that never stops training loses nothing; a stop
    of ``P`` seconds at ``λ`` records/s that is caught up at once loses about
    ``λ·P²/2``. ``pause_s``: the action's pause as full-stop seconds, the backlog's peak
    above that baseline divided by the arrival rate before the action (what the planner
    and the simulator call the action's pause). ``records_per_s_before`` /
    ``records_per_s_after``: trained throughput over ``baseline_s`` before the action
    and over the window's last ``baseline_s``.
    """

    at_s: float
    window_s: float
    lost_record_s: float
    pause_s: float
    records_per_s_before: float
    records_per_s_after: float


def cumulative(
    times_s: Sequence[float], counts: Sequence[int]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Events ``(time, records)`` in any order as a sorted cumulative step series."""
    t = np.asarray(times_s, dtype=np.float64)
    n = np.asarray(counts, dtype=np.float64)
    order = np.argsort(t, kind="stable")
    return t[order], np.cumsum(n[order])


def _at(
    series: tuple[NDArray[np.float64], NDArray[np.float64]], grid: NDArray[np.float64]
) -> NDArray[np.float64]:
    times, totals = series
    index = np.searchsorted(times, grid, side="right") - 1
    out = np.where(index >= 0, totals[np.clip(index, 0, None)], 0.0)
    return np.asarray(out, dtype=np.float64)


def action_costs(
    produced: tuple[NDArray[np.float64], NDArray[np.float64]],
    trained: tuple[NDArray[np.float64], NDArray[np.float64]],
    actions_s: Sequence[float],
    *,
    window_s: float,
    baseline_s: float = 3.0,
) -> list[ActionCost]:
    """One :class:`ActionCost` per action, over the window until the next action (at
    most ``window_s``)."""
    costs: list[ActionCost] = []
    ordered = sorted(actions_s)
    for k, at in enumerate(ordered):
        end = min(at + window_s, ordered[k + 1]) if k + 1 < len(ordered) else at + window_s
        before = np.arange(at - baseline_s, at, _GRID_S)
        during = np.arange(at, end, _GRID_S)
        if during.size == 0 or before.size == 0:
            continue
        backlog_before = _at(produced, before) - _at(trained, before)
        backlog = _at(produced, during) - _at(trained, during)
        settled = np.arange(max(at, end - baseline_s), end, _GRID_S)
        backlog_after = _at(produced, settled) - _at(trained, settled)
        # the steady backlog before or after, the higher: fewer workers queue more, which
        # is the new size's cost, not the hand-over's
        baseline = max(float(np.mean(backlog_before)), float(np.mean(backlog_after)))
        extra = backlog - baseline
        arrival = (
            _at(produced, np.array([at]))[0] - _at(produced, np.array([at - baseline_s]))[0]
        ) / baseline_s
        rate_before = (
            _at(trained, np.array([at]))[0] - _at(trained, np.array([at - baseline_s]))[0]
        ) / baseline_s
        tail = max(at, end - baseline_s)
        rate_after = (_at(trained, np.array([end]))[0] - _at(trained, np.array([tail]))[0]) / max(
            end - tail, 1e-9
        )
        costs.append(
            ActionCost(
                at_s=at,
                window_s=end - at,
                lost_record_s=max(0.0, float(extra.sum() * _GRID_S)),
                pause_s=max(0.0, float(extra.max()) / arrival) if arrival > 0 else 0.0,
                records_per_s_before=float(rate_before),
                records_per_s_after=float(rate_after),
            )
        )
    return costs


@dataclass(frozen=True, slots=True)
class ActionDelay:
    """One action's cost from each record's delay.

    ``lost_record_s``: the record x seconds of delay the records produced in the window
    waited beyond the job's delay without an action, ``sum(max(0, d_i - reference_s))``,
    and never less than ``stop_record_s``. A full stop of ``P`` seconds at ``λ``
    records/s makes every record produced during it wait until it ends, at least
    ``λ·(P - reference_s)²/2`` beyond the reference, and the backlog it leaves makes the
    following records wait too; when the job's delay at rest is longer than the stop,
    the records it held back were produced before the action, which the sum does not
    see, hence the floor ``stop_record_s = λ·P²/2``, so an action with a full stop
    never reads 0. ``stop_s`` is the full stop measured directly, not inferred from a
    backlog. ``records`` and ``reference_s`` let a reader redo the sum. Records never
    trained count with a delay up to the window's end (they waited at least that long).
    """

    at_s: float
    window_s: float
    records: int  # produced in the window
    reference_s: float  # the median delay before the action (no action)
    lost_record_s: float  # sum over the window's records of the delay beyond it (>= floor)
    stop_s: float  # the longest time without a finished training step anywhere
    stop_record_s: float  # the floor: arrival rate x stop_s² / 2


def record_delays(
    produced: tuple[Sequence[float], Sequence[int]],
    trained_ids: NDArray[np.int64],
    trained_at_s: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Each record's production time and delay (first training minus production; NaN
    when never trained). ``produced``: batches ``(time, count)`` in production order,
    whose records carry the ids ``0, 1, ...`` in that order; ``trained_ids`` /
    ``trained_at_s``: every training of a record (duplicates allowed) and when its step
    finished."""
    times = np.asarray(produced[0], dtype=np.float64)
    counts = np.asarray(produced[1], dtype=np.int64)
    if times.shape != counts.shape or np.any(counts < 0):
        raise ValueError("need one non-negative count per production time")
    produced_at = np.repeat(times, counts)
    ids = np.asarray(trained_ids, dtype=np.int64)
    at = np.asarray(trained_at_s, dtype=np.float64)
    if ids.shape != at.shape:
        raise ValueError("need one training time per trained id")
    first = np.full(produced_at.shape[0], np.inf)
    known = (ids >= 0) & (ids < produced_at.shape[0])
    np.minimum.at(first, ids[known], at[known])
    delay = np.where(np.isfinite(first), first - produced_at, np.nan)
    return produced_at, delay


def median_delay(
    produced_at_s: NDArray[np.float64], delay_s: NDArray[np.float64], start: float, end: float
) -> float:
    """The median delay of the records produced in ``[start, end)`` and trained (0 if
    none)."""
    known = (produced_at_s >= start) & (produced_at_s < end) & np.isfinite(delay_s)
    return float(np.median(delay_s[known])) if np.any(known) else 0.0


def _longest_gap(step_times_s: NDArray[np.float64], start: float, end: float) -> float:
    inside = step_times_s[(step_times_s > start) & (step_times_s < end)]
    edges = np.concatenate([[start], inside, [end]])
    return float(np.max(np.diff(edges)))


def action_delays(
    produced_at_s: NDArray[np.float64],
    delay_s: NDArray[np.float64],
    step_times_s: NDArray[np.float64],
    actions_s: Sequence[float],
    *,
    window_s: float,
    reference_window_s: float = 5.0,
    reference_s: float | None = None,
) -> list[ActionDelay]:
    """One :class:`ActionDelay` per action, over the window until the next action (at
    most ``window_s``). ``reference_s``, when given, is the
    delay without an action for every action (e.g. measured in a control window);
    otherwise each action's is the median of the ``reference_window_s`` before it."""
    produced = np.asarray(produced_at_s, dtype=np.float64)
    delay = np.asarray(delay_s, dtype=np.float64)
    steps = np.sort(np.asarray(step_times_s, dtype=np.float64))
    ordered = sorted(actions_s)
    out: list[ActionDelay] = []
    for k, at in enumerate(ordered):
        end = min(at + window_s, ordered[k + 1]) if k + 1 < len(ordered) else at + window_s
        if end <= at:
            continue
        reference = reference_s
        if reference is None:
            reference = median_delay(produced, delay, at - reference_window_s, at)
        inside = (produced >= at) & (produced < end)
        waited = np.where(np.isfinite(delay[inside]), delay[inside], end - produced[inside])
        excess = float(np.sum(np.maximum(0.0, waited - reference)))
        records = int(np.sum(inside))
        stop = _longest_gap(steps, at, end)
        floor = records / (end - at) * stop**2 / 2
        out.append(
            ActionDelay(
                at_s=at,
                window_s=end - at,
                records=records,
                reference_s=reference,
                lost_record_s=max(excess, floor),
                stop_s=stop,
                stop_record_s=floor,
            )
        )
    return out
