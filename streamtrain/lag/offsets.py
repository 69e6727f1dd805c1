"""Reading the offsets lag is computed from: high/low watermarks, committed offsets, timestamps.

Owned here, and only here, is the Kafka I/O of the lag monitor:

* :class:`OffsetsReader` takes one :class:`OffsetsSnapshot` per call: topic metadata,
  then for all watched partitions at once a batched ListOffsets (latest; earliest only
  where a group has no commit) and one OffsetFetch per group, overlapping.
  ``snapshot_sync()`` blocks its thread (the one-shot CLI); ``snapshot()`` is a
  coroutine that runs it in a worker thread, so the event loop never waits.
* :func:`read_record_timestamps`: the timestamp of the record at a given offset, for lag
  seconds when the committed offset is older than the HWM history (the one-shot CLI
  always, the app after a restart or for a long-stuck group).

While the broker is away (the last snapshot failed), a snapshot first tries a plain TCP
connection to a bootstrap server (:func:`streamtrain.kafka.broker_answers`) and fails
at once when none answers, without asking librdkafka: an admin client kept sending
requests into an outage aborted the whole process (librdkafka 2.16
``rd_kafka_enq_once_del_source_return`` assertion, seen with the broker killed for
60 s). A client whose requests failed is dropped at once, while the broker
is still away: its requests that wait for the group coordinator would otherwise fire
when the broker comes back, after they timed out, and abort the process.

Which partitions a group is watched on: the topics given, or else every topic the group
has committed offsets for. A topic that does not exist (never created, or deleted while
watched) is listed in ``missing_topics``; its partitions are not made up.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec

from streamtrain.config import KafkaSettings
from streamtrain.errors import BrokerUnreachableError, ConfigError, KafkaError
from streamtrain.kafka import broker_answers
from streamtrain.lag.metrics import TopicOffsets
from streamtrain.partition_key import PartitionKey
from streamtrain.units import ms_to_s, s_to_ms

__all__ = ["OffsetsReader", "OffsetsSnapshot", "read_record_timestamps"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class OffsetsSnapshot:
    """Everything one tick knows about offsets, observed at ``observed_at_s`` (epoch s)."""

    observed_at_s: float
    partition_counts: Mapping[str, int]  # watched topics that exist -> partition count
    high_watermarks: Mapping[PartitionKey, int]
    low_watermarks: Mapping[PartitionKey, int]
    committed: Mapping[str, Mapping[PartitionKey, int]]  # group -> partition -> offset
    group_topics: Mapping[str, tuple[str, ...]]  # group -> topics watched for it
    missing_topics: tuple[str, ...] = ()
    fetch_s: float = 0.0

    def topic_offsets(self, group: str) -> list[TopicOffsets]:
        """The pure tick's input for ``group``: one :class:`TopicOffsets` per topic, one
        entry per partition (-1 where unknown)."""
        committed = self.committed.get(group, {})
        columns: list[TopicOffsets] = []
        for topic in self.group_topics.get(group, ()):
            parts = range(self.partition_counts.get(topic, 0))
            columns.append(
                TopicOffsets(
                    topic,
                    np.arange(len(parts), dtype=np.int64),
                    np.fromiter((committed.get((topic, p), -1) for p in parts), np.int64),
                    np.fromiter(
                        (self.high_watermarks.get((topic, p), -1) for p in parts), np.int64
                    ),
                    np.fromiter((self.low_watermarks.get((topic, p), -1) for p in parts), np.int64),
                )
            )
        return columns


def _translate(exc: KafkaException, what: str) -> KafkaError:
    error: Any = exc.args[0] if exc.args else None
    retriable = bool(error.retriable()) if hasattr(error, "retriable") else True
    return KafkaError(f"{what}: {error or exc}", retriable=retriable)


class OffsetsReader:
    """Batched offset reads for a set of groups (see the module docstring).

    ``groups`` are consumer group ids; ``group_pattern`` (a regular expression matched in
    full) adds every group the cluster lists that matches it, rediscovered each call.
    ``topics`` restricts the watched topics; empty means each group's committed topics.
    """

    def __init__(
        self,
        settings: KafkaSettings,
        *,
        groups: Sequence[str] = (),
        group_pattern: str | None = None,
        topics: Sequence[str] = (),
        request_timeout_s: float = 5.0,
    ) -> None:
        if not groups and not group_pattern:
            raise ConfigError("give at least one consumer group or a group pattern")
        if request_timeout_s <= 0:
            raise ConfigError(f"the request timeout must be positive, got {request_timeout_s}")
        try:
            self._pattern = re.compile(group_pattern) if group_pattern else None
        except re.error as exc:
            raise ConfigError(f"bad group pattern {group_pattern!r}: {exc}") from exc
        self.settings = settings
        self.groups = tuple(dict.fromkeys(groups))
        self.topics = tuple(dict.fromkeys(topics))
        self.request_timeout_s = request_timeout_s
        self._admin: AdminClient | None = None
        self._failing = False  # the last snapshot failed: check the broker is back first

    def _client(self) -> AdminClient:
        if self._admin is None:
            timeout_ms = int(s_to_ms(self.request_timeout_s))
            self._admin = AdminClient(
                self.settings.confluent_config(
                    **{
                        "socket.connection.setup.timeout.ms": timeout_ms,
                        "reconnect.backoff.max.ms": 1000,
                    }
                )
            )
        return self._admin

    # -- the one-shot, synchronous path --------------------------------------------

    def snapshot_sync(self) -> OffsetsSnapshot:
        """One snapshot, blocking the calling thread (for CLIs and threads, not coroutines).

        Requests overlap: the OffsetFetches fly while Metadata is read; then one
        ListOffsets (latest) for every watched partition, and one (earliest) only for
        the partitions some group has no commit on.
        """
        if self._failing and not broker_answers(self.settings, self.request_timeout_s):
            raise BrokerUnreachableError(self.settings.bootstrap, self.request_timeout_s)
        try:
            snapshot = self._snapshot_sync()
        except KafkaError:
            self._failing = True
            self._admin = None  # dropped now, while the broker is away (module docstring)
            raise
        self._failing = False
        return snapshot

    def _snapshot_sync(self) -> OffsetsSnapshot:
        started = time.monotonic()
        groups = self._resolve_groups(self._wait(self._list_groups()) if self._pattern else None)
        fetches = self._offset_fetches(groups)
        counts = self._metadata()
        committed = {
            group: self._committed_of(group, self._wait(future))
            for group, future in fetches.items()
        }
        plan = self._plan(groups, committed, counts)
        uncommitted = {
            (topic, p)
            for group, topics in plan.group_topics.items()
            for topic in topics
            for p in range(plan.partition_counts.get(topic, 0))
            if (topic, p) not in committed[group]
        }
        latest, earliest = self._list_offsets(plan.partitions, sorted(uncommitted))
        high = {key: self._offset_of(key, self._wait(f)) for key, f in latest.items()}
        low = {key: self._offset_of(key, self._wait(f)) for key, f in earliest.items()}
        return plan.snapshot(high, low, committed, time.monotonic() - started)

    async def snapshot(self) -> OffsetsSnapshot:
        """One snapshot without blocking the event loop (:meth:`snapshot_sync` in a
        thread: one hop for the whole tick rather than a wake-up per partition)."""
        return await asyncio.to_thread(self.snapshot_sync)

    # -- shared steps ----------------------------------------------------------------

    def _wait(self, future: concurrent.futures.Future[Any]) -> Any:
        try:
            return future.result(timeout=self.request_timeout_s + 1)
        except concurrent.futures.TimeoutError as exc:
            raise BrokerUnreachableError(self.settings.bootstrap, self.request_timeout_s) from exc
        except KafkaException as exc:
            raise _translate(exc, "reading offsets failed") from exc

    def _list_groups(self) -> concurrent.futures.Future[Any]:
        return self._client().list_consumer_groups(request_timeout=self.request_timeout_s)

    def _resolve_groups(self, listing: Any) -> tuple[str, ...]:
        found: Iterable[str] = ()
        if listing is not None and self._pattern is not None:
            pattern = self._pattern
            found = sorted(g.group_id for g in listing.valid if pattern.fullmatch(g.group_id))
        return tuple(dict.fromkeys((*self.groups, *found)))

    def _metadata(self) -> dict[str, int]:
        try:
            metadata = self._client().list_topics(timeout=self.request_timeout_s)
        except KafkaException as exc:
            raise BrokerUnreachableError(self.settings.bootstrap, self.request_timeout_s) from exc
        return {
            name: len(topic.partitions)
            for name, topic in metadata.topics.items()
            if topic.error is None
        }

    def _offset_fetches(self, groups: Sequence[str]) -> dict[str, concurrent.futures.Future[Any]]:
        admin = self._client()
        # The API takes one group per request; the requests still fly together.
        return {
            group: admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group)], request_timeout=self.request_timeout_s
            )[group]
            for group in groups
        }

    @staticmethod
    def _committed_of(group: str, result: Any) -> dict[PartitionKey, int]:
        committed: dict[PartitionKey, int] = {}
        for tp in result.topic_partitions or ():
            if tp.error is not None:
                log.warning(
                    "group %s: no offset for %s[%d]: %s", group, tp.topic, tp.partition, tp.error
                )
                continue
            if tp.offset >= 0:  # negative = no commit (OFFSET_INVALID)
                committed[(tp.topic, tp.partition)] = tp.offset
        return committed

    def _plan(
        self,
        groups: Sequence[str],
        committed: Mapping[str, Mapping[PartitionKey, int]],
        counts: Mapping[str, int],
    ) -> _Plan:
        group_topics: dict[str, tuple[str, ...]] = {}
        for group in groups:
            wanted = self.topics or tuple(sorted({topic for topic, _ in committed[group]}))
            group_topics[group] = wanted
        watched = sorted({topic for topics in group_topics.values() for topic in topics})
        missing = tuple(topic for topic in watched if topic not in counts)
        present = {topic: counts[topic] for topic in watched if topic in counts}
        return _Plan(present, group_topics, missing)

    def _list_offsets(
        self, partitions: Sequence[PartitionKey], need_low: Sequence[PartitionKey]
    ) -> tuple[dict[PartitionKey, Any], dict[PartitionKey, Any]]:
        if not partitions:
            return {}, {}
        admin = self._client()
        tps = [TopicPartition(topic, partition) for topic, partition in partitions]
        low_tps = [TopicPartition(topic, partition) for topic, partition in need_low]
        timeout = self.request_timeout_s
        latest_spec, earliest_spec = OffsetSpec.latest(), OffsetSpec.earliest()  # type: ignore[no-untyped-call]
        latest = admin.list_offsets({tp: latest_spec for tp in tps}, request_timeout=timeout)
        earliest = (
            admin.list_offsets({tp: earliest_spec for tp in low_tps}, request_timeout=timeout)
            if low_tps
            else {}
        )
        return (
            {(tp.topic, tp.partition): future for tp, future in latest.items()},
            {(tp.topic, tp.partition): future for tp, future in earliest.items()},
        )

    @staticmethod
    def _offset_of(key: PartitionKey, info: Any) -> int:
        offset = int(info.offset)
        if offset < 0:
            raise KafkaError(f"the broker gave no offset for {key[0]}[{key[1]}]", retriable=True)
        return offset


@dataclass(frozen=True, slots=True)
class _Plan:
    partition_counts: dict[str, int]
    group_topics: dict[str, tuple[str, ...]]
    missing_topics: tuple[str, ...]

    @property
    def partitions(self) -> list[PartitionKey]:
        return [(t, p) for t, n in sorted(self.partition_counts.items()) for p in range(n)]

    def snapshot(
        self,
        high: dict[PartitionKey, int],
        low: dict[PartitionKey, int],
        committed: Mapping[str, Mapping[PartitionKey, int]],
        fetch_s: float,
    ) -> OffsetsSnapshot:
        return OffsetsSnapshot(
            observed_at_s=time.time(),
            partition_counts=self.partition_counts,
            high_watermarks=high,
            low_watermarks=low,
            committed=committed,
            group_topics=self.group_topics,
            missing_topics=self.missing_topics,
            fetch_s=fetch_s,
        )


def read_record_timestamps(
    settings: KafkaSettings,
    positions: Mapping[PartitionKey, int],
    *,
    timeout_s: float = 5.0,
) -> dict[PartitionKey, float]:
    """Epoch seconds of the record at each ``(topic, partition) -> offset``.

    Blocking (run it in a thread from a coroutine). A partition whose record cannot be
    read in time is left out: its lag seconds stay unknown rather than guessed. The
    consumer never joins a group and never commits.
    """
    if not positions:
        return {}
    consumer = Consumer(
        settings.confluent_config(
            **{
                "group.id": "streamtrain-lag-peek",  # required by librdkafka; never joined
                "enable.auto.commit": False,
                "enable.partition.eof": False,
                "fetch.max.bytes": 1_048_576,
                "max.partition.fetch.bytes": 65_536,
            }
        )
    )
    found: dict[PartitionKey, float] = {}
    try:
        consumer.assign([TopicPartition(t, p, offset) for (t, p), offset in positions.items()])
        deadline = time.monotonic() + timeout_s
        while len(found) < len(positions) and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=500, timeout=0.2):
                if message.error() is not None:
                    continue
                key = (message.topic() or "", message.partition() or 0)
                if key in positions and key not in found:
                    _, stamp_ms = message.timestamp()
                    if stamp_ms > 0:
                        found[key] = ms_to_s(stamp_ms)
                    consumer.pause([TopicPartition(key[0], key[1])])
    except KafkaException as exc:
        raise _translate(exc, "reading record timestamps failed") from exc
    finally:
        consumer.close()
    return found
