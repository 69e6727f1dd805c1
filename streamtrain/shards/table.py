"""The shard book's per-partition records and their table form (pure).

Owned here: the states a shard is in (:data:`QUEUED`, :data:`LEASED`, :data:`DONE`),
the mutable records :class:`~streamtrain.shards.book.ShardBook` keeps
(:class:`ShardEntry`, :class:`PartitionEntry`), and their JSON-able form in the
control app's changelogged table: :func:`partition_snapshot` writes one partition,
:func:`parse_partition` reads one back (raising ``KeyError``/``TypeError``/``ValueError``
on a malformed entry; the book logs and skips it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DONE",
    "LEASED",
    "QUEUED",
    "PartitionEntry",
    "PartitionKey",
    "ShardEntry",
    "parse_partition",
    "partition_snapshot",
]

PartitionKey = tuple[str, int]

QUEUED, LEASED, DONE = "queued", "leased", "done"


@dataclass(slots=True)
class ShardEntry:
    start: int
    end: int
    state: str = QUEUED
    worker: str = ""
    epoch: int = 0
    granted_at_s: float = 0.0
    deadline_s: float = 0.0

    @property
    def records(self) -> int:
        return self.end - self.start


@dataclass(slots=True)
class PartitionEntry:
    base: int  # below: trained and reported done
    cut_to: int  # below: in some shard
    hwm: int
    committed: int  # the last position handed out as committable
    uncut_since_s: float | None = None
    shards: dict[int, ShardEntry] = field(default_factory=dict)  # by start offset


def partition_snapshot(key: PartitionKey, part: PartitionEntry, epoch: int) -> dict[str, Any]:
    """One partition as the changelogged table stores it."""
    return {
        "topic": key[0],
        "partition": key[1],
        "base": part.base,
        "cut_to": part.cut_to,
        "hwm": part.hwm,
        "committed": part.committed,
        "epoch": epoch,
        "shards": [
            [s.start, s.end, s.state, s.worker, s.epoch]
            for s in sorted(part.shards.values(), key=lambda s: s.start)
        ],
    }


def parse_partition(
    entry: Mapping[str, Any], *, now_s: float, lease_s: float
) -> tuple[PartitionKey, PartitionEntry, int]:
    """A :func:`partition_snapshot` back: its key, its records (leases with a fresh
    deadline ``lease_s`` from ``now_s``) and the book's epoch it was written at."""
    key = (str(entry["topic"]), int(entry["partition"]))
    part = PartitionEntry(
        base=int(entry["base"]),
        cut_to=int(entry["cut_to"]),
        hwm=int(entry["hwm"]),
        committed=int(entry["committed"]),
    )
    for start, end, state, worker, epoch in entry["shards"]:
        if state not in (QUEUED, LEASED, DONE) or not start < end:
            raise ValueError(f"bad shard {start}..{end} {state}")
        part.shards[int(start)] = ShardEntry(
            int(start), int(end), str(state), str(worker), int(epoch), now_s, now_s + lease_s
        )
    return key, part, int(entry["epoch"])
