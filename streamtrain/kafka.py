"""Thin, error-translating helpers over confluent-kafka's AdminClient.

Owned here: probing a bootstrap address for a Metadata answer within a deadline,
creating topics (by default with the cluster's replication factor:
:func:`cluster_replication_factor`), and describing topics. Every confluent-kafka error
is translated to :class:`streamtrain.errors.KafkaError` (or a subclass) with the topic
named. :func:`broker_answers` is a plain TCP check of the bootstrap servers: a
long-lived admin client must not send requests into a broker outage (librdkafka 2.16
aborted the process, ``rd_kafka_enq_once_del_source_return`` assertion, when group
coordinator requests were in flight while the broker was killed and came back), so
its owner checks this first after a failed call.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import ConfigResource
from confluent_kafka.cimpl import NewTopic

from streamtrain.config import KafkaSettings
from streamtrain.errors import BrokerUnreachableError, ConfigError, KafkaError
from streamtrain.units import s_to_ms

__all__ = [
    "BrokerInfo",
    "TopicInfo",
    "broker_answers",
    "cluster_replication_factor",
    "create_topic",
    "describe_topics",
    "kafka_error",
    "probe",
    "replication_factor_for",
]


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    partitions: int


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """What one Metadata answer says about a cluster."""

    bootstrap: str
    cluster_id: str | None
    broker_count: int
    topics: tuple[TopicInfo, ...]
    answered_in_s: float


def kafka_error(exc: KafkaException, what: str) -> KafkaError:
    """``exc`` as a :class:`~streamtrain.errors.KafkaError`: ``what`` failed, librdkafka's
    reason, and whether it is retriable (the caller raises it ``from exc``)."""
    error = exc.args[0]
    return KafkaError(f"{what}: {error.str()}", retriable=bool(error.retriable()))


def _admin(settings: KafkaSettings, timeout_s: float) -> AdminClient:
    timeout_ms = max(int(s_to_ms(timeout_s)), 1)
    return AdminClient(
        settings.confluent_config(
            **{
                "socket.connection.setup.timeout.ms": timeout_ms,
                "reconnect.backoff.max.ms": 1000,
            }
        )
    )


def broker_answers(settings: KafkaSettings, timeout_s: float) -> bool:
    """Whether any bootstrap server accepts a TCP connection within ``timeout_s``."""
    for host, port in settings.servers:
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return True
        except OSError:
            continue
    return False


def probe(settings: KafkaSettings, timeout_s: float = 10.0) -> BrokerInfo:
    """Ask the cluster for Metadata; raise :class:`BrokerUnreachableError` after ``timeout_s``."""
    if timeout_s <= 0:
        raise ConfigError(f"timeout must be positive, got {timeout_s!r}")
    started = time.monotonic()
    admin = _admin(settings, timeout_s)
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise BrokerUnreachableError(settings.bootstrap, timeout_s) from exc
    topics = tuple(
        TopicInfo(name=name, partitions=len(topic.partitions))
        for name, topic in sorted(metadata.topics.items())
        if not name.startswith("__")
    )
    return BrokerInfo(
        bootstrap=settings.bootstrap,
        cluster_id=metadata.cluster_id,
        broker_count=len(metadata.brokers),
        topics=topics,
        answered_in_s=time.monotonic() - started,
    )


def describe_topics(settings: KafkaSettings, timeout_s: float = 10.0) -> tuple[TopicInfo, ...]:
    return probe(settings, timeout_s).topics


def cluster_replication_factor(admin: AdminClient, timeout_s: float = 10.0) -> int:
    """The replication factor a new topic should get on this cluster: its brokers'
    ``default.replication.factor`` when they say, else ``min(3, brokers)``; never more
    than there are brokers."""
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException:
        return 1
    brokers = max(len(metadata.brokers), 1)
    configured: int | None = None
    try:
        resource = ConfigResource(ConfigResource.Type.BROKER, str(min(metadata.brokers)))
        futures = admin.describe_configs([resource], request_timeout=timeout_s)
        entry = futures[resource].result(timeout=timeout_s).get("default.replication.factor")
        if entry is not None and entry.value is not None:
            configured = int(entry.value)
    except (KafkaException, ValueError, TimeoutError):
        configured = None  # a broker that does not say (Tansu, an ACL): the fallback
    return replication_factor_for(configured, brokers)


def replication_factor_for(configured: int | None, brokers: int) -> int:
    """``default.replication.factor`` as the brokers said (``None``: they did not), else
    ``min(3, brokers)``; never more than there are brokers, never below 1."""
    wanted = configured if configured is not None and configured >= 1 else 3
    return max(min(wanted, brokers), 1)


def create_topic(
    settings: KafkaSettings,
    name: str,
    partitions: int,
    *,
    replication_factor: int | None = None,
    config: dict[str, str] | None = None,
    timeout_s: float = 10.0,
    exist_ok: bool = False,
) -> TopicInfo:
    """Create ``name`` and wait for the controller's answer.

    ``replication_factor=None`` takes the cluster's (:func:`cluster_replication_factor`).
    """
    if not name or len(name) > 249:
        raise ConfigError(f"topic name {name!r} must have 1-249 characters")
    if partitions < 1:
        raise ConfigError(f"topic {name!r}: partitions must be at least 1, got {partitions}")
    admin = _admin(settings, timeout_s)
    if replication_factor is None:
        replication_factor = cluster_replication_factor(admin, timeout_s)
    new_topic = NewTopic(
        name,
        num_partitions=partitions,
        replication_factor=replication_factor,
        config=dict(config or {}),
    )
    futures = admin.create_topics(
        [new_topic], operation_timeout=timeout_s, request_timeout=timeout_s
    )
    try:
        futures[name].result(timeout=timeout_s)
    except KafkaException as exc:
        error = exc.args[0]
        if exist_ok and error.name() == "TOPIC_ALREADY_EXISTS":
            return TopicInfo(name=name, partitions=partitions)
        raise kafka_error(
            exc,
            f"creating topic {name!r} ({partitions} partitions) on {settings.bootstrap} failed",
        ) from exc
    except TimeoutError as exc:
        raise BrokerUnreachableError(settings.bootstrap, timeout_s) from exc
    return TopicInfo(name=name, partitions=partitions)
