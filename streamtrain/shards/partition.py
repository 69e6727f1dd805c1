"""One partition's shards in the coordinator's book, and its table form (pure).

Owned here: :class:`ShardEntry` (a queued or leased shard), :class:`PartitionShards` (a
partition's positions, its queued and leased shards, its done ranges), and the table
form: :meth:`PartitionShards.snapshot` writes one partition, :func:`parse_partition`
reads one back and validates it (raising :class:`ValueError` on anything a coordinator
could not have written; the book logs and skips such an entry).

A partition stays small whatever its backlog. It keeps its *base* (below: trained,
reported done, committable), its *cut* position (below: in some shard), the shards cut
ahead and waiting (a few: the book cuts as the queue drains), the leased ones, and the
done ones merged into ranges (adjacent done shards are one range). The table value
keeps only the positions, the leases and the done ranges: queued shards are the gaps
between them below the cut, rebuilt by :func:`parse_partition` (one queued shard per
gap, split when it is leased).
"""

from __future__ import annotations

import bisect
import collections
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streamtrain.partition_key import PartitionKey
from streamtrain.shards.model import MAX_EPOCH, MAX_OFFSET

__all__ = [
    "LEASED",
    "MAX_WORKER_ID_CHARS",
    "QUEUED",
    "PartitionShards",
    "ShardEntry",
    "parse_partition",
]

QUEUED, LEASED = "queued", "leased"

#: A worker id longer than this is refused (it is written into the table with each lease).
MAX_WORKER_ID_CHARS = 256

_MAX_TABLE_ENTRIES = 100_000  # leases or done ranges in one restored value: refused above


@dataclass(slots=True)
class ShardEntry:
    """A queued or leased shard ``[start, end)``. A shard that went back to the queue
    remembers its last holder and epoch: that holder, slow but alive, may reclaim it.
    A queued shard rebuilt from a gap in a restored table is ``restored``: it may have
    been granted by the old process just before it died."""

    start: int
    end: int
    state: str = QUEUED
    worker: str = ""
    epoch: int = 0
    granted_at_s: float = 0.0
    deadline_s: float = 0.0
    last_worker: str = ""
    last_epoch: int = 0
    restored: bool = False

    @property
    def records(self) -> int:
        return self.end - self.start


class PartitionShards:
    """One partition's shards (module docstring). The book changes it; it keeps the
    structure consistent (queued starts, lease count, merged done ranges)."""

    __slots__ = (
        "base",
        "committed",
        "cut_to",
        "done",
        "entries",
        "hwm",
        "leased",
        "queued",
        "uncut_since_s",
    )  # uncut_since_s: when the oldest uncut record was first seen

    def __init__(self, start: int, hwm: int | None = None) -> None:
        self.base = start  # below: trained and reported done
        self.cut_to = start  # below: in some shard
        self.hwm = start if hwm is None else max(start, hwm)
        self.committed = start  # the last position handed out as committable
        self.uncut_since_s: float | None = None
        self.entries: dict[int, ShardEntry] = {}  # queued and leased shards, by start
        self.queued: collections.deque[int] = collections.deque()  # next out first
        self.leased = 0
        self.done: list[tuple[int, int]] = []  # sorted, merged, disjoint from entries

    @property
    def uncut(self) -> int:
        return self.hwm - self.cut_to

    # -- changes --------------------------------------------------------------------

    def cut(self, end: int) -> ShardEntry:
        """Cut ``[cut_to, end)`` into a shard, queued last."""
        entry = ShardEntry(self.cut_to, end)
        self.entries[entry.start] = entry
        self.queued.append(entry.start)
        self.cut_to = end
        self._cut_some()
        return entry

    def _cut_some(self) -> None:
        # records still uncut waited as long as the oldest of them, for all we know
        if self.cut_to >= self.hwm:
            self.uncut_since_s = None

    def grow(self, entry: ShardEntry, end: int) -> None:
        """The queued last shard ``entry`` takes the uncut records up to ``end``."""
        entry.end = self.cut_to = end
        self._cut_some()

    def lease(
        self, entry: ShardEntry, worker: str, epoch: int, now_s: float, deadline_s: float
    ) -> None:
        """Lease a queued ``entry`` to ``worker``."""
        self.queued.remove(entry.start)
        entry.state, entry.worker, entry.epoch = LEASED, worker, epoch
        entry.granted_at_s, entry.deadline_s = now_s, deadline_s
        self.leased += 1

    def requeue(self, entry: ShardEntry) -> None:
        """A leased ``entry`` goes back to the queue, first in line."""
        entry.last_worker, entry.last_epoch = entry.worker, entry.epoch
        entry.state, entry.worker = QUEUED, ""
        self.queued.appendleft(entry.start)
        self.leased -= 1

    def split(self, entry: ShardEntry, at: int) -> ShardEntry:
        """Cut ``entry`` at ``at``; the rest is queued first in line."""
        rest = ShardEntry(at, entry.end, restored=entry.restored)
        entry.end = at
        self.entries[rest.start] = rest
        self.queued.appendleft(rest.start)
        return rest

    def absorb_followers(self, entry: ShardEntry, max_end: int) -> None:
        """Queued shards right after ``entry`` join it while it ends by ``max_end``."""
        while (follower := self.entries.get(entry.end)) is not None and (
            follower.state == QUEUED and follower.end <= max_end
        ):
            del self.entries[follower.start]
            self.queued.remove(follower.start)
            entry.end = follower.end

    def carve(self, entry: ShardEntry, start: int, end: int) -> tuple[ShardEntry, list[ShardEntry]]:
        """The queued ``[start, end)`` inside the queued ``entry``, as an entry of its own,
        and the new queued entries left after it (what is left before it stays
        ``entry``)."""
        rest = [self.split(entry, end)] if end < entry.end else []
        if start > entry.start:
            entry = self.split(entry, start)
        return entry, rest

    def mark_done(self, start: int, end: int) -> None:
        """``[start, end)`` (a queued or leased shard) is done; the base moves over the
        done prefix."""
        entry = self.entries.pop(start)
        if entry.state == LEASED:
            self.leased -= 1
        else:
            self.queued.remove(start)
        i = bisect.bisect(self.done, (start, end))
        if i > 0 and self.done[i - 1][1] == start:  # joins the range before
            i -= 1
            start = self.done[i][0]
            del self.done[i]
        if i < len(self.done) and self.done[i][0] == end:  # and the one after
            end = self.done[i][1]
            del self.done[i]
        self.done.insert(i, (start, end))
        if self.done[0][0] == self.base:
            self.base = self.done.pop(0)[1]

    # -- reading ----------------------------------------------------------------------

    def is_done(self, start: int, end: int) -> bool:
        """``[start, end)`` lies in a done range (or below the base)."""
        if end <= self.base:
            return True
        i = bisect.bisect(self.done, (start, MAX_OFFSET)) - 1
        return i >= 0 and self.done[i][0] <= start and end <= self.done[i][1]

    def queued_containing(self, start: int, end: int) -> ShardEntry | None:
        """The queued shard that contains ``[start, end)``, if one does."""
        for first in self.queued:
            entry = self.entries[first]
            if entry.start <= start and end <= entry.end:
                return entry
        return None

    def queued_records(self) -> int:
        return sum(self.entries[s].records for s in self.queued)

    def snapshot(self, key: PartitionKey, epoch: int) -> dict[str, Any]:
        """The table value: positions, leases (worker ids written once) and done ranges."""
        workers: dict[str, int] = {}
        leased = []
        for entry in sorted(self.entries.values(), key=lambda e: e.start):
            if entry.state == LEASED:
                index = workers.setdefault(entry.worker, len(workers))
                leased.append([entry.start, entry.end, index, entry.epoch])
        return {
            "topic": key[0],
            "partition": key[1],
            "base": self.base,
            "cut_to": self.cut_to,
            "committed": self.committed,
            "epoch": epoch,
            "workers": list(workers),
            "leased": leased,
            "done": [list(r) for r in self.done],
        }


