"""The ``streamtrain`` command line: thin shims over the packages.

Owned here: the command tree (``main``), logging set-up, and the commands that are a
few lines each (``broker``, ``topics``); larger command groups live in
``streamtrain.commands`` and the shared option/error machinery in
``streamtrain.commands.common``. No logic lives here that a library user would also need.

Exit codes: 0 success, 1 a streamtrain error, 2 bad usage or config, 130 interrupted.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

import click

from streamtrain import __version__
from streamtrain.commands.cluster import cluster
from streamtrain.commands.common import handle_errors, kafka_connection, kafka_options, option
from streamtrain.commands.demo import demo
from streamtrain.commands.forecast import forecast, trace
from streamtrain.commands.keda import keda
from streamtrain.commands.lag import lag
from streamtrain.commands.lighthouse import lighthouse
from streamtrain.commands.scale import scale
from streamtrain.commands.simulate import simulate
from streamtrain.commands.worker import worker
from streamtrain.config import EmbeddedBrokerSettings
from streamtrain.errors import StreamtrainError

# -- the command tree --------------------------------------------------------------------


@click.group(
    name="streamtrain",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="streamtrain")
@option(
    "--log-level",
    env="LOG_LEVEL",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default="WARNING",
    show_default=True,
)
def main(log_level: str) -> None:
    """streamtrain keeps online deep-learning training fed from Kafka and sized to its traffic.

    Commands that talk to Kafka take --bootstrap (or STREAMTRAIN_BOOTSTRAP); without it
    they start an embedded, in-memory Kafka-compatible broker on a free loopback port.
    """
    level = getattr(logging, log_level.upper())
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # librdkafka retries connections loudly; show its lines only when debugging.
    logging.getLogger("streamtrain.kafka.client").setLevel(
        logging.DEBUG if level <= logging.DEBUG else logging.CRITICAL
    )


@main.command()
@option(
    "--host",
    env="BROKER_HOST",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (loopback by default). Tansu authenticates nobody: beyond "
    "loopback only with --trusted-network.",
)
@option(
    "--trusted-network",
    env="TRUSTED_NETWORK",
    is_flag=True,
    help="Every host that can reach --host may use the broker: allow an address beyond loopback.",
)
@option(
    "--port",
    env="BROKER_PORT",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Port to listen on; 0 picks a free one.",
)
@option(
    "--startup-timeout-s",
    env="BROKER_STARTUP_TIMEOUT_S",
    type=click.FloatRange(min=0.1),
    default=15.0,
    show_default=True,
    help="Fail if the broker does not answer by then.",
)
@option(
    "--log-level",
    env="BROKER_LOG",
    default="warn",
    show_default=True,
    help="Tansu's log filter (RUST_LOG syntax: error, warn, info, debug, or per module).",
)
@option(
    "--durable/--in-memory",
    env="BROKER_DURABLE",
    default=False,
    show_default=True,
    help="Keep records and committed offsets on a local S3 server (in memory, on loopback) "
    "that outlives the broker process, so a crashed broker restarts with its data "
    "(streamtrain's own; it needs nothing beyond Python).",
)
@handle_errors
def broker(
    host: str,
    trusted_network: bool,
    port: int,
    startup_timeout_s: float,
    log_level: str,
    durable: bool,
) -> None:
    """Run the embedded Kafka-compatible broker until Ctrl-C or SIGTERM.

    Prints STREAMTRAIN_BOOTSTRAP=HOST:PORT on stdout once the broker answers Metadata.
    Data is kept in memory unless --durable.
    """
    from streamtrain.broker import EmbeddedBroker

    settings = EmbeddedBrokerSettings(
        host=host,
        port=port,
        startup_timeout_s=startup_timeout_s,
        log_level=log_level,
        durable=durable,
        trusted_network=trusted_network,
    )
    with EmbeddedBroker(settings) as embedded:
        click.echo(f"STREAMTRAIN_BOOTSTRAP={embedded.bootstrap}")
        click.echo(
            f"embedded broker (Tansu, {'durable on local S3' if durable else 'in memory'}, "
            f"pid {embedded.pid}) is ready at "
            f"{embedded.bootstrap}; point clients at it, Ctrl-C stops it",
            err=True,
        )
        sys.stdout.flush()
        while embedded.running:
            time.sleep(0.2)
        raise StreamtrainError(f"embedded broker exited unexpectedly: {embedded.log_tail()!r}")


@main.group()
def topics() -> None:
    """List and create Kafka topics."""


@topics.command("list")
@kafka_options
@option("--json", "as_json", env="JSON", is_flag=True, help="Print one JSON object.")
@handle_errors
def topics_list(as_json: bool, **opts: Any) -> None:
    """List the topics of the cluster with their partition counts."""
    from streamtrain.kafka import describe_topics

    with kafka_connection(opts) as settings:
        found = describe_topics(settings, timeout_s=opts["connect_timeout_s"])
    if as_json:
        payload = {"topics": [{"name": t.name, "partitions": t.partitions} for t in found]}
        click.echo(json.dumps(payload))
        return
    if not found:
        click.echo("(no topics)")
    for topic in found:
        click.echo(f"{topic.name}\t{topic.partitions}")


@topics.command("create")
@click.argument("name")
@option(
    "--partitions", env="TOPIC_PARTITIONS", type=click.IntRange(min=1), default=8, show_default=True
)
@option(
    "--exist-ok", env="TOPIC_EXIST_OK", is_flag=True, help="Succeed if the topic already exists."
)
@kafka_options
@handle_errors
def topics_create(name: str, partitions: int, exist_ok: bool, **opts: Any) -> None:
    """Create topic NAME."""
    from streamtrain.kafka import create_topic

    with kafka_connection(opts) as settings:
        created = create_topic(
            settings, name, partitions, timeout_s=opts["connect_timeout_s"], exist_ok=exist_ok
        )
    click.echo(f"{created.name}\t{created.partitions}")


# -- the larger command groups --------------------------------------------------------


main.add_command(worker)
main.add_command(lag)
main.add_command(forecast)
main.add_command(trace)
main.add_command(scale)
main.add_command(simulate)
main.add_command(demo)
main.add_command(keda)
main.add_command(cluster)
main.add_command(lighthouse)


if __name__ == "__main__":  # pragma: no cover
    main()
