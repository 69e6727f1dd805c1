"""The planner's options of ``streamtrain lag run`` (``--plan-job`` and the rest), each
with its ``STREAMTRAIN_PLAN_*`` variable, and :func:`take_planner_options`: their values
as the control app's :class:`~streamtrain.scale.planner_settings.PlannerSettings` (or
``None`` without ``--plan-job``) and where its messages go.

The preparation and pause a scaling action is expected to cost default to what
``benchmarks/scaling.py`` measured for ``--plan-assignment``
(:mod:`streamtrain.scale.action_costs`), on the planner's clock.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from streamtrain.commands.common import OptionGroup, option
from streamtrain.config import key_values
from streamtrain.errors import ConfigError
from streamtrain.roster import RosterSettings
from streamtrain.scale.policies import POLICY_NAMES
from streamtrain.scale.samples import SampleSettings

if TYPE_CHECKING:
    from streamtrain.scale.planner_settings import PlannerSettings

__all__ = ["PlannerOptions", "planner_options", "take_planner_options"]


def _declared() -> OptionGroup:
    """The planner's options (module docstring), declared here only."""
    options = [
        option("--plan-job", env="PLAN_JOB", default=None, help="Run the planner for this job."),
        option(
            "--plan-group",
            env="PLAN_GROUP",
            default=None,
            help="The job's consumer group (its CPS and lag); default: the only --group.",
        ),
        option(
            "--policy",
            env="PLAN_POLICY",
            type=click.Choice(POLICY_NAMES),
            default="streamtrain",
            show_default=True,
        ),
        option(
            "--policy-setting",
            "policy_settings",
            env="PLAN_POLICY_SETTINGS",
            multiple=True,
            metavar="KEY=VALUE",
            help="A setting of the policy (its settings dataclass names them; repeatable).",
        ),
        option(
            "--samples-topic",
            env="PLAN_SAMPLES_TOPIC",
            default="streamtrain.throughput",
            show_default=True,
            help="Where workers publish ThroughputSample messages.",
        ),
        option(
            "--commands-topic",
            env="PLAN_COMMANDS_TOPIC",
            default="streamtrain.scale.commands",
            show_default=True,
            help="Where ScaleCommand messages go (key: the job).",
        ),
        option("--min-workers", env="PLAN_MIN_WORKERS", type=click.IntRange(min=1), default=1),
        option("--max-workers", env="PLAN_MAX_WORKERS", type=click.IntRange(min=1), default=32),
        option(
            "--initial-workers",
            env="PLAN_INITIAL_WORKERS",
            type=click.IntRange(min=0),
            default=None,
            help="The worker count until samples report one.",
        ),
        option(
            "--plan-step-s",
            env="PLAN_STEP_S",
            type=click.IntRange(min=1),
            default=60,
            show_default=True,
            help="Arrival history step: one mean CPS per step.",
        ),
        option(
            "--action-pause-s",
            env="PLAN_ACTION_PAUSE_S",
            type=click.FloatRange(min=0),
            default=None,
            help="Expected pause per scaling action until one is measured (model seconds). "
            "Default: the pause measured for --plan-assignment (streamtrain.scale.action_costs, "
            "benchmarks/scaling.py) on the planner's clock.",
        ),
        option(
            "--scale-up-prep-s",
            env="PLAN_SCALE_UP_PREP_S",
            type=click.FloatRange(min=0),
            default=None,
            help="Expected preparation of new workers before they take data (model seconds). "
            "Default: the preparation measured for --plan-assignment, on the planner's clock.",
        ),
        option(
            "--plan-assignment",
            env="PLAN_ASSIGNMENT",
            type=click.Choice(["group", "cooperative", "shards"]),
            default="group",
            show_default=True,
            help="How the planned job's workers get data (their --assignment): picks the "
            "measured preparation and pause the planner expects per action.",
        ),
        option(
            "--plan-engine",
            env="PLAN_ENGINE",
            type=click.Choice(["none", "torchft", "torchelastic"]),
            default="none",
            show_default=True,
            help="How the planned job's workers train (their --engine): with one model "
            "(torchft, torchelastic) the planner expects that engine's measured preparation "
            "and pause per action (streamtrain.scale.action_costs).",
        ),
        option(
            "--min-action-pause-s",
            env="PLAN_MIN_ACTION_PAUSE_S",
            type=click.FloatRange(min=0),
            default=0.0,
            show_default=True,
            help="A floor under the measured pause per action (when the reported worker count "
            "moves before the new workers consume).",
        ),
        option(
            "--plan-lag-floor-s",
            env="PLAN_LAG_FLOOR_S",
            type=click.FloatRange(min=0),
            default=0.0,
            show_default=True,
            help="Lag the job shows while it keeps up (model seconds; e.g. with --assignment "
            "shards records wait to be cut, granted and committed): the policy plans on the lag "
            "and backlog above it.",
        ),
        option(
            "--throughput-model",
            env="PLAN_THROUGHPUT_MODEL",
            type=click.Choice(["sync", "async", "optimus", "ernest"]),
            default="sync",
            show_default=True,
        ),
        option(
            "--min-distinct-workers",
            env="PLAN_MIN_DISTINCT_WORKERS",
            type=click.IntRange(min=1),
            default=3,
            show_default=True,
            help="Measured pool sizes needed before F is fitted (at least the model's "
            "coefficients); the ModelArts prior until then.",
        ),
        option(
            "--prior-rate",
            env="PLAN_PRIOR_RATE",
            type=click.FloatRange(min=0, min_open=True),
            default=None,
            help="Records/s of one worker for the prior before any sample arrives.",
        ),
        option(
            "--sample-bucket-s",
            env="PLAN_SAMPLE_BUCKET_S",
            type=click.FloatRange(min=0.1),
            default=10.0,
            show_default=True,
            help="Samples in one bucket at one pool size make one job-level observation.",
        ),
        option(
            "--sample-max-clock-skew-s",
            env="PLAN_SAMPLE_MAX_CLOCK_SKEW_S",
            type=click.FloatRange(min=0),
            default=60.0,
            show_default=True,
            help="Samples observed further ahead of this app's clock (wall seconds) are refused.",
        ),
        option(
            "--sample-max-pool-workers",
            env="PLAN_SAMPLE_MAX_POOL_WORKERS",
            type=click.IntRange(min=1),
            default=10_000,
            show_default=True,
            help="Samples reporting a larger pool are refused.",
        ),
        option(
            "--sample-max-records-per-s",
            env="PLAN_SAMPLE_MAX_RECORDS_PER_S",
            type=click.FloatRange(min=0, min_open=True),
            default=1e9,
            show_default=True,
            help="Samples with a higher rate (records per wall second) are refused.",
        ),
        option(
            "--worker-expiry-s",
            env="PLAN_WORKER_EXPIRY_S",
            type=click.FloatRange(min=0, min_open=True),
            default=30.0,
            show_default=True,
            help="The worker count is the distinct workers whose samples arrived within this "
            "many wall seconds (or the pool size they state with worker --pool-size).",
        ),
        option(
            "--heartbeats-topic",
            env="PLAN_HEARTBEATS_TOPIC",
            default="streamtrain.scale.heartbeats",
            show_default=True,
            help="Where the planner says it is alive, and its plan, every "
            "--heartbeat-interval-s (keda serve --heartbeats-topic).",
        ),
        option(
            "--heartbeat-interval-s",
            env="PLAN_HEARTBEAT_INTERVAL_S",
            type=click.FloatRange(min=0, min_open=True),
            default=15.0,
            show_default=True,
            help="Seconds between the planner's heartbeats (keep it well under "
            "keda serve --max-plan-age-s).",
        ),
        option(
            "--plan-time-scale",
            env="PLAN_TIME_SCALE",
            type=click.FloatRange(min=0, min_open=True),
            default=1.0,
            show_default=True,
            help="Plan on a clock this many times faster than the wall clock (a replay that "
            "compresses a day); the planner's step, pause and sample bucket are model seconds.",
        ),
        option(
            "--plan-history",
            env="PLAN_HISTORY",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help='Seed the arrival history from this JSON file ({"step_s", "end_at_ms", '
            '"records_per_s"}: records per model second that ended at end_at_ms, which is '
            "also where the scaled clock starts).",
        ),
        option(
            "--allocator",
            env="PLAN_ALLOCATOR",
            is_flag=True,
            help="The pool is shared: send the planner's wanted counts to the cluster allocator "
            "(`cluster run`) as ScaleRequests on --requests-topic instead of ScaleCommands.",
        ),
        option(
            "--requests-topic",
            env="PLAN_REQUESTS_TOPIC",
            default="streamtrain.cluster.requests",
            show_default=True,
            help="Where ScaleRequests go with --allocator.",
        ),
        option(
            "--job-class",
            env="PLAN_JOB_CLASS",
            type=click.Choice(["guarantee", "opportunistic"]),
            default="guarantee",
            show_default=True,
            help="With --allocator: served first (guarantee) or with what is left.",
        ),
    ]
    return OptionGroup(*options)


