"""The dead-letter queue's decisions that need no broker, and the replication factor new
topics get."""

from streamtrain.config import KafkaSettings
from streamtrain.ingest.dlq import DeadLetterQueue
from streamtrain.kafka import replication_factor_for
from streamtrain.testing import records


def test_only_the_workers_own_topics_are_dead_lettered():
    """A peer's batch could make a worker create and write any
    ``<topic>.dlq``; records of a topic the worker does not read are refused."""
    acknowledged: list[object] = []
    dlq = DeadLetterQueue(
        KafkaSettings(bootstrap="127.0.0.1:1"),  # never contacted: refused before producing
        ".dlq",
        "w1",
        acknowledged.append,
        topics=("clicks",),
    )
    dlq.send(records(0, 2, topic="payroll"), ["bad", "bad"])
    assert dlq.refused == 2
    assert (dlq.sent, dlq.outstanding) == (0, 0)
    assert acknowledged == []  # never counted as handled: a peer's batch times out instead


def test_new_topics_take_the_clusters_replication_factor():
    """DLQ, members and control topics were created with replication
    factor 1 whatever the cluster."""
    assert replication_factor_for(None, 1) == 1
    assert replication_factor_for(None, 5) == 3  # min(3, brokers)
    assert replication_factor_for(2, 5) == 2  # default.replication.factor as configured
    assert replication_factor_for(4, 2) == 2  # never more than there are brokers
    assert replication_factor_for(0, 3) == 3
