"""ShardOffsets' discovery: retried until every call answered, repeated for partitions
added later. The broker's answers are scripted (the embedded broker cannot add
partitions to a topic); the logic under test is the coordinator's own."""

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError as ClientError
from confluent_kafka import KafkaException, TopicPartition

from streamtrain.control.shard_coordinator import ShardJobSettings
from streamtrain.control.shard_offsets import ShardOffsets
from streamtrain.errors import KafkaError
from streamtrain.shards.ends import PartitionEnds

T = "clicks"


class Scripted(ShardOffsets):
    """ShardOffsets with the broker's answers scripted (no clients are made)."""

    def __init__(self, interval_s=30.0):
        self.settings = ShardJobSettings(job="ctr", topics=(T,), discover_interval_s=interval_s)
        self.timeout_s = 1.0
        self.now = 0.0
        self._clock = lambda: self.now
        self.partitions = 1
        self.commit_failures = 0
        self.committed_calls = 0
        self.committed_at = 899_000
        self._partitions, self._starts = [], {}
        self.ends = PartitionEnds()

    def _topic_partitions(self, topic):
        return [TopicPartition(topic, p) for p in range(self.partitions)]

    def _committed(self, partitions):
        self.committed_calls += 1
        if self.commit_failures:
            self.commit_failures -= 1
            raise KafkaException(ClientError(ClientError._TIMED_OUT))
        return [  # the group committed on partition 0 only
            SimpleNamespace(
                topic=tp.topic,
                partition=tp.partition,
                offset=self.committed_at if tp.partition == 0 else -1,
                error=None,
            )
            for tp in partitions
        ]

    def _list(self, spec, partitions=None):
        partitions = self._partitions if partitions is None else partitions
        latest = "latest" in repr(spec).lower() or "-1" in repr(spec)
        return {(tp.topic, tp.partition): 900_000 if latest else 0 for tp in partitions}

    def _probe_ends(self, highs, wait_s=0.5):
        pass


def test_a_committed_offset_that_could_not_be_read_is_read_again_not_replaced():
    offsets = Scripted()
    offsets.commit_failures = 1
    with pytest.raises(KafkaError):
        offsets.read()
    assert offsets.read() == ({(T, 0): 900_000}, {(T, 0): 899_000})
    assert offsets.committed_calls == 2


def test_partitions_added_later_are_found_at_the_next_discovery():
    offsets = Scripted(interval_s=30.0)
    assert offsets.read()[1] == {(T, 0): 899_000}
    offsets.partitions = 3
    offsets.now = 10.0
    assert set(offsets.read()[0]) == {(T, 0)}  # not due yet
    offsets.now = 31.0
    ends, starts = offsets.read()
    assert set(ends) == {(T, 0), (T, 1), (T, 2)}
    assert starts == {(T, 0): 899_000, (T, 1): 0, (T, 2): 0}  # new ones from their start
    assert offsets.committed_calls == 2  # the known partition is not asked again
