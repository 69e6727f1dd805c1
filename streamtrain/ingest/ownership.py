"""Which partitions this worker owns right now, and keeping records of others out.

Owned here: :class:`Ownership`, rebuilt by the consumer on every assignment change,
:func:`by_topic` (partitions grouped by topic) and :func:`describe` (partitions for log
lines). A chunk whose offset ranges all belong to
owned partitions passes untouched (a set lookup per range); otherwise its records are
filtered with one vectorized table lookup. Records of a partition that is not (or no
longer) owned must never be handed out: nobody would commit them.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from numpy.typing import NDArray

from streamtrain.partition_key import PartitionKey
from streamtrain.records import RecordColumns

__all__ = ["Ownership", "by_topic", "describe"]


def by_topic(keys: Iterable[PartitionKey]) -> dict[str, set[int]]:
    """``(topic, partition)`` pairs as each topic's set of partitions."""
    grouped: dict[str, set[int]] = {}
    for topic, partition in keys:
        grouped.setdefault(topic, set()).add(partition)
    return grouped


class Ownership:
    """The owned ``(topic, partition)`` pairs, as sets and as boolean lookup tables."""

    def __init__(self) -> None:
        self._sets: dict[str, frozenset[int]] = {}
        self._tables: dict[str, NDArray[np.bool_]] = {}

    def update(self, owned: Iterable[PartitionKey]) -> None:
        grouped = by_topic(owned)
        tables = {}
        for topic, partitions in grouped.items():
            table = np.zeros(max(partitions) + 1, dtype=bool)
            table[sorted(partitions)] = True
            tables[topic] = table
        self._tables = tables
        self._sets = {topic: frozenset(parts) for topic, parts in grouped.items()}

    def covers(self, topic: str, ranges: Iterable[tuple[int, int, int]]) -> bool:
        mine = self._sets.get(topic, frozenset())
        return all(partition in mine for partition, _, _ in ranges)

    def only_owned(self, chunk: RecordColumns) -> RecordColumns:
        table = self._tables.get(chunk.topic)
        if table is None:
            return chunk.take(slice(0, 0))
        parts = chunk.partitions
        inside = parts < table.size
        mine = inside & table[np.where(inside, parts, 0)]
        if bool(mine.all()):
            return chunk
        return chunk.take(np.flatnonzero(mine))


def describe(keys: Iterable[PartitionKey]) -> str:
    """``clicks [0, 1, 5]; views [2]`` for log lines."""
    grouped = by_topic(keys)
    if not grouped:
        return "no partitions"
    return "; ".join(f"{t} {sorted(p)}" for t, p in sorted(grouped.items()))
