"""A worker's shards, pure: what it holds, where to read, when a shard is done.

Owned here: :class:`Holdings`, the worker's side of ``--assignment shards``. It is
responsible for:

* the shards granted to this worker, per partition in offset order, each under a
  *lease id* of its own (a number this worker never gives twice); the first one not
  yet read to its end is the one being *read* (:meth:`~Holdings.read_positions` says
  where the consumer must be for each partition);
* cutting fetched records to the shards (:meth:`~Holdings.accept`): each record gets
  the lease id of the shard it was read under (``-1``: none, dropped); a fetch returns
  records past a shard's end, which belong to the next held shard of the same
  partition if it starts there; a shard is *read* when a record at or past its last
  offset came, or the consumer's position passed its end (:meth:`~Holdings.position`:
  gaps);
* counting acknowledgements by lease (:meth:`~Holdings.ack`): a record counts only for
  the lease it was read under, so records of a shard that was taken away and granted
  again (they may still wait in the local queue, or be in a training step) never count
  toward the new grant. A shard is *done* (:meth:`~Holdings.take_finished`) only when it
  was read to its end and every record read under its lease was acknowledged;
* giving shards up: :meth:`~Holdings.drop` (taken away: its records become stale),
  :meth:`~Holdings.unstarted` (nothing read yet).

Not thread-safe: the caller holds one lock around it.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from streamtrain.partition_key import PartitionKey
from streamtrain.shards.model import Grant, ShardRange

__all__ = ["NO_LEASE", "HeldShard", "Holdings"]

NO_LEASE = -1  # the lease id of a record no held shard wants


@dataclass(slots=True)
class HeldShard:
    """One granted shard and how far this worker got with it."""

    grant: Grant
    lease_id: int
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
        self._by_lease: dict[int, HeldShard] = {}
        self._lease_ids = itertools.count(1)

    def add(self, grant: Grant) -> HeldShard | None:
        """Hold ``grant`` under a new lease id; ``None`` (ignored) if it overlaps a shard
        already held."""
        shards = self._held.setdefault(grant.shard.key, [])
        rng = grant.shard
        for held in shards:
            if (
                rng.start_offset < held.range.end_offset
                and held.range.start_offset < rng.end_offset
            ):
                return None
        shard = HeldShard(grant, next(self._lease_ids), rng.start_offset)
        starts = [h.range.start_offset for h in shards]
        shards.insert(bisect.bisect(starts, rng.start_offset), shard)
        self._by_lease[shard.lease_id] = shard
        return shard

    def __len__(self) -> int:
        return len(self._by_lease)

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
        return sum(1 for h in self._by_lease.values() if not h.read)

    def unread_records(self) -> int:
        """Offsets of held shards still to fetch."""
        return sum(
            h.range.end_offset - h.next_offset for h in self._by_lease.values() if not h.read
        )

    def accept(self, topic: str, partition: int, offsets: NDArray[np.int64]) -> NDArray[np.int64]:
        """The lease id of each of a fetch's records (one partition, offsets ascending):
        the shard being read that it belongs to, or :data:`NO_LEASE`; counts them as
        handed out."""
        leases = np.full(offsets.shape[0], NO_LEASE, dtype=np.int64)
        shards = self._held.get((topic, partition))
        if not shards or offsets.size == 0:
            return leases
        for held in shards:
            if held.read:
                continue
            lo, hi = held.next_offset, held.range.end_offset
            inside = (offsets >= lo) & (offsets < hi)
            count = int(inside.sum())
            if count:
                leases[inside] = held.lease_id
                held.handed_out += count
                held.next_offset = int(offsets[inside].max()) + 1
            if held.next_offset >= hi or int(offsets[-1]) >= hi - 1:
                held.read = True
                held.next_offset = hi
                continue  # the next held shard may start right here
            break  # records past this one's next offset are not ours yet
        return leases

    def position(self, topic: str, partition: int, position: int) -> None:
        """The consumer's position on a partition: a shard whose end it passed is read
        (the offsets left were gaps: compaction or transaction markers)."""
        held = self.reading((topic, partition))
        if held is not None and position >= held.range.end_offset:
            held.read = True
            held.next_offset = held.range.end_offset

    def holds(self, lease_ids: NDArray[np.int64]) -> NDArray[np.bool_]:
        """Whether each record's lease is still held (records of a shard taken away
        are worth neither training nor acknowledging)."""
        return np.isin(lease_ids, np.fromiter(self._by_lease, dtype=np.int64))

    def ack(self, lease_ids: NDArray[np.int64]) -> int:
        """Acknowledge trained records by the lease ids they were read under; returns
        how many counted (records of leases no longer held count for nothing)."""
        ids, counts = np.unique(lease_ids, return_counts=True)
        acked = 0
        for lease_id, count in zip(ids.tolist(), counts.tolist(), strict=True):
            held = self._by_lease.get(lease_id)
            if held is not None:
                held.acked += count
                acked += count
        return acked

    def take_finished(self) -> list[HeldShard]:
        """Remove and return the shards read to their end with every record acknowledged."""
        return self._remove(lambda h: h.finished)

    def unstarted(self) -> list[HeldShard]:
        """Held shards of which nothing was read (a leaving worker hands them back)."""
        return [
            h
            for h in self._by_lease.values()
            if h.handed_out == 0 and h.next_offset == h.range.start_offset
        ]

    def drop(self, ranges: Iterable[ShardRange]) -> list[HeldShard]:
        """Stop holding ``ranges``; returns what was dropped. Records read under them no
        longer count for anything."""
        wanted = set(ranges)
        return self._remove(lambda h: h.range in wanted)

    def _remove(self, doomed: Callable[[HeldShard], bool]) -> list[HeldShard]:
        removed: list[HeldShard] = []
        for key in list(self._held):
            keep: list[HeldShard] = []
            for held in self._held[key]:
                (removed if doomed(held) else keep).append(held)
            if keep:
                self._held[key] = keep
            else:
                del self._held[key]
        for held in removed:
            del self._by_lease[held.lease_id]
        return removed

    def partitions(self) -> Sequence[PartitionKey]:
        return sorted(self._held)
