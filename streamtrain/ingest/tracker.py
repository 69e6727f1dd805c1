"""At-least-once offset bookkeeping per (topic, partition): in flight, acknowledged, committable.

Owned here: :class:`OffsetTracker`. The consumer tells it which offset ranges it handed
out; whoever trained the records (the local trainer, or the shuffle layer on behalf of a
peer) acknowledges ranges, in any order and from any thread; the commit loop asks what
may be committed: per partition, one past the contiguous acknowledged prefix.

Bookkeeping is by ranges, never by offset: each partition keeps its unacknowledged
in-flight offsets as a sorted list of disjoint inclusive intervals, so handing out or
acknowledging a batch costs a bisect and a few list operations whatever its size.
Offsets that were never handed out (gaps from compaction or transaction markers) are
not in any interval and so never block the prefix.

A partition's next commit position is the start of its first unacknowledged interval,
or, when nothing is in flight, one past the highest offset handed out. It is reported
by :meth:`~OffsetTracker.committable` only when it is beyond what was last committed
(with nothing committed yet: beyond the first offset handed out).
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from streamtrain.errors import ConfigError
from streamtrain.partition_key import PartitionKey

__all__ = ["OffsetTracker", "PartitionProgress"]


@dataclass(frozen=True, slots=True)
class PartitionProgress:
    """What the tracker knows about one partition (for metrics and logs).

    ``committed`` is the last committed position (``None``: unknown, nothing committed
    yet); ``consumed`` is one past the highest offset handed out (``None``: nothing
    handed out since assignment); ``in_flight_records`` counts unacknowledged offsets.
    """

    committed: int | None
    consumed: int | None
    in_flight_records: int


@dataclass(slots=True)
class _Partition:
    committed: int | None
    floor: int | None = None  # committable only above this: committed, else first hand-out
    high: int | None = None
    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)  # inclusive
    in_flight: int = 0

    def next_position(self) -> int | None:
        return self.starts[0] if self.starts else self.high

    def add(self, first: int, last: int) -> None:
        """Mark ``first..last`` in flight, merging with neighbouring intervals."""
        starts, ends = self.starts, self.ends
        if not starts or first > ends[-1] + 1:  # the common case: appending in order
            starts.append(first)
            ends.append(last)
            self.in_flight += last - first + 1
            return
        if first == ends[-1] + 1:
            ends[-1] = last
            self.in_flight += last - first + 1
            return
        # General case (re-delivery after a seek): union with every touching interval.
        lo = bisect.bisect_left(ends, first - 1)
        hi = bisect.bisect_right(starts, last + 1)
        covered = sum(
            min(e, last) - max(s, first) + 1
            for s, e in zip(starts[lo:hi], ends[lo:hi], strict=True)
            if s <= last and e >= first
        )
        new_start = min(first, starts[lo]) if lo < hi else first
        new_end = max(last, ends[hi - 1]) if lo < hi else last
        starts[lo:hi] = [new_start]
        ends[lo:hi] = [new_end]
        self.in_flight += (last - first + 1) - covered

    def remove(self, first: int, last: int) -> int:
        """Acknowledge ``first..last``: drop it from the in-flight intervals; return the count."""
        starts, ends = self.starts, self.ends
        lo = bisect.bisect_left(ends, first)
        hi = lo
        removed = 0
        remnants_s: list[int] = []
        remnants_e: list[int] = []
        while hi < len(starts) and starts[hi] <= last:
            s, e = starts[hi], ends[hi]
            removed += min(e, last) - max(s, first) + 1
            if s < first:
                remnants_s.append(s)
                remnants_e.append(first - 1)
            if e > last:
                remnants_s.append(last + 1)
                remnants_e.append(e)
            hi += 1
        if removed:
            starts[lo:hi] = remnants_s
            ends[lo:hi] = remnants_e
            self.in_flight -= removed
        return removed


class OffsetTracker:
    """Thread-safe at-least-once bookkeeping per (topic, partition)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._partitions: dict[PartitionKey, _Partition] = {}
        self._stale_acks = 0
        self._ignored_handouts = 0

    # -- the shared contract (the shuffle layer relies on exactly these) ----------------

    def assign(self, topic: str, partition: int, committed_offset: int) -> None:
        """Start tracking a partition; ``committed_offset < 0`` means nothing committed yet.

        Re-assigning a tracked partition starts it afresh: its in-flight records are
        dropped (the consumer re-reads from the committed offset).
        """
        committed = committed_offset if committed_offset >= 0 else None
        with self._lock:
            self._partitions[(topic, partition)] = _Partition(committed, floor=committed)

    def handed_out(self, topic: str, partition: int, first_offset: int, last_offset: int) -> None:
        """Records ``first_offset..last_offset`` (inclusive) are now in flight."""
        _check_range(first_offset, last_offset)
        with self._lock:
            state = self._partitions.get((topic, partition))
            if state is None:
                self._ignored_handouts += 1
                return
            state.add(first_offset, last_offset)
            if state.floor is None:
                state.floor = first_offset
            if state.high is None or last_offset + 1 > state.high:
                state.high = last_offset + 1

    def ack(self, topic: str, partition: int, first_offset: int, last_offset: int) -> int:
        """Acknowledge ``first_offset..last_offset`` (inclusive); return how many became acked.

        Acknowledgements for partitions not (or no longer) assigned, or for offsets not
        in flight, change nothing and are counted in :attr:`stale_acks`.
        """
        _check_range(first_offset, last_offset)
        with self._lock:
            state = self._partitions.get((topic, partition))
            removed = 0 if state is None else state.remove(first_offset, last_offset)
            if removed == 0:
                self._stale_acks += 1
            return removed

    def committable(self) -> dict[PartitionKey, int]:
        """Per partition, the next offset to commit, where it advanced since the last commit."""
        result: dict[PartitionKey, int] = {}
        with self._lock:
            for key, state in self._partitions.items():
                position = state.next_position()
                if position is not None and state.floor is not None and position > state.floor:
                    result[key] = position
        return result

    def mark_committed(self, positions: Mapping[PartitionKey, int]) -> None:
        """Record that ``positions`` were committed (a position never moves backwards)."""
        with self._lock:
            for key, position in positions.items():
                state = self._partitions.get(key)
                if state is not None and (state.committed is None or position > state.committed):
                    state.committed = position
                    state.floor = position if state.floor is None else max(state.floor, position)

    def revoke(self, topic: str, partition: int) -> None:
        """Forget a partition and its in-flight records; later acks for it are stale."""
        with self._lock:
            self._partitions.pop((topic, partition), None)

    # -- read-only views ----------------------------------------------------------------

    @property
    def stale_acks(self) -> int:
        with self._lock:
            return self._stale_acks

    @property
    def ignored_handouts(self) -> int:
        """Hand-outs for partitions that were not assigned (and so were not tracked)."""
        with self._lock:
            return self._ignored_handouts

    def assigned(self) -> set[PartitionKey]:
        with self._lock:
            return set(self._partitions)

    def in_flight_records(self) -> int:
        with self._lock:
            return sum(state.in_flight for state in self._partitions.values())

    def progress(self) -> dict[PartitionKey, PartitionProgress]:
        with self._lock:
            return {
                key: PartitionProgress(state.committed, state.high, state.in_flight)
                for key, state in self._partitions.items()
            }


def _check_range(first_offset: int, last_offset: int) -> None:
    if first_offset < 0 or last_offset < first_offset:
        raise ConfigError(
            f"offset range {first_offset}..{last_offset} is not a non-negative inclusive range"
        )
