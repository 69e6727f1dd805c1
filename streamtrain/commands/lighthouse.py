"""``streamtrain lighthouse``: torchft's lighthouse for the workers of ``--engine torchft``.

All of the work lives in :mod:`streamtrain.elastic.lighthouse`; this module parses
options (each from its ``STREAMTRAIN_LIGHTHOUSE_*`` variable), prints one line
``lighthouse at http://HOST:PORT`` once it listens, and runs until SIGINT or SIGTERM.
"""

from __future__ import annotations

import threading

import click

from streamtrain.commands.common import handle_errors, option

__all__ = ["lighthouse"]


@click.command("lighthouse")
@option(
    "--host",
    env="LIGHTHOUSE_HOST",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on. Beyond loopback only with --trusted-network: the "
    "lighthouse authenticates nobody.",
)
@option(
    "--port",
    env="LIGHTHOUSE_PORT",
    type=click.IntRange(0, 65535),
    default=29510,
    show_default=True,
    help="Port to listen on (torchft's default); 0 picks a free one.",
)
@option(
    "--min-replicas",
    env="LIGHTHOUSE_MIN_REPLICAS",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Workers needed before a quorum forms.",
)
@option(
    "--join-timeout-ms",
    env="LIGHTHOUSE_JOIN_TIMEOUT_MS",
    type=click.IntRange(min=1),
    default=1_000,
    show_default=True,
    help="How long a quorum waits for workers that heartbeat but have not asked to join.",
)
@option(
    "--heartbeat-timeout-ms",
    env="LIGHTHOUSE_HEARTBEAT_TIMEOUT_MS",
    type=click.IntRange(min=1),
    default=500,
    show_default=True,
    help="A worker silent this long is gone. It bounds how long a worker that left "
    "(drained or killed) holds up the others' next step (torchft's default: 5,000).",
)
@option(
    "--quorum-tick-ms",
    env="LIGHTHOUSE_QUORUM_TICK_MS",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="How often a waiting quorum is checked again.",
)
@option(
    "--trusted-network/--no-trusted-network",
    env="LIGHTHOUSE_TRUSTED_NETWORK",
    default=False,
    show_default=True,
    help="Allow a --host beyond loopback.",
)
@handle_errors
def lighthouse(
    host: str,
    port: int,
    min_replicas: int,
    join_timeout_ms: int,
    heartbeat_timeout_ms: int,
    quorum_tick_ms: int,
    trusted_network: bool,
) -> None:
    """Run torchft's lighthouse: it forms the quorum of a job's --engine torchft workers
    every step. Point the workers at it with --lighthouse HOST:PORT."""
    from streamtrain.elastic.lighthouse import LighthouseSettings, ready_line, serve

    settings = LighthouseSettings(
        host=host,
        port=port,
        min_replicas=min_replicas,
        join_timeout_ms=join_timeout_ms,
        heartbeat_timeout_ms=heartbeat_timeout_ms,
        quorum_tick_ms=quorum_tick_ms,
        trusted_network=trusted_network,
    )
    stop = threading.Event()
    try:
        serve(settings, stop, on_ready=lambda address: click.echo(ready_line(address)))
    finally:
        stop.set()


if __name__ == "__main__":  # pragma: no cover - `python -m streamtrain.commands.lighthouse`
    lighthouse()
