"""IngestSettings: validation and the consumer properties it renders."""

import pytest

from streamtrain.config import KafkaSettings
from streamtrain.errors import ConfigError
from streamtrain.ingest.settings import FETCH_TUNING, IngestSettings


def test_consumer_config_is_manual_commit_and_tuned():
    settings = IngestSettings(group="job", topics=("a",), worker_id="w")
    conf = settings.consumer_config(KafkaSettings("127.0.0.1:9092"), on_commit=print)
    assert conf["group.id"] == "job"
    assert conf["enable.auto.commit"] is False
    assert conf["enable.auto.offset.store"] is False
    assert conf["auto.offset.reset"] == "earliest"
    assert conf["on_commit"] is print
    for key, value in FETCH_TUNING.items():
        assert conf[key] == value


def test_overrides_win():
    settings = IngestSettings(
        group="job", topics=("a",), consumer_overrides={"fetch.queue.backoff.ms": 1000}
    )
    assert settings.consumer_config(KafkaSettings("h:1"))["fetch.queue.backoff.ms"] == 1000


def test_dlq_topic_and_explicit_assignment():
    settings = IngestSettings(group="g", topics=("a",), partitions=(0, 3))
    assert settings.explicit_assignment
    assert settings.dlq_topic("a") == "a.dlq"
    assert IngestSettings(group="g", topics=("a",), dlq_suffix=None).dlq_topic("a") is None


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"group": " "}, "group"),
        ({"topics": ()}, "topic"),
        ({"topics": ("a", "a")}, "twice"),
        ({"partitions": (-1,)}, "non-negative"),
        ({"batch_records": 0}, "batch_records"),
        ({"queue_records": 10, "batch_records": 20}, "at least one batch"),
        ({"commit_interval_s": 0}, "commit_interval_s"),
        ({"auto_offset_reset": "middle"}, "auto_offset_reset"),
        ({"session_timeout_ms": 1000, "heartbeat_interval_ms": 1000}, "heartbeat"),
        ({"dlq_suffix": ""}, "dlq_suffix"),
        ({"column_builder": "rust"}, "column_builder"),
        ({"prefetch_kbytes": 0}, "prefetch_kbytes"),
    ],
)
def test_bad_settings_are_clear(kwargs, needle):
    base = {"group": "g", "topics": ("a",)}
    with pytest.raises(ConfigError, match=needle):
        IngestSettings(**{**base, **kwargs})


def test_the_prefetch_bound_follows_the_local_queue():
    """librdkafka's pre-fetch (64 MiB by default) is bounded by the queue settings."""
    default = IngestSettings(group="g", topics=("a",))
    assert default.effective_prefetch_kbytes == 100_000 * 256 // 1024  # about 24 MiB
    conf = default.consumer_config(KafkaSettings("h:1"))
    assert conf["queued.max.messages.kbytes"] == default.effective_prefetch_kbytes
    tiny = IngestSettings(group="g", topics=("a",), queue_records=1_000, batch_records=100)
    assert tiny.effective_prefetch_kbytes == 1024  # at least 1 MiB
    huge = IngestSettings(group="g", topics=("a",), queue_records=10_000_000)
    assert huge.effective_prefetch_kbytes == 65_536  # never more than librdkafka's default
    given = IngestSettings(group="g", topics=("a",), prefetch_kbytes=5_000)
    assert given.fetch_properties()["queued.max.messages.kbytes"] == 5_000
