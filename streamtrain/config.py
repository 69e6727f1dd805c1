"""Frozen settings objects, one per subsystem.

Only the CLI reads environment variables (``STREAMTRAIN_*``); library code receives
these objects. Each knows how to turn itself into the configuration dictionary of the
client that consumes it, so no other module spells out Kafka client keys.

Owned here:

* :class:`KafkaSettings`: where Kafka is and how to authenticate (bootstrap,
  SASL, SSL), rendered for confluent-kafka and aiokafka; its connection fields are
  named once (:data:`KAFKA_CONNECTION_FIELDS`), for the CLI's options and a child
  process's environment too.
* :func:`comma_list` and :func:`key_values`: how a comma list and ``KEY=VALUE``
  settings are read, wherever they come from.
* :class:`EmbeddedBrokerSettings`: how to run the embedded Tansu broker.
* :class:`AssignmentMode`: how a job's data is handed to its workers (a vocabulary the
  workers, the control app, the planner and the simulator share).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from streamtrain.errors import ConfigError

__all__ = [
    "KAFKA_CONNECTION_FIELDS",
    "AssignmentMode",
    "EmbeddedBrokerSettings",
    "KafkaSettings",
    "comma_list",
    "key_values",
    "parse_bootstrap",
]

_SECURITY_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
_SASL_MECHANISMS = frozenset({"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI"})
_HOST_PORT = re.compile(r"^(?P<host>\[[0-9a-fA-F:]+\]|[A-Za-z0-9_.\-]+):(?P<port>\d{1,5})$")

# librdkafka prints connection failures straight to stderr unless given a logger; route
# them through Python logging so a CLI user sees one clear error, not fifty retries.
_CLIENT_LOGGER = logging.getLogger("streamtrain.kafka.client")


def comma_list(text: str) -> tuple[str, ...]:
    """The items of a comma-separated setting, stripped, empty ones left out
    (``"a, b,,c"`` is ``("a", "b", "c")``): the one reading of every comma list."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def key_values(flag: str, items: Iterable[str]) -> dict[str, str]:
    """``KEY=VALUE`` texts as a dict (key and value stripped; a later key wins), or a
    :class:`ConfigError` naming ``flag``: the one reading of every repeatable
    ``KEY=VALUE`` option."""
    pairs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{flag} {item!r} is not KEY=VALUE")
        pairs[key.strip()] = value.strip()
    return pairs


def parse_bootstrap(bootstrap: str) -> tuple[tuple[str, int], ...]:
    """Split ``host:port[,host:port...]`` into pairs, rejecting anything else clearly."""
    servers = comma_list(bootstrap)
    if not servers:
        raise ConfigError("bootstrap address is empty; expected HOST:PORT[,HOST:PORT...]")
    parsed: list[tuple[str, int]] = []
    for server in servers:
        match = _HOST_PORT.match(server)
        if match is None:
            raise ConfigError(f"bootstrap address {server!r} is not HOST:PORT")
        port = int(match["port"])
        if not 0 < port < 65536:
            raise ConfigError(f"bootstrap address {server!r} has port {port} outside 1-65535")
        parsed.append((match["host"], port))
    return tuple(parsed)


# The connection settings besides ``bootstrap`` and ``extra``, named once: each is the
# librdkafka property of the same name with dots (``ssl_ca_location`` is
# ``ssl.ca.location``), the CLI's ``--ssl-ca-location`` and ``STREAMTRAIN_SSL_CA_LOCATION``.
KAFKA_CONNECTION_FIELDS = (
    "security_protocol",
    "sasl_mechanism",
    "sasl_username",
    "sasl_password",
    "ssl_ca_location",
    "ssl_certificate_location",
    "ssl_key_location",
    "ssl_key_password",
)


