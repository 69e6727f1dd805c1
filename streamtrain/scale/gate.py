"""The downtime-aware gate (DLRover-RM Eq. 8: TG(A) = ΔΨ_thp - Overhead(A)) and the fluid
backlog model it runs on.

Owned here, as pure functions: the fluid queue (:func:`project_backlog`) and the
capacity of a job that starts an action now (:func:`capacity_path`, or to several
targets at once: :func:`capacity_paths`); the gate, in
records for a scale-up (:func:`gate_scale_up`) and in worker-time for a scale-down
(:func:`gate_scale_down`); and :func:`meets_lag_goal`, what the ``streamtrain`` policy
asks of holding, scaling up and scaling down.

Lag from a fluid backlog is estimated as ``backlog / load`` seconds (the age of the
oldest record when arrivals were steady): what lag exporters report as "estimated time
lag". Loads are forecasts; callers pass whichever quantile they plan for.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError
from streamtrain.units import MINUTE_S

__all__ = [
    "GateVerdict",
    "capacity_path",
    "capacity_paths",
    "estimated_lag_s",
    "gate_scale_down",
    "gate_scale_up",
    "meets_lag_goal",
    "project_backlog",
]

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]


def project_backlog(
    loads_records_per_s: FloatArray,
    capacity_records_per_s: FloatArray,
    *,
    backlog_records: float,
    step_s: float,
) -> FloatArray:
    """Backlog (records) at the end of each step. ``capacity`` may be 1-D (one path) or
    2-D (candidates x steps); ``loads`` is 1-D and shared by every candidate.

    Per step of ``step_s`` seconds, ``load`` records/s arrive and up to ``capacity``
    records/s are consumed: ``B_t = max(0, B_{t-1} + (load_t - capacity_t)·step_s)``
    (Lindley's recursion), computed in closed form with cumulative sums.
    """
    if step_s <= 0 or backlog_records < 0 or not math.isfinite(backlog_records):
        raise ConfigError("need step_s > 0 and a finite, non-negative starting backlog")
    loads = np.asarray(loads_records_per_s, dtype=np.float64)
    capacity = np.asarray(capacity_records_per_s, dtype=np.float64)
    if capacity.shape[-1] != loads.shape[-1]:
        raise ConfigError(f"{loads.shape[-1]} load steps but {capacity.shape[-1]} capacity steps")
    net = np.cumsum((loads - capacity) * step_s, axis=-1)
    # B_t = S_t + max(B_0, -min_{s≤t} S_s) with S the cumulative net inflow.
    floor = np.maximum(backlog_records, -np.minimum.accumulate(net, axis=-1))
    result: FloatArray = np.maximum(net + floor, 0.0)
    return result


def estimated_lag_s(backlog_records: FloatArray, loads_records_per_s: FloatArray) -> FloatArray:
    """``backlog / load`` seconds; a backlog with no arrivals reads as 0 s per record/s of
    the smallest positive load (callers only use this for comparisons and budgets)."""
    loads = np.asarray(loads_records_per_s, dtype=np.float64)
    positive = loads[loads > 0]
    floor = float(positive.min()) if positive.size else 1.0
    result: FloatArray = np.asarray(backlog_records) / np.maximum(loads, floor)
    return result


@functools.lru_cache(maxsize=256)
def _phase_fractions(
    steps: int, step_s: float, prep_s: float, pause_s: float
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Share of each step spent preparing, paused and after, for an action started at
    step 0 (read-only; cached: a policy asks for the same few actions at every
    decision)."""
    starts = np.arange(steps, dtype=np.float64) * step_s
    ends = starts + step_s
    pause_start, pause_end = prep_s, prep_s + pause_s
    in_prep = np.clip(np.minimum(ends, pause_start) - starts, 0.0, step_s) / step_s
    in_pause = (
        np.clip(np.minimum(ends, pause_end) - np.maximum(starts, pause_start), 0.0, step_s) / step_s
    )
    after = 1.0 - in_prep - in_pause
    for fractions in (in_prep, in_pause, after):
        fractions.setflags(write=False)
    return in_prep, in_pause, after


def capacity_path(
    steps: int,
    *,
    current_records_per_s: float,
    target_records_per_s: float,
    step_s: float,
    prep_s: float = 0.0,
    pause_s: float = 0.0,
) -> FloatArray:
    """Capacity per step for an action started at step 0 (step fractions are prorated):
    the current capacity during ``prep_s`` (two-phase scaling starts new workers first),
    zero during ``pause_s``, the target's capacity after."""
    paths = capacity_paths(
        steps,
        current_records_per_s=current_records_per_s,
        targets_records_per_s=np.array([target_records_per_s], dtype=np.float64),
        step_s=step_s,
        prep_s=prep_s,
        pause_s=pause_s,
    )
    result: FloatArray = paths[0]
    return result


def capacity_paths(
    steps: int,
    *,
    current_records_per_s: float,
    targets_records_per_s: FloatArray,
    step_s: float,
    prep_s: float = 0.0,
    pause_s: float = 0.0,
) -> FloatArray:
    """:func:`capacity_path` to each of several targets: one row per target."""
    if steps < 1 or step_s <= 0 or prep_s < 0 or pause_s < 0:
        raise ConfigError("need steps >= 1, step_s > 0 and non-negative prep/pause times")
    in_prep, _, after = _phase_fractions(steps, step_s, prep_s, pause_s)
    targets = np.asarray(targets_records_per_s, dtype=np.float64)
    result: FloatArray = in_prep * current_records_per_s + after * targets[:, None]
    return result


@dataclass(frozen=True, slots=True)
class GateVerdict:
    """Whether an action pays for its downtime, and the two sides of Eq. 8."""

    accept: bool
    saved: float  # records (scale-up) or worker-seconds (scale-down)
    overhead: float  # same unit as ``saved``
    explanation: str


def _check_common(loads: FloatArray, step_s: float, backlog: float, pause_s: float) -> FloatArray:
    values = np.asarray(loads, dtype=np.float64)
    if (
        values.ndim != 1
        or values.size == 0
        or np.any(values < 0)
        or not np.all(np.isfinite(values))
    ):
        raise ConfigError("loads must be a non-empty series of finite, non-negative records/s")
    if step_s <= 0 or pause_s < 0 or backlog < 0:
        raise ConfigError("need step_s > 0, pause_s >= 0, backlog >= 0")
    return values


def gate_scale_up(
    loads_records_per_s: FloatArray,
    *,
    current_records_per_s: float,
    target_records_per_s: float,
    backlog_records: float,
    step_s: float,
    pause_s: float,
    prep_s: float = 0.0,
    margin: float = 0.0,
) -> GateVerdict:
    """Eq. 8 for a scale-up over the horizon of ``loads``, in records.

    *Backlog created* is what the current workers would have consumed during the pause
    (the action's overhead); *backlog saved* is what the larger count consumes beyond
    the current one after the pause, over the horizon. The action passes when saved >
    created · (1 + margin); otherwise the caller skips it (or merges it into a later,
    larger one).
    """
    loads = _check_common(loads_records_per_s, step_s, backlog_records, pause_s)
    steps = loads.size
    hold = np.full(steps, current_records_per_s)
    act = capacity_path(
        steps,
        current_records_per_s=current_records_per_s,
        target_records_per_s=target_records_per_s,
        step_s=step_s,
        prep_s=prep_s,
        pause_s=pause_s,
    )
    backlogs = project_backlog(
        loads, np.vstack([hold, act]), backlog_records=backlog_records, step_s=step_s
    )
    # Consumed per step = inflow - backlog growth, per path.
    previous = np.hstack([np.full((2, 1), backlog_records), backlogs[:, :-1]])
    consumed = loads * step_s - (backlogs - previous)
    _, in_pause, _ = _phase_fractions(steps, step_s, prep_s, pause_s)
    created = float((consumed[0] * in_pause).sum())
    # Net records the action consumes beyond holding = saved - created.
    saved = float(consumed[1].sum() - consumed[0].sum()) + created
    accept = saved > created * (1.0 + margin)
    verdict = "passes" if accept else "fails"
    return GateVerdict(
        accept=accept,
        saved=saved,
        overhead=created,
        explanation=(
            f"Eq. 8 {verdict}: saves {saved:,.0f} records over "
            f"{steps * step_s / MINUTE_S:.0f} min, "
            f"the pause leaves {created:,.0f} unconsumed"
        ),
    )


def gate_scale_down(
    loads_records_per_s: FloatArray,
    *,
    current_workers: int,
    target_workers: int,
    target_records_per_s: float,
    backlog_records: float,
    step_s: float,
    pause_s: float,
    hold_s: float,
    drain_s: float,
    lag_budget_s: float,
) -> GateVerdict:
    """Eq. 8 for a scale-down, in worker-seconds, with a lag guard.

    A scale-down frees ``(current - target) · hold_s`` worker-seconds but wastes
    ``current · pause_s`` (every worker is idle during the pause); it passes when it
    frees more than it wastes and the projected backlog left by the pause drains within
    ``drain_s`` with the lag never above ``lag_budget_s``.
    """
    loads = _check_common(loads_records_per_s, step_s, backlog_records, pause_s)
    if not 1 <= target_workers < current_workers:
        raise ConfigError(f"not a scale-down: {current_workers} -> {target_workers}")
    saved = float((current_workers - target_workers) * hold_s)
    overhead = float(current_workers * pause_s)
    act = capacity_path(
        loads.size,
        current_records_per_s=0.0,
        target_records_per_s=target_records_per_s,
        step_s=step_s,
        pause_s=pause_s,
    )
    backlog = project_backlog(loads, act, backlog_records=backlog_records, step_s=step_s)
    lag = estimated_lag_s(backlog, loads)
    resumed = min(loads.size - 1, math.ceil(pause_s / step_s))
    deadline = min(loads.size, max(resumed + 1, math.ceil((pause_s + drain_s) / step_s)))
    tolerance = 1e-6 * max(1.0, float(loads.max()) * step_s)
    drains = bool(np.any(backlog[resumed:deadline] <= tolerance))
    within_budget = float(lag.max()) <= lag_budget_s
    accept = saved > overhead and drains and within_budget
    reasons = []
    if saved <= overhead:
        reasons.append(
            f"frees {saved / MINUTE_S:,.0f} worker-min, the pause wastes {overhead / MINUTE_S:,.0f}"
        )
    if not drains:
        reasons.append(f"the backlog would not drain within {drain_s / MINUTE_S:.0f} min")
    if not within_budget:
        reasons.append(
            f"projected lag {lag.max() / MINUTE_S:.1f} min > budget {lag_budget_s / MINUTE_S:.1f}"
        )
    explanation = (
        f"Eq. 8 passes: frees {saved / MINUTE_S:,.0f} worker-min for "
        f"{overhead / MINUTE_S:,.0f} wasted"
        if accept
        else "Eq. 8 fails: " + "; ".join(reasons)
    )
    return GateVerdict(accept=accept, saved=saved, overhead=overhead, explanation=explanation)


def meets_lag_goal(
    backlog: FloatArray,
    lag_s: FloatArray,
    *,
    resume: int,
    catchup_steps: int,
    end: int,
    tolerated_lag_s: float,
    tolerance: float,
) -> BoolArray:
    """Per row (candidate): the backlog empties at some step in
    ``[resume, resume + catchup_steps]``, and from then until ``end`` the lag stays
    within ``tolerated_lag_s``."""
    steps = backlog.shape[-1]
    end = min(end, steps)
    deadline = min(resume + catchup_steps, steps - 1)
    columns = np.arange(steps)
    window = (backlog <= tolerance) & (columns >= resume) & (columns <= deadline)
    drained = window.any(axis=-1)
    first = np.argmax(window, axis=-1)
    after = (columns >= first[..., None]) & (columns < end)
    ok_after = ~((lag_s > tolerated_lag_s) & after).any(axis=-1)
    result: BoolArray = drained & ok_after
    return result
