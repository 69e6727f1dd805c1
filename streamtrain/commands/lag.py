"""``streamtrain lag``: the Faust control app (``run``) and a one-shot look (``status``).

All of the work lives in :mod:`streamtrain.lag`; this module parses, calls and prints.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from streamtrain.commands.common import (
    check_web_port,
    create_app_topics,
    faust_app_options,
    handle_errors,
    kafka_connection,
    kafka_options,
    option,
    web_pages_options,
)
from streamtrain.commands.forecaster_options import forecaster_options, forecaster_settings
from streamtrain.commands.planner_options import planner_options, take_planner_options
from streamtrain.commands.shard_options import shard_job_settings, shard_options
from streamtrain.errors import StreamtrainError

if TYPE_CHECKING:
    pass

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
@web_pages_options("LAG")
@option(
    "--faust-pages",
    env="LAG_FAUST_PAGES",
    is_flag=True,
    help="Also serve Faust's own /table (table contents) and /router (topology) pages.",
)
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
@faust_app_options("LAG")
@option(
    "--session-timeout-s",
    env="LAG_SESSION_TIMEOUT_S",
    type=click.FloatRange(min=3.0),
    default=10.0,
    show_default=True,
    help="The broker drops the app from its consumer group after this long without a "
    "heartbeat (one a second); a (re)join on Tansu waits about half of it for others.",
)
@option(
    "--cps-window-s",
    env="LAG_CPS_WINDOW_S",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Window of the arrival rate (CPS). Default: max(60, 2 x --tick-s).",
)
@planner_options
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
    trusted_network: bool,
    faust_pages: bool,
    web_port: int,
    webhook_url: str | None,
    slo_violation_s: float,
    slo_warning_s: float | None,
    history_step_s: float,
    history_max_age_s: float,
    data_dir: Path | None,
    faust_log_level: str,
    session_timeout_s: float,
    cps_window_s: float | None,
    **opts: Any,
) -> None:
    """Run the Faust control app until Ctrl-C or SIGTERM.

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
    from streamtrain.control.service import LagAppSettings, check_web_host
    from streamtrain.lag.monitor import MonitorSettings
    from streamtrain.lag.slo import SloSettings

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
            for k in (
                "forecaster",
                "refit_every",
                "plan_quantile",
                "forecaster_fit_timeout",
                "forecaster_option",
            )
        )
    )
    plan = take_planner_options(opts, groups, forecasting)
    planner = plan.settings
    if planner is not None and planner.group not in groups:
        groups = (*groups, planner.group)
    shards = shard_job_settings(opts, topics)
    if shards is not None and shards.job not in groups:
        groups = (*groups, shards.job)
    check_web_host(web_host, trusted_network=trusted_network)
    check_web_port(web_host, web_port)
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
            session_timeout_s=session_timeout_s,
            data_dir=data_dir,
            monitor=monitor,
            planner=planner,
            samples_topic=plan.samples_topic,
            commands_topic=plan.commands_topic,
            requests_topic=plan.requests_topic,
            job_class=plan.job_class,
            shards=shards,
            heartbeats_topic=plan.heartbeats_topic or None,
            heartbeat_interval_s=plan.heartbeat_interval_s,
            trusted_network=trusted_network,
            faust_pages=faust_pages,
        )
        app, _ = create_app(settings)
        topics_needed = [reports_topic, alerts_topic, settings.history_topic]
        if planner is not None:
            topics_needed += [plan.samples_topic, plan.commands_topic]
            topics_needed += [plan.requests_topic] if plan.requests_topic else []
            topics_needed += [plan.heartbeats_topic] if plan.heartbeats_topic else []
        if shards is not None:
            topics_needed += [shards.updates_topic, shards.grants_topic]
        create_app_topics(kafka, topics_needed, opts["connect_timeout_s"])
        watched = ", ".join(groups) or "-"
        click.echo(
            f"control app {app_id}: groups {watched}"
            + (f" + /{group_pattern}/" if group_pattern else "")
            + f", tick {tick_s:g} s, http://{web_host}:{web_port}/groups",
            err=True,
        )
        if planner is not None:
            route = (
                f"requests {plan.requests_topic} ({plan.job_class})"
                if plan.requests_topic
                else f"commands {plan.commands_topic}"
            )
            click.echo(
                f"planner for job {planner.job} on group {planner.group}: policy {planner.policy}, "
                f"forecaster {planner.forecaster}, "
                f"samples {plan.samples_topic} -> {route}, "
                f"http://{web_host}:{web_port}/planner",
                err=True,
            )
        run_faust_app(app, faust_log_level, "the control app")
