"""The ``streamtrain`` command line: thin shims over the packages.

Owned here: parsing flags (and the ``STREAMTRAIN_*`` environment variables behind
them, shown in every ``--help``), choosing between ``--bootstrap`` and the embedded
broker, turning :class:`~streamtrain.errors.StreamtrainError` into one clear line on
stderr with a non-zero exit code, and stopping what a command started on Ctrl-C or
SIGTERM. No logic lives here that a library user would also need.

Exit codes: 0 success, 1 a streamtrain error, 2 bad usage or config, 130 interrupted.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import signal
import sys
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, NoReturn, TypeVar

import click

from streamtrain import __version__
from streamtrain.config import EmbeddedBrokerSettings, KafkaSettings
from streamtrain.errors import ConfigError, NotYetAvailableError, StreamtrainError

F = TypeVar("F", bound=Callable[..., Any])

log = logging.getLogger("streamtrain.cli")

_ENV = "STREAMTRAIN_"
_EMBEDDED_NOTE = (
    "no --bootstrap given: using an embedded Kafka-compatible broker (Tansu, in memory) "
    "at {bootstrap}; its data goes away when this command exits"
)


def _option(*names: str, env: str, **kwargs: Any) -> Callable[[F], F]:
    """A click option that reads ``STREAMTRAIN_<env>`` and says so in ``--help``."""
    return click.option(*names, envvar=_ENV + env, show_envvar=True, **kwargs)


# -- Kafka connection options, shared by every command that talks to Kafka --------------


def kafka_options(command: F) -> F:
    """Add ``--bootstrap`` and the SASL/SSL pass-through options to ``command``."""
    options = [
        _option(
            "--bootstrap",
            env="BOOTSTRAP",
            default=None,
            metavar="HOST:PORT[,HOST:PORT]",
            help="Kafka bootstrap servers. Without it an embedded broker is started.",
        ),
        _option(
            "--connect-timeout-s",
            env="CONNECT_TIMEOUT_S",
            type=click.FloatRange(min=0.1),
            default=10.0,
            show_default=True,
            help="Give up on an unreachable --bootstrap after this many seconds.",
        ),
        _option(
            "--security-protocol",
            env="SECURITY_PROTOCOL",
            type=click.Choice(["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"], False),
            default="PLAINTEXT",
            show_default=True,
        ),
        _option("--sasl-mechanism", env="SASL_MECHANISM", default=None),
        _option("--sasl-username", env="SASL_USERNAME", default=None),
        _option("--sasl-password", env="SASL_PASSWORD", default=None),
        _option("--ssl-ca-location", env="SSL_CA_LOCATION", default=None),
        _option("--ssl-certificate-location", env="SSL_CERTIFICATE_LOCATION", default=None),
        _option("--ssl-key-location", env="SSL_KEY_LOCATION", default=None),
        _option("--ssl-key-password", env="SSL_KEY_PASSWORD", default=None),
        _option(
            "--kafka-config",
            env="KAFKA_CONFIG",
            multiple=True,
            metavar="KEY=VALUE",
            help="Extra librdkafka property, passed through verbatim (repeatable).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _kafka_settings(bootstrap: str, opts: dict[str, Any]) -> KafkaSettings:
    extra: dict[str, str] = {}
    for item in opts["kafka_config"]:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--kafka-config {item!r} is not KEY=VALUE")
        extra[key.strip()] = value
    return KafkaSettings(
        bootstrap=bootstrap,
        security_protocol=opts["security_protocol"],
        sasl_mechanism=opts["sasl_mechanism"],
        sasl_username=opts["sasl_username"],
        sasl_password=opts["sasl_password"],
        ssl_ca_location=opts["ssl_ca_location"],
        ssl_certificate_location=opts["ssl_certificate_location"],
        ssl_key_location=opts["ssl_key_location"],
        ssl_key_password=opts["ssl_key_password"],
        extra=extra,
    )


@contextlib.contextmanager
def kafka_connection(opts: dict[str, Any]) -> Iterator[KafkaSettings]:
    """Yield settings for the given cluster (checked to answer) or for an embedded broker."""
    from streamtrain.kafka import probe

    if opts["bootstrap"]:
        settings = _kafka_settings(opts["bootstrap"], opts)
        probe(settings, timeout_s=opts["connect_timeout_s"])
        yield settings
        return
    from streamtrain.broker import EmbeddedBroker

    with EmbeddedBroker() as broker:
        click.echo(_EMBEDDED_NOTE.format(bootstrap=broker.bootstrap), err=True)
        yield broker.kafka_settings()


# -- signals and errors -----------------------------------------------------------------


def _raise_interrupt(signum: int, frame: FrameType | None) -> NoReturn:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _fail(message: str, code: int) -> NoReturn:
    click.echo(f"streamtrain: error: {message}", err=True)
    sys.exit(code)


def handle_errors(command: F) -> F:
    """Turn streamtrain errors and interrupts into one line and an exit code."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        # SIGTERM unwinds like Ctrl-C, so every `with` block stops what it started. SIGINT
        # is installed too: a shell starts background jobs with SIGINT ignored, and
        # `kill -INT` must still stop the command cleanly.
        previous = {
            sig: signal.signal(sig, _raise_interrupt) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            return command(*args, **kwargs)
        except KeyboardInterrupt:
            click.echo("streamtrain: interrupted; stopped cleanly", err=True)
            sys.exit(130)
        except ConfigError as exc:
            _fail(exc.message, 2)
        except StreamtrainError as exc:
            _fail(exc.message, 1)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    return wrapper  # type: ignore[return-value]


# -- the command tree --------------------------------------------------------------------


@click.group(
    name="streamtrain",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="streamtrain")
@_option(
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
@_option(
    "--host",
    env="BROKER_HOST",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (loopback by default).",
)
@_option(
    "--port",
    env="BROKER_PORT",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Port to listen on; 0 picks a free one.",
)
@_option(
    "--startup-timeout-s",
    env="BROKER_STARTUP_TIMEOUT_S",
    type=click.FloatRange(min=0.1),
    default=15.0,
    show_default=True,
    help="Fail if the broker does not answer by then.",
)
@handle_errors
def broker(host: str, port: int, startup_timeout_s: float) -> None:
    """Run the embedded Kafka-compatible broker until Ctrl-C or SIGTERM.

    Prints STREAMTRAIN_BOOTSTRAP=HOST:PORT on stdout once the broker answers Metadata.
    Data is kept in memory only.
    """
    from streamtrain.broker import EmbeddedBroker

    settings = EmbeddedBrokerSettings(host=host, port=port, startup_timeout_s=startup_timeout_s)
    with EmbeddedBroker(settings) as embedded:
        click.echo(f"STREAMTRAIN_BOOTSTRAP={embedded.bootstrap}")
        click.echo(
            f"embedded broker (Tansu, in memory, pid {embedded.pid}) is ready at "
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
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
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
@click.option("--partitions", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--exist-ok", is_flag=True, help="Succeed if the topic already exists.")
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


# -- commands whose issues have not landed: they say so and exit 1, never pretend ---------


def _not_yet(name: str, issue: int, summary: str) -> click.Command:
    @click.command(
        name=name,
        help=f"{summary}\n\nNot available yet: tracked in issue #{issue}. Exits 1.",
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    )
    @handle_errors
    def stub() -> None:
        raise NotYetAvailableError(
            f"`streamtrain {name}` is not available yet (tracked in issue #{issue})"
        )

    return stub


main.add_command(_not_yet("worker", 3, "Run a training worker on a topic's partitions."))
main.add_command(_not_yet("lag", 5, "Per-partition lag (records, seconds), CPS and alerts."))
main.add_command(_not_yet("forecast", 6, "Evaluate traffic forecasters on a trace."))
main.add_command(_not_yet("trace", 6, "Generate synthetic traffic traces."))
main.add_command(_not_yet("scale", 7, "Throughput models, plans, stabilization."))
main.add_command(_not_yet("simulate", 8, "Replay a trace against scaling policies."))
main.add_command(_not_yet("demo", 9, "The end-to-end elastic online-training demo."))


if __name__ == "__main__":  # pragma: no cover
    main()
