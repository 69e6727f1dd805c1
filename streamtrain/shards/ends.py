"""Where each partition ends, from listed high watermarks and a probe of the last batch (pure).

Owned here: :class:`PartitionEnds`, the decisions of the coordinator's offset reader
(:mod:`streamtrain.control.shard_offsets` does the Kafka calls). The embedded broker
(Tansu 0.6.0) reports a partition's high watermark as the last record *batch*'s base
offset + 1, not one past its last record, so a partition's end is read from its last
batch: a partition whose watermark stood still for one read (and was not probed at that
watermark in the last ``reprobe_after_s``) is probed from ``high watermark - 1``, and its
end is one past the last offset the probe got. While producers write the watermark moves
at every read and the shards are cut up to it; the last batch waits for the next read.
On a broker that reports the true watermark the probe finds nothing past it and changes
nothing.

A probe that answered is repeated every ``reprobe_after_s`` while the watermark stands
still, because an answer can be short: on the embedded broker the last three records of
a partition stayed uncut after the traffic stopped, until the demo's drain gave up,
though the probe had answered at that watermark. A repeat costs one fetch of the last
batch of each partition that stands still.

A probe that gets no record is repeated at the next read; :meth:`PartitionEnds.missed`
counts such misses in a row, so the reader can warn when a partition's end stays unknown.
"""

from __future__ import annotations

from collections.abc import Mapping

from streamtrain.partition_key import PartitionKey

__all__ = ["PartitionEnds"]


class PartitionEnds:
    """The ends the coordinator knows of (module docstring). One caller at a time."""

    def __init__(self, reprobe_after_s: float = 5.0) -> None:
        self.reprobe_after_s = reprobe_after_s
        self._highs: dict[PartitionKey, int] = {}  # the watermarks of the last read
        # (watermark, when) of the last probe that answered
        self._probed: dict[PartitionKey, tuple[int, float]] = {}
        self._ends: dict[PartitionKey, int] = {}  # one past the last offset a probe got
        self._misses: dict[PartitionKey, int] = {}  # probes in a row that got no record

    def to_probe(self, highs: Mapping[PartitionKey, int], now_s: float) -> list[PartitionKey]:
        """This read's watermarks at ``now_s``; returns the partitions to probe now (from
        their watermark - 1): those whose watermark stood still since the last read and
        was not probed at in the last ``reprobe_after_s``."""
        before, self._highs = self._highs, dict(highs)
        due = []
        for key, high in highs.items():
            if high <= 0 or before.get(key) != high:
                continue
            last = self._probed.get(key)
            if last is None or last[0] != high or now_s - last[1] >= self.reprobe_after_s:
                due.append(key)
        return due

    def got(self, key: PartitionKey, offset: int) -> None:
        """The probe got a record of ``key`` at ``offset``."""
        self._ends[key] = max(self._ends.get(key, 0), offset + 1)

    def probed(self, key: PartitionKey, high: int, now_s: float) -> int:
        """The probe of ``key`` at watermark ``high`` answered at ``now_s``; returns how
        many probes in a row had not before it."""
        self._probed[key] = (high, now_s)
        return self._misses.pop(key, 0)

    def missed(self, key: PartitionKey) -> int:
        """The probe of ``key`` got no record; returns how many probes in a row did not."""
        self._misses[key] = self._misses.get(key, 0) + 1
        return self._misses[key]

    def ends(self, highs: Mapping[PartitionKey, int]) -> dict[PartitionKey, int]:
        """Each partition's end: its watermark, or past it what a probe got."""
        return {key: max(high, self._ends.get(key, 0)) for key, high in highs.items()}
