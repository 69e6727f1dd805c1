"""The demo's end-of-run summary, computed from its timeline (pure; no Kafka, no processes).

The metrics follow KALE §4.1 (and :mod:`streamtrain.sim.metrics`), measured live:

* ``slo_violation_rate``: share of lag reports (one per tick) whose job lag (the largest
  partition lag, seconds) was above ``slo_lag_s``;
* ``accumulated_lag_min``: Eq. 11, ∫ lag dt in *simulated* minutes (wall seconds times
  the speed), so it compares with ``streamtrain simulate``'s numbers;
* ``peak_lag_s``: the largest job lag seen (wall seconds);
* ``scaling_actions``: commands the executor applied; ``worker_minutes``: ∫ pool size dt
  in wall minutes;
* ``workers``: the pool at the start, at the traffic peak and at the end of the day,
  and whether it grew before the peak and shrank after it;
* ``auc``: mean and last online AUC (click task, on the traffic of that moment);
* ``actions``: each ScaleCommand with its reason, ``after_day`` when it was decided
  after the day's traffic ended (while the demo drains), and, once applied, the
  assignment mode, the preparation seconds of its new workers, its pause (wall and simulated
  seconds) and the trained records/s before and after it;
* ``fallback_share``: the share of the day's actions (not ``after_day``) that the lag or
  forecast-error fallback decided (``reason`` FALLBACK; ``None`` without any): after
  the day the traffic stops at once, which no running job sees, and the lag of its
  last few records only ages while they are trained;
* ``action_costs``: the preparation and pause per action the planner (and ``streamtrain
  simulate``) assumed for this engine and assignment
  (:func:`~streamtrain.scale.action_costs.measured_cost`) beside what this run
  measured (the range over its actions), so a gap between them shows;
* ``records``: produced (acknowledged by the broker) versus trained ids: ``lost`` is
  produced ids no worker trained, ``duplicates`` ids trained more than once (allowed:
  at-least-once), ``trained_from_peers`` records a worker trained after another
  worker's shuffle forwarded them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from streamtrain.scale.action_costs import ActionCostEstimate
from streamtrain.scale.handover import ActionCost, action_costs
from streamtrain.units import DAY_S, HOUR_S, MINUTE_S

# An action's cost is measured until the next action, over this many wall seconds at most.
ACTION_WINDOW_S = 20.0

__all__ = [
    "RecordCounts",
    "action_marks",
    "assumed_and_measured",
    "engine_summary",
    "format_summary",
    "summarize",
    "workers_at",
]

# Committed steps per second are measured over this many wall seconds of the newest steps.
STEPS_WINDOW_S = 10.0


@dataclass(frozen=True, slots=True)
class RecordCounts:
    produced: int
    trained_unique: int
    trained_total: int
    failed_to_produce: int = 0
    trained_from_peers: int = 0
    # the traffic generator's worst delay behind its plan (wall s of planned traffic)
    produced_late_max_s: float = 0.0
    # the same for the broker's acknowledgements of the traffic (the arrivals the
    # planner can read; at least produced_late_max_s)
    acked_late_max_s: float = 0.0

    @property
    def lost(self) -> int:
        return self.produced - self.trained_unique

    @property
    def duplicates(self) -> int:
        return self.trained_total - self.trained_unique


def workers_at(workers: Sequence[Sequence[float]], at_s: float) -> int:
    """The pool size at ``at_s`` from ``(time, size)`` changes (0 before the first)."""
    size = 0
    for t, n in workers:
        if t > at_s:
            break
        size = int(n)
    return size


def _clock(at_s: float, started_at_s: float, speed: float) -> str:
    """``HH:MM`` of simulated time (``+1d`` past the day)."""
    simulated = max(0.0, at_s - started_at_s) * speed
    days, rest = divmod(int(simulated), DAY_S)
    text = f"{rest // HOUR_S:02d}:{rest // MINUTE_S % 60:02d}"
    return text + (f" +{days}d" if days else "")


def _pool_minutes(workers: Sequence[Sequence[float]], start_s: float, end_s: float) -> float:
    total = 0.0
    changes = [(float(t), int(n)) for t, n in workers]
    for k, (t, n) in enumerate(changes):
        a = max(t, start_s)
        b = min(changes[k + 1][0] if k + 1 < len(changes) else end_s, end_s)
        if b > a:
            total += n * (b - a)
    return total / MINUTE_S


def action_marks(timeline: dict[str, Any]) -> list[dict[str, Any]]:
    """Per applied action, for the dashboard's workers chart: when it began, its
    preparation and its measured pause (wall seconds; the pause once measurable)."""
    costs = _costs(timeline)
    marks = []
    for action in timeline["actions"]:
        if action.get("outcome") != "applied" or "at_s" not in action:
            continue
        cost = costs.get(action["at_s"])
        marks.append(
            {
                "at_s": action["at_s"],
                "prep_s": action.get("prep_s"),
                "pause_s": None if cost is None else round(cost.pause_s, 2),
            }
        )
    return marks


def engine_summary(
    kind: str,
    steps: Sequence[Sequence[float]],
    *,
    started_at_s: float | None = None,
    ended_at_s: float | None = None,
) -> dict[str, Any]:
    """What the engine did, from the ``(time, committed step, quorum size)`` points the
    evaluating worker logs: the job's committed steps, committed steps per second (over
    the run between ``started_at_s`` and ``ended_at_s`` when given, else over the newest
    :data:`STEPS_WINDOW_S`), and the quorum's size now, smallest and largest. With
    ``none`` each worker has its own steps: only ``kind`` is meaningful."""
    points = [(float(t), int(step), int(q)) for t, step, q in steps]
    if started_at_s is not None:
        points = [p for p in points if p[0] >= started_at_s]
    if ended_at_s is not None:
        points = [p for p in points if p[0] <= ended_at_s]
    out: dict[str, Any] = {"kind": kind, "one_model": kind != "none"}
    if not points or kind == "none":
        return out
    window = points
    if started_at_s is None:
        window = [p for p in points if p[0] >= points[-1][0] - STEPS_WINDOW_S]
    span_s = window[-1][0] - window[0][0]
    quorums = [q for _, _, q in points]
    out.update(
        committed_steps=points[-1][1],
        steps_per_s=round((window[-1][1] - window[0][1]) / span_s, 2) if span_s > 0 else None,
        quorum={"now": quorums[-1], "min": min(quorums), "max": max(quorums)},
    )
    return out


def _costs(timeline: dict[str, Any]) -> dict[float, ActionCost]:
    """:func:`~streamtrain.scale.handover.action_costs` of the applied actions, by start."""
    applied = [a for a in timeline["actions"] if a.get("outcome") == "applied" and "at_s" in a]
    progress = np.asarray(timeline.get("progress") or [], dtype=np.float64).reshape(-1, 3)
    starts = sorted(a["at_s"] for a in applied)
    costs: dict[float, ActionCost] = {}
    if progress.shape[0] > 1 and starts:
        produced = (progress[:, 0], progress[:, 1])
        trained = (progress[:, 0], progress[:, 2])
        for measured in action_costs(produced, trained, starts, window_s=ACTION_WINDOW_S):
            costs[measured.at_s] = measured
    return costs


def _actions(
    timeline: dict[str, Any], started_at_s: float, day_end_s: float, speed: float
) -> list[dict[str, Any]]:
    """Each command with whether it came after the day and what applying it cost: mode,
    preparation, pause (wall and simulated seconds), trained records/s before and after
    (:func:`~streamtrain.scale.handover.action_costs` on the produced/trained progress)."""
    applied = {a.get("command_id"): a for a in timeline["actions"] if a.get("outcome") == "applied"}
    costs = _costs(timeline)
    out = []
    for c in timeline["commands"]:
        entry: dict[str, Any] = {
            "at_simulated": _clock(c["at_s"], started_at_s, speed),
            "from": c["current_workers"],
            "to": c["target_workers"],
            "reason": c["reason"],
            "explanation": c["explanation"],
            "after_day": c["at_s"] > day_end_s,
        }
        action = applied.get(c.get("command_id"))
        if action is not None:
            cost = costs.get(action.get("at_s", -1.0))
            entry["mode"] = action.get("assignment")
            entry["prep_s"] = action.get("prep_s")
            if cost is not None:
                entry["pause_s"] = round(cost.pause_s, 2)
                entry["pause_simulated_s"] = round(cost.pause_s * speed, 1)
                entry["lost_record_s"] = round(cost.lost_record_s, 1)
                entry["records_per_s_before"] = round(cost.records_per_s_before, 1)
                entry["records_per_s_after"] = round(cost.records_per_s_after, 1)
        out.append(entry)
    return out


def summarize(
    timeline: dict[str, Any],
    *,
    started_at_s: float,
    day_end_s: float,
    ended_at_s: float,
    peak_at_s: float,
    speed: float,
    slo_lag_s: float,
    records: RecordCounts,
    assumed_costs: ActionCostEstimate | None = None,
) -> dict[str, Any]:
    """The summary object ``streamtrain demo --json`` prints (see the module docstring);
    ``assumed_costs``: what the planner assumed an action costs (``action_costs``)."""
    reports = [r for r in timeline["reports"] if started_at_s <= r["at_s"] <= ended_at_s]
    lags = [float(r["max_lag_s"] or 0.0) for r in reports]
    violations = sum(1 for lag in lags if lag > slo_lag_s)
    accumulated = 0.0
    for previous, current in itertools.pairwise(reports):
        dt_min = (current["at_s"] - previous["at_s"]) * speed / MINUTE_S
        accumulated += float(current["max_lag_s"] or 0.0) * speed / MINUTE_S * dt_min
    workers = timeline["workers"]
    at_start = workers_at(workers, started_at_s)
    at_peak = workers_at(workers, peak_at_s)
    after_peak = [int(n) for t, n in workers if peak_at_s < t <= day_end_s]
    at_day_end = workers_at(workers, day_end_s)
    applied = [a for a in timeline["actions"] if a.get("outcome") == "applied"]
    aucs = [a for t, a in timeline["auc"] if started_at_s <= t <= ended_at_s]
    actions = _actions(timeline, started_at_s, day_end_s, speed)
    in_day = [a for a in actions if not a["after_day"]]
    fallbacks = sum(1 for a in in_day if a["reason"] == "FALLBACK")
    return {
        "duration_s": round(ended_at_s - started_at_s, 1),
        "speed": speed,
        "simulated_hours": round((min(ended_at_s, day_end_s) - started_at_s) * speed / HOUR_S, 2),
        "slo_lag_s": round(slo_lag_s, 3),
        "slo_violation_rate": round(violations / len(lags), 4) if lags else None,
        "accumulated_lag_min": round(accumulated, 1),
        "peak_lag_s": round(max(lags), 2) if lags else None,
        "scaling_actions": len(applied),
        "worker_minutes": round(_pool_minutes(workers, started_at_s, ended_at_s), 2),
        "workers": {
            "at_start": at_start,
            "at_peak": at_peak,
            "max": max((int(n) for _, n in workers), default=0),
            "at_day_end": at_day_end,
            "scaled_up_before_peak": at_peak > at_start,
            "scaled_down_after_peak": bool(after_peak) and min(after_peak) < at_peak,
        },
        "auc": {
            "mean": round(sum(aucs) / len(aucs), 4) if aucs else None,
            "last": round(aucs[-1], 4) if aucs else None,
            "evaluations": len(aucs),
        },
        "records": {
            "produced": records.produced,
            "trained_unique": records.trained_unique,
            "lost": records.lost,
            "duplicates": records.duplicates,
            "failed_to_produce": records.failed_to_produce,
            "trained_from_peers": records.trained_from_peers,
            "produced_late_max_s": round(records.produced_late_max_s, 2),
            "acked_late_max_s": round(records.acked_late_max_s, 2),
        },
        "actions": actions,
        "fallback_share": round(fallbacks / len(in_day), 4) if in_day else None,
        # each applied action's pause (wall s; None: not measurable, e.g. the run ended)
        "action_pauses_s": [a.get("pause_s") for a in actions if "mode" in a],
        "action_costs": None
        if assumed_costs is None
        else assumed_and_measured(assumed_costs, actions),
        "alerts": len(timeline["alerts"]),
        "lag_reports": len(reports),
    }


def assumed_and_measured(
    assumed: ActionCostEstimate, actions: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """What the planner assumed an action costs (wall seconds, mean and spread) beside
    the smallest and largest preparation (scale-ups) and pause this run's applied
    ``actions`` measured (``None`` where none measured it)."""

    def span(values: list[float]) -> list[float] | None:
        return [round(min(values), 2), round(max(values), 2)] if values else None

    applied = [a for a in actions if "mode" in a]
    grew = [a for a in applied if a["to"] > a["from"]]
    return {
        "assumed": {
            "prep_s": assumed.prep_s,
            "prep_spread_s": assumed.prep_spread_s,
            "pause_s": assumed.pause_s,
            "pause_spread_s": assumed.pause_spread_s,
        },
        "measured": {
            "prep_s": span([float(a["prep_s"]) for a in grew if a.get("prep_s") is not None]),
            "pause_s": span([float(a["pause_s"]) for a in applied if a.get("pause_s") is not None]),
        },
    }


def format_summary(summary: dict[str, Any]) -> str:
    """The summary as a few lines for people."""

    def number(value: Any, fmt: str = "{:,}") -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "n/a"
        return fmt.format(value)

    w, r, auc = summary["workers"], summary["records"], summary["auc"]
    rate = summary["slo_violation_rate"]
    engine = summary.get("engine") or {}
    pauses = ", ".join(number(p, "{:.2f}") for p in summary.get("action_pauses_s", []))
    return "\n".join(
        [
            f"demo finished: {summary['simulated_hours']} simulated hours in "
            f"{summary['duration_s']} s (speed {summary['speed']:g}x)",
            f"  engine {engine.get('kind', 'n/a')}: "
            + (
                f"one model, {number(engine.get('committed_steps'))} committed steps "
                f"({number(engine.get('steps_per_s'))}/s), quorum of "
                f"{(engine.get('quorum') or {}).get('min', 'n/a')}-"
                f"{(engine.get('quorum') or {}).get('max', 'n/a')}"
                if engine.get("one_model")
                else "each worker its own model copy"
            )
            + f"; action pauses (s): {pauses or 'none'}",
            *_cost_line(summary.get("action_costs")),
            f"  SLO (lag <= {summary['slo_lag_s']} s): violated "
            f"{number(None if rate is None else 100 * rate, '{:.1f}')} % of the time; "
            f"peak lag {number(summary['peak_lag_s'])} s; accumulated lag "
            f"{number(summary['accumulated_lag_min'])} simulated lag-minutes",
            f"  workers: {w['at_start']} at the start, {w['at_peak']} at the peak, max "
            f"{w['max']}, {w['at_day_end']} at the end of the day; "
            f"{summary['scaling_actions']} scaling actions ({_share(summary)}), "
            f"{summary['worker_minutes']} worker-minutes",
            f"  online AUC: mean {number(auc['mean'])}, last {number(auc['last'])}; "
            f"lost to lag {number(summary.get('auc_lost_to_lag'), '{:.4f}')} (against the "
            f"measured AUC-against-lag curve)",
            f"  records: {r['produced']:,} produced, {r['trained_unique']:,} trained, "
            f"{r['lost']:,} lost, {r['duplicates']:,} trained twice (at-least-once), "
            f"{r['trained_from_peers']:,} trained by a peer of the worker that read them; "
            f"produced up to {number(r.get('produced_late_max_s'), '{:.1f}')} s and "
            f"acknowledged by the broker up to {number(r.get('acked_late_max_s'), '{:.1f}')} "
            f"s behind the traffic's plan",
        ]
    )


def _share(summary: dict[str, Any]) -> str:
    """How many of the day's actions were fallbacks, and how many came after the day."""
    actions = summary.get("actions", [])
    after = sum(1 for a in actions if a.get("after_day"))
    share = summary.get("fallback_share")
    text = "none in the day" if share is None else f"fallbacks {100 * share:.0f} % of the day's"
    return text + (f"; {after} while draining" if after else "")


def _cost_line(costs: dict[str, Any] | None) -> list[str]:
    if not costs:
        return []
    assumed, measured = costs["assumed"], costs["measured"]

    def span(values: list[float] | None) -> str:
        return "n/a" if values is None else f"{values[0]:.2f}-{values[1]:.2f}"

    return [
        f"  action costs: assumed prep {assumed['prep_s']:.2f} s, pause "
        f"{assumed['pause_s']:.2f} s; measured prep {span(measured['prep_s'])} s, pause "
        f"{span(measured['pause_s'])} s"
    ]