def _int(value: Any, name: str, low: int = 0, high: int = MAX_OFFSET) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in [{low}, {high}], got {value!r}")
    return value


def parse_partition(
    entry: Mapping[str, Any], *, now_s: float, lease_s: float
) -> tuple[PartitionKey, PartitionShards, int]:
    """A :meth:`PartitionShards.snapshot` back: its key, its shards (leases with a fresh
    deadline ``lease_s`` from ``now_s``, the gaps as queued shards) and the book's epoch
    it was written at. Raises :class:`ValueError` (or ``KeyError``/``TypeError``) on a
    value a coordinator could not have written: offsets out of order or range, epochs
    above the value's own, overlapping shards, unknown workers."""
    topic, partition = entry["topic"], entry["partition"]
    if not isinstance(topic, str) or not topic:
        raise ValueError(f"bad topic {topic!r}")
    key = (topic, _int(partition, "partition", 0, 2**31 - 1))
    base = _int(entry["base"], "base")
    cut_to = _int(entry["cut_to"], "cut_to", base)
    committed = _int(entry["committed"], "committed", 0, base)
    epoch = _int(entry["epoch"], "epoch", 0, MAX_EPOCH)
    workers = entry["workers"]
    leased, done = entry["leased"], entry["done"]
    if not (isinstance(workers, list) and isinstance(leased, list) and isinstance(done, list)):
        raise TypeError("workers, leased and done must be lists")
    if max(len(workers), len(leased), len(done)) > _MAX_TABLE_ENTRIES:
        raise ValueError("more entries than a coordinator writes")
    for name in workers:
        if not isinstance(name, str) or not 0 < len(name) <= MAX_WORKER_ID_CHARS:
            raise ValueError(f"bad worker id {name!r}")
    part = PartitionShards(base)
    part.cut_to, part.hwm, part.committed = cut_to, cut_to, committed
    spans: list[tuple[int, int]] = []
    for start, end, index, lease_epoch in leased:
        start = _int(start, "lease start", base, cut_to - 1)
        end = _int(end, "lease end", start + 1, cut_to)
        shard = ShardEntry(
            start,
            end,
            LEASED,
            workers[_int(index, "worker index", 0, len(workers) - 1)],
            _int(lease_epoch, "lease epoch", 1, epoch),
            now_s,
            now_s + lease_s,
        )
        part.entries[start] = shard
        part.leased += 1
        spans.append((start, end))
    for start, end in done:
        start = _int(start, "done start", base, cut_to - 1)
        part.done.append((start, _int(end, "done end", start + 1, cut_to)))
        spans.append(part.done[-1])
    part.done.sort()
    spans.sort()
    position = base
    for start, end in spans:
        if start < position:
            raise ValueError(f"shards overlap at offset {start}")
        if start > position:  # a gap: what was queued
            part.entries[position] = ShardEntry(position, start, restored=True)
            part.queued.append(position)
        position = end
    if position < cut_to:
        part.entries[position] = ShardEntry(position, cut_to, restored=True)
        part.queued.append(position)
    while part.done and part.done[0][0] == part.base:  # a prefix done but not yet moved over
        part.base = part.done.pop(0)[1]
    return key, part, epoch
