"""The planner's seed history for the demo: the synthetic days before the demo's day.

Owned here:

* :func:`seed_history` (pure): the days of a trace before its last one, averaged per
  planning step (:data:`~streamtrain.demo.control_args.PLAN_STEP_S`) and scaled;
* :func:`demo_seed_history` (pure): that, scaled like the demo's traffic: the last
  day's peak becomes ``peak_records_per_s`` per wall second, and the planner counts
  per model second (``speed`` times fewer records per second);
* :func:`write_seed_history`: the JSON file the control app reads with
  :func:`~streamtrain.scale.timescale.read_seed_history` (``--plan-history``).

With it the planner's seasonal forecaster has six days to repeat from its first
decision instead of starting blind at the demo's midnight.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from streamtrain.demo.control_args import PLAN_STEP_S
from streamtrain.demo.traffic import last_day
from streamtrain.forecast.trace import Trace
from streamtrain.units import DAY_S, MS_PER_S

__all__ = ["demo_seed_history", "seed_history", "write_seed_history"]


def seed_history(
    trace_rates: np.ndarray[Any, Any],
    trace_step_s: int,
    scale: float,
    *,
    plan_step_s: int = PLAN_STEP_S,
) -> list[float]:
    """The days before the trace's last day, per planning step, times ``scale``."""
    day_steps = round(DAY_S / trace_step_s)
    before = np.nan_to_num(trace_rates[:-day_steps], nan=0.0) * scale
    per_step = max(1, round(plan_step_s / trace_step_s))
    usable = before.size - before.size % per_step
    means: np.ndarray[Any, Any] = before[before.size - usable :].reshape(-1, per_step).mean(axis=1)
    return [round(float(v), 6) for v in means]


def demo_seed_history(trace: Trace, *, peak_records_per_s: float, speed: float) -> list[float]:
    """:func:`seed_history` in records per model second, scaled like the demo's day."""
    scale = peak_records_per_s / float(last_day(trace).max()) / speed
    return seed_history(trace.records_per_s, trace.step_s, scale)


def write_seed_history(path: Path, records_per_s: list[float], *, end_at_s: float) -> Path:
    """Write the seed history ending at wall time ``end_at_s`` to ``path``."""
    path.write_text(
        json.dumps(
            {
                "step_s": PLAN_STEP_S,
                "end_at_ms": int(end_at_s * MS_PER_S),
                "records_per_s": records_per_s,
            }
        )
    )
    return path
