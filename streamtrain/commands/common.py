"""Shared pieces of the command line: env-var options, Kafka connection options, and the
error/signal wrapper every command uses.

Owned here: ``option`` (a click option backed by ``STREAMTRAIN_<NAME>``, shown in
``--help``), ``kafka_options`` / ``kafka_connection`` (``--bootstrap`` or the embedded
broker), ``handle_errors`` (streamtrain errors to one stderr line and an exit code;
SIGINT and SIGTERM unwind like Ctrl-C), and small parsers for comma lists.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, NoReturn, TypeVar

import click

from streamtrain.config import KafkaSettings
from streamtrain.errors import ConfigError, StreamtrainError

__all__ = [
    "handle_errors",
    "kafka_connection",
    "kafka_options",
    "option",
    "parse_float_list",
]

F = TypeVar("F", bound=Callable[..., Any])

_ENV = "STREAMTRAIN_"
_EMBEDDED_NOTE = (
    "no --bootstrap given: using an embedded Kafka-compatible broker (Tansu, in memory) "
    "at {bootstrap}; its data goes away when this command exits"
)


def option(*names: str, env: str, **kwargs: Any) -> Callable[[F], F]:
    """A click option that reads ``STREAMTRAIN_<env>`` and says so in ``--help``."""
    return click.option(*names, envvar=_ENV + env, show_envvar=True, **kwargs)


# -- Kafka connection options, shared by every command that talks to Kafka --------------


def kafka_options(command: F) -> F:
    """Add ``--bootstrap`` and the SASL/SSL pass-through options to ``command``."""
    options = [
        option(
            "--bootstrap",
            env="BOOTSTRAP",
            default=None,
            metavar="HOST:PORT[,HOST:PORT]",
            help="Kafka bootstrap servers. Without it an embedded broker is started.",
        ),
        option(
            "--connect-timeout-s",
            env="CONNECT_TIMEOUT_S",
            type=click.FloatRange(min=0.1),
            default=10.0,
            show_default=True,
            help="Give up on an unreachable --bootstrap after this many seconds.",
        ),
        option(
            "--security-protocol",
            env="SECURITY_PROTOCOL",
            type=click.Choice(["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"], False),
            default="PLAINTEXT",
            show_default=True,
        ),
        option("--sasl-mechanism", env="SASL_MECHANISM", default=None),
        option("--sasl-username", env="SASL_USERNAME", default=None),
        option("--sasl-password", env="SASL_PASSWORD", default=None),
        option("--ssl-ca-location", env="SSL_CA_LOCATION", default=None),
        option("--ssl-certificate-location", env="SSL_CERTIFICATE_LOCATION", default=None),
        option("--ssl-key-location", env="SSL_KEY_LOCATION", default=None),
        option("--ssl-key-password", env="SSL_KEY_PASSWORD", default=None),
        option(
            "--kafka-config",
            env="KAFKA_CONFIG",
            multiple=True,
            metavar="KEY=VALUE",
            help="Extra librdkafka property, passed through verbatim (repeatable).",
        ),
    ]
    for decorator in reversed(options):
        command = decorator(command)
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
    from streamtrain.config import EmbeddedBrokerSettings

    log_level = os.environ.get(f"{_ENV}BROKER_LOG", "warn")  # as `streamtrain broker --log-level`
    with EmbeddedBroker(EmbeddedBrokerSettings(log_level=log_level)) as broker:
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


@contextlib.contextmanager
def graceful_stop(stop: threading.Event) -> Iterator[None]:
    """The first SIGINT/SIGTERM ends the worker after its current step; a second one at once."""

    def handler(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt(signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def parse_float_list(flag: str, text: str) -> list[float]:
    """``"1,2.5,3"`` to floats, or a :class:`ConfigError` naming the flag."""
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise ConfigError(f"{flag} {text!r} is not a comma-separated list of numbers") from exc
    if not values:
        raise ConfigError(f"{flag} is empty")
    return values