@dataclass(frozen=True, slots=True)
class KafkaSettings:
    """Connection settings shared by every component that talks to Kafka.

    ``extra`` carries any further librdkafka property verbatim (for confluent-kafka
    clients), for settings streamtrain does not name itself.
    """

    bootstrap: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: str | None = field(default=None, repr=False)
    extra: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        parse_bootstrap(self.bootstrap)
        protocol = self.security_protocol.upper()
        if protocol not in _SECURITY_PROTOCOLS:
            raise ConfigError(
                f"security protocol {self.security_protocol!r} is not one of "
                f"{', '.join(sorted(_SECURITY_PROTOCOLS))}"
            )
        object.__setattr__(self, "security_protocol", protocol)
        uses_sasl = protocol.startswith("SASL_")
        if uses_sasl and self.sasl_mechanism is None:
            raise ConfigError(f"security protocol {protocol} needs a SASL mechanism")
        if self.sasl_mechanism is not None:
            if not uses_sasl:
                raise ConfigError(
                    f"SASL mechanism {self.sasl_mechanism!r} given but security protocol is "
                    f"{protocol}; use SASL_PLAINTEXT or SASL_SSL"
                )
            if self.sasl_mechanism.upper() not in _SASL_MECHANISMS:
                raise ConfigError(
                    f"SASL mechanism {self.sasl_mechanism!r} is not one of "
                    f"{', '.join(sorted(_SASL_MECHANISMS))}"
                )
        object.__setattr__(self, "extra", dict(self.extra))

    @property
    def servers(self) -> tuple[tuple[str, int], ...]:
        return parse_bootstrap(self.bootstrap)

    def connection(self) -> dict[str, str | None]:
        """The :data:`KAFKA_CONNECTION_FIELDS` and their values (``None`` where unset)."""
        return {name: getattr(self, name) for name in KAFKA_CONNECTION_FIELDS}

    def confluent_config(self, **overrides: Any) -> dict[str, Any]:
        """librdkafka properties for a confluent-kafka Producer, Consumer or AdminClient."""
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap, "logger": _CLIENT_LOGGER}
        conf.update(
            {
                name.replace("_", "."): value
                for name, value in self.connection().items()
                if value is not None
            }
        )
        conf.update(self.extra)
        conf.update(overrides)
        return conf

    def aiokafka_config(self) -> dict[str, Any]:
        """Keyword arguments for aiokafka clients (and so Faust's transport)."""
        conf: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap,
            "security_protocol": self.security_protocol,
        }
        if self.sasl_mechanism is not None:
            conf["sasl_mechanism"] = self.sasl_mechanism.upper()
            conf["sasl_plain_username"] = self.sasl_username
            conf["sasl_plain_password"] = self.sasl_password
        if self.security_protocol.endswith("SSL"):
            import ssl

            context = ssl.create_default_context(cafile=self.ssl_ca_location)
            if self.ssl_certificate_location is not None:
                context.load_cert_chain(
                    self.ssl_certificate_location,
                    keyfile=self.ssl_key_location,
                    password=self.ssl_key_password,
                )
            conf["ssl_context"] = context
        return conf


@dataclass(frozen=True, slots=True)
class EmbeddedBrokerSettings:
    """How to run the embedded Tansu broker.

    ``port=0`` picks a free loopback port. ``startup_timeout_s`` bounds the wait for
    the broker's first Metadata answer. ``log_level`` is Tansu's ``RUST_LOG`` filter
    (its output goes to a temporary file, shown when it fails to start). ``durable``
    keeps the broker's data on a local S3 server (:mod:`streamtrain.s3local`) instead of
    in the broker's memory, so the broker process can be killed and restarted without
    losing records or committed offsets. Tansu authenticates nobody: a ``host`` beyond
    loopback is refused unless ``trusted_network`` says every host that can reach it
    may use it (the broker checks it at start).
    """

    host: str = "127.0.0.1"
    port: int = 0
    startup_timeout_s: float = 15.0
    stop_timeout_s: float = 5.0
    cluster_id: str = "streamtrain"
    log_level: str = "warn"
    durable: bool = False
    trusted_network: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.port < 65536:
            raise ConfigError(f"port {self.port} is outside 0-65535 (0 picks a free port)")
        if self.startup_timeout_s <= 0 or self.stop_timeout_s <= 0:
            raise ConfigError("broker timeouts must be positive")


class AssignmentMode(StrEnum):
    """How a job's partitions reach its workers (``streamtrain worker --assignment``).

    * ``group``: consumer-group membership with the eager assignor: every join or leave
      stops every worker for the rebalance;
    * ``cooperative``: incremental (cooperative-sticky) rebalancing: a join or leave moves
      only the partitions that change hands, the others keep training;
    * ``shards``: no group membership; the control app cuts each partition's offsets into
      shards and hands them out on request (DLRover-RM §5.1).
    """

    GROUP = "group"
    COOPERATIVE = "cooperative"
    SHARDS = "shards"
