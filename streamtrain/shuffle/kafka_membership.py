"""Membership through Kafka alone: the compacted ``<job>.members`` topic.

Owned here: :class:`KafkaMembership`. Each worker writes its ``Member`` record (key =
worker id: endpoints, CURVE public key, incarnation, heartbeat time) every heartbeat
interval and a tombstone on a clean exit; every worker reads the topic from the start
and keeps the latest record per key. A peer is live while its last heartbeat is younger
than the timeout (its age is taken when the record is read, so history replayed at
start-up does not revive dead workers); a tombstone removes it at once. No central
service: the topic is the only shared state (created with the cluster's replication
factor). One background thread per worker does the producing and reading;
:meth:`KafkaMembership.peers` is a thread-safe snapshot.

A record cannot choose its own fate: one whose endpoints, CURVE key or heartbeat fields
are unusable (:mod:`~streamtrain.shuffle.announcements`: a wildcard or unresolvable
form of address, a key of the wrong length, a heartbeat time more than
``MAX_CLOCK_SKEW_MS`` (or the heartbeat timeout, if longer) ahead, an interval above the
reader's own timeout) is dropped, counted in
``invalid_records`` and logged once per worker and reason. A peer's timeout is the
larger of the reader's and three of its intervals, so at most three times the
reader's: no record keeps a dead worker live for longer.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from streamtrain import wire
from streamtrain.config import KafkaSettings
from streamtrain.errors import ConfigError, KafkaError, SchemaError
from streamtrain.kafka import create_topic
from streamtrain.proto.data_plane_pb2 import Member
from streamtrain.shuffle.announcements import heartbeat_problem
from streamtrain.shuffle.membership import PeerInfo
from streamtrain.shuffle.settings import check_heartbeat
from streamtrain.units import NS_PER_MS, ms_to_s

__all__ = ["MAX_CLOCK_SKEW_MS", "KafkaMembership", "MembershipStats", "members_topic"]

_LOG = logging.getLogger(__name__)

MAX_CLOCK_SKEW_MS = 30_000
"""How far ahead of the reader's clock a heartbeat may be (at least the heartbeat
timeout): hosts' clocks differ a little; a record from further ahead would stay "live"
for as long as its writer liked."""


def members_topic(job: str) -> str:
    return f"{job}.members"


@dataclass(frozen=True, slots=True)
class MembershipStats:
    heartbeats_sent: int
    records_read: int
    malformed_records: int
    expired_peers: int
    tombstones_read: int
    invalid_records: int = 0


@dataclass(slots=True)
class _Seen:
    info: PeerInfo
    last_seen: float  # monotonic time of the heartbeat, aged by its age when read
    timeout_s: float


class KafkaMembership:
    """Workers of ``job`` announce themselves on ``<job>.members`` (see module docstring)."""

    def __init__(
        self,
        kafka: KafkaSettings,
        job: str,
        *,
        heartbeat_interval_ms: int = 1_000,
        heartbeat_timeout_ms: int = 5_000,
        clock: Callable[[], float] = time.monotonic,
        wall_clock_ms: Callable[[], int] = lambda: time.time_ns() // NS_PER_MS,
    ) -> None:
        check_heartbeat(heartbeat_interval_ms, heartbeat_timeout_ms)
        self._kafka = kafka
        self._job = job
        self._topic = members_topic(job)
        self._interval_s = ms_to_s(heartbeat_interval_ms)
        self._interval_ms = heartbeat_interval_ms
        self._timeout_s = ms_to_s(heartbeat_timeout_ms)
        self._timeout_ms = heartbeat_timeout_ms
        self._clock = clock
        self._wall_ms = wall_clock_ms
        self._lock = threading.Lock()
        self._seen: dict[str, _Seen] = {}
        self._me: PeerInfo | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._failure: BaseException | None = None
        self._heartbeats = 0
        self._read = 0
        self._malformed = 0
        self._expired = 0
        self._tombstones = 0
        self._invalid = 0
        self._logged: dict[str, str] = {}  # worker -> the last reason logged for it

    @property
    def topic(self) -> str:
        return self._topic

    def start(self, me: PeerInfo) -> None:
        """Create the topic if needed, announce ``me`` and start reading."""
        self._me = me
        create_topic(  # with the cluster's replication factor
            self._kafka,
            self._topic,
            1,
            config={"cleanup.policy": "compact"},
            exist_ok=True,
        )
        self._producer = Producer(self._kafka.confluent_config(**{"linger.ms": 0}))
        consumer = Consumer(
            self._kafka.confluent_config(
                **{
                    "group.id": f"{self._topic}.{me.worker_id}.{me.incarnation}",
                    "enable.auto.commit": False,
                    "enable.partition.eof": False,
                }
            )
        )
        # read every partition: someone (or auto-creation) may have made more than one
        try:
            metadata = consumer.list_topics(self._topic, timeout=10)
        except KafkaException as exc:
            consumer.close()
            raise KafkaError(
                f"cannot read the metadata of {self._topic!r} on {self._kafka.bootstrap}",
                retriable=True,
            ) from exc
        topic = metadata.topics.get(self._topic)
        partitions = sorted(topic.partitions) if topic is not None and topic.partitions else [0]
        consumer.assign([TopicPartition(self._topic, p, OFFSET_BEGINNING) for p in partitions])
        self._consumer = consumer
        self._heartbeat()
        self._thread = threading.Thread(
            target=self._run, name=f"membership-{me.worker_id}", daemon=True
        )
        self._thread.start()

    def peers(self) -> Mapping[str, PeerInfo]:
        if self._failure is not None:
            raise KafkaError(
                f"membership on {self._topic!r} stopped: {self._failure}", retriable=True
            )
        now = self._clock()
        me = self._me.worker_id if self._me is not None else ""
        with self._lock:
            return {
                worker: seen.info
                for worker, seen in self._seen.items()
                if worker != me and now - seen.last_seen < seen.timeout_s
            }

    def stats(self) -> MembershipStats:
        with self._lock:
            return MembershipStats(
                self._heartbeats,
                self._read,
                self._malformed,
                self._expired,
                self._tombstones,
                self._invalid,
            )

    def close(self) -> None:
        """Write a tombstone for this worker and stop; idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        if self._producer is not None and self._me is not None:
            try:
                self._producer.produce(self._topic, key=self._me.worker_id.encode(), value=None)
                self._producer.flush(5)
            except (KafkaException, BufferError) as exc:
                _LOG.warning("could not write the tombstone of %s: %s", self._me.worker_id, exc)
            self._producer = None
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    # background thread -----------------------------------------------------------------

    def _run(self) -> None:
        next_beat = self._clock() + self._interval_s
        try:
            while not self._stop.is_set():
                self._read_some(min(self._interval_s / 4, 0.1))
                if self._clock() >= next_beat:
                    self._heartbeat()
                    next_beat = self._clock() + self._interval_s
        except (KafkaException, KafkaError) as exc:
            self._failure = exc
            _LOG.exception("membership on %s failed", self._topic)

    def _heartbeat(self) -> None:
        me, producer = self._me, self._producer
        if me is None or producer is None:
            return
        record = Member(
            job=self._job,
            worker_id=me.worker_id,
            data_endpoint=me.data_endpoint,
            event_endpoint=me.event_endpoint,
            curve_public_key=(me.curve_public_key or b"").decode("ascii"),
            incarnation=me.incarnation,
            heartbeat_at_ms=self._wall_ms(),
            heartbeat_interval_ms=self._interval_ms,
            batch_schema_version=me.batch_schema_version,
        )
        try:
            producer.produce(self._topic, key=me.worker_id.encode(), value=wire.encode(record))
        except BufferError:
            _LOG.warning("membership heartbeat of %s skipped: producer queue full", me.worker_id)
        producer.poll(0)
        with self._lock:
            self._heartbeats += 1

    def _read_some(self, timeout_s: float) -> None:
        consumer = self._consumer
        if consumer is None:
            return
        messages = consumer.consume(num_messages=500, timeout=timeout_s)
        now, now_ms = self._clock(), self._wall_ms()
        with self._lock:
            for message in messages:
                if message.error() is not None:
                    _LOG.warning("membership read error on %s: %s", self._topic, message.error())
                    continue
                self._read += 1
                self._apply(message.key(), message.value(), now, now_ms)
            for worker in [w for w, s in self._seen.items() if now - s.last_seen >= s.timeout_s]:
                del self._seen[worker]
                self._expired += 1

    def _apply(self, key: bytes | None, value: bytes | None, now: float, now_ms: int) -> None:
        if not key:
            self._malformed += 1
            return
        worker = key.decode("utf-8", errors="replace")
        if value is None:
            self._tombstones += 1
            self._seen.pop(worker, None)
            return
        try:
            record = wire.decode(Member, value)
        except SchemaError:
            self._malformed += 1
            return
        if record.job != self._job or record.worker_id != worker:
            self._malformed += 1
            return
        problem = heartbeat_problem(
            record.heartbeat_at_ms,
            record.heartbeat_interval_ms,
            now_ms=now_ms,
            max_skew_ms=max(self._timeout_ms, MAX_CLOCK_SKEW_MS),
            max_interval_ms=self._timeout_ms,
        )
        info: PeerInfo | None = None
        if problem is None:
            try:
                info = PeerInfo(
                    worker_id=record.worker_id,
                    data_endpoint=record.data_endpoint,
                    event_endpoint=record.event_endpoint,
                    incarnation=record.incarnation,
                    curve_public_key=record.curve_public_key.encode("ascii") or None,
                    # an older release announces none: it reads version 1 only
                    batch_schema_version=record.batch_schema_version or 1,
                )
            except (ConfigError, UnicodeEncodeError) as exc:
                problem = str(exc)
        if info is None:
            self._refuse(worker, problem or "unusable record")
            return
        age_s = max(0.0, ms_to_s(now_ms - record.heartbeat_at_ms))
        timeout_s = max(self._timeout_s, ms_to_s(3 * record.heartbeat_interval_ms))
        previous = self._seen.get(worker)
        if previous is not None and previous.info.incarnation > info.incarnation:
            return  # a late record of an earlier incarnation
        self._seen[worker] = _Seen(info, now - age_s, timeout_s)
        self._logged.pop(worker, None)

    def _refuse(self, worker: str, problem: str) -> None:
        """Drop ``worker``'s record (and any older view of it); log each new reason once."""
        self._invalid += 1
        self._seen.pop(worker, None)
        if self._logged.get(worker) != problem:
            self._logged[worker] = problem
            _LOG.warning("ignoring the %s record of %r: %s", self._topic, worker, problem)
