"""What the shuffle layer needs from an offset tracker, and how it reports acknowledged records.

Owned here: the :class:`Acknowledger` protocol (exactly the ``ack`` method of
``streamtrain.ingest.tracker.OffsetTracker``, so the shuffle depends on nothing else of
ingest) and :func:`contiguous_runs`, the pure function that turns the records of a
trained batch into the inclusive per-partition offset ranges the tracker is told about.
The origin worker calls ``ack`` for its own records once its trainer acknowledged them
and for forwarded records once the receiver's ``BatchAck`` arrived, so a partition is
committed only up to the lowest record not yet acknowledged locally or remotely.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from numpy.typing import NDArray

__all__ = ["Acknowledger", "OffsetRun", "contiguous_runs"]

OffsetRun = tuple[int, int, int]
"""``(partition, first_offset, last_offset)``, both offsets inclusive."""


class Acknowledger(Protocol):
    """Receives acknowledged offset ranges; thread-safe; any order."""

    def ack(self, topic: str, partition: int, first_offset: int, last_offset: int) -> int: ...


def contiguous_runs(partitions: NDArray[np.int32], offsets: NDArray[np.int64]) -> list[OffsetRun]:
    """The records as maximal runs of consecutive offsets per partition (duplicates merged)."""
    if offsets.size == 0:
        return []
    order = np.lexsort((offsets, partitions))
    parts, offs = partitions[order], offsets[order]
    if parts.size > 1:
        distinct = np.ones(parts.size, dtype=bool)
        distinct[1:] = (np.diff(parts) != 0) | (np.diff(offs) != 0)
        parts, offs = parts[distinct], offs[distinct]
    breaks = np.flatnonzero((np.diff(parts) != 0) | (np.diff(offs) != 1)) + 1
    starts = np.concatenate(([0], breaks))
    ends = np.concatenate((breaks - 1, [parts.size - 1]))
    return [
        (int(p), int(first), int(last))
        for p, first, last in zip(
            parts[starts].tolist(), offs[starts].tolist(), offs[ends].tolist(), strict=True
        )
    ]
