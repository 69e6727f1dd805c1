"""BatchReader: oversized and undecodable records go to the dead-letter sink, the rest on."""

import json

import numpy as np
import pytest

from streamtrain.errors import SchemaError
from streamtrain.ingest.decoders import Field, JsonDecoder, RawDecoder
from streamtrain.ingest.localqueue import LocalQueue
from streamtrain.ingest.metrics import WorkerMetrics
from streamtrain.ingest.reader import BatchReader
from streamtrain.records import RecordColumns


class RecordingDeadLetters:
    """Stands in for DeadLetterQueue: records what it was sent, acks like a delivery."""

    def __init__(self, acknowledge):
        self.sent = []
        self.acknowledge = acknowledge

    def send(self, records, errors):
        self.sent.extend(zip(records.offsets.tolist(), errors, strict=True))
        self.acknowledge(records)

    def poll(self, timeout_s=0.0):
        pass


def setup(values, decoder, **kwargs):
    queue = LocalQueue(1000)
    n = len(values)
    queue.put(RecordColumns.from_values("t", [0] * n, list(range(n)), [0] * n, values))
    acked = []

    def acknowledge(records):
        acked.extend(records.offsets.tolist())

    dead = RecordingDeadLetters(acknowledge)
    metrics = WorkerMetrics()
    reader = BatchReader(queue, decoder, acknowledge, dead_letters=dead, metrics=metrics, **kwargs)
    return reader, dead, acked, metrics


def test_bad_records_are_dead_lettered_and_the_rest_is_a_batch():
    values = [json.dumps({"v": i}).encode() for i in range(4)]
    values[1] = b"{broken"
    values[3] = b'{"v": ' + b"9" * 50 + b"}"  # too big to be an int64 ... and oversized
    reader, dead, acked, metrics = setup(
        values, JsonDecoder([Field("v", np.int64)]), max_record_bytes=40
    )
    batch = reader.next_batch(10, timeout_s=0.1)
    assert batch is not None
    assert batch.records.offsets.tolist() == [0, 2]
    assert batch["v"].tolist() == [0, 2]
    assert [offset for offset, _ in dead.sent] == [3, 1]
    assert "more than the 40-byte limit" in dead.sent[0][1]
    assert metrics.snapshot().dead_letters == 2
    assert acked == [3, 1]  # dead letters are acked on delivery, the batch not yet
    batch.ack()
    assert sorted(acked) == [0, 1, 2, 3]
    assert metrics.snapshot().records_trained == 2


def test_auto_ack_acks_the_previous_batch_on_the_next_request():
    reader, _, acked, _ = setup([b"a", b"b", b"c"], RawDecoder(), auto_ack=True, linger_s=0)
    first = reader.next_batch(2, 0.1)
    assert acked == []
    reader.next_batch(2, 0.1)
    assert first.acked
    assert acked == [0, 1]


def test_without_auto_ack_nothing_is_acked_implicitly():
    reader, _, acked, _ = setup([b"a", b"b"], RawDecoder(), auto_ack=False, linger_s=0)
    reader.next_batch(1, 0.1)
    reader.next_batch(1, 0.1)
    assert acked == []


def test_ack_is_idempotent():
    reader, _, acked, _ = setup([b"a"], RawDecoder())
    batch = reader.next_batch(1, 0.1)
    batch.ack()
    batch.ack()
    assert acked == [0]


def test_a_chunk_of_only_bad_records_yields_no_batch():
    reader, dead, _, _ = setup([b"{", b"["], JsonDecoder([Field("v", np.int64)]))
    assert reader.next_batch(10, timeout_s=0.05) is None
    assert len(dead.sent) == 2


def test_without_a_dead_letter_topic_a_bad_record_is_an_error():
    queue = LocalQueue(10)
    queue.put(RecordColumns.from_values("t", [3], [17], [0], [b"{"]))
    reader = BatchReader(queue, JsonDecoder([Field("v", np.int64)]), lambda r: None)
    with pytest.raises(SchemaError, match=r"t\[3\]@17"):
        reader.next_batch(10, 0.1)


