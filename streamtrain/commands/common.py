"""Shared pieces of the command line: env-var options, Kafka connection options, and the
error/signal wrapper every command uses.

Owned here: ``option`` (a click option backed by ``STREAMTRAIN_<NAME>``, shown in
``--help``), :class:`OptionGroup` (options declared once: the decorator that adds them
and the names it takes back out of a command's keyword arguments), ``kafka_options`` /
``kafka_connection`` (``--bootstrap`` or the embedded broker), ``handle_errors``
(streamtrain errors to one stderr line and an exit code; SIGINT and SIGTERM unwind like
Ctrl-C), and the comma-list readers of the commands' flags (over
:func:`streamtrain.config.comma_list`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn, TypeVar

import click

from streamtrain.config import KAFKA_CONNECTION_FIELDS, KafkaSettings, comma_list, key_values
from streamtrain.errors import ConfigError, StreamtrainError

__all__ = [
    "OptionGroup",
    "check_web_port",
    "create_app_topics",
    "faust_app_options",
    "handle_errors",
    "kafka_connection",
    "kafka_options",
    "option",
    "parse_float_list",
    "parse_names",
    "web_pages_options",
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


class OptionGroup:
    """Click options declared once: calling the group on a command adds them (in the
    order given, as ``--help`` lists them), and :meth:`take` pops their values out of the
    command's keyword arguments by the names click gives them."""

    def __init__(self, *options: Callable[[Any], Any]) -> None:
        self._options = options

        def probe() -> None:  # pragma: no cover - never called: it only collects params
            """Carries the options' click parameters, to read their names."""

        for add in options:
            add(probe)
        params: list[click.Parameter] = getattr(probe, "__click_params__", [])
        self.names: tuple[str, ...] = tuple(str(p.name) for p in params)

    def __call__(self, command: F) -> F:
        for add in reversed(self._options):
            command = add(command)
        return command

    def take(self, opts: dict[str, Any]) -> dict[str, Any]:
        """The group's values, removed from ``opts``."""
        return {name: opts.pop(name) for name in self.names}


def faust_app_options(env_prefix: str) -> OptionGroup:
    """``--data-dir`` and ``--faust-log-level`` of a command that runs a Faust app, behind
    ``STREAMTRAIN_<env_prefix>_DATA_DIR`` and ``..._FAUST_LOG_LEVEL``."""
    return OptionGroup(
        option(
            "--data-dir",
            env=f"{env_prefix}_DATA_DIR",
            type=click.Path(file_okay=False, path_type=Path),
            default=None,
            help="Faust's data directory (default: a new temporary one).",
        ),
        option(
            "--faust-log-level",
            env=f"{env_prefix}_FAUST_LOG_LEVEL",
            type=click.Choice(["crit", "error", "warn", "info", "debug"]),
            default="warn",
            show_default=True,
        ),
    )


# -- Kafka connection options, shared by every command that talks to Kafka --------------


def web_pages_options(env_prefix: str) -> OptionGroup:
    """``--web-host`` and ``--trusted-network`` of a command that serves pages, behind
    ``STREAMTRAIN_<env_prefix>_WEB_HOST`` and ``STREAMTRAIN_TRUSTED_NETWORK``."""
    return OptionGroup(
        option(
            "--web-host",
            env=f"{env_prefix}_WEB_HOST",
            default="127.0.0.1",
            show_default=True,
            help="Address of the pages (no authentication): beyond loopback only with "
            "--trusted-network.",
        ),
        option(
            "--trusted-network",
            env="TRUSTED_NETWORK",
            is_flag=True,
            help="Every host that can reach --web-host may read the pages: allow an address "
            "beyond loopback.",
        ),
    )


def check_web_port(host: str, port: int) -> None:
    """Refuse a ``--web-port`` something already listens on, before anything starts."""
    from streamtrain.ports import port_is_free

    if not port_is_free(host, port, reuse_address=True):
        raise ConfigError(f"{host}:{port} is in use: choose another --web-port")


def create_app_topics(kafka: KafkaSettings, names: Sequence[str], timeout_s: float) -> None:
    """Create a Faust app's topics that do not exist yet, one partition each (its tables'
    changelogs must match their topics' partition count, or Faust refuses to start)."""
    from streamtrain.kafka import create_topic

    for name in names:
        create_topic(kafka, name, 1, timeout_s=timeout_s, exist_ok=True)


def _connection_option(field: str) -> Callable[[F], F]:
    flag = "--" + field.replace("_", "-")
    if field == "security_protocol":
        return option(
            flag,
            env=field.upper(),
            type=click.Choice(["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"], False),
            default="PLAINTEXT",
            show_default=True,
        )
    return option(flag, env=field.upper(), default=None)


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
        *(_connection_option(field) for field in KAFKA_CONNECTION_FIELDS),
        option(
            "--kafka-config",
            env="KAFKA_CONFIG",
            multiple=True,
            metavar="KEY=VALUE",
            help="Extra librdkafka property, passed through verbatim (repeatable).",
        ),
    ]
    return OptionGroup(*options)(command)


def _kafka_settings(bootstrap: str, opts: dict[str, Any]) -> KafkaSettings:
    return KafkaSettings(
        bootstrap=bootstrap,
        extra=key_values("--kafka-config", opts["kafka_config"]),
        **{field: opts[field] for field in KAFKA_CONNECTION_FIELDS},
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


def parse_names(flag: str, text: str, known: Sequence[str]) -> tuple[str, ...]:
    """A comma list of names, each one of ``known`` and none twice, or a
    :class:`ConfigError` naming the flag."""
    names = comma_list(text)
    if not names:
        raise ConfigError(f"{flag} is empty")
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ConfigError(f"{flag}: unknown {', '.join(unknown)}; choose from {', '.join(known)}")
    if len(set(names)) != len(names):
        raise ConfigError(f"{flag} names one twice")
    return names


def parse_float_list(flag: str, text: str) -> list[float]:
    """``"1,2.5,3"`` to floats, or a :class:`ConfigError` naming the flag."""
    try:
        values = [float(part) for part in comma_list(text)]
    except ValueError as exc:
        raise ConfigError(f"{flag} {text!r} is not a comma-separated list of numbers") from exc
    if not values:
        raise ConfigError(f"{flag} is empty")
    return values
