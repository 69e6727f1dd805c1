"""RecordColumns <-> RecordBatch frames, and rejection of unusable frames."""

import numpy as np
import pytest

from streamtrain import wire
from streamtrain.errors import SchemaError
from streamtrain.proto.data_plane_pb2 import BatchAck, CreditGrant, RecordBatch, WorkerStateEvent
from streamtrain.records import RecordColumns
from streamtrain.shuffle import codec


def _columns(n=5, size=7):
    return RecordColumns.from_values(
        "topic-a",
        [i % 3 for i in range(n)],
        [100 + i for i in range(n)],
        [1_700_000_000_000 + i for i in range(n)],
        [bytes([i % 256]) * (size + i) for i in range(n)],
    )


def _encode(columns):
    return codec.encode_batch(columns, job="j", batch_id="b-1", origin_worker="w1", sent_at_ms=42)


@pytest.mark.parametrize(("n", "size"), [(1, 0), (5, 7), (1000, 200), (3, 20_000)])
def test_round_trip(n, size):
    columns = _columns(n, size)
    decoded = codec.decode_batch(_encode(columns))
    assert (decoded.job, decoded.batch_id, decoded.origin_worker) == ("j", "b-1", "w1")
    assert decoded.sent_at_ms == 42
    got = decoded.columns
    assert got.forwarded
    assert got.topic == "topic-a"
    np.testing.assert_array_equal(got.partitions, columns.partitions)
    np.testing.assert_array_equal(got.offsets, columns.offsets)
    np.testing.assert_array_equal(got.timestamps_ms, columns.timestamps_ms)
    assert list(got.values()) == list(columns.values())


def test_frame_is_a_plain_record_batch():
    """The hand-appended payload field parses with the stock protobuf runtime."""
    columns = _columns(4, 3)
    message = RecordBatch()
    message.ParseFromString(_encode(columns))
    assert message.payloads == columns.payloads
    assert message.forwarded
    assert list(message.payload_lengths) == [3, 4, 5, 6]
    assert message.schema_version == wire.SCHEMA_VERSION


def test_memoryview_input():
    columns = _columns()
    assert len(codec.decode_batch(memoryview(_encode(columns))).columns) == 5


@pytest.mark.parametrize(
    "frame",
    [
        b"\xff\xff\xff",
        b"",
        RecordBatch(job="j", batch_id="b", origin_worker="w", topic="t").SerializeToString(),
        RecordBatch(
            job="j",
            batch_id="b",
            origin_worker="w",
            topic="t",
            partitions=[0],
            offsets=[1, 2],
            timestamps_ms=[0],
            payload_lengths=[1],
            payloads=b"x",
        ).SerializeToString(),
        RecordBatch(
            job="j",
            batch_id="b",
            origin_worker="w",
            topic="t",
            partitions=[0],
            offsets=[1],
            timestamps_ms=[0],
            payload_lengths=[5],
            payloads=b"x",
        ).SerializeToString(),
        RecordBatch(
            job="j",
            batch_id="b",
            origin_worker="w",
            topic="t",
            partitions=[-1],
            offsets=[1],
            timestamps_ms=[0],
            payload_lengths=[1],
            payloads=b"x",
        ).SerializeToString(),
        RecordBatch(
            schema_version=wire.SCHEMA_VERSION + 1,
            job="j",
            batch_id="b",
            origin_worker="w",
            topic="t",
            partitions=[0],
            offsets=[1],
            timestamps_ms=[0],
            payload_lengths=[1],
            payloads=b"x",
        ).SerializeToString(),
    ],
    ids=["garbage", "empty", "no-records", "ragged", "short-payload", "negative", "newer"],
)
def test_unusable_batches_raise_schema_error(frame):
    with pytest.raises(SchemaError):
        codec.decode_batch(frame)


def test_control_frames():
    ack = codec.decode_control(
        codec.KIND_ACK, wire.encode(BatchAck(batch_id="x", status=BatchAck.ACKED))
    )
    assert isinstance(ack, BatchAck)
    assert ack.batch_id == "x"
    grant = codec.decode_control(codec.KIND_CREDIT, wire.encode(CreditGrant(credit_records=5)))
    assert isinstance(grant, CreditGrant)
    event = codec.decode_control(codec.KIND_STATE, wire.encode(WorkerStateEvent(sequence=3)))
    assert isinstance(event, WorkerStateEvent)
    with pytest.raises(SchemaError, match="unknown shuffle frame kind"):
        codec.decode_control(b"?", b"")
    with pytest.raises(SchemaError):
        codec.decode_control(codec.KIND_ACK, b"\xff\xff")


def test_control_encoders_round_trip():
    ack = codec.decode_control(
        codec.KIND_ACK,
        codec.encode_ack(
            job="j", batch_id="b", receiver="r", status=BatchAck.REJECTED, reason="no", at_ms=7
        ),
    )
    assert isinstance(ack, BatchAck)
    assert (ack.job, ack.batch_id, ack.receiver_worker, ack.reason, ack.acked_at_ms) == (
        "j",
        "b",
        "r",
        "no",
        7,
    )
    assert ack.status == BatchAck.REJECTED
    received = codec.decode_control(
        codec.KIND_ACK,
        codec.encode_ack(
            job="j", batch_id="b", receiver="r", status=BatchAck.RECEIVED, reason="", at_ms=7
        ),
    )
    assert isinstance(received, BatchAck) and received.status == BatchAck.RECEIVED
    event = codec.decode_control(
        codec.KIND_STATE,
        codec.encode_state(
            job="j",
            worker_id="w",
            state=WorkerStateEvent.RECEIVING,
            sequence=4,
            queue_records=12,
            at_ms=8,
        ),
    )
    assert isinstance(event, WorkerStateEvent)
    assert (event.worker_id, event.sequence, event.queue_length, event.emitted_at_ms) == (
        "w",
        4,
        12,
        8,
    )
    assert event.state == WorkerStateEvent.RECEIVING


def test_peek_reads_the_header_of_a_batch_decode_refuses():
    newer = RecordBatch(
        schema_version=wire.SCHEMA_VERSION + 1, job="j", batch_id="b", origin_worker="w", topic="t"
    ).SerializeToString()
    with pytest.raises(SchemaError):
        codec.decode_batch(newer)
    header = codec.peek_batch(newer)
    assert header == codec.BatchHeader(wire.SCHEMA_VERSION + 1, "j", "b", "w", "t")
    assert codec.peek_batch(b"\xff\xff") is None
