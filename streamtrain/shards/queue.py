"""Which queued shard goes out next, and cutting as the queue drains (pure).

Owned here: :class:`ShardQueue`, the book's queue over its partitions. Shards go out in
the order they were cut (the oldest records first), except that shards that went back
to the queue (a silent holder, a hand-back, the rest of a split) go out before any
other. :meth:`~ShardQueue.refill` cuts a partition's new records while its queue has
room (``queued_shards_per_partition``): full shards as soon as that many are there, a
smaller one once the oldest uncut record waited ``max_wait_s`` (a small shard not yet
leased grows instead of a new one following it, so a partition cut every
``max_wait_s`` while no worker asks still holds shards of a useful size).
:meth:`~ShardQueue.cut_on_demand` cuts a shard for a worker that found the queue
empty (at least ``min_shard_records``, or records that waited ``max_wait_s`` already:
a cut the timer owes them). A partition with ``max_leased_per_partition`` shards leased
is passed over until one of its leases ends.
"""

from __future__ import annotations

import collections

from streamtrain.partition_key import PartitionKey
from streamtrain.shards.model import ShardSettings
from streamtrain.shards.partition import QUEUED, PartitionShards, ShardEntry

__all__ = ["ShardQueue"]

_ON_DEMAND_SCAN = 256  # partitions with uncut records looked at for one on-demand cut

Slot = tuple[PartitionKey, int]  # a queued shard: its partition and start offset


class ShardQueue:
    """The order queued shards are leased in (module docstring)."""

    def __init__(
        self, settings: ShardSettings, partitions: dict[PartitionKey, PartitionShards]
    ) -> None:
        self.settings = settings
        self._partitions = partitions  # the book's
        # Queued shards by their start. A shard leased out of turn (a continuation, a
        # reclaim, grown into another) leaves its slot behind: skipped when popped, and
        # swept out once stale slots outnumber the live ones.
        self._slots: collections.deque[Slot] = collections.deque()
        self._swept_at = 0
        self._uncut: dict[PartitionKey, None] = {}  # partitions with uncut records
        self._cuttable: dict[PartitionKey, None] = {}  # ... and room to cut them

    def push_front(self, key: PartitionKey, start: int) -> None:
        """A shard went back to the queue: it goes out first."""
        self._slots.appendleft((key, start))

    def rebuild(self) -> None:
        """Start over from the partitions (after a restore): their queued shards in
        partition and offset order."""
        self._slots = collections.deque(
            (key, start) for key, part in sorted(self._partitions.items()) for start in part.queued
        )
        self._swept_at = len(self._slots)
        self._uncut, self._cuttable = {}, {}

    def refill(self, key: PartitionKey, now_s: float) -> int:
        """Cut ``key``'s new records while its queue has room; returns how many shards
        were cut or grown."""
        s, part = self.settings, self._partitions[key]
        room = s.queued_shards_per_partition
        cut = 0
        while part.uncut > 0:
            tail = self._growable_tail(part)
            if tail is not None and (
                part.uncut >= s.shard_records - tail.records or self._due(part, now_s)
            ):
                part.grow(tail, min(part.hwm, tail.start + s.shard_records))
            elif len(part.queued) < room and (
                part.uncut >= s.shard_records or self._due(part, now_s)
            ):
                entry = part.cut(min(part.hwm, part.cut_to + s.shard_records))
                self._slots.append((key, entry.start))
            else:
                break
            cut += 1
        if part.uncut > 0:
            if part.uncut_since_s is None:
                part.uncut_since_s = now_s
            self._uncut[key] = None
            if len(part.queued) < room or self._growable_tail(part) is not None:
                self._cuttable[key] = None  # a cut waits for max_wait_s only
            else:
                self._cuttable.pop(key, None)  # a lease makes room, and refills
        else:
            self._uncut.pop(key, None)
            self._cuttable.pop(key, None)
        self._sweep()
        return cut

    def cuttable(self) -> list[PartitionKey]:
        """The partitions with uncut records and room to cut them: a tick refills these
        (the others change only when their watermark moves or one of their shards is
        leased)."""
        return list(self._cuttable)

    def _due(self, part: PartitionShards, now_s: float) -> bool:
        since = part.uncut_since_s
        return since is not None and now_s - since >= self.settings.max_wait_s

    def _growable_tail(self, part: PartitionShards) -> ShardEntry | None:
        """The partition's last shard, if it is queued, was cut here, never leased, and
        is short."""
        if not part.queued:
            return None
        entry = part.entries[part.queued[-1]]
        if (
            entry.end == part.cut_to
            and entry.state == QUEUED
            and not (entry.last_worker or entry.restored)
            and entry.records < self.settings.shard_records
        ):
            return entry
        return None

    def next(self) -> tuple[PartitionKey, ShardEntry] | None:
        """The next queued shard to lease (it stays queued until it is leased)."""
        passed: list[Slot] = []  # queued, but their partition has all the leases it may
        found: tuple[PartitionKey, ShardEntry] | None = None
        while self._slots:
            key, start = slot = self._slots.popleft()
            part = self._partitions[key]
            entry = part.entries.get(start)
            if entry is None or entry.state != QUEUED:
                continue  # a stale slot
            if part.leased >= self.settings.max_leased_per_partition:
                passed.append(slot)
                continue
            found = key, entry  # the caller leases it
            break
        self._slots.extendleft(reversed(passed))
        return found

    def cut_on_demand(self, now_s: float) -> tuple[PartitionKey, ShardEntry] | None:
        """Cut a shard of the partition with the most uncut records (at least
        ``min_shard_records``, or any that waited ``max_wait_s``; among the first
        ``_ON_DEMAND_SCAN`` with any)."""
        best: tuple[int, PartitionKey] | None = None
        for scanned, key in enumerate(self._uncut):
            if scanned >= _ON_DEMAND_SCAN:
                break
            part = self._partitions[key]
            uncut = part.uncut
            if (
                uncut > 0
                and (uncut >= self.settings.min_shard_records or self._due(part, now_s))
                and part.leased < self.settings.max_leased_per_partition
                and (best is None or uncut > best[0])
            ):
                best = (uncut, key)
        if best is None:
            return None
        key = best[1]
        part = self._partitions[key]
        entry = part.cut(min(part.hwm, part.cut_to + self.settings.shard_records))
        self._slots.append((key, entry.start))
        if part.uncut <= 0:
            self._uncut.pop(key, None)
        return key, entry

    def _sweep(self) -> None:
        """Drop stale slots once they could outnumber the live ones (amortized O(1))."""
        if len(self._slots) <= 2 * self._swept_at + 64:
            return
        live = collections.deque(
            (key, start)
            for key, start in self._slots
            if (e := self._partitions[key].entries.get(start)) is not None and e.state == QUEUED
        )
        self._slots = live
        self._swept_at = len(live)
