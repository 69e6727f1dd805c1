"""Shards on the wire: :class:`ShardRange` and :class:`Grant` to and from protobuf.

Owned here (pure): :func:`to_range` / :func:`from_range` for ``ShardUpdate.Range``,
:func:`default_topics` (the per-job topic names both sides derive from the job).
A range that cannot be a shard (an empty topic, a negative partition) is refused by
:func:`from_range` with ``None``; the caller logs and ignores it.
"""

from __future__ import annotations

from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.shards.model import Grant, ShardRange

__all__ = ["default_topics", "from_range", "grant_range", "to_range"]


def default_topics(job: str) -> tuple[str, str]:
    """``(updates, grants)``: ``<job>.shards`` (workers to the control app) and
    ``<job>.shard-grants`` (the control app to workers)."""
    return f"{job}.shards", f"{job}.shard-grants"


def to_range(shard: ShardRange, epoch: int = 0) -> pb.ShardUpdate.Range:
    return pb.ShardUpdate.Range(
        topic=shard.topic,
        partition=shard.partition,
        start_offset=shard.start_offset,
        end_offset=shard.end_offset,
        epoch=epoch,
    )


def grant_range(grant: Grant) -> pb.ShardUpdate.Range:
    return to_range(grant.shard, grant.epoch)


def from_range(message: pb.ShardUpdate.Range) -> tuple[ShardRange, int] | None:
    """``(range, epoch)``, or ``None`` for a message that names no partition."""
    if not message.topic or message.partition < 0:
        return None
    rng = ShardRange(message.topic, message.partition, message.start_offset, message.end_offset)
    return rng, message.epoch
