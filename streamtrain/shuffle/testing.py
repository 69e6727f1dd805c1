"""Test doubles for the shuffle layer, shipped with the package.

Owned here: :class:`RecordingAcknowledger`, a real (not mocked) implementation of the
:class:`~streamtrain.shuffle.acks.Acknowledger` protocol that records every acknowledged
range and answers, per partition, which offsets are covered and the commit position a
tracker would reach (the lowest offset at or above a start that is not acknowledged).
Tests, benchmarks and the scripted worker use it where ingest's OffsetTracker is not the
thing under test.
"""

from __future__ import annotations

import threading
from collections import defaultdict

__all__ = ["RecordingAcknowledger", "merge_ranges"]


def merge_ranges(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Inclusive ranges sorted and merged where they overlap or touch."""
    merged: list[tuple[int, int]] = []
    for first, last in sorted(ranges):
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return merged


class RecordingAcknowledger:
    """Records ``ack(topic, partition, first, last)`` calls; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ranges: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
        self.calls = 0

    def ack(self, topic: str, partition: int, first_offset: int, last_offset: int) -> int:
        with self._lock:
            self.calls += 1
            ranges = self._ranges[(topic, partition)]
            ranges.append((first_offset, last_offset))
            if len(ranges) > 64:
                ranges[:] = merge_ranges(ranges)
            return self._position_locked(topic, partition, 0)

    def covered(self, topic: str, partition: int) -> list[tuple[int, int]]:
        """The acknowledged offsets of a partition as merged inclusive ranges."""
        with self._lock:
            merged = merge_ranges(self._ranges.get((topic, partition), []))
            self._ranges[(topic, partition)] = list(merged)
            return merged

    def acked_records(self, topic: str, partition: int) -> int:
        return sum(last - first + 1 for first, last in self.covered(topic, partition))

    def position(self, topic: str, partition: int, start: int = 0) -> int:
        """The commit position: the lowest offset >= ``start`` not acknowledged."""
        with self._lock:
            return self._position_locked(topic, partition, start)

    def _position_locked(self, topic: str, partition: int, start: int) -> int:
        merged = merge_ranges(self._ranges.get((topic, partition), []))
        self._ranges[(topic, partition)] = list(merged)
        position = start
        for first, last in merged:
            if first > position:
                break
            position = max(position, last + 1)
        return position

    def partitions(self) -> list[tuple[str, int]]:
        with self._lock:
            return sorted(self._ranges)