planner_options = _declared()


@dataclass(frozen=True, slots=True)
class PlannerOptions:
    """The planner's settings (``None`` without ``--plan-job``) and its topics;
    ``requests_topic`` is set only with ``--allocator`` and a planner."""

    settings: PlannerSettings | None
    samples_topic: str
    commands_topic: str
    requests_topic: str | None
    job_class: str
    heartbeats_topic: str = "streamtrain.scale.heartbeats"
    heartbeat_interval_s: float = 15.0


def take_planner_options(
    opts: dict[str, Any], groups: tuple[str, ...], forecasting: dict[str, Any]
) -> PlannerOptions:
    """Take the planner's options out of ``opts``; ``groups`` are the watched ``--group``s
    (the default ``--plan-group`` is the only one), ``forecasting`` the forecaster's
    settings (:func:`~streamtrain.commands.forecaster_options.forecaster_settings`)."""
    v = planner_options.take(opts)
    settings = None
    if v["plan_job"] is not None:
        settings = _planner_settings(v, groups, forecasting)
    return PlannerOptions(
        settings=settings,
        samples_topic=v["samples_topic"],
        commands_topic=v["commands_topic"],
        requests_topic=v["requests_topic"] if v["allocator"] and settings is not None else None,
        job_class=v["job_class"],
        heartbeats_topic=v["heartbeats_topic"],
        heartbeat_interval_s=v["heartbeat_interval_s"],
    )


