"""Outage logging (one line down, one line back) and the owned-partition filter."""

import logging

from confluent_kafka import KafkaError as ClientError

from streamtrain.errors import KafkaError
from streamtrain.ingest.health import KafkaHealth
from streamtrain.ingest.ownership import Ownership, by_topic, describe
from streamtrain.records import RecordColumns


def test_an_outage_is_one_warning_down_and_one_back(caplog):
    caplog.set_level(logging.WARNING)
    health = KafkaHealth("127.0.0.1:9092", "job", 2000)
    for _ in range(5):
        assert health.on_error(ClientError(ClientError._TRANSPORT, "connection refused")) is None
    assert health.on_error(ClientError(ClientError._ALL_BROKERS_DOWN, "1/1 down")) is None
    health.back_online()
    health.back_online()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert "Kafka unreachable at 127.0.0.1:9092" in messages[0]
    assert "retrying with backoff up to 2000 ms" in messages[0]
    assert "Kafka reachable again at 127.0.0.1:9092" in messages[1]


def test_other_errors_are_logged_once_per_kind_and_fatal_ones_returned(caplog):
    caplog.set_level(logging.WARNING)
    health = KafkaHealth("h:1", "job", 1000)
    for _ in range(3):
        health.on_error(ClientError(ClientError.UNKNOWN_TOPIC_OR_PART, "no topic"))
    assert len(caplog.records) == 1
    fatal = health.on_error(ClientError(ClientError._FATAL, "fenced", fatal=True))
    assert isinstance(fatal, KafkaError)
    assert "fenced" in fatal.message


def test_ownership_filters_records_of_partitions_not_owned():
    ownership = Ownership()
    ownership.update([("t", 0), ("t", 2)])
    records = RecordColumns.from_values("t", [0, 1, 2, 5], [1, 1, 1, 1], [0] * 4, [b"a"] * 4)
    assert not ownership.covers("t", records.offset_ranges())
    kept = ownership.only_owned(records)
    assert kept.partitions.tolist() == [0, 2]
    assert ownership.only_owned(kept) is kept
    assert len(ownership.only_owned(RecordColumns.from_values("u", [0], [0], [0], [b""]))) == 0
    assert describe([("t", 2), ("t", 0), ("u", 1)]) == "t [0, 2]; u [1]"
    assert describe([]) == "no partitions"
    assert by_topic([("t", 2), ("t", 0), ("u", 1), ("t", 2)]) == {"t": {0, 2}, "u": {1}}