class RecordingSource:
    """A RecordSource that records the linger it was asked to wait and hands out one chunk."""

    def __init__(self, chunk):
        self.chunk = chunk
        self.lingers = []

    def get(self, max_records, timeout_s, linger_s=0.0):
        self.lingers.append((max_records, linger_s))
        return self.chunk


@pytest.mark.parametrize(
    ("source_lingers", "max_records", "expected"),
    [
        (True, None, 0.0),  # the batch size the source cut at: it already waited
        (True, 8, 0.25),  # another size: the source's chunks may still be joined up
        (False, None, 0.25),
    ],
)
def test_a_source_that_lingers_is_not_waited_for_twice(source_lingers, max_records, expected):
    chunk = RecordColumns.from_values("t", [0, 0], [5, 6], [0, 0], [b"a", b"b"])
    source = RecordingSource(chunk)
    reader = BatchReader(
        source,
        RawDecoder(),
        lambda records: None,
        batch_records=4,
        linger_s=0.25,
        source_lingers=source_lingers,
    )
    batch = reader.next_batch(max_records, timeout_s=1.0)
    assert batch is not None and batch.records.offsets.tolist() == [5, 6]
    assert source.lingers == [(max_records or 4, expected)]


def test_a_handed_back_batch_is_handed_out_again_first_and_acked_once():
    reader, _, acked, metrics = setup([b"a", b"b", b"c", b"d"], RawDecoder(), linger_s=0)
    first = reader.next_batch(2, 0.1, ack_previous=False)
    first.nack()  # its step did not commit
    first.nack()
    first.ack()  # a batch ends once: handed back, it is not acknowledged
    assert acked == []
    again = reader.next_batch(2, 0.1, ack_previous=False)
    assert again.records.offsets.tolist() == [0, 1]
    assert again["payload"].tolist() == first["payload"].tolist()
    after = reader.next_batch(2, 0.1, ack_previous=False)
    assert after.records.offsets.tolist() == [2, 3]
    again.ack()
    after.ack()
    assert sorted(acked) == [0, 1, 2, 3]
    assert metrics.snapshot().records_trained == 4
    assert reader.next_batch(2, 0.05, ack_previous=False) is None


def test_a_batch_without_a_hand_back_does_nothing_on_nack():
    from streamtrain.ingest.reader import Batch
    from streamtrain.testing import records

    acked: list[object] = []
    batch = Batch(records(0, 2), {}, acked.append)
    batch.nack()
    batch.ack()
    assert acked == [] and batch.acked


def test_records_no_longer_wanted_are_dropped_before_decoding():
    decoded = []

    class CountingDecoder(RawDecoder):
        def decode(self, records):
            decoded.extend(records.offsets.tolist())
            return super().decode(records)

    wanted = {0, 2, 3}
    reader, dead, acked, _ = setup(
        [b"a", b"b", b"c", b"d"],
        CountingDecoder(),
        still_wanted=lambda records: np.isin(records.offsets, list(wanted)),
    )
    batch = reader.next_batch(10, timeout_s=0.1)
    assert batch is not None
    assert batch.records.offsets.tolist() == [0, 2, 3]
    assert decoded == [0, 2, 3]
    assert reader.dropped_unwanted == 1
    assert dead.sent == [] and acked == []  # neither dead-lettered nor acknowledged
    batch.ack()
    assert acked == [0, 2, 3]


def test_a_chunk_of_only_unwanted_records_yields_no_batch():
    reader, _, acked, _ = setup(
        [b"a", b"b"], RawDecoder(), still_wanted=lambda records: np.zeros(len(records), bool)
    )
    assert reader.next_batch(10, timeout_s=0.1) is None
    assert reader.dropped_unwanted == 2 and acked == []
