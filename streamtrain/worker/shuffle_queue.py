"""The seam between ingest and shuffle: a ShuffleNode as the ingest consumer's record queue.

Owned here: :class:`ShuffleQueue` and :func:`shuffled_consumer`. It belongs to the worker's
assembly: ingest knows nothing of the shuffle and the shuffle nothing of ingest (both
know :mod:`streamtrain.records`); this module joins the two.

:class:`~streamtrain.ingest.IngestConsumer` fills a :class:`RecordQueue` from its fetch
thread and drains it through a :class:`~streamtrain.ingest.reader.BatchReader`, which
acknowledges trained records through one callable. :class:`ShuffleQueue` puts a
:class:`~streamtrain.shuffle.node.ShuffleNode` behind both sides: ``put`` never blocks
(the fetch thread must keep serving rebalances), ``get`` hands out the worker's own
records or a batch a peer forwarded, and ``acknowledge`` maps acknowledged records back
to the chunks they came from, so the node acknowledges the worker's own records to the
offset tracker and a peer's batch to its origin. Once the node's forwarding thread
died, ``get`` raises, so the worker stops with the shuffle's error instead of waiting
for ACKs that cannot come.

:func:`shuffled_consumer` wires one tracker, node, queue and consumer together.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
import time
from dataclasses import dataclass

from streamtrain.config import KafkaSettings
from streamtrain.errors import StreamtrainError
from streamtrain.ingest.consumer import IngestConsumer
from streamtrain.ingest.decoders import Decoder
from streamtrain.ingest.metrics import WorkerMetrics
from streamtrain.ingest.settings import IngestSettings
from streamtrain.ingest.tracker import OffsetTracker
from streamtrain.records import Acknowledger, RecordColumns, contiguous_runs, drop_partitions
from streamtrain.shuffle.membership import Membership
from streamtrain.shuffle.node import ShuffleNode
from streamtrain.shuffle.settings import ShuffleSettings
from streamtrain.shuffle.unit import ShuffledBatch, UnitStats

__all__ = ["ShuffleQueue", "shuffled_consumer"]

log = logging.getLogger(__name__)

_TAKE_SLICE_S = 0.1  # how often a waiting get() looks at close() and the node's health

RecordKey = tuple[int, int]  # (partition, offset)


@dataclass(slots=True)
class _HandedOut:
    """A chunk the trainer has; ``pending`` is built at its first partial acknowledgement."""

    batch: ShuffledBatch
    pending: set[RecordKey] | None = None


def _keys(columns: RecordColumns) -> list[RecordKey]:
    return list(zip(columns.partitions.tolist(), columns.offsets.tolist(), strict=True))


class ShuffleQueue:
    """A :class:`~streamtrain.ingest.localqueue.RecordQueue` over a ShuffleNode.

    ``tracker`` is the consumer's offset tracker: acknowledged records of this worker
    that no handed-out chunk accounts for (acknowledged twice) go straight to it, where
    a repeated acknowledgement is harmless.
    """

    def __init__(self, node: ShuffleNode, tracker: Acknowledger) -> None:
        settings = node.unit.settings
        self.capacity_records = settings.queue_capacity_records + settings.overflow_capacity_records
        self._node = node
        self._tracker = tracker
        self._pending_lock = threading.Lock()
        self._pending: collections.deque[RecordColumns] = collections.deque()
        self._pending_records = 0
        self._acks_lock = threading.Lock()
        # By id() of the handed-out columns (the entry keeps them alive, so the id is
        # theirs until the entry goes), in hand-out order.
        self._handed_out: dict[int, _HandedOut] = {}
        self._closed = threading.Event()

    @property
    def node(self) -> ShuffleNode:
        return self._node

    # -- the fetch thread's side -----------------------------------------------------------

    def _flushed(self) -> tuple[UnitStats, int]:
        """Offer the pending records to the node again; its stats and what still waits."""
        with self._pending_lock:
            self._flush_locked()
            return self._node.unit.stats(), self._pending_records

    @property
    def records(self) -> int:
        """Records waiting here: the node's local queue and overflow, and the pending list."""
        stats, pending = self._flushed()
        return stats.queue_records + stats.overflow_records + pending

    @property
    def full(self) -> bool:
        """True while the node refused records (fetching should pause)."""
        return self.records >= self.capacity_records or self._pending_records > 0

    @property
    def settled(self) -> bool:
        """Nothing waits here and nothing is in flight to a peer (safe to call a worker idle)."""
        stats, pending = self._flushed()
        return not (
            pending or stats.queue_records or stats.overflow_records or stats.in_flight_records
        )

    def put(self, chunk: RecordColumns) -> None:
        """Never blocks: what the node cannot place now (its local queue and overflow are
        full) waits in a small pending list that is offered again on every call; while
        it is not empty, :attr:`full` is true and the consumer pauses fetching."""
        if not len(chunk):
            return
        with self._pending_lock:
            self._pending.append(chunk)
            self._pending_records += len(chunk)
            self._flush_locked()

    def _flush_locked(self) -> None:
        while self._pending:
            head = self._pending[0]
            rest = self._node.put(head, timeout_s=0)
            placed = len(head) - (0 if rest is None else len(rest))
            self._pending_records -= placed
            if rest is not None:
                self._pending[0] = rest
                return
            self._pending.popleft()

    def drop(self, topic: str, partitions: set[int]) -> int:
        """Remove this worker's records of revoked ``partitions`` (pending and in the node)."""
        if not partitions:
            return 0
        with self._pending_lock:
            self._pending, dropped = drop_partitions(self._pending, topic, partitions)
            self._pending_records -= dropped
        return dropped + self._node.unit.drop(topic, partitions)

    def close(self) -> None:
        """Later ``get`` calls return ``None`` (records still queued are not acknowledged,
        so their partitions' next owner reads them again)."""
        self._closed.set()

    # -- the trainer's side ----------------------------------------------------------------

    def get(
        self, max_records: int, timeout_s: float, linger_s: float = 0.0
    ) -> RecordColumns | None:
        """The node's next chunk of at most ``max_records`` records, or ``None``: the
        worker's own records or a batch a peer forwarded (``forwarded`` set), remembered
        until acknowledged.

        ``linger_s`` is not used: the fetch thread already cuts chunks at the batch size,
        and a forwarded batch is handed out whole or in pieces as it came.
        """
        deadline = time.monotonic() + timeout_s
        while not self._closed.is_set():
            self._raise_failure()
            remaining = deadline - time.monotonic()
            batch = self._node.take(max_records, timeout_s=max(min(remaining, _TAKE_SLICE_S), 0))
            if batch is not None:
                with self._acks_lock:
                    self._handed_out[id(batch.columns)] = _HandedOut(batch)
                return batch.columns
            if remaining <= 0:
                return None
        return None

    def _raise_failure(self) -> None:
        failure = self._node.forwarding.failure
        if failure is not None:
            raise StreamtrainError(
                f"the shuffle layer of worker {self._node.unit.settings.worker_id} stopped: "
                f"{failure}"
            ) from failure

    def acknowledge(self, records: RecordColumns) -> int:
        """Acknowledge trained (or dead-lettered) records; return how many.

        The reader's and the dead-letter queue's callback. Records map back to the whole
        chunk they came from (the common case: one identity check), or to parts of it
        (records sent to the dead-letter topic are acknowledged when their delivery is
        confirmed, the rest when the step ends). A chunk is acknowledged to the node once
        every record of it is. The worker's own records acknowledged in parts also go to
        the tracker at once: a dead letter whose delivery is still being retried holds
        back its own offset only, not the rest of its chunk.
        """
        done: list[ShuffledBatch] = []
        unmatched: list[RecordKey] = []
        whole = False
        with self._acks_lock:
            entry = self._handed_out.get(id(records))
            if entry is not None and entry.batch.columns is records and entry.pending is None:
                del self._handed_out[id(records)]
                done.append(entry.batch)
                whole = True
            else:
                unmatched = self._match_locked(records, done)
        for batch in done:
            self._node.ack(batch)
        if whole:
            return len(records)
        if not records.forwarded:
            # the worker's own records, in parts: straight to the tracker as well (a
            # repeated acknowledgement is harmless), so the part still waiting holds back
            # only its own offsets
            for partition, first, last in contiguous_runs(records.partitions, records.offsets):
                self._tracker.ack(records.topic, partition, first, last)
        elif unmatched:
            log.debug("%d forwarded record(s) acknowledged twice: ignored", len(unmatched))
        return len(records)

    def _match_locked(self, records: RecordColumns, done: list[ShuffledBatch]) -> list[RecordKey]:
        """Tick ``records`` off the chunks they came from (oldest first); return the rest."""
        remaining = _keys(records)
        for handle, entry in list(self._handed_out.items()):
            if not remaining:
                break
            columns = entry.batch.columns
            if columns.topic != records.topic or columns.forwarded != records.forwarded:
                continue
            if entry.pending is None:
                entry.pending = set(_keys(columns))
            pending = entry.pending
            left = []
            for key in remaining:
                if key in pending:
                    pending.discard(key)
                else:
                    left.append(key)
            remaining = left
            if not pending:
                del self._handed_out[handle]
                done.append(entry.batch)
        return remaining


def shuffled_consumer(
    kafka: KafkaSettings,
    settings: IngestSettings,
    decoder: Decoder,
    shuffle: ShuffleSettings,
    membership: Membership,
    *,
    metrics: WorkerMetrics | None = None,
) -> tuple[IngestConsumer, ShuffleQueue]:
    """An ingest consumer whose records go through a shuffle node (neither started).

    The node is the queue's :attr:`~ShuffleQueue.node`. Start it before the consumer
    and stop it after the consumer closed (an ``ExitStack`` entering the node first
    does both), so that the consumer's last commit still counts the peers'
    acknowledgements that arrived until then.
    """
    if not shuffle.topics:  # a peer's batch of another topic is refused
        shuffle = dataclasses.replace(shuffle, topics=settings.topics)
    tracker = OffsetTracker()
    node = ShuffleNode(shuffle, tracker, membership)
    queue = ShuffleQueue(node, tracker)
    consumer = IngestConsumer(
        kafka,
        settings,
        decoder,
        metrics=metrics,
        queue=queue,
        tracker=tracker,
        acknowledge=queue.acknowledge,
    )
    return consumer, queue
