"""A worker's shards, pure: what it holds, where to read, when a shard is done.

Owned here: :class:`Holdings`, the worker's side of ``--assignment shards``. It is
responsible for:

* the shards granted to this worker, per partition in offset order; the first one not
  yet read to its end is the one being *read* (:meth:`~Holdings.read_positions` says
  where the consumer must be for each partition);
* cutting fetched records to the shards (:meth:`~Holdings.accept`): a fetch returns
  records past a shard's end, which are dropped unless the next held shard of the same
  partition starts there; a shard is *read* when a record at or past its last offset
  came, or the consumer's position passed its end (:meth:`~Holdings.position`: gaps);
* counting acknowledgements (:meth:`~Holdings.ack`): a shard is *done*
  (:meth:`~Holdings.take_finished`) only when it was read to its end and every record
  handed out from it was acknowledged: at-least-once;
* leaving: :meth:`~Holdings.unstarted` (nothing read yet: handed back at once) and
  :meth:`~Holdings.drop` (a shard given up or taken away).

Not thread-safe: the caller holds one lock around it.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from streamtrain.shards.model import Grant, ShardRange

__all__ = ["HeldShard", "Holdings"]

PartitionKey = tuple[str, int]


@dataclass(slots=True)
class HeldShard:
    """One granted shard and how far this worker got with it."""

    grant: Grant
    next_offset: int
    handed_out: int = 0
    acked: int = 0
    read: bool = False

    @property
    def range(self) -> ShardRange:
        return self.grant.shard

    @property
    def finished(self) -> bool:
        return self.read and self.acked >= self.handed_out


class Holdings:
    """The shards one worker holds (module docstring)."""

    def __init__(self) -> None:
        self._held: dict[PartitionKey, list[HeldShard]] = {}

    def add(self, grant: Grant) -> bool:
        """Hold ``grant``; ``False`` (ignored) if it overlaps a shard already held."""
        shards = self._held.setdefault(grant.shard.key, [])
        rng = grant.shard
        for held in shards:
            if (
                rng.start_offset < held.range.end_offset
                and held.range.start_offset < rng.end_offset
            ):
                return False
        starts = [h.range.start_offset for h in shards]
        shards.insert(bisect.bisect(starts, rng.start_offset), HeldShard(grant, rng.start_offset))
        return True

    def __len__(self) -> int:
        return sum(len(s) for s in self._held.values())

    def grants(self) -> list[Grant]:
        return [h.grant for key in sorted(self._held) for h in self._held[key]]

    def reading(self, key: PartitionKey) -> HeldShard | None:
        return next((h for h in self._held.get(key, ()) if not h.read), None)

    def read_positions(self) -> dict[PartitionKey, int]:
        """Where the consumer must read next, per partition with a shard not yet read."""
        positions = {}
        for key in self._held:
            held = self.reading(key)
            if held is not None:
                positions[key] = held.next_offset
        return positions

    def unread(self) -> int:
        """Held shards not yet read to their end (what the worker still has to fetch)."""
        return sum(1 for shards in self._held.values() for h in shards if not h.read)

    def unread_records(self) -> int:
        """Offsets of held shards still to fetch."""
        return sum(
            h.range.end_offset - h.next_offset
            for shards in self._held.values()
            for h in shards
            if not h.read
        )

    def accept(self, topic: str, partition: int, offsets: NDArray[np.int64]) -> NDArray[np.bool_]:
        """Which of a fetch's records (one partition, offsets ascending) belong to a
        shard being read; counts them as handed out."""
        keep = np.zeros(offsets.shape[0], dtype=bool)
        shards = self._held.get((topic, partition))
        if not shards or offsets.size == 0:
            return keep
        for held in shards:
            if held.read:
                continue
            lo, hi = held.next_offset, held.range.end_offset
            inside = (offsets >= lo) & (offsets < hi)
            count = int(inside.sum())
            if count:
                keep |= inside
                held.handed_out += count
                held.next_offset = int(offsets[inside].max()) + 1
            if held.next_offset >= hi or (offsets.size and int(offsets[-1]) >= hi - 1):
                held.read = True
                held.next_offset = hi
                continue  # the next held shard may start right here
            break  # records past this one's next offset are not ours yet
        return keep

    def position(self, topic: str, partition: int, position: int) -> None:
        """The consumer's position on a partition: a shard whose end it passed is read
        (the offsets left were gaps: compaction or transaction markers)."""
        held = self.reading((topic, partition))
        if held is not None and position >= held.range.end_offset:
            held.read = True
            held.next_offset = held.range.end_offset

    def ack(self, topic: str, partition: int, first_offset: int, last_offset: int) -> int:
        """Acknowledge the consecutive offsets ``first..last``; returns how many were ours."""
        acked = 0
        for held in self._held.get((topic, partition), ()):
            lo = max(first_offset, held.range.start_offset)
            hi = min(last_offset + 1, held.range.end_offset, held.next_offset)
            if hi > lo:
                held.acked += hi - lo
                acked += hi - lo
        return acked

    def take_finished(self) -> list[HeldShard]:
        """Remove and return the shards read to their end with every record acknowledged."""
        done: list[HeldShard] = []
        for key in list(self._held):
            keep: list[HeldShard] = []
            for held in self._held[key]:
                (done if held.finished else keep).append(held)
            if keep:
                self._held[key] = keep
            else:
                del self._held[key]
        return done

    def unstarted(self) -> list[HeldShard]:
        """Held shards of which nothing was read (a leaving worker hands them back)."""
        return [
            h
            for shards in self._held.values()
            for h in shards
            if h.handed_out == 0 and h.next_offset == h.range.start_offset
        ]

    def drop(self, ranges: Iterable[ShardRange]) -> list[HeldShard]:
        """Stop holding ``ranges``; returns what was dropped."""
        wanted = set(ranges)
        dropped: list[HeldShard] = []
        for key in list(self._held):
            keep: list[HeldShard] = []
            for held in self._held[key]:
                (dropped if held.range in wanted else keep).append(held)
            if keep:
                self._held[key] = keep
            else:
                del self._held[key]
        return dropped

    def partitions(self) -> Sequence[PartitionKey]:
        return sorted(self._held)
