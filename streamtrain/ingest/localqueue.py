"""The worker's local queue: record chunks between the fetch thread and the trainer.

Owned here: :class:`LocalQueue`, a FIFO of :class:`RecordColumns` chunks counted in
records. ``put`` never blocks (the producer side watches :attr:`~LocalQueue.full` and
pauses fetching instead, so a rebalance callback is never stuck behind a full queue);
``get`` waits for a batch of up to ``max_records`` records of one topic: whole chunks
while they fit, or the front of a chunk that alone is larger. It never cuts a chunk to
fill a batch up, so chunks the fetch thread cut at the batch size stay aligned and no
payload bytes are copied; ``drop`` removes the records of revoked partitions. It counts
the bytes it holds (:func:`~streamtrain.ingest.memory.record_bytes`) and their peak, for
the worker's memory report.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Protocol

from streamtrain.errors import ConfigError
from streamtrain.ingest.memory import record_bytes
from streamtrain.records import RecordColumns, drop_partitions

__all__ = ["LocalQueue", "RecordQueue"]


class RecordQueue(Protocol):
    """What the consumer's fetch thread fills and the batch reader drains.

    :class:`LocalQueue` is the default; the worker's shuffle seam passes its own, one
    that overflows to peers (:class:`~streamtrain.worker.shuffle_queue.ShuffleQueue`),
    to :class:`~streamtrain.ingest.IngestConsumer`.
    """

    capacity_records: int

    @property
    def records(self) -> int: ...

    @property
    def full(self) -> bool: ...

    def put(self, chunk: RecordColumns) -> None: ...

    def get(
        self, max_records: int, timeout_s: float, linger_s: float = 0.0
    ) -> RecordColumns | None: ...

    def drop(self, topic: str, partitions: set[int]) -> int: ...

    def close(self) -> None: ...


class LocalQueue:
    """Bounded (softly, in records) FIFO of record chunks; thread-safe."""

    def __init__(self, capacity_records: int) -> None:
        if capacity_records < 1:
            raise ConfigError(f"queue capacity must be at least 1 record, got {capacity_records}")
        self.capacity_records = capacity_records
        self._chunks: collections.deque[RecordColumns] = collections.deque()
        self._records = 0
        self._bytes = 0
        self._peak_bytes = 0
        self._closed = False
        self._changed = threading.Condition()

    @property
    def records(self) -> int:
        return self._records

    @property
    def queued_bytes(self) -> int:
        """What the queued records hold: payloads and column entries."""
        return self._bytes

    @property
    def peak_bytes(self) -> int:
        """The most :attr:`queued_bytes` ever were."""
        return self._peak_bytes

    @property
    def full(self) -> bool:
        return self._records >= self.capacity_records

    @property
    def closed(self) -> bool:
        return self._closed

    def put(self, chunk: RecordColumns) -> None:
        if not len(chunk):
            return
        with self._changed:
            self._chunks.append(chunk)
            self._records += len(chunk)
            self._bytes += record_bytes(chunk)
            self._peak_bytes = max(self._peak_bytes, self._bytes)
            self._changed.notify_all()

    def close(self) -> None:
        """Wake every waiter; later ``get`` calls return what is left, then ``None``."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def get(
        self, max_records: int, timeout_s: float, linger_s: float = 0.0
    ) -> RecordColumns | None:
        """Up to ``max_records`` records of one topic, or ``None`` if none came in ``timeout_s``.

        Once the first record is there, waits at most ``linger_s`` more for a full batch.
        """
        if max_records < 1:
            raise ConfigError(f"max_records must be at least 1, got {max_records}")
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not self._chunks and not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._changed.wait(remaining)
            if linger_s > 0:
                full_by = min(deadline, time.monotonic() + linger_s)
                while self._records < max_records and not self._closed:
                    remaining = full_by - time.monotonic()
                    if remaining <= 0:
                        break
                    self._changed.wait(remaining)
            if not self._chunks:
                return None
            return self._take(max_records)

    def _take(self, max_records: int) -> RecordColumns:
        first = self._chunks[0]
        if len(first) >= max_records:  # split only a chunk that alone is too big
            if len(first) == max_records:
                taken = self._chunks.popleft()
            else:
                taken = first.take(slice(0, max_records))
                self._chunks[0] = first.take(slice(max_records, len(first)))
            self._records -= len(taken)
            self._bytes -= record_bytes(taken)
            return taken
        picked = [self._chunks.popleft()]
        count = len(first)
        while self._chunks:  # then whole chunks while they fit: no copies to re-cut them
            head = self._chunks[0]
            if (
                head.topic != first.topic
                or head.forwarded != first.forwarded
                or (head.lease_ids is None) != (first.lease_ids is None)
                or count + len(head) > max_records
            ):
                break
            picked.append(self._chunks.popleft())
            count += len(head)
        self._records -= count
        self._bytes -= sum(record_bytes(chunk) for chunk in picked)
        return RecordColumns.concat(picked)

    def drop(self, topic: str, partitions: set[int]) -> int:
        """Remove queued records of ``topic``'s ``partitions``; return how many were dropped."""
        if not partitions:
            return 0
        with self._changed:
            kept, dropped = drop_partitions(self._chunks, topic, partitions)
            self._chunks = kept
            self._records -= dropped
            self._bytes = sum(record_bytes(chunk) for chunk in kept)
            self._changed.notify_all()
        return dropped
