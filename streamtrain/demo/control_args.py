"""The demo's control app command line: ``streamtrain lag run --plan-job ...`` (pure).

Owned here: :func:`control_app_argv`, the argv of the control app for a run, and the
named constants behind every number in it.

Two clocks meet in this command line. The control app's lag monitor measures on the
**wall clock**: its tick, history step, SLO and arrival-rate window are wall seconds.
The planner runs on
a **model clock** ``speed`` times faster (``--plan-time-scale``; a simulated day takes
``86400 / speed`` wall seconds), so its step, pauses, sample bucket and policy settings
are model (simulated) seconds. A duration the demo means in wall seconds, such as how
long a rebalance pauses the consumer group on this machine, is therefore written as
``WALL_S * speed`` model seconds: at the default speed of 144, one wall second is
2.4 simulated minutes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from streamtrain.demo.children import DemoNames, streamtrain_command
from streamtrain.scale.action_costs import measured_cost

__all__ = [
    "CPS_WINDOW_MIN_S",
    "CPS_WINDOW_PLAN_STEPS",
    "DEMO_WORKER_PREP_WALL_S",
    "DOWN_HEADROOM",
    "FALLBACK_COOLDOWN_WALL_S",
    "HEADROOM",
    "HISTORY_STEP_S",
    "LAG_TICK_S",
    "PLAN_QUANTILE",
    "PLAN_STEP_S",
    "SAMPLE_BUCKET_WALL_S",
    "SHARD_LAG_FLOOR_WALL_S",
    "SHARD_LEASE_WALL_S",
    "SHARD_MAX_WAIT_WALL_S",
    "SLO_WARNING_FRACTION",
    "TOLERATED_LAG_WALL_S",
    "TRIGGER_ENTER_MIN_WALL_S",
    "TRIGGER_ENTER_SLO_FRACTION",
    "TRIGGER_EXIT_WALL_S",
    "ControlSettings",
    "control_app_argv",
]

# -- the lag monitor (wall clock) -----------------------------------------------------

# One lag report a wall second (2.4 simulated minutes at 144x): the dashboard and the
# planner see lag move while a compressed day passes.
LAG_TICK_S = 1
# HWMs and group summaries kept every 5 wall seconds (12 simulated minutes at 144x).
HISTORY_STEP_S = 5
# The SLO warning fires at half the violation threshold.
SLO_WARNING_FRACTION = 0.5
# The arrival rate (CPS) is averaged over three planning steps (15 simulated minutes),
# but never over fewer than three ticks (3 wall seconds), so one tick's noise does not
# make the rate jump at high speeds.
CPS_WINDOW_PLAN_STEPS = 3
CPS_WINDOW_MIN_S = 3.0

# -- the planner (model clock) --------------------------------------------------------

# The planner's step: 5 simulated minutes (model seconds), KALE's planning granularity;
# the seed history is built per step of this length too.
PLAN_STEP_S = 300
# The pause and preparation the planner expects per action are the ones measured for
# the demo's --assignment (streamtrain.scale.action_costs, benchmarks/scaling.py), on
# the model clock; the measured pause is also the floor under the pause the planner
# measures itself from the pool's size (which moves when the new workers are admitted,
# before they have data).
# The preparation of a demo worker (process up, torch and the MMoE model loaded, the
# newest checkpoint read, READY) measured in `streamtrain demo` runs on the 2-core
# machine with one copy of the model per worker: 2.8-8.2 s, 5.8 s on average. It is
# longer than the benchmark's (streamtrain.scale.action_costs: a worker that imports no
# torch), so the demo tells the planner its own; the pause is the mode's measured one.
# Both are where the planner starts: once an action has been measured it plans with
# the measured one (a scale-up's preparation took 9-35 s in the evening, with five or
# more workers training beside the joiner).
DEMO_WORKER_PREP_WALL_S = 6.0
# With shards, records wait at most half a wall second uncut (72 simulated seconds):
# the cut is one of the waits that add up to the lag floor (cut, grant, read, train,
# done report, commit: ≈3 wall seconds with 1 s); a worker whose shards are small asks
# for more of them per grant round trip (streamtrain.ingest.shard_consumer).
SHARD_MAX_WAIT_WALL_S = 0.5
# A shard whose worker sent no heartbeat for 6 wall seconds goes back to the queue (the
# coordinator's default is 3 s): on the shared 2-core machine live workers and the
# control app's agent stalled for 3 s often enough that every lease expired at once
# (each shard then trained twice); a killed worker's shards return 3 s later instead.
SHARD_LEASE_WALL_S = 6.0
# The settings below were tuned in group mode, whose lag floor (≈1-1.5 wall seconds:
# the workers commit every second) they include. With shards a record also waits to
# be cut, granted, reported done and committed by the control app: ≈2 wall seconds
# more (benchmarks/scaling.py: the shard worker's median record waits ≈2.4 s more than
# in group mode with 1-s cuts; 0.5-s cuts now). The planner subtracts that extra floor
# (`--plan-lag-floor-s`), so the policy's thresholds mean the same in every mode
# (without it the fallback, entered once, never saw the excess lag fall under its exit
# threshold and the pool stayed at its peak size for the rest of the day).
SHARD_LAG_FLOOR_WALL_S = 2.0
# Throughput samples arrive once a wall second; 3 wall seconds of them at one pool size
# make one job-level observation (7.2 simulated minutes at 144x), at least one step.
SAMPLE_BUCKET_WALL_S = 3.0

# -- the streamtrain policy's settings (model clock) ------------------------------------

# The demo plans on the forecast's 0.8 quantile, not the median (the policy's default).
# Its pool is small: at the evening peak one worker is a third of the capacity, and the
# planner's step (5 simulated minutes) averages traffic that swings ±25 % from minute to
# minute; on the median, 3 workers held into the peak at their limit and the fallback
# added the fourth (and more) once lag had built up. The worker-minutes this costs are
# measured in docs/benchmarks.md ("The demo").
PLAN_QUANTILE = 0.8

# The demo plans for 35 % above that forecast (the policy's `headroom`; 2 % by default),
# and a scale-down keeps 15 % more above the forecast and the rate just measured
# (`down_headroom`; 0 by default). Its traffic swings ±25 % from minute to minute
# inside a planning step, its pool learns its capacity while it runs (two workers'
# measured rate moved between 4.3 and 6.0 records per model second over a day), and
# the lag of its shards grows with the pool's load well before the pool falls behind
# (the rounds' batches fill and every record waits for a round). A lockstep worker's
# capacity is measured from its compute and synchronization, as if every round had a
# full batch; against it, 20 % left the evening pool at 60-80 % of that capacity with
# the lag at 8-19 wall seconds on two killed-worker days (SLO violation 6.4 % and 9.9 %),
# where 35 % met the SLO (docs/benchmarks.md, "The demo"). With the same margin both
# ways, a scale-down was undone by a scale-up minutes later, three times a day.
HEADROOM = 0.35
DOWN_HEADROOM = 0.15

# Lag is measured to about a wall second and a rebalance pauses the group for several,
# which on the model clock are minutes: the policy tolerates 3 wall seconds of lag
# (7.2 simulated minutes at 144x) before acting ahead of a forecast.
TOLERATED_LAG_WALL_S = 3.0
# After an action, the lag fallback waits 20 wall seconds (48 simulated minutes at 144x):
# several rebalance pauses and lag reports, so one action's own pause does not trigger
# the next.
FALLBACK_COOLDOWN_WALL_S = 20.0
# The fallback trigger enters when measured lag exceeds the plan's by half the SLO,
# but never below 5 wall seconds (12 simulated minutes at 144x: a rebalance's pause
# alone must not trigger it) ...
TRIGGER_ENTER_SLO_FRACTION = 0.5
TRIGGER_ENTER_MIN_WALL_S = 5.0
# ... and leaves once the excess is back under 2.5 wall seconds (6 simulated minutes at
# 144x), about the resolution of the lag measurement.
TRIGGER_EXIT_WALL_S = 2.5


class ControlSettings(Protocol):
    """What the control app's command line depends on: the part of
    :class:`~streamtrain.demo.settings.DemoSettings` it reads."""

    @property
    def speed(self) -> float: ...

    @property
    def slo_s(self) -> float: ...

    @property
    def min_workers(self) -> int: ...

    @property
    def max_workers(self) -> int: ...

    @property
    def initial_workers(self) -> int: ...

    @property
    def worker_capacity_records_per_s(self) -> float: ...

    @property
    def assignment(self) -> str: ...

    @property
    def engine(self) -> str: ...


def control_app_argv(
    settings: ControlSettings,
    names: DemoNames,
    *,
    web_port: int,
    data_dir: Path,
    history_path: Path,
) -> list[str]:
    """The control app's argv: lag watched for ``names.job``, with the streamtrain
    policy planning it (see the module docstring for the two clocks)."""
    s, n = settings, names

    def model_s(wall_s: float) -> str:
        """A wall-clock duration as whole model seconds."""
        return f"{wall_s * s.speed:.0f}"

    cost = measured_cost(s.assignment, s.engine)
    shards = (
        (
            "--shards-job",
            n.job,
            "--shard-max-wait-s",
            str(SHARD_MAX_WAIT_WALL_S),
            "--shard-lease-s",
            str(SHARD_LEASE_WALL_S),
        )
        if s.assignment == "shards"
        else ()
    )
    return streamtrain_command(
        "lag",
        "run",
        "--group",
        n.job,
        "--topic",
        n.topic,
        "--tick-s",
        str(LAG_TICK_S),
        "--app-id",
        n.control("control"),
        "--reports-topic",
        n.control("reports"),
        "--alerts-topic",
        n.control("alerts"),
        "--web-port",
        str(web_port),
        "--slo-violation-s",
        f"{s.slo_s:.3f}",
        "--slo-warning-s",
        f"{s.slo_s * SLO_WARNING_FRACTION:.3f}",
        "--history-step-s",
        str(HISTORY_STEP_S),
        "--cps-window-s",
        f"{max(CPS_WINDOW_MIN_S, CPS_WINDOW_PLAN_STEPS * PLAN_STEP_S / s.speed):.3f}",
        "--data-dir",
        str(data_dir),
        "--plan-job",
        n.job,
        "--policy",
        "streamtrain",
        "--samples-topic",
        n.control("throughput"),
        "--commands-topic",
        n.control("commands"),
        "--min-workers",
        str(s.min_workers),
        "--max-workers",
        str(s.max_workers),
        "--initial-workers",
        str(s.initial_workers),
        "--plan-step-s",
        str(PLAN_STEP_S),
        "--plan-assignment",
        s.assignment,
        "--plan-engine",
        s.engine,
        "--plan-quantile",
        str(PLAN_QUANTILE),
        "--action-pause-s",
        model_s(cost.pause_s),
        "--scale-up-prep-s",
        model_s(max(cost.prep_s, DEMO_WORKER_PREP_WALL_S)),
        "--min-action-pause-s",
        model_s(cost.pause_s),
        "--plan-lag-floor-s",
        model_s(SHARD_LAG_FLOOR_WALL_S if s.assignment == "shards" else 0.0),
        "--prior-rate",
        f"{s.worker_capacity_records_per_s:.3f}",
        "--sample-bucket-s",
        f"{max(PLAN_STEP_S, SAMPLE_BUCKET_WALL_S * s.speed):.0f}",
        "--policy-setting",
        f"tolerated_lag_s={model_s(TOLERATED_LAG_WALL_S)}",
        "--policy-setting",
        f"headroom={HEADROOM}",
        "--policy-setting",
        f"down_headroom={DOWN_HEADROOM}",
        "--policy-setting",
        f"fallback_target_lag_s={model_s(s.slo_s)}",
        "--policy-setting",
        f"fallback_cooldown_s={model_s(FALLBACK_COOLDOWN_WALL_S)}",
        "--policy-setting",
        "trigger_lag_enter_s="
        + model_s(max(s.slo_s * TRIGGER_ENTER_SLO_FRACTION, TRIGGER_ENTER_MIN_WALL_S)),
        "--policy-setting",
        f"trigger_lag_exit_s={model_s(TRIGGER_EXIT_WALL_S)}",
        "--plan-time-scale",
        f"{s.speed:g}",
        "--plan-history",
        str(history_path),
        *shards,
    )
