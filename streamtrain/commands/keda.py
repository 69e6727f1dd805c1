"""``streamtrain keda serve``: the planner's worker count over KEDA's external-scaler gRPC.

All of the work lives in :mod:`streamtrain.keda`; this module parses, calls and prints.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from streamtrain.commands.common import handle_errors, kafka_connection, kafka_options, option

if TYPE_CHECKING:
    from streamtrain.config import KafkaSettings
    from streamtrain.keda.server import Listening, ScalerSettings

__all__ = ["keda"]

_FILE = click.Path(dir_okay=False, path_type=Path)  # existence: ScalerSettings checks it


@click.group()
def keda() -> None:
    """Serve the planner's plan to KEDA (an external scaler for a ScaledObject)."""


@keda.command("serve")
@option(
    "--job",
    "jobs",
    env="KEDA_JOBS",
    multiple=True,
    help="Serve only this job (repeatable); default: every job the topics name.",
)
@option(
    "--host",
    env="KEDA_HOST",
    default="127.0.0.1",
    show_default=True,
    help="Address of the gRPC port. Beyond loopback it needs --tls-cert, --tls-key "
    "and --tls-client-ca.",
)
@option(
    "--port",
    env="KEDA_PORT",
    type=click.IntRange(0, 65535),
    default=6068,
    show_default=True,
    help="The gRPC port (0: a free one).",
)
@option(
    "--tls-cert", env="KEDA_TLS_CERT", type=_FILE, default=None, help="Server certificate (PEM)."
)
@option("--tls-key", env="KEDA_TLS_KEY", type=_FILE, default=None, help="Its private key (PEM).")
@option(
    "--tls-client-ca",
    env="KEDA_TLS_CLIENT_CA",
    type=_FILE,
    default=None,
    help="Require client certificates signed by this CA (PEM): KEDA's tlsClientCert.",
)
@option("--metrics-host", env="KEDA_METRICS_HOST", default="127.0.0.1", show_default=True)
@option(
    "--metrics-port",
    env="KEDA_METRICS_PORT",
    type=click.IntRange(0, 65535),
    default=6069,
    show_default=True,
    help="Serve Prometheus /metrics on this port (0: a free one).",
)
@option(
    "--commands-topic",
    env="PLAN_COMMANDS_TOPIC",
    default="streamtrain.scale.commands",
    show_default=True,
    help="Where the planner publishes ScaleCommand messages (lag run --commands-topic).",
)
@option(
    "--samples-topic",
    env="PLAN_SAMPLES_TOPIC",
    default="streamtrain.throughput",
    show_default=True,
    help="Where workers publish ThroughputSample messages (their pool size).",
)
@option(
    "--heartbeats-topic",
    env="PLAN_HEARTBEATS_TOPIC",
    default="streamtrain.scale.heartbeats",
    show_default=True,
    help="Where the planner says it is alive (lag run --heartbeats-topic).",
)
@option(
    "--samples-lookback-s",
    env="KEDA_SAMPLES_LOOKBACK_S",
    type=click.FloatRange(min=1),
    default=300.0,
    show_default=True,
    help="Read the samples and heartbeats of this many seconds before the start.",
)
@option(
    "--max-plan-age-s",
    env="KEDA_MAX_PLAN_AGE_S",
    type=click.FloatRange(min=0),
    default=180.0,
    show_default=True,
    help="A job whose planner was not heard (heartbeat or command) for this long gets "
    "UNAVAILABLE, so KEDA applies the ScaledObject's fallback; streamtrain_keda_ready "
    "goes to 0 and the log says why. Default: three planner decision intervals. 0: never.",
)
@option(
    "--max-clock-skew-s",
    env="KEDA_MAX_CLOCK_SKEW_S",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="Commands, heartbeats and samples dated further ahead of this clock are refused.",
)
@option(
    "--worker-expiry-s",
    env="KEDA_WORKER_EXPIRY_S",
    type=click.FloatRange(min=0, min_open=True),
    default=30.0,
    show_default=True,
    help="A job's workers are those whose samples arrived within this many seconds.",
)
@kafka_options
@handle_errors
def keda_serve(
    jobs: tuple[str, ...],
    host: str,
    port: int,
    tls_cert: Path | None,
    tls_key: Path | None,
    tls_client_ca: Path | None,
    metrics_host: str,
    metrics_port: int,
    commands_topic: str,
    samples_topic: str,
    heartbeats_topic: str,
    samples_lookback_s: float,
    max_plan_age_s: float,
    max_clock_skew_s: float,
    worker_expiry_s: float,
    **opts: Any,
) -> None:
    """Serve KEDA's externalscaler.ExternalScaler until Ctrl-C or SIGTERM.

    Answers IsActive, StreamIsActive, GetMetricSpec and GetMetrics for the job named
    by the trigger's metadata (`job: <the control app's --plan-job>`) with the planned
    worker count, read from the ScaleCommands on --commands-topic (and, before the
    first command, the workers the job has, from --samples-topic). Target 1 per
    replica, value the plan: KEDA's HPA (metricType AverageValue, the default) lands on
    the plan. A plan whose planner is not heard on --heartbeats-topic for
    --max-plan-age-s is answered UNAVAILABLE (KEDA's fallback applies).
    Prints STREAMTRAIN_KEDA_ADDRESS=HOST:PORT on stdout once it listens.
    """
    from streamtrain.keda.feed import FeedSettings
    from streamtrain.keda.plans import PlanSettings
    from streamtrain.keda.server import ScalerSettings
    from streamtrain.roster import RosterSettings

    settings = ScalerSettings(
        host=host,
        port=port,
        tls_cert=tls_cert,
        tls_key=tls_key,
        tls_client_ca=tls_client_ca,
        metrics_host=metrics_host,
        metrics_port=metrics_port,
        jobs=tuple(j.strip() for j in jobs if j.strip()),
        feed=FeedSettings(
            commands_topic=commands_topic,
            samples_topic=samples_topic or None,
            heartbeats_topic=heartbeats_topic or None,
            samples_lookback_s=samples_lookback_s,
            request_timeout_s=opts["connect_timeout_s"],
        ),
        plans=PlanSettings(
            max_plan_age_s=max_plan_age_s or None,
            max_clock_skew_s=max_clock_skew_s,
            workers=RosterSettings(expiry_s=worker_expiry_s),
        ),
    )
    from streamtrain.kafka import create_topic

    with kafka_connection(opts) as kafka:
        # One partition each, as `lag run` creates them: whichever starts first.
        for topic in filter(None, (commands_topic, samples_topic, heartbeats_topic)):
            create_topic(kafka, topic, 1, timeout_s=opts["connect_timeout_s"], exist_ok=True)
        signalled = asyncio.run(_serve(kafka, settings))
    if signalled:
        raise KeyboardInterrupt(signalled)  # exit 130, "stopped cleanly", as every command


async def _serve(kafka: KafkaSettings, settings: ScalerSettings) -> str:
    """Serve until SIGINT or SIGTERM; returns the signal's name ('' if none)."""
    from streamtrain.keda.server import serve

    stop = asyncio.Event()
    got: list[str] = []

    def stop_on(sig: signal.Signals) -> None:
        got.append(sig.name)
        stop.set()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop_on, sig)
    try:
        await serve(kafka, settings, stop, on_listening=_announce(settings))
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    return got[0] if got else ""


def _announce(settings: ScalerSettings) -> Any:
    def announce(listening: Listening) -> None:
        click.echo(f"STREAMTRAIN_KEDA_ADDRESS={listening.address}")
        sys.stdout.flush()
        served = ", ".join(settings.jobs) or "every job on the topics"
        tls = (
            "TLS with client certificates"
            if settings.tls_client_ca
            else ("TLS" if listening.tls else "plaintext")
        )
        click.echo(
            f"KEDA external scaler for {served} at {listening.address} ({tls}); plans from "
            f"{settings.feed.commands_topic}; metrics at {listening.metrics_url or '-'}",
            err=True,
        )

    return announce
