"""``streamtrain cluster``: several jobs on one pool: the allocator (``run``) and what it
last decided (``status``).

All of the work lives in :mod:`streamtrain.cluster` and :mod:`streamtrain.control.allocator`;
this module parses, calls and prints.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
from streamtrain.errors import StreamtrainError
from streamtrain.units import ms_to_s

__all__ = ["cluster"]

_REQUESTS = "streamtrain.cluster.requests"
_DECISIONS = "streamtrain.cluster.decisions"


@click.group()
def cluster() -> None:
    """Several jobs on one pool: guarantee, opportunistic and serving (ModelArts, AntMan, FaPES)."""


@cluster.command("run")
@option(
    "--capacity",
    env="CLUSTER_CAPACITY",
    type=click.IntRange(min=1),
    required=True,
    help="Workers in the pool.",
)
@option(
    "--guarantee-job",
    "guarantee_jobs",
    env="CLUSTER_GUARANTEE_JOBS",
    multiple=True,
    help="An online job with a lag SLO: its wanted counts are served first (repeatable).",
)
@option(
    "--opportunistic-job",
    "opportunistic_jobs",
    env="CLUSTER_OPPORTUNISTIC_JOBS",
    multiple=True,
    help="An offline or best-effort job: it gets what is left (repeatable).",
)
@option(
    "--serving-job",
    "serving_jobs",
    env="CLUSTER_SERVING_JOBS",
    multiple=True,
    help="A serving pool: its requests' wanted count is its min_scale, met before "
    "opportunistic jobs; its idle workers are loaned out (repeatable).",
)
@option(
    "--power-of-two-job",
    "power_of_two_jobs",
    env="CLUSTER_POWER_OF_TWO_JOBS",
    multiple=True,
    help="A job that may only get 1, 2, 4, 8, ... workers (repeatable).",
)
@option(
    "--solver",
    env="CLUSTER_SOLVER",
    type=click.Choice(["milp", "greedy"]),
    default="milp",
    show_default=True,
    help="The rolling-horizon MILP, or the ModelArts greedy rules.",
)
@option("--requests-topic", env="CLUSTER_REQUESTS_TOPIC", default=_REQUESTS, show_default=True)
@option(
    "--commands-topic",
    env="CLUSTER_COMMANDS_TOPIC",
    default="streamtrain.scale.commands",
    show_default=True,
    help="Where the granted ScaleCommands go (key: the job; `scale apply` reads them).",
)
@option(
    "--decisions-topic",
    env="CLUSTER_DECISIONS_TOPIC",
    default=_DECISIONS,
    show_default=True,
    help="Every decision with its reasons (`cluster status` reads the newest).",
)
@option("--app-id", env="CLUSTER_APP_ID", default="streamtrain-cluster", show_default=True)
@option(
    "--tick-s",
    env="CLUSTER_TICK_S",
    type=click.FloatRange(min=0.1),
    default=5.0,
    show_default=True,
    help="How often the leader looks for new requests to decide on.",
)
@option(
    "--interval-s",
    env="CLUSTER_INTERVAL_S",
    type=click.FloatRange(min=0.1),
    default=300.0,
    show_default=True,
    help="Re-plan at least this often without new requests (ModelArts' f).",
)
@option(
    "--plan-step-s",
    env="CLUSTER_PLAN_STEP_S",
    type=click.FloatRange(min=1),
    default=300.0,
    show_default=True,
)
@option(
    "--horizon-steps",
    env="CLUSTER_HORIZON_STEPS",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="Plan steps the MILP looks ahead; only the first is applied.",
)
@option(
    "--time-limit-ms",
    env="CLUSTER_TIME_LIMIT_MS",
    type=click.FloatRange(min=1),
    default=500.0,
    show_default=True,
    help="The MILP's time budget per decision (the best plan found by then is used).",
)
@web_pages_options("CLUSTER")
@option(
    "--max-clock-skew-s",
    env="CLUSTER_MAX_CLOCK_SKEW_S",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="Requests created further ahead of this clock are refused with a reason.",
)
@option(
    "--web-port",
    env="CLUSTER_WEB_PORT",
    type=click.IntRange(1, 65535),
    default=6067,
    show_default=True,
)
@faust_app_options("CLUSTER")
@kafka_options
@handle_errors
def cluster_run(
    capacity: int,
    guarantee_jobs: tuple[str, ...],
    opportunistic_jobs: tuple[str, ...],
    serving_jobs: tuple[str, ...],
    power_of_two_jobs: tuple[str, ...],
    solver: str,
    requests_topic: str,
    commands_topic: str,
    decisions_topic: str,
    app_id: str,
    tick_s: float,
    interval_s: float,
    plan_step_s: float,
    horizon_steps: int,
    time_limit_ms: float,
    web_host: str,
    trusted_network: bool,
    max_clock_skew_s: float,
    web_port: int,
    data_dir: Path | None,
    faust_log_level: str,
    **opts: Any,
) -> None:
    """Run the cluster allocator until Ctrl-C or SIGTERM.

    Planners (`lag run --allocator`) and other jobs send ScaleRequests to
    --requests-topic; the leader grants workers within --capacity: guarantee jobs
    first, serving's min_scale next, opportunistic jobs the rest (the MILP maximizes
    their progress minus scaling costs), and sends a ScaleCommand for every job whose
    count changes to --commands-topic. Requests for undeclared jobs, negative counts,
    stale requests and requests from the future are refused with a logged reason;
    counts above --capacity are clamped to it. Every decision and its
    reasons go to --decisions-topic and /cluster on --web-host:--web-port.
    """
    from streamtrain.control.allocator import create_allocator_app
    from streamtrain.control.allocator_service import AllocatorSettings
    from streamtrain.control.faust_app import run_faust_app

    check_web_port(web_host, web_port)
    with kafka_connection(opts) as kafka:
        settings = AllocatorSettings(
            kafka=kafka,
            capacity_workers=capacity,
            guarantee_jobs=guarantee_jobs,
            opportunistic_jobs=opportunistic_jobs,
            serving_jobs=serving_jobs,
            power_of_two_jobs=power_of_two_jobs,
            app_id=app_id,
            requests_topic=requests_topic,
            commands_topic=commands_topic,
            decisions_topic=decisions_topic,
            tick_s=tick_s,
            interval_s=interval_s,
            step_s=plan_step_s,
            horizon_steps=horizon_steps,
            solver=solver,
            time_limit_s=ms_to_s(time_limit_ms),
            web_host=web_host,
            web_port=web_port,
            data_dir=data_dir,
            request_timeout_s=min(opts["connect_timeout_s"], max(1.0, tick_s)),
            max_clock_skew_s=max_clock_skew_s,
            trusted_network=trusted_network,
        )
        app, _ = create_allocator_app(settings)
        create_app_topics(
            kafka,
            (requests_topic, commands_topic, decisions_topic, settings.state_topic),
            opts["connect_timeout_s"],
        )
        declared = ", ".join(f"{job} ({cls})" for job, cls in settings.declared.items())
        click.echo(
            f"cluster allocator {app_id}: {capacity} workers for {declared}; {solver}, "
            f"requests {requests_topic} -> commands {commands_topic}, "
            f"http://{web_host}:{web_port}/cluster",
            err=True,
        )
        run_faust_app(app, faust_log_level, "the allocator")


@cluster.command("status")
@option(
    "--decisions-topic",
    env="CLUSTER_DECISIONS_TOPIC",
    default=_DECISIONS,
    show_default=True,
)
@option("--json", "as_json", env="JSON", is_flag=True, help="Print one JSON object.")
@kafka_options
@handle_errors
def cluster_status(decisions_topic: str, as_json: bool, **opts: Any) -> None:
    """What the allocator last decided: every job's class, wanted and granted workers,
    and the reason; refused requests and pool notes (loans, reclaims, the throttle)."""
    from streamtrain.control.cluster_status import decision_json, format_decision, latest_decision

    with kafka_connection(opts) as kafka:
        decision = latest_decision(kafka, decisions_topic, opts["connect_timeout_s"])
    if decision is None:
        raise StreamtrainError(f"no decision on {decisions_topic!r} yet (is `cluster run` up?)")
    click.echo(json.dumps(decision_json(decision)) if as_json else format_decision(decision))
