"""Message lists from consume() to columns (confluent-kafka's test constructor, no broker)."""

from confluent_kafka import KafkaError, Message

from streamtrain.ingest.messages import to_columns


def message(topic="t", partition=0, offset=0, value=b"x", ts=1000, error=None):
    return Message(
        topic=topic, partition=partition, offset=offset, value=value, timestamp=(1, ts), error=error
    )


def test_one_topic_to_columns():
    messages = [
        message(partition=i % 3, offset=i, value=bytes([i]) * i, ts=100 + i) for i in range(6)
    ]
    (records,), errors = to_columns(messages, "t")
    assert errors == []
    assert records.topic == "t"
    assert records.partitions.tolist() == [0, 1, 2, 0, 1, 2]
    assert records.offsets.tolist() == list(range(6))
    assert records.timestamps_ms.tolist() == [100 + i for i in range(6)]
    assert list(records.values()) == [bytes([i]) * i for i in range(6)]


def test_topics_are_split_in_arrival_order():
    messages = [message("a", offset=0), message("b", offset=5), message("a", offset=1)]
    chunks, _ = to_columns(messages)
    assert [(c.topic, c.offsets.tolist()) for c in chunks] == [("a", [0, 1]), ("b", [5])]


def test_error_events_are_separated_from_records():
    error = KafkaError(KafkaError._PARTITION_EOF, "eof")
    messages = [message(offset=0), message(offset=1, error=error), message(offset=2)]
    (records,), errors = to_columns(messages, "t")
    assert records.offsets.tolist() == [0, 2]
    assert [e.code() for e in errors] == [KafkaError._PARTITION_EOF]


def test_only_errors_gives_no_chunk():
    error = KafkaError(KafkaError._TRANSPORT, "down")
    chunks, errors = to_columns([message(error=error)], "t")
    assert chunks == []
    assert len(errors) == 1


def test_tombstones_become_empty_payloads():
    (records,), _ = to_columns([message(value=None, offset=0), message(value=b"ab", offset=1)], "t")
    assert list(records.values()) == [b"", b"ab"]
