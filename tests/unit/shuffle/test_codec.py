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


def _encode(columns, version=codec.BATCH_SCHEMA_VERSION):
    return codec.encode_batch(
        columns, job="j", batch_id="b-1", origin_worker="w1", sent_at_ms=42, version=version
    )


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize(("n", "size"), [(1, 0), (5, 7), (1000, 200), (3, 20_000)])
def test_round_trip(n, size, version):
    columns = _columns(n, size)
    decoded = codec.decode_batch(_encode(columns, version))
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
    """The hand-written payload field parses with the stock protobuf runtime; version 2
    carries the columns as packed little-endian buffers."""
    columns = _columns(4, 3)
    message = RecordBatch()
    message.ParseFromString(_encode(columns))
    assert message.payloads == columns.payloads
    assert message.forwarded
    assert message.schema_version == codec.BATCH_SCHEMA_VERSION == 2
    assert message.record_count == 4
    assert list(message.payload_lengths) == []
    assert np.frombuffer(message.payload_lengths_le32, "<u4").tolist() == [3, 4, 5, 6]
    assert np.frombuffer(message.offsets_le64, "<i8").tolist() == [100, 101, 102, 103]
    assert np.frombuffer(message.partitions_le32, "<i4").tolist() == [0, 1, 2, 0]


def test_version_1_frame_is_what_older_workers_read():
    """What an older worker's reader needs: repeated columns, schema version 1."""
    columns = _columns(4, 3)
    message = wire.decode(RecordBatch, _encode(columns, version=1))
    assert message.schema_version == 1
    assert list(message.payload_lengths) == [3, 4, 5, 6]
    assert list(message.offsets) == [100, 101, 102, 103]
    assert message.payloads == columns.payloads
    assert not message.partitions_le32


def test_decodes_a_frame_with_the_payloads_last():
    """Older workers appended the payloads after the other fields; any field order is
    protobuf, and a repeated payloads field means the last one (protobuf's merge)."""
    columns = _columns(3, 5)
    header = RecordBatch(
        schema_version=1,
        job="j",
        batch_id="b",
        origin_worker="w",
        topic="t",
        partitions=[0, 0, 0],
        offsets=[1, 2, 3],
        timestamps_ms=[0, 0, 0],
        payload_lengths=[5, 6, 7],
    ).SerializeToString()
    last = header + RecordBatch(payloads=columns.payloads).SerializeToString()
    assert list(codec.decode_batch(last).columns.values()) == list(columns.values())
    twice = RecordBatch(payloads=b"junk").SerializeToString() + last
    assert list(codec.decode_batch(twice).columns.values()) == list(columns.values())


def test_decoded_columns_are_views_not_python_lists():
    decoded = codec.decode_batch(_encode(_columns(1000, 10))).columns
    for array in (decoded.partitions, decoded.offsets, decoded.timestamps_ms):
        assert not array.flags.owndata  # a view of the frame's bytes, no per-record objects
    assert decoded.partitions.dtype == np.int32
    assert decoded.offsets.dtype == np.int64


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
            schema_version=codec.BATCH_SCHEMA_VERSION + 1,
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
        RecordBatch(
            schema_version=2,
            job="j",
            batch_id="b",
            origin_worker="w",
            topic="t",
            record_count=2,
            partitions_le32=np.zeros(2, "<i4").tobytes(),
            offsets_le64=np.zeros(1, "<i8").tobytes(),
            timestamps_ms_le64=np.zeros(2, "<i8").tobytes(),
            payload_lengths_le32=np.ones(2, "<u4").tobytes(),
            payloads=b"xy",
        ).SerializeToString(),
        RecordBatch(
            schema_version=2,
            job="j",
            batch_id="b",
            origin_worker="w",
            topic="t",
            record_count=1,
            partitions_le32=np.zeros(1, "<i4").tobytes(),
            offsets_le64=np.zeros(1, "<i8").tobytes(),
            timestamps_ms_le64=np.zeros(1, "<i8").tobytes(),
            payload_lengths_le32=np.full(1, 2**32 - 1, "<u4").tobytes(),
            payloads=b"x",
        ).SerializeToString(),
        b"\x52\xff\xff\xff\x0f",
    ],
    ids=[
        "garbage",
        "empty",
        "no-records",
        "ragged",
        "short-payload",
        "negative",
        "newer",
        "v2-ragged",
        "v2-lengths-exceed",
        "payload-past-end",
    ],
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
        schema_version=codec.BATCH_SCHEMA_VERSION + 1,
        job="j",
        batch_id="b",
        origin_worker="w",
        topic="t",
    ).SerializeToString()
    with pytest.raises(SchemaError):
        codec.decode_batch(newer)
    header = codec.peek_batch(newer)
    assert header == codec.BatchHeader(codec.BATCH_SCHEMA_VERSION + 1, "j", "b", "w", "t")
    assert codec.peek_batch(b"\xff\xff") is None
