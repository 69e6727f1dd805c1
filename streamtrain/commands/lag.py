"""``streamtrain lag``: the Faust lag app (``run``) and a one-shot look (``status``).

All of the work lives in :mod:`streamtrain.lag`; this module parses, calls and prints.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from streamtrain.commands.common import handle_errors, kafka_connection, kafka_options, option
from streamtrain.commands.forecaster_options import forecaster_options, forecaster_settings
from streamtrain.commands.shard_options import shard_job_settings, shard_options
from streamtrain.errors import ConfigError, StreamtrainError
from streamtrain.scale.policies import POLICY_NAMES
from streamtrain.scale.samples import SampleSettings

if TYPE_CHECKING:
    from streamtrain.scale.planner_settings import PlannerSettings

__all__ = ["lag"]


@click.group()
def lag() -> None:
    """Per-partition lag in records and seconds, CPS, status and alerts (KALE §2.2)."""


def _dash(value: Any, fmt: str = "{}") -> str:
    return "-" if value is None else fmt.format(value)


@lag.command("status")
@option("--group", env="LAG_GROUP", required=True, help="The consumer group.")
@option(
    "--topic",
    "topics",
    env="LAG_TOPIC",
    multiple=True,
    help="Topic to report (repeatable); default: every topic the group committed on.",
)
@option("--json", "as_json", env="JSON", is_flag=True, help="Print one JSON object.")
@kafka_options
@handle_errors
def lag_status(group: str, topics: tuple[str, ...], as_json: bool, **opts: Any) -> None:
    """One snapshot of GROUP's lag, like `kafka-consumer-groups.sh --describe` plus LAG-S and CPS.

    LAG-S is the age of the record at the committed offset (from its timestamp); CPS
    needs a history, so a one-shot shows it as unknown (`-`, null in JSON).
    """
    from streamtrain.lag.monitor import one_shot_lag
    from streamtrain.lag.offsets import OffsetsReader
    from streamtrain.lag.report import group_lag_json

    with kafka_connection(opts) as settings:
        reader = OffsetsReader(
            settings, groups=[group], topics=topics, request_timeout_s=opts["connect_timeout_s"]
        )
        result, snapshot = one_shot_lag(reader, group)
    if snapshot.missing_topics:
        missing = ", ".join(repr(t) for t in snapshot.missing_topics)
        raise StreamtrainError(f"topic {missing} does not exist")
    if not snapshot.group_topics.get(group):
        raise StreamtrainError(
            f"consumer group {group!r} has no committed offsets (unknown group?); "
            "give --topic to see the lag it would have"
        )
    if as_json:
        click.echo(json.dumps(group_lag_json(result)))
        return
    header = (
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "LAG-S",
        "CPS",
    )
    rows = [header]
    for topic, partition, committed, hwm, records, seconds, rate, _ in result.rows():
        rows.append(
            (
                group,
                topic,
                str(partition),
                _dash(committed),
                _dash(hwm),
                _dash(records),
                _dash(seconds, "{:.1f}"),
                _dash(rate, "{:.1f}"),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    max_s = "-" if result.max_lag_s is None else f"{result.max_lag_s:.1f} s"
    click.echo(f"\ntotal lag {result.total_lag_records} records, max lag {max_s}")


@lag.command("run")
@option("--group", "groups", env="LAG_GROUPS", multiple=True, help="Group to watch (repeatable).")
@option(
    "--group-pattern",
    env="LAG_GROUP_PATTERN",
    default=None,
    help="Also watch every group whose id fully matches this regular expression.",
)
@option(
    "--topic",
    "topics",
    env="LAG_TOPICS",
    multiple=True,
    help="Topic to watch (repeatable); default: each group's committed topics.",
)
@option(
    "--tick-s", env="LAG_TICK_S", type=click.FloatRange(min=0.1), default=5.0, show_default=True
)
@option("--app-id", env="LAG_APP_ID", default="streamtrain-lag", show_default=True)
@option(
    "--reports-topic", env="LAG_REPORTS_TOPIC", default="streamtrain.lag.reports", show_default=True
)
@option(
    "--alerts-topic", env="LAG_ALERTS_TOPIC", default="streamtrain.lag.alerts", show_default=True
)
@option("--web-host", env="LAG_WEB_HOST", default="127.0.0.1", show_default=True)
@option(
    "--web-port", env="LAG_WEB_PORT", type=click.IntRange(1, 65535), default=6066, show_default=True
)
@option("--webhook-url", env="LAG_WEBHOOK_URL", default=None, help="POST alerts here as JSON.")
@option(
    "--slo-violation-s",
    env="LAG_SLO_VIOLATION_S",
    type=click.FloatRange(min=0, min_open=True),
    default=1200.0,
    show_default=True,
    help="Lag above this many seconds is an SLO violation (KALE §4.1: 20 min).",
)
@option(
    "--slo-warning-s",
    env="LAG_SLO_WARNING_S",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Optional warning threshold below the violation threshold.",
)
@option(
    "--history-step-s",
    env="LAG_HISTORY_STEP_S",
    type=click.FloatRange(min=0.1),
    default=60.0,
    show_default=True,
    help="How often HWMs and group summaries are kept in the changelogged tables.",
)
@option(
    "--history-max-age-s",
    env="LAG_HISTORY_MAX_AGE_S",
    type=click.FloatRange(min=1),
    default=3600.0,
    show_default=True,
)
@option(
    "--data-dir",
    env="LAG_DATA_DIR",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Faust's data directory (default: a new temporary one).",
)
@option(
    "--faust-log-level",
    env="LAG_FAUST_LOG_LEVEL",
    type=click.Choice(["crit", "error", "warn", "info", "debug"]),
    default="warn",
    show_default=True,
)
@option("--plan-job", env="PLAN_JOB", default=None, help="Run the planner for this job.")
@option(
    "--plan-group",
    env="PLAN_GROUP",
    default=None,
    help="The job's consumer group (its CPS and lag); default: the only --group.",
)
@option(
    "--policy",
    env="PLAN_POLICY",
    type=click.Choice(POLICY_NAMES),
    default="streamtrain",
    show_default=True,
)
@option(
    "--policy-setting",
    "policy_settings",
    env="PLAN_POLICY_SETTINGS",
    multiple=True,
    metavar="KEY=VALUE",
    help="A setting of the policy (its settings dataclass names them; repeatable).",
)
@option(
    "--samples-topic",
    env="PLAN_SAMPLES_TOPIC",
    default="streamtrain.throughput",
    show_default=True,
    help="Where workers publish ThroughputSample messages.",
)
@option(
    "--commands-topic",
    env="PLAN_COMMANDS_TOPIC",
    default="streamtrain.scale.commands",
    show_default=True,
    help="Where ScaleCommand messages go (key: the job).",
)
@option("--min-workers", env="PLAN_MIN_WORKERS", type=click.IntRange(min=1), default=1)
@option("--max-workers", env="PLAN_MAX_WORKERS", type=click.IntRange(min=1), default=32)
@option(
    "--initial-workers",
    env="PLAN_INITIAL_WORKERS",
    type=click.IntRange(min=0),
    default=None,
    help="The worker count until samples report one.",
)
@option(
    "--plan-step-s",
    env="PLAN_STEP_S",
    type=click.IntRange(min=1),
    default=60,
    show_default=True,
    help="Arrival history step: one mean CPS per step.",
)
@option(
    "--action-pause-s",
    env="PLAN_ACTION_PAUSE_S",
    type=click.FloatRange(min=0),
    default=None,
    help="Expected pause per scaling action until one is measured (model seconds). "
    "Default: the pause measured for --plan-assignment (streamtrain.scale.action_costs, "
    "benchmarks/scaling.py) on the planner's clock.",
)
@option(
    "--scale-up-prep-s",
    env="PLAN_SCALE_UP_PREP_S",
    type=click.FloatRange(min=0),
    default=None,
    help="Expected preparation of new workers before they take data (model seconds). "
    "Default: the preparation measured for --plan-assignment, on the planner's clock.",
)
@option(
    "--plan-assignment",
    env="PLAN_ASSIGNMENT",
    type=click.Choice(["group", "cooperative", "shards"]),
    default="group",
    show_default=True,
    help="How the planned job's workers get data (their --assignment): picks the "
    "measured preparation and pause the planner expects per action.",
)
@option(
    "--min-action-pause-s",
    env="PLAN_MIN_ACTION_PAUSE_S",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="A floor under the measured pause per action (when the reported worker count "
    "moves before the new workers consume).",
)
@option(
    "--plan-lag-floor-s",
    env="PLAN_LAG_FLOOR_S",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="Lag the job shows while it keeps up (model seconds; e.g. with --assignment "
    "shards records wait to be cut, granted and committed): the policy plans on the lag "
    "and backlog above it.",
)
@option(
    "--throughput-model",
    env="PLAN_THROUGHPUT_MODEL",
    type=click.Choice(["sync", "async", "optimus", "ernest"]),
    default="sync",
    show_default=True,
)
@option(
    "--min-distinct-workers",
    env="PLAN_MIN_DISTINCT_WORKERS",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Measured pool sizes needed before F is fitted (at least the model's "
    "coefficients); the ModelArts prior until then.",
)
@option(
    "--prior-rate",
    env="PLAN_PRIOR_RATE",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Records/s of one worker for the prior before any sample arrives.",
)
@option(
    "--sample-bucket-s",
    env="PLAN_SAMPLE_BUCKET_S",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="Samples in one bucket at one pool size make one job-level observation.",
)
@option(
    "--sample-max-clock-skew-s",
    env="PLAN_SAMPLE_MAX_CLOCK_SKEW_S",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="Samples observed further ahead of this app's clock (wall seconds) are refused.",
)
@option(
    "--sample-max-pool-workers",
    env="PLAN_SAMPLE_MAX_POOL_WORKERS",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="Samples reporting a larger pool are refused.",
)
@option(
    "--sample-max-records-per-s",
    env="PLAN_SAMPLE_MAX_RECORDS_PER_S",
    type=click.FloatRange(min=0, min_open=True),
    default=1e9,
    show_default=True,
    help="Samples with a higher rate (records per wall second) are refused.",
)
@option(
    "--plan-time-scale",
    env="PLAN_TIME_SCALE",
    type=click.FloatRange(min=0, min_open=True),
    default=1.0,
    show_default=True,
    help="Plan on a clock this many times faster than the wall clock (a replay that "
    "compresses a day); the planner's step, pause and sample bucket are model seconds.",
)
@option(
    "--plan-history",
    env="PLAN_HISTORY",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help='Seed the arrival history from this JSON file ({"step_s", "end_at_ms", '
    '"records_per_s"}: records per model second that ended at end_at_ms, which is '
    "also where the scaled clock starts).",
)
@option(
    "--allocator",
    env="PLAN_ALLOCATOR",
    is_flag=True,
    help="The pool is shared: send the planner's wanted counts to the cluster allocator "
    "(`cluster run`) as ScaleRequests on --requests-topic instead of ScaleCommands.",
)
@option(
    "--requests-topic",
    env="PLAN_REQUESTS_TOPIC",
    default="streamtrain.cluster.requests",
    show_default=True,
    help="Where ScaleRequests go with --allocator.",
)
@option(
    "--job-class",
    env="PLAN_JOB_CLASS",
    type=click.Choice(["guarantee", "opportunistic"]),
    default="guarantee",
    show_default=True,
    help="With --allocator: served first (guarantee) or with what is left.",
)
@option(
    "--cps-window-s",
    env="LAG_CPS_WINDOW_S",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Window of the arrival rate (CPS). Default: max(60, 2 x --tick-s).",
)
@forecaster_options
@shard_options
@kafka_options
@handle_errors
def lag_run(
    groups: tuple[str, ...],
    group_pattern: str | None,
    topics: tuple[str, ...],
    tick_s: float,
    app_id: str,
    reports_topic: str,
    alerts_topic: str,
    web_host: str,
    web_port: int,
    webhook_url: str | None,
    slo_violation_s: float,
    slo_warning_s: float | None,
    history_step_s: float,
    history_max_age_s: float,
    data_dir: Path | None,
    faust_log_level: str,
    plan_job: str | None,
    plan_group: str | None,
    policy: str,
    policy_settings: tuple[str, ...],
    samples_topic: str,
    commands_topic: str,
    min_workers: int,
    max_workers: int,
    initial_workers: int | None,
    plan_step_s: int,
    action_pause_s: float | None,
    scale_up_prep_s: float | None,
    plan_assignment: str,
    min_action_pause_s: float,
    plan_lag_floor_s: float,
    throughput_model: str,
    min_distinct_workers: int,
    prior_rate: float | None,
    sample_bucket_s: float,
    sample_max_clock_skew_s: float,
    sample_max_pool_workers: int,
    sample_max_records_per_s: float,
    plan_time_scale: float,
    plan_history: Path | None,
    allocator: bool,
    requests_topic: str,
    job_class: str,
    cps_window_s: float | None,
    **opts: Any,
) -> None:
    """Run the Faust lag app until Ctrl-C or SIGTERM.

    Every --tick-s it reads HWMs and committed offsets in batched calls, publishes a
    LagReport per group to --reports-topic and alerts (status changes, SLO, its own
    health) to --alerts-topic, the log and --webhook-url; serves /metrics, /groups,
    /groups/{group}/lag and /health on --web-host:--web-port.

    With --plan-job it also runs the planner: throughput samples from --samples-topic,
    the --plan-group's CPS and lag, --policy; ScaleCommands to --commands-topic, a
    CANNOT_KEEP_UP alert to --alerts-topic, its state on /planner.
    """
    from streamtrain.control.app import create_app
    from streamtrain.control.faust_app import run_faust_app
    from streamtrain.control.service import LagAppSettings
    from streamtrain.kafka import create_topic
    from streamtrain.lag.monitor import MonitorSettings
    from streamtrain.lag.slo import SloSettings
    from streamtrain.ports import port_is_free

    monitor = MonitorSettings(
        tick_s=tick_s,
        history_step_s=history_step_s,
        history_max_age_s=history_max_age_s,
        cps_window_s=cps_window_s or max(60.0, 2 * tick_s),
        slo=SloSettings(violation_s=slo_violation_s, warning_s=slo_warning_s),
    )
    forecasting = forecaster_settings(
        *(
            opts.pop(k)
            for k in ("forecaster", "refit_every", "plan_quantile", "forecaster_fit_timeout")
        )
    )
    planner = None
    if plan_job is not None:
        from streamtrain.scale.action_costs import measured_cost
        from streamtrain.scale.timescale import TimeScale, read_seed_history

        seed, origin_s = (None, time.time())
        if plan_history is not None:
            seed, origin_s = read_seed_history(plan_history)
        clock = TimeScale(plan_time_scale, origin_s)
        cost = measured_cost(plan_assignment)
        planner = _planner_settings(
            job=plan_job,
            group=plan_group or (groups[0] if len(groups) == 1 else None),
            policy=policy,
            policy_settings=_key_values("--policy-setting", policy_settings),
            step_s=plan_step_s,
            min_workers=min_workers,
            max_workers=max_workers,
            initial_workers=initial_workers,
            action_pause_s=clock.model_duration(cost.pause_s)
            if action_pause_s is None
            else action_pause_s,
            scale_up_prep_s=clock.model_duration(cost.prep_s)
            if scale_up_prep_s is None
            else scale_up_prep_s,
            min_action_pause_s=min_action_pause_s,
            lag_floor_s=plan_lag_floor_s,
            # an action is pending (no new decision) until the samples show its size,
            # at most this long: the measured preparation and pause, with room to spare
            command_timeout_s=max(
                900.0, clock.model_duration(max(30.0, 4 * (cost.prep_s + cost.pause_s)))
            ),
            samples=SampleSettings(
                bucket_s=sample_bucket_s,
                # samples may arrive this late: some wall seconds, however fast the clock
                retention_s=max(300.0, 2 * sample_bucket_s, clock.model_duration(10.0)),
                min_distinct_workers=min_distinct_workers,
                model_kind=throughput_model,
                prior_single_worker_records_per_s=None
                if prior_rate is None
                else clock.model_rate(prior_rate),
                # the limits of issue #18, item 5, on the planner's clock
                max_clock_skew_s=clock.model_duration(sample_max_clock_skew_s),
                max_pool_workers=sample_max_pool_workers,
                max_records_per_s=clock.model_rate(sample_max_records_per_s),
            ),
            time_scale=clock,
            history=seed,
            **forecasting,
        )
        if planner.group not in groups:
            groups = (*groups, planner.group)
    shards = shard_job_settings(opts, topics)
    if shards is not None and shards.job not in groups:
        groups = (*groups, shards.job)
    if not port_is_free(web_host, web_port, reuse_address=True):
        raise ConfigError(f"{web_host}:{web_port} is in use: choose another --web-port")
    with kafka_connection(opts) as kafka:
        settings = LagAppSettings(
            kafka=kafka,
            groups=groups,
            group_pattern=group_pattern,
            topics=topics,
            app_id=app_id,
            reports_topic=reports_topic,
            alerts_topic=alerts_topic,
            web_host=web_host,
            web_port=web_port,
            webhook_url=webhook_url,
            request_timeout_s=min(opts["connect_timeout_s"], max(1.0, tick_s)),
            data_dir=data_dir,
            monitor=monitor,
            planner=planner,
            samples_topic=samples_topic,
            commands_topic=commands_topic,
            requests_topic=requests_topic if allocator and planner is not None else None,
            job_class=job_class,
            shards=shards,
        )
        app, _ = create_app(settings)
        # Created up front with one partition each: the history topic must match its
        # tables' partition count (Faust refuses to start otherwise).
        topics_needed = [reports_topic, alerts_topic, settings.history_topic]
        if planner is not None:
            topics_needed += [samples_topic, commands_topic]
            topics_needed += [requests_topic] if allocator else []
        if shards is not None:
            topics_needed += [shards.updates_topic, shards.grants_topic]
        for name in topics_needed:
            create_topic(kafka, name, 1, timeout_s=opts["connect_timeout_s"], exist_ok=True)
        watched = ", ".join(groups) or "-"
        click.echo(
            f"lag app {app_id}: groups {watched}"
            + (f" + /{group_pattern}/" if group_pattern else "")
            + f", tick {tick_s:g} s, http://{web_host}:{web_port}/groups",
            err=True,
        )
        if planner is not None:
            route = (
                f"requests {requests_topic} ({job_class})"
                if allocator
                else f"commands {commands_topic}"
            )
            click.echo(
                f"planner for job {planner.job} on group {planner.group}: policy {policy}, "
                f"forecaster {planner.forecaster}, "
                f"samples {samples_topic} -> {route}, "
                f"http://{web_host}:{web_port}/planner",
                err=True,
            )
        run_faust_app(app, faust_log_level, "the lag app")


def _key_values(flag: str, items: tuple[str, ...]) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{flag} {item!r} is not KEY=VALUE")
        pairs[key.strip()] = value.strip()
    return pairs


def _planner_settings(
    *, group: str | None, policy_settings: dict[str, str], **kwargs: Any
) -> PlannerSettings:
    from streamtrain.scale.planner_settings import PlannerSettings, check_policy
    from streamtrain.scale.policy_settings import parse_policy_settings

    if group is None:
        raise ConfigError("--plan-job needs --plan-group (or exactly one --group)")
    settings = PlannerSettings(
        group=group, policy_settings=parse_policy_settings(policy_settings), **kwargs
    )
    check_policy(settings)
    return settings
