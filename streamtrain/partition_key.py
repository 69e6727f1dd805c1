"""How streamtrain names one Kafka partition: ``(topic, partition)``, the one home of
:data:`PartitionKey`.

Ingest's offset tracker, the lag reader's watermarks and the shard coordinator's book
all key their per-partition state by it. It is a plain tuple, not confluent-kafka's
``TopicPartition`` (which also carries an offset and is mutable), so pure cores use it
without importing a Kafka client.
"""

from __future__ import annotations

__all__ = ["PartitionKey"]

PartitionKey = tuple[str, int]
"""``(topic, partition)``."""
