"""torch and tf.data adapters: when each handed-out batch gets acknowledged (no broker)."""

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from streamtrain.errors import ConfigError
from streamtrain.ingest.decoders import Field, RawDecoder
from streamtrain.ingest.reader import Batch
from streamtrain.ingest.tf_data import TfFeed
from streamtrain.ingest.torch_data import KafkaIterableDataset, to_tensors
from streamtrain.records import RecordColumns


class FakeSource:
    """Hands out ``n`` one-record batches and remembers which were acknowledged."""

    decoder = RawDecoder(width=2)

    def __init__(self, n):
        self.left = n
        self.acked = []
        self.handed = 0

    def next_batch(self, max_records=None, timeout_s=1.0, *, ack_previous=None):
        assert ack_previous is False  # the adapters acknowledge themselves
        if not self.left:
            return None
        self.left -= 1
        index = self.handed
        self.handed += 1
        records = RecordColumns.from_values("t", [0], [index], [0], [bytes([index, 1])])
        columns = {"payload": np.frombuffer(records.payloads, np.uint8).reshape(1, 2)}
        return Batch(records, columns, lambda r: self.acked.append(int(r.offsets[0])))


def test_torch_dataset_acks_after_the_step_that_used_the_batch():
    source = FakeSource(3)
    dataset = KafkaIterableDataset(source, idle_timeout_s=0.01, poll_s=0.0)
    seen: list[int] = []
    for item in DataLoader(dataset, batch_size=None, num_workers=0):
        assert source.acked == seen  # the batch being trained is not acked yet
        seen.append(int(item["payload"][0, 0]))
    assert seen == [0, 1, 2]
    assert source.acked == [0, 1, 2]


def test_torch_dataset_leaving_early_does_not_ack_the_current_batch():
    source = FakeSource(5)
    for _ in KafkaIterableDataset(source, poll_s=0.0):
        break
    assert source.acked == []


def test_torch_dataset_ack_now_and_max_batches():
    source = FakeSource(5)
    dataset = KafkaIterableDataset(source, max_batches=2, poll_s=0.0)
    iterator = iter(dataset)
    next(iterator)
    dataset.ack()
    assert source.acked == [0]
    next(iterator)
    with pytest.raises(StopIteration):
        next(iterator)
    assert source.acked == [0, 1]


def test_tensors_are_writable_copies_of_read_only_views():
    source = FakeSource(1)
    tensors = to_tensors(source.next_batch(ack_previous=False))
    assert tensors["payload"].dtype == torch.uint8
    tensors["payload"][0, 0] = 9  # would fail on a read-only numpy view


def test_object_columns_cannot_be_tensors():
    records = RecordColumns.from_values("t", [0], [0], [0], [b"x"])
    batch = Batch(records, {"value": np.array([{"a": 1}], dtype=object)}, lambda r: None)
    with pytest.raises(ConfigError, match="transform"):
        to_tensors(batch)


def test_tf_feed_next_mode_acks_on_the_following_request():
    source = FakeSource(3)
    feed = TfFeed(source, ack="next", idle_timeout_s=0.01, poll_s=0.0)
    generator = feed._generate()
    first = next(generator)
    assert first["payload"].tolist() == [[0, 1]]
    assert source.acked == []
    next(generator)
    assert source.acked == [0]
    assert list(generator) != []
    assert source.acked == [0, 1, 2]


def test_tf_feed_callback_mode_acks_oldest_per_step():
    source = FakeSource(3)
    feed = TfFeed(source, ack="callback", poll_s=0.0, max_batches=3)
    generator = feed._generate()
    next(generator)
    next(generator)  # prefetched one ahead
    assert source.acked == []
    feed.ack_oldest()  # end of step 1
    assert source.acked == [0]
    assert feed.outstanding == 1


def test_keras_callback_acks_every_step_of_an_execution():
    """With ``steps_per_execution=N`` Keras calls back once per N
    steps, and the callback acknowledged one batch per call: N - 1 of every N trained
    batches stayed unacknowledged (commits fell behind, and a restart re-trained them)."""
    source = FakeSource(10)
    feed = TfFeed(source, ack="callback", poll_s=0.0, max_batches=10)
    generator = feed._generate()
    for _ in range(6):
        next(generator)
    callback = feed.ack_callback()
    callback.on_train_batch_begin(0)
    callback.on_train_batch_end(3)  # an execution of steps 0..3
    assert source.acked == [0, 1, 2, 3]
    callback.on_train_batch_begin(4)
    callback.on_train_batch_end(4)  # one step per execution: one batch
    assert source.acked == [0, 1, 2, 3, 4]
    callback.on_train_batch_end(5)  # no begin seen: one step
    assert source.acked == [0, 1, 2, 3, 4, 5]
    callback.on_train_batch_begin(6)
    callback.on_train_batch_end(9)  # more steps than batches out: only what is out
    assert feed.outstanding == 0


def test_tf_feed_needs_declared_fields():
    source = FakeSource(1)
    source.decoder = RawDecoder()  # ragged: fields unknown
    with pytest.raises(ConfigError, match="fields"):
        TfFeed(source)
    assert TfFeed(source, fields=(Field("payload", np.uint8, (2,)),)).fields
    with pytest.raises(ConfigError):
        TfFeed(source, ack="never", fields=(Field("payload", np.uint8, (2,)),))
    with pytest.raises(ConfigError, match="callback"):
        TfFeed(source, fields=(Field("payload", np.uint8, (2,)),)).ack_callback()
