"""The control app's shard coordinator (``streamtrain lag run --shards-job J``), minus Faust.

Owned here:

* :class:`ShardJobSettings`: which job's topics are cut into shards, the book's
  :class:`~streamtrain.shards.model.ShardSettings`, the topics, how often to cut/expire
  and commit;
* :class:`ShardCoordinator`: turns a worker's ``ShardUpdate`` into book calls and the
  ``ShardGrant`` to answer with. A malformed update, one for another job, a report for
  an unknown or already-done shard or an offset range outside the partition is logged
  (one clear line) and ignored: never a crash, never a commit past untrained records.
  :meth:`~ShardCoordinator.tick` feeds the newest offsets to the book and expires
  silent holders;
* :class:`ShardOffsets`: its Kafka I/O, blocking (the app runs it in a thread): the job's
  partitions, their ends and committed offsets, and the commits of each partition's
  done prefix under the job's group id (so ``streamtrain lag status``, Burrow and
  ``kafka-consumer-groups.sh`` see the true lag). The embedded broker (Tansu 0.6.0)
  reports a partition's high watermark as the last record *batch*'s base offset + 1,
  not one past its last record (measured: 500 records produced in one batch give a high
  watermark of 1), so a partition's end is read from its last batch: a probe consumer
  fetches from ``high watermark - 1`` once the watermark stood still for a tick, and
  the end is one past the last offset it gets. While producers write, the watermark
  moves every tick and the shards are cut up to it (the last batch waits for the next
  one); probing every moved partition instead cost a fetch round trip per tick, up to
  0.8 s at the demo's evening peak, when the broker is busiest. On a broker that
  reports the true watermark the probe finds nothing past it and changes nothing.

:mod:`streamtrain.control.app` wires these to a Faust agent, a changelogged table and a
timer.
"""

from __future__ import annotations

import collections
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec

from streamtrain import wire
from streamtrain.config import KafkaSettings
from streamtrain.errors import ConfigError, KafkaError, SchemaError
from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.shards.book import ShardBook
from streamtrain.shards.messages import default_topics, from_range, grant_range, to_range
from streamtrain.shards.model import Grant, Refusal, ShardRange, ShardSettings

__all__ = ["ShardCoordinator", "ShardJobSettings", "ShardOffsets"]

log = logging.getLogger(__name__)

PartitionKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ShardJobSettings:
    """The shard coordinator of one job. Topic names default to ``<job>.shards`` and
    ``<job>.shard-grants``."""

    job: str
    topics: tuple[str, ...]
    book: ShardSettings = field(default_factory=ShardSettings)
    tick_s: float = 0.25
    commit_interval_s: float = 1.0
    updates_topic: str = ""
    grants_topic: str = ""

    def __post_init__(self) -> None:
        if not self.job.strip():
            raise ConfigError("the shard job must not be empty")
        if not self.topics:
            raise ConfigError(f"shards for job {self.job!r} need the job's --topic")
        if self.tick_s <= 0 or self.commit_interval_s <= 0:
            raise ConfigError("the shard tick and commit interval must be positive")
        updates, grants = default_topics(self.job)
        object.__setattr__(self, "updates_topic", self.updates_topic or updates)
        object.__setattr__(self, "grants_topic", self.grants_topic or grants)


