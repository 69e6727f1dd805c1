"""Where each partition ends, from listed high watermarks and a probe of the last batch (pure).

Owned here: :class:`PartitionEnds`, the decisions of the coordinator's offset reader
(:mod:`streamtrain.control.shard_offsets` does the Kafka calls). The embedded broker
(Tansu 0.6.0) reports a partition's high watermark as the last record *batch*'s base
offset + 1, not one past its last record, so a partition's end is read from its last
batch: a partition whose watermark stood still for one read (and was not probed at that
watermark yet) is probed from ``high watermark - 1``, and its end is one past the last
offset the probe got. While producers write the watermark moves at every read and the
shards are cut up to it; the last batch waits for the next read. On a broker that
reports the true watermark the probe finds nothing past it and changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from streamtrain.partition_key import PartitionKey

__all__ = ["PartitionEnds"]


class PartitionEnds:
    """The ends the coordinator knows of (module docstring). One caller at a time."""

    def __init__(self) -> None:
        self._highs: dict[PartitionKey, int] = {}  # the watermarks of the last read
        self._probed: dict[PartitionKey, int] = {}  # the watermark the last probe read at
        self._ends: dict[PartitionKey, int] = {}  # one past the last offset a probe got

    def to_probe(self, highs: Mapping[PartitionKey, int]) -> list[PartitionKey]:
        """This read's watermarks; returns the partitions to probe now (from their
        watermark - 1): those whose watermark stood still since the last read and was
        not probed at yet."""
        before, self._highs = self._highs, dict(highs)
        return [
            key
            for key, high in highs.items()
            if high > 0 and before.get(key) == high and self._probed.get(key) != high
        ]

    def got(self, key: PartitionKey, offset: int) -> None:
        """The probe got a record of ``key`` at ``offset``."""
        self._ends[key] = max(self._ends.get(key, 0), offset + 1)

    def probed(self, key: PartitionKey, high: int) -> None:
        """The probe of ``key`` at watermark ``high`` got the last batch (not probed at
        that watermark again)."""
        self._probed[key] = high

    def ends(self, highs: Mapping[PartitionKey, int]) -> dict[PartitionKey, int]:
        """Each partition's end: its watermark, or past it what a probe got."""
        return {key: max(high, self._ends.get(key, 0)) for key, high in highs.items()}
