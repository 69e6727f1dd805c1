"""The demo's Kafka topics: created for a run, and the job started at the data's end.

Owned here: :func:`create_demo_topics`: the data topic (``partitions`` partitions) and
the control-plane topics (one partition each, see
:data:`~streamtrain.demo.children.CONTROL_TOPIC_KINDS`), all allowed to exist already,
then the job's consumer group committed at the data topic's current end, so a topic
with older records (``--topic`` on a real cluster) is not replayed.
"""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition

from streamtrain.config import KafkaSettings
from streamtrain.demo.children import CONTROL_TOPIC_KINDS, DemoNames
from streamtrain.errors import KafkaError
from streamtrain.kafka import create_topic

__all__ = ["create_demo_topics"]

_TIMEOUT_S = 15


def create_demo_topics(kafka: KafkaSettings, names: DemoNames, partitions: int) -> None:
    """See the module docstring."""
    create_topic(kafka, names.topic, partitions, timeout_s=_TIMEOUT_S, exist_ok=True)
    for kind in CONTROL_TOPIC_KINDS:
        create_topic(kafka, names.control(kind), 1, timeout_s=_TIMEOUT_S, exist_ok=True)
    _commit_at_end(kafka, names.job, names.topic, partitions)


def _commit_at_end(settings: KafkaSettings, group: str, topic: str, partitions: int) -> None:
    """Start ``group`` at the current end of ``topic`` (older records are not the demo's)."""
    consumer = Consumer(settings.confluent_config(**{"group.id": group}))
    try:
        offsets = []
        for p in range(partitions):
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            offsets.append(TopicPartition(topic, p, high))
        consumer.commit(offsets=offsets, asynchronous=False)
    except Exception as exc:
        raise KafkaError(f"cannot set the demo group's start offsets on {topic}: {exc}") from exc
    finally:
        consumer.close()