class ShardCoordinator:
    """One job's :class:`ShardBook` behind the wire messages (module docstring)."""

    def __init__(self, settings: ShardJobSettings) -> None:
        self.settings = settings
        self.book = ShardBook(settings.book)
        self.refused: collections.Counter[str] = collections.Counter()
        self.updates = 0
        self.restored = False

    def handle(self, data: bytes, now_s: float) -> pb.ShardGrant | None:
        """One ``ShardUpdate``; the grant to send back, if any."""
        self.updates += 1
        try:
            update = wire.decode(pb.ShardUpdate, data)
        except SchemaError as exc:
            self._refuse(f"a malformed shard update ({exc})", Refusal.MALFORMED)
            return None
        worker = update.worker_id
        if update.job != self.settings.job or not worker:
            self._refuse(
                f"a shard update for job {update.job!r} from worker {worker!r} "
                f"(this coordinator serves {self.settings.job!r} and needs a worker id)",
                Refusal.MALFORMED,
            )
            return None
        for message in update.done:
            parsed = self._parse(worker, message)
            if parsed is not None:
                refusal = self.book.done(worker, parsed[0], parsed[1], now_s)
                if refusal is not None:
                    self._refuse(f"done report of {worker} for {parsed[0]}", refusal)
        returned = [p[0] for m in update.returned if (p := self._parse(worker, m)) is not None]
        if returned:
            log.info(
                "worker %s handed back %d shard(s)", worker, self.book.release(worker, returned)
            )
        held = [p for m in update.held if (p := self._parse(worker, m)) is not None]
        if update.leaving:
            gone = self.book.forget_worker(worker)
            log.info("worker %s left; %d shard(s) back in the queue", worker, len(gone))
            return None
        revoked = self.book.heartbeat(worker, held, now_s)
        for rng, refusal in revoked:
            log.info("worker %s holds %s, which it must let go: %s", worker, rng, refusal)
        # ``want_shards`` is beyond what the update lists as held: leases the worker does
        # not list yet are grants on their way to it, and count against it
        listed = {rng for rng, _ in held}
        in_flight = [g for g in self.book.held_by(worker) if g.shard not in listed]
        want = max(0, update.want_shards - len(in_flight))
        grants = self.book.request(worker, want, now_s)
        if not grants and not revoked:
            return None
        return self._grant_message(worker, grants, [rng for rng, _ in revoked])

    def _grant_message(
        self, worker: str, grants: list[Grant], revoked: list[ShardRange] | None = None
    ) -> pb.ShardGrant:
        return pb.ShardGrant(
            job=self.settings.job,
            worker_id=worker,
            shards=[grant_range(g) for g in grants],
            revoked=[to_range(rng) for rng in revoked or ()],
        )

    def _parse(self, worker: str, message: pb.ShardUpdate.Range) -> tuple[ShardRange, int] | None:
        parsed = from_range(message)
        if parsed is None:
            self._refuse(f"a shard of {worker} naming no partition", Refusal.MALFORMED)
        return parsed

    def _refuse(self, what: str, refusal: Refusal) -> None:
        self.refused[refusal.name] += 1
        log.warning("ignoring %s: %s", what, refusal.value)

    def tick(
        self,
        high_watermarks: dict[PartitionKey, int],
        starts: dict[PartitionKey, int],
        now_s: float,
    ) -> list[pb.ShardGrant]:
        """Cut what arrived, requeue the shards of silent holders, and serve the workers
        waiting for shards; returns the grants to send."""
        for key, high in high_watermarks.items():
            self.book.observe(key[0], key[1], high, starts.get(key, 0), now_s)
        expired = self.book.expire(now_s)
        for grant in expired:
            log.warning(
                "worker %s sent no heartbeat for %.1f s: shard %s back in the queue",
                grant.worker_id,
                self.settings.book.lease_s,
                grant.shard,
            )
        by_worker: dict[str, list[Grant]] = {}
        for grant in self.book.serve_waiting(now_s):
            by_worker.setdefault(grant.worker_id, []).append(grant)
        return [self._grant_message(w, grants) for w, grants in sorted(by_worker.items())]

    def state_json(self) -> dict[str, Any]:
        stats = self.book.stats()
        return {
            "job": self.settings.job,
            "partitions": stats.partitions,
            "queued_shards": stats.queued_shards,
            "leased_shards": stats.leased_shards,
            "queued_records": stats.queued_records,
            "uncut_records": stats.uncut_records,
            "workers": sorted(self.book.workers()),
            "updates": self.updates,
            "refused": dict(self.refused),
        }


