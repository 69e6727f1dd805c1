"""What the shard book shows (pure, read-only): the coordinator's page, stats and logs.

Owned here: :class:`BookView`, the state the book's rules change (each partition's
:class:`~streamtrain.shards.partition.PartitionShards`, the leases indexed by worker)
and every read of it that changes nothing: the leases of one worker or of all,
positions, :class:`~streamtrain.shards.model.BookStats`, and the partitions with records
not done (:meth:`BookView.lagging`, the ``/shards`` page). :func:`describe_partition` is
one partition as the coordinator sees it; :func:`describe_line` prints such a view (also
one read from another process) as one log line. The rules that change the book are
:class:`~streamtrain.shards.book.ShardBook`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streamtrain.partition_key import PartitionKey
from streamtrain.shards.model import BookStats, Grant, ShardRange, ShardSettings
from streamtrain.shards.partition import LEASED, PartitionShards, ShardEntry

__all__ = ["BookView", "LeaseKey", "describe_line", "describe_partition"]

LeaseKey = tuple[PartitionKey, int]  # a leased shard: its partition and start offset

_DESCRIBED_SHARDS = 16  # queued or leased shards listed per partition by describe_partition


class BookView:
    """The book's partitions and leases, and what reading them tells (module docstring)."""

    def __init__(self, settings: ShardSettings | None = None) -> None:
        self.settings = settings or ShardSettings()
        self._partitions: dict[PartitionKey, PartitionShards] = {}
        self._leases: dict[str, dict[LeaseKey, None]] = {}  # worker -> its leased shards

    def _entry(self, lease: LeaseKey) -> tuple[PartitionKey, ShardEntry]:
        key, start = lease
        return key, self._partitions[key].entries[start]

    def held_by(self, worker_id: str) -> list[Grant]:
        grants = []
        for lease in self._leases.get(worker_id, ()):
            key, entry = self._entry(lease)
            grants.append(
                Grant(ShardRange(key[0], key[1], entry.start, entry.end), worker_id, entry.epoch)
            )
        return sorted(grants, key=lambda g: g.shard)

    def leases(self) -> list[Grant]:
        """Every leased shard (for tests and the page)."""
        leased = (g for worker in self._leases for g in self.held_by(worker))
        return sorted(leased, key=lambda g: g.shard)

    def workers(self) -> set[str]:
        return set(self._leases)

    def positions(self) -> dict[PartitionKey, tuple[int, int, int]]:
        """Per partition ``(base, cut_to, high_watermark)``."""
        return {key: (p.base, p.cut_to, p.hwm) for key, p in self._partitions.items()}

    def lagging(self, now_s: float, limit: int = 32) -> list[dict[str, Any]]:
        """Up to ``limit`` partitions with records not done, described
        (:func:`describe_partition`; the ``/shards`` page)."""
        keys = [k for k, p in sorted(self._partitions.items()) if p.base < p.hwm][:limit]
        return [describe_partition(k, self._partitions[k], now_s) for k in keys]

    def stats(self) -> BookStats:
        parts = self._partitions.values()
        return BookStats(
            partitions=len(self._partitions),
            queued_shards=sum(len(p.queued) for p in parts),
            leased_shards=sum(p.leased for p in parts),
            done_ranges=sum(len(p.done) for p in parts),
            uncut_records=sum(p.uncut for p in parts),
            queued_records=sum(p.queued_records() for p in parts),
            workers=len(self._leases),
        )


def describe_partition(key: PartitionKey, part: PartitionShards, now_s: float) -> dict[str, Any]:
    """The partition as the coordinator sees it: positions, queued shards in queue order
    (with their last holder), leased shards (holder, epoch, seconds left on the lease)
    and the count of done ranges above the base; at most ``_DESCRIBED_SHARDS`` shards of
    each kind are listed, all are counted."""
    queued = [part.entries[s] for s in part.queued]
    leased = sorted((e for e in part.entries.values() if e.state == LEASED), key=lambda e: e.start)
    return {
        "topic": key[0],
        "partition": key[1],
        "base": part.base,
        "cut_to": part.cut_to,
        "hwm": part.hwm,
        "committed": part.committed,
        "queued_count": len(queued),
        "queued": [[e.start, e.end, e.last_worker] for e in queued[:_DESCRIBED_SHARDS]],
        "leased_count": len(leased),
        "leased": [
            [e.start, e.end, e.worker, e.epoch, round(e.deadline_s - now_s, 1)]
            for e in leased[:_DESCRIBED_SHARDS]
        ],
        "done_ranges": len(part.done),
    }


def describe_line(view: Mapping[str, Any]) -> str:
    """A :func:`describe_partition` view as one log line (a view from another process:
    fields it lacks print as ``?``)."""

    def get(name: str) -> Any:
        return view.get(name, "?")

    queued = " ".join(
        f"{s}..{e}" + (f"(was {w})" if w else "") for s, e, w in view.get("queued", ())
    )
    leased = " ".join(f"{s}..{e}@{w}#{n}({left}s)" for s, e, w, n, left in view.get("leased", ()))
    return (
        f"{get('topic')}[{get('partition')}]: base {get('base')} cut {get('cut_to')} "
        f"hwm {get('hwm')} committed {get('committed')}; "
        f"queued {get('queued_count')} [{queued}]; leased {get('leased_count')} [{leased}]; "
        f"{get('done_ranges')} done range(s) above the base"
    )
