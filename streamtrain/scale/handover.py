"""What a scaling action cost the job, from what was produced and trained (pure).

Owned here: :func:`action_costs`. Given the cumulative records produced and trained over
time (two step series) and the times scaling actions happened, it measures per action,
over the window until the next action (at most ``window_s``):

* ``lost_record_s``: the extra waiting the action caused, in records x seconds: the
  integral of the backlog (produced - trained) above the backlog the job had in steady
  state just before the action (``baseline_s``). A job that never stops training loses
  nothing; a stop of ``P`` seconds at ``λ`` records/s that is caught up at once loses
  about ``λ·P²/2``;
* ``pause_s``: the action's pause as full-stop seconds: the backlog's peak above that
  baseline divided by the arrival rate before the action (what the planner and the
  simulator call the action's pause);
* ``records_per_s_before`` / ``records_per_s_after``: trained throughput over
  ``baseline_s`` before the action and over the window's last ``baseline_s``.

Used by ``benchmarks/scaling.py`` and the applier's outcome; tested without a broker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["ActionCost", "action_costs", "cumulative"]

_GRID_S = 0.05


@dataclass(frozen=True, slots=True)
class ActionCost:
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
    """One :class:`ActionCost` per action (module docstring)."""
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