def _planner_settings(
    v: dict[str, Any], groups: tuple[str, ...], forecasting: dict[str, Any]
) -> PlannerSettings:
    from streamtrain.scale.action_costs import measured_cost
    from streamtrain.scale.planner_settings import (
        PlannerSettings,
        check_policy,
        command_timeout_s,
        sample_retention_s,
    )
    from streamtrain.scale.policy_settings import parse_policy_settings
    from streamtrain.scale.timescale import TimeScale, read_seed_history

    group = v["plan_group"] or (groups[0] if len(groups) == 1 else None)
    if group is None:
        raise ConfigError("--plan-job needs --plan-group (or exactly one --group)")
    seed, origin_s = (None, time.time())
    if v["plan_history"] is not None:
        seed, origin_s = read_seed_history(v["plan_history"])
    clock = TimeScale(v["plan_time_scale"], origin_s)
    cost = measured_cost(v["plan_assignment"], v["plan_engine"])
    bucket_s = v["sample_bucket_s"]
    prior_rate = v["prior_rate"]
    settings = PlannerSettings(
        job=v["plan_job"],
        group=group,
        policy=v["policy"],
        policy_settings=parse_policy_settings(key_values("--policy-setting", v["policy_settings"])),
        step_s=v["plan_step_s"],
        min_workers=v["min_workers"],
        max_workers=v["max_workers"],
        initial_workers=v["initial_workers"],
        action_pause_s=clock.model_duration(cost.pause_s)
        if v["action_pause_s"] is None
        else v["action_pause_s"],
        scale_up_prep_s=clock.model_duration(cost.prep_s)
        if v["scale_up_prep_s"] is None
        else v["scale_up_prep_s"],
        min_action_pause_s=v["min_action_pause_s"],
        # one model: a joiner heals before it is admitted and a leaver drains before it
        # leaves, the others training meanwhile
        two_phase_actions=v["plan_engine"] != "none",
        lag_floor_s=v["plan_lag_floor_s"],
        command_timeout_s=command_timeout_s(clock, cost.prep_s, cost.pause_s),
        samples=SampleSettings(
            bucket_s=bucket_s,
            retention_s=sample_retention_s(clock, bucket_s),
            min_distinct_workers=v["min_distinct_workers"],
            model_kind=v["throughput_model"],
            prior_single_worker_records_per_s=None
            if prior_rate is None
            else clock.model_rate(prior_rate),
            # the sample limits (clock skew, pool size, rate), on the planner's clock
            max_clock_skew_s=clock.model_duration(v["sample_max_clock_skew_s"]),
            max_pool_workers=v["sample_max_pool_workers"],
            max_records_per_s=clock.model_rate(v["sample_max_records_per_s"]),
        ),
        workers=RosterSettings(expiry_s=v["worker_expiry_s"]),  # wall seconds
        time_scale=clock,
        history=seed,
        **forecasting,
    )
    check_policy(settings)
    return settings
