"""``streamtrain demo``: the elastic online-training loop end to end.

All of the work lives in :mod:`streamtrain.demo.run`; this module parses options,
starts the embedded broker unless ``--bootstrap`` is given, prints the dashboard URL
and progress on stderr, and the summary on stdout (one JSON object with ``--json``).
Ctrl-C (or SIGTERM) stops everything it started and exits 130.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from streamtrain.commands.common import handle_errors, kafka_connection, kafka_options, option
from streamtrain.errors import ConfigError
from streamtrain.shuffle.policy import ShufflePolicy
from streamtrain.units import DAY_S

__all__ = ["demo"]


@click.command("demo")
@option(
    "--duration",
    "duration_s",
    env="DEMO_DURATION",
    type=click.FloatRange(min=30),
    default=None,
    help="Wall seconds the simulated day takes. Default: 600 (24 h in 10 minutes).",
)
@option(
    "--speed",
    env="DEMO_SPEED",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Simulated seconds per wall second (86400 / --duration). Default: 144.",
)
@option("--topic", env="DEMO_TOPIC", default=None, help="Data topic. Default: a new one per run.")
@option(
    "--partitions", env="DEMO_PARTITIONS", type=click.IntRange(min=1), default=16, show_default=True
)
@option(
    "--peak-rate",
    env="DEMO_PEAK_RATE",
    type=click.FloatRange(min=0, min_open=True),
    default=1200.0,
    show_default=True,
    help="Records/s at the evening peak.",
)
@option(
    "--worker-capacity",
    env="DEMO_WORKER_CAPACITY",
    type=click.FloatRange(min=0, min_open=True),
    default=400.0,
    show_default=True,
    help="Records/s one worker trains at most (as a slower accelerator would).",
)
@option(
    "--min-workers",
    env="DEMO_MIN_WORKERS",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="The pool never goes below this: with one worker, a dead worker stops training "
    "until its replacement is ready.",
)
@option("--max-workers", env="DEMO_MAX_WORKERS", type=click.IntRange(min=1), default=8)
@option(
    "--initial-workers",
    env="DEMO_INITIAL_WORKERS",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    help="The pool when the day starts (at midnight's traffic, about 0.7 of the evening peak's).",
)
@option(
    "--slo-lag-s",
    env="DEMO_SLO_LAG_S",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Lag SLO in wall seconds. Default: 20 simulated minutes (KALE), at least 2 s (lag "
    "is measured to about a second).",
)
@option("--seed", env="DEMO_SEED", type=int, default=0, show_default=True)
@option(
    "--drain-timeout-s",
    env="DEMO_DRAIN_TIMEOUT_S",
    type=click.FloatRange(min=0),
    default=120.0,
    show_default=True,
    help="After the day, wait this long at most for the workers to train every record.",
)
@option(
    "--run-dir",
    env="DEMO_RUN_DIR",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Logs, trained ids and checkpoints. Default: a new temporary directory.",
)
@option("--dashboard-host", env="DEMO_DASHBOARD_HOST", default="127.0.0.1", show_default=True)
@option(
    "--dashboard-port",
    env="DEMO_DASHBOARD_PORT",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="0 picks a free port.",
)
@option(
    "--kill-worker-at",
    "kill_worker_at_s",
    env="DEMO_KILL_WORKER_AT",
    type=click.FloatRange(min=0),
    default=None,
    metavar="SECONDS",
    help="SIGKILL one worker this many wall seconds into the day (it is replaced; the "
    "summary shows whether any record was lost).",
)
@option(
    "--shuffle",
    env="DEMO_SHUFFLE",
    type=click.Choice([p.value for p in ShufflePolicy]),
    default="advanced",
    show_default=True,
    help="The workers' shuffle policy (streamtrain worker --shuffle): `advanced` lets a "
    "worker with hot partitions hand its overflow to idle peers. With --assignment "
    "shards the workers run without it (free workers pulling shards balance hot "
    "partitions).",
)
@option(
    "--assignment",
    env="DEMO_ASSIGNMENT",
    type=click.Choice(["group", "cooperative", "shards"]),
    default="shards",
    show_default=True,
    help="How the workers get data (streamtrain worker --assignment): `shards` (the "
    "control app leases offset ranges; a scaling action moves no partition), "
    "`cooperative` (incremental rebalancing) or `group` (eager rebalancing: every action "
    "pauses every worker). Run the demo once per mode to compare them.",
)
@option(
    "--drift-turns-per-day",
    env="DEMO_DRIFT_TURNS_PER_DAY",
    type=click.FloatRange(min=0),
    default=0.5,
    show_default=True,
    help="How often the hidden model that labels the traffic turns in a simulated day. "
    "Fast drift (e.g. 6) makes stale training visible: the summary's auc_lost_to_lag.",
)
@option(
    "--engine",
    env="DEMO_ENGINE",
    type=click.Choice(["torchft", "torchelastic", "none"]),
    default="torchft",
    show_default=True,
    help="How the workers train (streamtrain worker --engine): `torchft`, ONE model "
    "data-parallel on every worker (the demo starts torchft's lighthouse on 127.0.0.1; "
    "workers join and leave between steps while the others keep stepping); `none`, "
    "each worker its own copy, nothing exchanged. `torchelastic` is refused here: every "
    "scaling action restarts every worker (13-62 s measured), far beyond the SLO.",
)
@option(
    "--worker-niceness",
    env="DEMO_WORKER_NICENESS",
    type=click.IntRange(0, 19),
    default=10,
    show_default=True,
    help="The workers' `nice` level: below the traffic generator, the broker and the "
    "control app, which share the machine with them (at the same priority, 6-8 workers "
    "on two cores starved the traffic). 0 where other work at nice 0 shares the cores.",
)
@option("--json", "as_json", env="JSON", is_flag=True, help="Print the summary as one JSON object.")
@kafka_options
@handle_errors
def demo(
    duration_s: float | None,
    speed: float | None,
    topic: str | None,
    partitions: int,
    peak_rate: float,
    worker_capacity: float,
    min_workers: int,
    max_workers: int,
    initial_workers: int,
    slo_lag_s: float | None,
    seed: int,
    drain_timeout_s: float,
    run_dir: Path | None,
    dashboard_host: str,
    dashboard_port: int,
    kill_worker_at_s: float | None,
    shuffle: str,
    assignment: str,
    drift_turns_per_day: float,
    engine: str,
    worker_niceness: int,
    as_json: bool,
    **opts: Any,
) -> None:
    """Run the elastic online-training demo: one simulated day, end to end, with a dashboard.

    Traffic shaped like KALE's day (compressed: 24 h in 10 minutes by default) goes into
    a 16-partition topic; a pool of training workers consumes it, training one MMoE CTR
    model data-parallel (torchft);
    the control app forecasts the traffic and scales the pool; the dashboard
    (http://127.0.0.1:8765/) shows traffic and forecast, workers and actions, lag per
    partition, SLO and alerts, and online AUC. Ends with a summary.
    """
    from streamtrain.demo.run import run_demo
    from streamtrain.demo.settings import DEFAULT_SPEED, DemoSettings
    from streamtrain.demo.summary import format_summary

    if (
        duration_s is not None
        and speed is not None
        and abs(DAY_S / duration_s - speed) > 0.01 * speed
    ):
        raise ConfigError(
            f"--duration {duration_s:g} and --speed {speed:g} disagree (a day at speed "
            f"{speed:g} takes {DAY_S / speed:.0f} s): give one of them"
        )
    chosen_speed = speed or (DAY_S / duration_s if duration_s else DEFAULT_SPEED)
    settings = DemoSettings(
        speed=chosen_speed,
        partitions=partitions,
        peak_records_per_s=peak_rate,
        worker_capacity_records_per_s=worker_capacity,
        min_workers=min_workers,
        max_workers=max_workers,
        initial_workers=initial_workers,
        slo_lag_s=slo_lag_s,
        seed=seed,
        drain_timeout_s=drain_timeout_s,
        run_dir=run_dir,
        topic=topic,
        dashboard_host=dashboard_host,
        dashboard_port=dashboard_port,
        kill_worker_at_s=kill_worker_at_s,
        shuffle=shuffle,
        assignment=assignment,
        drift_turns_per_day=drift_turns_per_day,
        engine=engine,
        worker_niceness=worker_niceness,
    )

    def echo(line: str) -> None:
        click.echo(line, err=True)

    with kafka_connection(opts) as kafka:
        summary = run_demo(
            kafka,
            settings,
            echo=echo,
            on_dashboard=lambda url: echo(f"dashboard: {url}"),
        )
    click.echo(json.dumps(summary) if as_json else format_summary(summary))
