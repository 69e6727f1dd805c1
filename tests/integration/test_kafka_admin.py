"""streamtrain.kafka against the session's embedded broker: probe and topic creation."""

import uuid

import pytest

from streamtrain.errors import ConfigError, KafkaError
from streamtrain.kafka import create_topic, describe_topics, probe


def test_probe_reports_the_cluster(broker):
    info = probe(broker.kafka_settings(), timeout_s=5)
    assert info.bootstrap == broker.bootstrap
    assert info.broker_count == 1
    assert info.cluster_id == "streamtrain"


def test_creating_an_existing_topic_names_it_unless_exist_ok(broker):
    settings = broker.kafka_settings()
    topic = f"dup-{uuid.uuid4().hex[:8]}"
    create_topic(settings, topic, 3)
    with pytest.raises(KafkaError, match=topic) as caught:
        create_topic(settings, topic, 3)
    assert "already exists" in str(caught.value).lower()
    assert create_topic(settings, topic, 3, exist_ok=True).partitions == 3
    assert {t.name: t.partitions for t in describe_topics(settings)}[topic] == 3


@pytest.mark.parametrize("name,partitions", [("", 1), ("ok", 0)])
def test_bad_topic_requests_are_config_errors(broker, name, partitions):
    with pytest.raises(ConfigError):
        create_topic(broker.kafka_settings(), name, partitions)
