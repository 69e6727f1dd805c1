"""What both Kafka readers give a training loop: batches, framework adapters, failures.

Owned here: :class:`TrainingSource`, the base of
:class:`~streamtrain.ingest.consumer.IngestConsumer` (partitions by consumer group) and
:class:`~streamtrain.ingest.shard_consumer.ShardConsumer` (shards leased by the control
app). A subclass builds ``reader`` (its :class:`~streamtrain.ingest.reader.BatchReader`),
keeps ``settings`` and ``assigned_event``, defines ``start`` and ``close`` (also
what ``with`` calls), and stores an exception of its fetch thread
in ``_failure``; this base hands out batches, raises that failure in the trainer's
thread, and builds the torch and tf.data adapters.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from streamtrain.errors import KafkaError, StreamtrainError
from streamtrain.ingest.decoders import Decoder
from streamtrain.ingest.idle import IdleClock
from streamtrain.ingest.reader import Batch, BatchReader
from streamtrain.ingest.settings import IngestSettings

if TYPE_CHECKING:
    from streamtrain.ingest.tf_data import TfFeed
    from streamtrain.ingest.torch_data import KafkaIterableDataset

__all__ = ["TrainingSource"]


class TrainingSource:
    """Batches for a training loop from a reader fed by a fetch thread (module docstring)."""

    reader: BatchReader
    decoder: Decoder
    settings: IngestSettings
    assigned_event: threading.Event
    _failure: BaseException | None = None

    def start(self) -> Self:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def next_batch(
        self,
        max_records: int | None = None,
        timeout_s: float = 1.0,
        *,
        ack_previous: bool | None = None,
    ) -> Batch | None:
        """The next decoded batch, or ``None`` if none arrived within ``timeout_s``.

        ``ack_previous`` (default: ``settings.auto_ack``) acknowledges the batch this
        source handed out last, if that was not done yet.
        """
        self._raise_failure()
        batch = self.reader.next_batch(max_records, timeout_s, ack_previous=ack_previous)
        if batch is None:
            self._raise_failure()
        return batch

    def batches(
        self,
        max_records: int | None = None,
        *,
        idle_timeout_s: float | None = None,
        max_batches: int | None = None,
        poll_s: float = 0.5,
    ) -> Iterator[Batch]:
        """Batches until ``max_batches``, or ``idle_timeout_s`` without a record once assigned.

        With ``auto_ack``, each batch is acknowledged when the loop body that got it has
        finished (the next batch is requested, or the iterator ends after
        ``max_batches``); leaving the loop with ``break`` or an exception does not
        acknowledge the batch being worked on.
        """
        count = 0
        idle = IdleClock(idle_timeout_s)
        while max_batches is None or count < max_batches:
            batch = self.next_batch(max_records, poll_s)
            if batch is None:
                if idle.expired(assigned=self.assigned_event.is_set()):
                    return
                continue
            idle.busy()
            count += 1
            yield batch
            if self.settings.auto_ack and count == max_batches:
                batch.ack()

    def as_torch_dataset(
        self,
        batch_records: int | None = None,
        *,
        idle_timeout_s: float | None = None,
        max_batches: int | None = None,
    ) -> KafkaIterableDataset:
        """A torch ``IterableDataset`` of ``{column: tensor}`` batches (see ``torch_data``)."""
        from streamtrain.ingest.torch_data import KafkaIterableDataset

        return KafkaIterableDataset(
            self, batch_records, idle_timeout_s=idle_timeout_s, max_batches=max_batches
        )

    def tf_feed(
        self,
        batch_records: int | None = None,
        *,
        ack: str = "next",
        idle_timeout_s: float | None = None,
        max_batches: int | None = None,
    ) -> TfFeed:
        """A ``tf.data`` feed: its ``dataset`` and, for Keras, ``ack_callback()``."""
        from streamtrain.ingest.tf_data import TfFeed

        return TfFeed(
            self,
            batch_records,
            ack=ack,
            idle_timeout_s=idle_timeout_s,
            max_batches=max_batches,
        )

    def as_tf_dataset(self, batch_records: int | None = None, **kwargs: Any) -> Any:
        """A ``tf.data.Dataset`` of ``{column: tensor}`` batches with output signatures."""
        return self.tf_feed(batch_records, **kwargs).dataset

    @property
    def failure(self) -> BaseException | None:
        """What stopped the fetch thread, if anything did."""
        return self._failure

    def _raise_failure(self) -> None:
        failure = self._failure
        if failure is None:
            return
        if isinstance(failure, StreamtrainError):
            raise failure
        raise KafkaError(f"the fetch thread failed: {failure!r}") from failure
