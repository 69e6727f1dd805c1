"""Committing the offset tracker's acknowledged prefix to Kafka.

Owned here: :class:`Committer`. It asks the :class:`OffsetTracker` what advanced, sends
it with ``Consumer.commit`` (asynchronously on the periodic path, whose result comes
back through ``on_commit``; synchronously on revoke and close), and tells the tracker
only what the broker confirmed, so a failed commit is simply sent again next time.
``last_committed`` keeps the highest confirmed position per partition, also after the
partition was revoked (for summaries and tests).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka import KafkaError as ClientError

from streamtrain.ingest.metrics import WorkerMetrics
from streamtrain.ingest.tracker import OffsetTracker
from streamtrain.partition_key import PartitionKey

__all__ = ["Committer"]

log = logging.getLogger("streamtrain.ingest.consumer")


class Committer:
    """Commits for one consumer; ``on_confirmed`` runs after every confirmed commit."""

    def __init__(
        self,
        tracker: OffsetTracker,
        metrics: WorkerMetrics,
        group: str,
        on_confirmed: Callable[[], None] = lambda: None,
    ) -> None:
        self.tracker = tracker
        self.metrics = metrics
        self.group = group
        self.on_confirmed = on_confirmed
        self.last_committed: dict[PartitionKey, int] = {}

    def commit(
        self,
        consumer: Consumer,
        *,
        asynchronous: bool,
        only: set[PartitionKey] | None = None,
    ) -> None:
        """Commit what advanced (of ``only``'s partitions, if given)."""
        positions = self.tracker.committable()
        if only is not None:
            positions = {key: pos for key, pos in positions.items() if key in only}
        if not positions:
            return
        offsets = [TopicPartition(t, p, pos) for (t, p), pos in sorted(positions.items())]
        try:
            if asynchronous:
                consumer.commit(offsets=offsets, asynchronous=True)  # result: on_commit
            else:
                self.confirmed(consumer.commit(offsets=offsets, asynchronous=False))
        except KafkaException as exc:
            error = exc.args[0]
            if error.code() != ClientError._NO_OFFSET:
                self._failed(error)

    def on_commit(self, error: ClientError | None, partitions: list[TopicPartition]) -> None:
        """The ``on_commit`` callback of the consumer (runs inside ``consume()``)."""
        if error is not None and error.code() != ClientError._NO_OFFSET:
            self._failed(error)
        self.confirmed(partitions)

    def confirmed(self, partitions: list[TopicPartition]) -> None:
        done = {
            (tp.topic, tp.partition): tp.offset
            for tp in partitions
            if tp.error is None and tp.offset >= 0
        }
        if not done:
            return
        self.tracker.mark_committed(done)
        for key, offset in done.items():
            if offset > self.last_committed.get(key, -1):
                self.last_committed[key] = offset
        self.metrics.add(commits=1)
        self.on_confirmed()

    def _failed(self, error: ClientError) -> None:
        self.metrics.add(commit_failures=1)
        log.warning(
            "commit for group %r failed (%s); retried at the next commit",
            self.group,
            error.str(),
        )
