"""From queued record chunks to decoded training batches, each with its acknowledgement.

Owned here: :class:`Batch` (the records, their decoded columns, ``ack()``) and
:class:`BatchReader`, which takes chunks from any :class:`RecordSource` (the consumer's
local queue, or the shuffle layer's), sends oversized and undecodable records to the
dead-letter topic, and hands out the rest as a :class:`Batch`. With ``auto_ack`` the
previous batch is acknowledged when the next one is requested: the training loop only
asks for more once its step on the previous batch finished.

Acknowledging goes through the ``acknowledge`` callable the reader was given, so the
same reader serves local records (acknowledged to the offset tracker) and records a peer
forwarded (acknowledged back to their origin by the shuffle layer). A batch whose
training step did not commit (a data-parallel step that failed) is handed back with
``nack()``: the reader hands the same records out again, first, in a later batch.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError, SchemaError
from streamtrain.ingest.decoders import Decoder
from streamtrain.ingest.idle import IdleClock
from streamtrain.ingest.metrics import WorkerMetrics
from streamtrain.records import RecordColumns

__all__ = ["Batch", "BatchReader", "DeadLetterSink", "RecordSource"]

log = logging.getLogger(__name__)

Acknowledge = Callable[[RecordColumns], object]
HandBack = Callable[["Batch"], object]


class DeadLetterSink(Protocol):
    """Where bad records go (``DeadLetterQueue`` has this shape)."""

    def send(self, records: RecordColumns, errors: Sequence[str]) -> None: ...

    def poll(self, timeout_s: float = 0.0) -> None: ...


class RecordSource(Protocol):
    """Where a reader takes record chunks from (``LocalQueue.get`` has this shape)."""

    def get(
        self, max_records: int, timeout_s: float, linger_s: float = 0.0
    ) -> RecordColumns | None: ...


class Batch:
    """Decoded records for one training step. Call :meth:`ack` after the optimizer step,
    or :meth:`nack` when the step did not commit."""

    __slots__ = ("_acked", "_acknowledge", "_hand_back", "_lock", "columns", "records")

    def __init__(
        self,
        records: RecordColumns,
        columns: Mapping[str, NDArray[Any]],
        acknowledge: Acknowledge,
        hand_back: HandBack | None = None,
    ) -> None:
        self.records = records
        self.columns = dict(columns)
        self._acknowledge = acknowledge
        self._hand_back = hand_back
        self._acked = False
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, name: str) -> NDArray[Any]:
        return self.columns[name]

    @property
    def acked(self) -> bool:
        return self._acked

    def ack(self) -> None:
        """Mark every record of this batch as trained; later calls do nothing."""
        with self._lock:
            if self._acked:
                return
            self._acked = True
        self._acknowledge(self.records)

    def nack(self) -> None:
        """The step that trained this batch did not commit: hand the records back to be
        trained again (through the callback the batch was given; without one, nothing
        happens and the records stay unacknowledged). Ends the batch like :meth:`ack`."""
        with self._lock:
            if self._acked:
                return
            self._acked = True
        if self._hand_back is not None:
            self._hand_back(self)

    def split(self) -> tuple[Batch, Batch]:
        """This batch as two halves, each acknowledged or handed back on its own (to find
        the records a training step cannot take); this batch itself ends here."""
        with self._lock:
            if self._acked:
                raise ValueError("a batch that was acknowledged or handed back cannot split")
            self._acked = True
        half = len(self) // 2
        return tuple(  # type: ignore[return-value]
            Batch(
                self.records.take(part),
                {name: column[part] for name, column in self.columns.items()},
                self._acknowledge,
                self._hand_back,
            )
            for part in (slice(0, half), slice(half, len(self)))
        )

    def __repr__(self) -> str:
        return (
            f"Batch({len(self)} records of {self.records.topic!r}, "
            f"columns={sorted(self.columns)}, acked={self._acked})"
        )


class BatchReader:
    """Decodes chunks from ``source`` into batches; bad records go to ``dead_letters``.

    Without a dead-letter queue a bad record raises :class:`SchemaError` naming its
    origin (nothing is skipped silently). ``linger_s``: once a record is there, how long
    to wait for a full batch; ``source_lingers`` says the source already did (it queues
    chunks of ``batch_records``, or fewer only after waiting ``linger_s`` for more, as
    the consumer's fetch thread does), so a batch of that size is not waited for twice.
    ``still_wanted`` (a mask per record) drops queued records before they are decoded:
    the shard reader's records of a shard taken away while they waited.
    """

    def __init__(
        self,
        source: RecordSource,
        decoder: Decoder,
        acknowledge: Acknowledge,
        *,
        dead_letters: DeadLetterSink | None = None,
        max_record_bytes: int = 1 << 20,
        metrics: WorkerMetrics | None = None,
        auto_ack: bool = True,
        batch_records: int = 512,
        linger_s: float = 0.05,
        source_lingers: bool = False,
        still_wanted: Callable[[RecordColumns], NDArray[np.bool_]] | None = None,
    ) -> None:
        if batch_records < 1:
            raise ConfigError(f"batch_records must be at least 1, got {batch_records}")
        self.source = source
        self.decoder = decoder
        self.dead_letters = dead_letters
        self.max_record_bytes = max_record_bytes
        self.metrics = metrics or WorkerMetrics()
        self.auto_ack = auto_ack
        self.batch_records = batch_records
        self.linger_s = linger_s
        self.source_lingers = source_lingers
        self.still_wanted = still_wanted
        self.dropped_unwanted = 0
        self._acknowledge = acknowledge
        self._last: Batch | None = None
        self._handed_back: deque[Batch] = deque()
        self._handed_back_lock = threading.Lock()

    def _ack_trained(self, records: RecordColumns) -> None:
        self._acknowledge(records)
        self.metrics.add(trained=len(records))

    def next_batch(
        self,
        max_records: int | None = None,
        timeout_s: float = 1.0,
        *,
        ack_previous: bool | None = None,
    ) -> Batch | None:
        """The next batch of up to ``max_records`` records, or ``None`` after ``timeout_s``.

        ``ack_previous`` (default: ``auto_ack``) acknowledges the batch handed out last.
        """
        if (self.auto_ack if ack_previous is None else ack_previous) and self._last is not None:
            self._last.ack()
        self._last = None
        with self._handed_back_lock:
            again = self._handed_back.popleft() if self._handed_back else None
        if again is not None:
            self._last = Batch(again.records, again.columns, self._ack_trained, self._take_back)
            return self._last
        limit = max_records or self.batch_records
        linger_s = 0.0 if self.source_lingers and limit == self.batch_records else self.linger_s
        deadline = time.monotonic() + timeout_s
        while True:
            if self.dead_letters is not None:
                self.dead_letters.poll(0)
            remaining = deadline - time.monotonic()
            chunk = self.source.get(limit, max(remaining, 0.0), linger_s)
            if chunk is None:
                return None
            batch = self._decode(chunk)
            if batch is not None:
                self._last = batch
                return batch
            if time.monotonic() >= deadline:
                return None

    def _take_back(self, batch: Batch) -> None:
        with self._handed_back_lock:
            self._handed_back.append(batch)

    def _decode(self, chunk: RecordColumns) -> Batch | None:
        if self.still_wanted is not None:
            wanted = self.still_wanted(chunk)
            if not wanted.all():
                self.dropped_unwanted += int(len(chunk) - wanted.sum())
                chunk = chunk.take(np.flatnonzero(wanted))
                if not len(chunk):
                    return None
        # no record can be over the limit when all of them together are not
        if (
            chunk.payload_bytes > self.max_record_bytes
            and chunk.payload_length_range()[1] > self.max_record_bytes
        ):
            lengths = chunk.payload_lengths()
            oversized = np.flatnonzero(lengths > self.max_record_bytes)
            self._reject(
                chunk.take(oversized),
                [
                    f"record has {int(lengths[i])} bytes, more than the "
                    f"{self.max_record_bytes}-byte limit"
                    for i in oversized
                ],
            )
            chunk = chunk.omit(oversized)
            if not len(chunk):
                return None
        decoded = self.decoder.decode(chunk)
        if decoded.failed.size:
            self._reject(chunk.take(decoded.failed), decoded.errors)
            chunk = chunk.omit(decoded.failed)
            if not len(chunk):
                return None
        return Batch(chunk, decoded.columns, self._ack_trained, self._take_back)

    def _reject(self, records: RecordColumns, errors: Sequence[str]) -> None:
        if self.dead_letters is None:
            raise SchemaError(
                f"{records.topic}[{int(records.partitions[0])}]@{int(records.offsets[0])} "
                f"cannot be decoded ({errors[0]}) and no dead-letter topic is configured"
            )
        self.dead_letters.send(records, errors)
        self.metrics.add(dead_letters=len(records))


class PollingSource(Protocol):
    """Anything that hands out batches (``IngestConsumer``, a shuffle layer's reader)."""

    def next_batch(
        self,
        max_records: int | None = None,
        timeout_s: float = 1.0,
        *,
        ack_previous: bool | None = None,
    ) -> Batch | None: ...


def poll_batches(
    source: PollingSource,
    batch_records: int | None,
    poll_s: float,
    *,
    max_batches: int | None,
    idle_timeout_s: float | None,
    before_each: Callable[[], None],
) -> Iterator[Batch]:
    """The framework adapters' loop: ``before_each()`` (the ack hook), then the next
    batch; ends after ``max_batches`` or once no batch came for ``idle_timeout_s``."""
    count = 0
    idle = IdleClock(idle_timeout_s)
    while max_batches is None or count < max_batches:
        before_each()
        batch = source.next_batch(batch_records, poll_s, ack_previous=False)
        if batch is None:
            if idle.expired():
                return
            continue
        idle.busy()
        count += 1
        yield batch
