"""The value types of offset-range shards: a range, a grant, the coordinator's settings.

Owned here (pure):

* :class:`ShardRange`: ``[start_offset, end_offset)`` of one partition of one topic, the
  unit the control app hands out; it is its own identity (two shards of a partition
  never overlap, so ``(topic, partition, start_offset, end_offset)`` names one).
* :class:`Grant`: a range leased to a worker under an ``epoch`` (a number the book
  increases on every hand-out, so a stale holder can be told from the current one;
  never above :data:`MAX_EPOCH`).
* :class:`ShardSettings`: how shards are cut and leased (sizes, waits, lease time,
  how many are cut ahead and leased at once per partition).
* :class:`ShardRefusal`: why a worker's report was ignored (logged by the caller).
* :class:`BookStats`: the book's counts, for logs, metrics and the control app's page.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from streamtrain.errors import ConfigError

__all__ = [
    "MAX_EPOCH",
    "MAX_OFFSET",
    "BookStats",
    "Grant",
    "ShardRange",
    "ShardRefusal",
    "ShardSettings",
]

#: Epochs and offsets are int64 on every wire and in every table (the protobuf epoch is
#: a uint64, Kafka offsets an int64): a value above these is refused, never stored.
MAX_EPOCH = 2**63 - 1
MAX_OFFSET = 2**63 - 1


@dataclass(frozen=True, slots=True, order=True)
class ShardRange:
    """Offsets ``start_offset`` (inclusive) to ``end_offset`` (exclusive) of a partition."""

    topic: str
    partition: int
    start_offset: int
    end_offset: int

    @property
    def records(self) -> int:
        """Offsets in the range (records, unless compaction or markers left gaps)."""
        return self.end_offset - self.start_offset

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]@{self.start_offset}..{self.end_offset}"


@dataclass(frozen=True, slots=True)
class Grant:
    """``shard`` leased to ``worker_id`` under ``epoch``."""

    shard: ShardRange
    worker_id: str
    epoch: int


class ShardRefusal(StrEnum):
    """Why a report from a worker was ignored (never a crash, never a commit)."""

    UNKNOWN_PARTITION = "unknown partition"
    OUT_OF_RANGE = "offset range outside the partition's cut shards"
    UNKNOWN_SHARD = "no such shard"
    ALREADY_DONE = "shard already done"
    NOT_HOLDER = "shard is leased to another worker"
    EPOCH_NOT_ISSUED = "an epoch this coordinator did not issue for this shard"
    MALFORMED = "malformed"
    STALE_LEAVING = "a leaving update sent before the worker's newest update"


@dataclass(frozen=True, slots=True)
class ShardSettings:
    """How the control app cuts and leases shards.

    * ``shard_records``: the size of a full shard; a partition's new records are cut
      into shards of this size as soon as that many are available;
    * ``max_wait_s``: records that waited this long uncut are cut into a smaller shard,
      so lag stays low on a quiet partition (and at the demo's 144x clock, where
      20 simulated minutes are 8.3 wall seconds);
    * ``min_shard_records``: a worker that asks while nothing is queued gets a shard cut
      from any partition with at least this many uncut records (fewer wait for
      ``max_wait_s``: a crowd of idle workers must not chop partitions into shards of a
      record or two, each costing a grant and a seek); also the smallest shard a slow
      worker gets;
    * ``lease_s``: a shard whose holder sent no heartbeat for this long goes back to the
      queue (and a restored book waits this long before handing out shards that were
      queued, so a grant lost in a crash is reclaimed by its holder's heartbeat first);
    * ``target_shard_s``: a worker whose measured rate would need longer than this for a
      full shard gets a smaller one (rate times this, at least ``min_shard_records``);
    * ``max_held_shards``: the most shards one worker holds at once (current, prefetched,
      and read but not yet acknowledged: a worker prefetches up to 8 small shards);
    * ``max_held_full_shards``: the most records one worker holds at once, in its own
      shard sizes (a full shard, or what it trains in ``target_shard_s``): 3 by default,
      6 s of work at the measured rate, so a burst of queued records is shared among
      the workers instead of leased to the first one that asks. A worker always gets
      at least one shard;
    * ``queued_shards_per_partition``: how many full shards a partition with a backlog
      has cut ahead, waiting in the queue. The rest of a backlog stays one uncut range
      (cut as the queue drains, or on demand when a worker finds the queue empty), so
      the book and its table hold a few entries per partition whatever the backlog;
    * ``max_leased_per_partition``: the most shards of one partition leased at once
      (bounds the partition's table value: each lease is one entry in it).
    """

    shard_records: int = 1_000
    max_wait_s: float = 1.0
    min_shard_records: int = 20
    lease_s: float = 3.0
    target_shard_s: float = 2.0
    max_held_shards: int = 12
    max_held_full_shards: float = 3.0
    queued_shards_per_partition: int = 4
    max_leased_per_partition: int = 256

    def __post_init__(self) -> None:
        if self.shard_records < 1 or self.min_shard_records < 1:
            raise ConfigError("shard sizes must be at least 1 record")
        # never above a full shard
        object.__setattr__(
            self, "min_shard_records", min(self.min_shard_records, self.shard_records)
        )
        for name in ("max_wait_s", "lease_s", "target_shard_s"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if self.max_held_full_shards <= 0:
            raise ConfigError(
                f"max_held_full_shards must be positive, got {self.max_held_full_shards}"
            )
        for name in ("max_held_shards", "queued_shards_per_partition", "max_leased_per_partition"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")


@dataclass(frozen=True, slots=True)
class BookStats:
    """Counts for logs, metrics and the control app's page."""

    partitions: int
    queued_shards: int
    leased_shards: int
    done_ranges: int
    uncut_records: int
    queued_records: int
    workers: int
