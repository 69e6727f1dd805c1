"""The overflow buffer of a worker's ShuffleUnit: what its local queue has no room for.

Owned here: :class:`Overflow`, the records waiting to be forwarded to a peer (oldest
first, a batch that came back goes in front) and the count of those in flight to one,
and the size bound of a forwarded frame (:func:`frame_bytes`): a batch is cut so that
its ``RecordBatch`` frame fits the receiver's ``max_frame_bytes``, and a record too large
for any frame is handed back to be trained locally instead of being sent and refused.

Pure and not thread-safe: the :class:`~streamtrain.shuffle.unit.ShuffleUnit` calls it
with its own lock held, so its queue, overflow and receiver state change together.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from streamtrain.records import RecordColumns, drop_partitions

__all__ = ["FRAME_BYTES_PER_RECORD", "FRAME_HEADER_BYTES", "Overflow", "frame_bytes"]

FRAME_BYTES_PER_RECORD = 40
"""What a record adds to a ``RecordBatch`` frame beyond its payload, at most: its
partition, offset, timestamp and length as varints, with their share of the tags."""
FRAME_HEADER_BYTES = 2048
"""The rest of a frame: job, batch id, origin worker, topic (each bounded well below)."""


def frame_bytes(records: int, payload_bytes: int) -> int:
    """An upper bound on the size of a ``RecordBatch`` frame of ``records`` records."""
    return FRAME_HEADER_BYTES + FRAME_BYTES_PER_RECORD * records + payload_bytes


class Overflow:
    """Records waiting to be forwarded, bounded by ``capacity_records``, and those in
    flight to a receiver (counted until its ACK, or until they come back)."""

    def __init__(self, capacity_records: int) -> None:
        self.capacity_records = capacity_records
        self._chunks: deque[RecordColumns] = deque()
        self.records = 0
        self.in_flight_records = 0

    def __bool__(self) -> bool:
        return bool(self._chunks)

    @property
    def room(self) -> int:
        """How many more records it takes (never negative)."""
        return max(self.capacity_records - self.records, 0)

    def push(self, columns: RecordColumns, *, front: bool = False) -> None:
        """Add records: at the back, or in front for a batch that came back."""
        if front:
            self._chunks.appendleft(columns)
        else:
            self._chunks.append(columns)
        self.records += len(columns)

    def take_head(self, max_records: int) -> RecordColumns:
        """Remove and return up to ``max_records`` of the oldest records (not in flight:
        the caller trains them locally). The buffer must not be empty."""
        head = self._chunks[0]
        if len(head) > max_records:
            part = head.take(slice(0, max_records))
            self._chunks[0] = head.take(slice(max_records, None))
        else:
            part = self._chunks.popleft()
        self.records -= len(part)
        return part

    def pop_for_frame(self, max_records: int, max_frame_bytes: float) -> RecordColumns | None:
        """Up to ``max_records`` of the oldest records that fit one frame of
        ``max_frame_bytes``, now counted in flight; ``None`` when the oldest record alone
        does not fit any frame (take it with :meth:`take_head` and train it locally).
        The buffer must not be empty."""
        head = self._chunks[0]
        take = min(len(head), max_records, _fitting(head, max_frame_bytes))
        if take == 0:
            return None
        part = self.take_head(take)
        self.in_flight_records += len(part)
        return part

    def landed(self, columns: RecordColumns) -> None:
        """Forwarded records are no longer in flight: acknowledged, or back (re-push them)."""
        self.in_flight_records -= len(columns)

    def drop(self, topic: str, partitions: set[int]) -> int:
        """Remove the records of ``topic``'s revoked ``partitions``; return how many.
        Records in flight stay counted: their ACK still comes."""
        self._chunks, dropped = drop_partitions(self._chunks, topic, partitions)
        self.records -= dropped
        return dropped


def _fitting(columns: RecordColumns, max_frame_bytes: float) -> int:
    """How many leading records of ``columns`` fit one frame of ``max_frame_bytes``."""
    if math.isinf(max_frame_bytes) or frame_bytes(len(columns), columns.payload_bytes) <= (
        max_frame_bytes
    ):
        return len(columns)
    n = np.arange(1, len(columns) + 1, dtype=np.int64)
    sizes = FRAME_HEADER_BYTES + FRAME_BYTES_PER_RECORD * n + columns.payload_bounds[1:]
    return int(np.searchsorted(sizes, max_frame_bytes, side="right"))
