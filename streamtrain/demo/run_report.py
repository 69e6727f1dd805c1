"""What a ``streamtrain demo`` run tells: the dashboard's state, progress, the summary.

Owned here: :func:`dashboard_state` (the page's ``api/state``), :func:`progress` (the
line echoed while the run goes on) and :func:`run_summary` (the end-of-run summary),
each read from a :class:`~streamtrain.demo.run_state.DemoRun`; the metrics themselves
are computed by :mod:`streamtrain.demo.summary` (pure), the progress line is drawn by
:func:`~streamtrain.demo.phases.progress_line`.
"""

from __future__ import annotations

import time
from typing import Any

from streamtrain.demo.phases import Phase, progress_line
from streamtrain.demo.run_state import DemoRun
from streamtrain.demo.summary import RecordCounts, action_marks, engine_summary, summarize
from streamtrain.scale.action_costs import measured_cost

__all__ = ["dashboard_state", "progress", "run_summary"]


def dashboard_state(run: DemoRun) -> dict[str, Any]:
    """What the dashboard's ``api/state`` returns."""
    timeline = run.timeline.to_json()
    return {
        "now_s": time.time(),
        "started_at_s": run.start_at_s,
        "day_end_s": run.start_at_s + run.settings.day_s,
        "speed": run.settings.speed,
        "slo_lag_s": run.settings.slo_s,
        "phase": run.phases.phase.value,
        "job": run.names.job,
        "topic": run.names.topic,
        "records": {
            "produced": run.produced(),
            "trained_unique": run.trained.unique,
            "trained_from_peers": run.trained.forwarded,
        },
        "timeline": timeline,
        "action_marks": action_marks(timeline),
        "engine": engine_summary(run.settings.engine, timeline["steps"]),
        **run.lag_cost.loss(
            timeline["reports"],
            started_at_s=run.start_at_s,
            ended_at_s=time.time(),
            speed=run.settings.speed,
        ),
    }


def run_summary(run: DemoRun, ended_at_s: float) -> dict[str, Any]:
    """The end-of-run summary (:func:`~streamtrain.demo.summary.summarize` on the
    timeline, with what only the run knows: workers killed and replaced, control app
    restarts, the planner's throughput belief, the AUC lost to lag, its files)."""
    run.trained.refresh()
    produced = run.produced()
    generator = run.generator
    result = summarize(
        run.timeline.to_json(),
        started_at_s=run.start_at_s,
        day_end_s=run.start_at_s + run.settings.day_s,
        ended_at_s=ended_at_s,
        peak_at_s=run.start_at_s + run.peak_offset_s,
        speed=run.settings.speed,
        slo_lag_s=run.settings.slo_s,
        records=RecordCounts(
            produced=produced,
            trained_unique=run.trained.covered(produced),
            trained_total=run.trained.total,
            failed_to_produce=generator.failed if generator is not None else 0,
            trained_from_peers=run.trained.forwarded,
            produced_late_max_s=generator.max_behind_s if generator is not None else 0.0,
            acked_late_max_s=generator.max_unacked_s if generator is not None else 0.0,
        ),
        assumed_costs=measured_cost(run.settings.assignment, run.settings.engine),
    )
    result["engine"] = engine_summary(
        run.settings.engine,
        run.timeline.to_json()["steps"],
        started_at_s=run.start_at_s,
        ended_at_s=ended_at_s,
    )
    result["throughput_model"] = run.throughput
    result["workers"]["killed"] = len(run.killed)
    result["workers"]["replaced"] = run.replaced
    result["control_app_restarts"] = run.control_restarts
    result["phase"] = run.phases.phase.value
    # started with the day, normally long done; a stopped run does not wait for it
    run.lag_cost.join(timeout=0 if run.phases.phase is Phase.STOPPED else 120)
    result.update(
        run.lag_cost.loss(
            run.timeline.to_json()["reports"],
            started_at_s=run.start_at_s,
            ended_at_s=ended_at_s,
            speed=run.settings.speed,
        )
    )
    result["run_dir"] = str(run.run_dir)
    result["job"] = run.names.job
    result["topic"] = run.names.topic
    if result["records"]["lost"]:
        result["records"]["missing_ids"] = run.trained.missing(produced)
    return result


def progress(run: DemoRun, now: float) -> str:
    """The line echoed every ``progress_interval_s`` while the run goes on."""
    reports = run.timeline.reports
    return progress_line(
        run.phases.phase,
        simulated_s=max(0.0, now - run.start_at_s) * run.settings.speed,
        workers=run.pool.current_workers() if run.pool is not None else 0,
        lag_s=reports[-1]["max_lag_s"] if reports else None,
        trained=run.trained.unique,
        produced=run.produced(),
        forwarded=run.trained.forwarded,
    )