class ShardOffsets:
    """The coordinator's Kafka calls (blocking; one thread at a time)."""

    def __init__(self, kafka: KafkaSettings, settings: ShardJobSettings, timeout_s: float) -> None:
        self.settings = settings
        self.timeout_s = timeout_s
        self._consumer = Consumer(
            kafka.confluent_config(
                **{
                    "group.id": settings.job,
                    "enable.auto.commit": False,
                    "client.id": f"streamtrain-shards-{settings.job}",
                }
            )
        )
        self._probe = Consumer(
            kafka.confluent_config(
                **{
                    "group.id": f"{settings.job}.shard-probe",
                    "enable.auto.commit": False,
                    "client.id": f"streamtrain-shards-probe-{settings.job}",
                    "fetch.wait.max.ms": 10,
                }
            )
        )
        self._admin = AdminClient(kafka.confluent_config())
        self._partitions: list[TopicPartition] = []
        self._starts: dict[PartitionKey, int] = {}
        self._probed: dict[PartitionKey, int] = {}  # the watermark the last probe read at
        self._highs: dict[PartitionKey, int] = {}  # the watermarks of the last read
        self._ends: dict[PartitionKey, int] = {}  # one past the last offset seen

    def read(self) -> tuple[dict[PartitionKey, int], dict[PartitionKey, int]]:
        """``(partition ends, start offsets)`` of the job's partitions (one batched
        ListOffsets, then the probe of the partitions whose watermark stood still)."""
        try:
            if not self._partitions:
                self._discover()
            highs = self._list(OffsetSpec.latest())  # type: ignore[no-untyped-call]
            self._probe_ends(highs)
        except KafkaException as exc:
            raise KafkaError(f"reading the offsets of job {self.settings.job!r}: {exc}") from exc
        ends = {key: max(high, self._ends.get(key, 0)) for key, high in highs.items()}
        return ends, self._starts

    def _list(self, spec: Any) -> dict[PartitionKey, int]:
        if not self._partitions:
            return {}
        futures = self._admin.list_offsets(
            {tp: spec for tp in self._partitions}, request_timeout=self.timeout_s
        )
        return {(tp.topic, tp.partition): int(f.result().offset) for tp, f in futures.items()}

    def _probe_ends(self, highs: dict[PartitionKey, int], wait_s: float = 0.5) -> None:
        """Read the last batch of each partition whose watermark stood still since the
        last read and was not probed at yet (module docstring)."""
        before, self._highs = self._highs, dict(highs)
        still = [
            k
            for k, high in highs.items()
            if high > 0 and before.get(k) == high and self._probed.get(k) != high
        ]
        if not still:
            return
        self._probe.assign([TopicPartition(t, p, highs[(t, p)] - 1) for t, p in still])
        pending = set(still)
        deadline = time.monotonic() + wait_s
        # Until every probed partition's last batch has arrived (a fetched batch is queued
        # whole), then once more without waiting for what is already queued. Waiting for
        # the probe to go quiet instead never ends while producers write: it cost the
        # whole ``wait_s`` on every tick (the demo's 0.25-s tick overran 600 times a run).
        drained = False
        while not drained:
            drained = not pending or time.monotonic() >= deadline
            messages = self._probe.consume(10_000, 0.0 if drained else 0.02)
            for message in messages:
                if message.error() is not None:
                    continue
                topic, partition, offset = message.topic(), message.partition(), message.offset()
                if topic is None or partition is None or offset is None:
                    continue
                key = (topic, partition)
                self._ends[key] = max(self._ends.get(key, 0), offset + 1)
                pending.discard(key)
        for key in still:
            if key not in pending:
                self._probed[key] = highs[key]
        self._probe.unassign()

    def _discover(self) -> None:
        found: list[TopicPartition] = []
        for topic in self.settings.topics:
            meta = self._consumer.list_topics(topic, timeout=self.timeout_s).topics.get(topic)
            if meta is None or meta.error is not None:
                continue
            found += [TopicPartition(topic, p) for p in sorted(meta.partitions)]
        self._partitions = found
        for key, low in self._list(OffsetSpec.earliest()).items():  # type: ignore[no-untyped-call]
            self._starts.setdefault(key, low)
        for tp in self._consumer.committed(found, timeout=self.timeout_s) if found else []:
            if tp.error is None and tp.offset >= 0:
                self._starts[(tp.topic, tp.partition)] = tp.offset

    def commit(self, positions: dict[PartitionKey, int]) -> None:
        """Commit ``positions`` under the job's group id."""
        offsets = [TopicPartition(t, p, o) for (t, p), o in sorted(positions.items())]
        try:
            for tp in self._consumer.commit(offsets=offsets, asynchronous=False) or []:
                if tp.error is not None:
                    raise KafkaError(f"commit of {tp.topic}[{tp.partition}]: {tp.error}")
        except KafkaException as exc:
            raise KafkaError(f"committing job {self.settings.job!r}: {exc}") from exc

    def close(self) -> None:
        self._consumer.close()
        self._probe.close()
