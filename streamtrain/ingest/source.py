"""What both Kafka readers give a training loop: batches, framework adapters, failures.

Owned here: :class:`TrainingSource`, the base of
:class:`~streamtrain.ingest.consumer.IngestConsumer` (partitions by consumer group) and
:class:`~streamtrain.ingest.shard_consumer.ShardConsumer` (shards leased by the control
app). A subclass builds ``reader`` (its :class:`~streamtrain.ingest.reader.BatchReader`)
and ``queue``, keeps ``settings`` and ``assigned_event``, defines ``start`` and ``close``
(also what ``with`` calls) and its fetch loop ``_fetch``. This base runs that loop on
the fetch thread (:meth:`~TrainingSource._start_fetching`,
:meth:`~TrainingSource._stop_fetching`), keeps what stopped it (:meth:`_fail`: the
fetch thread's exception or a fatal client error), hands out batches, raises that
failure in the trainer's thread, and builds the torch and tf.data adapters.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from streamtrain.errors import KafkaError, StreamtrainError
from streamtrain.ingest.decoders import Decoder
from streamtrain.ingest.idle import IdleClock
from streamtrain.ingest.localqueue import RecordQueue
from streamtrain.ingest.reader import Batch, BatchReader
from streamtrain.ingest.settings import IngestSettings

if TYPE_CHECKING:
    from streamtrain.ingest.tf_data import TfFeed
    from streamtrain.ingest.torch_data import KafkaIterableDataset

__all__ = ["TrainingSource"]

log = logging.getLogger(__name__)


class TrainingSource:
    """Batches for a training loop from a reader fed by a fetch thread (module docstring)."""

    reader: BatchReader
    decoder: Decoder
    settings: IngestSettings
    queue: RecordQueue
    assigned_event: threading.Event
    _failure: BaseException | None = None
    _thread: threading.Thread | None = None

    def __init__(self) -> None:
        self._stop = threading.Event()

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

    # -- the fetch thread --------------------------------------------------------------------

    def _fetch(self) -> None:
        """The fetch loop (the subclass's): runs until ``_stop`` is set."""
        raise NotImplementedError

    def _start_fetching(self, name: str, what: str, reading: str) -> None:
        """Run :meth:`_fetch` on a daemon thread ``streamtrain-<name>-<worker id>`` and log
        what it is ``reading``; an exception that ends it is logged (``what`` names the
        reader) and kept (:meth:`_fail`)."""

        def fetch() -> None:
            try:
                self._fetch()
            except BaseException as exc:  # handed to the trainer's thread by _raise_failure
                log.exception("%s fetch thread failed", what)
                self._fail(exc)

        self._thread = threading.Thread(
            target=fetch, name=f"streamtrain-{name}-{self.settings.worker_id}", daemon=True
        )
        self._thread.start()
        log.info("worker %s reading %s", self.settings.worker_id, reading)

    def _stop_fetching(self, timeout_s: float) -> bool:
        """Stop the fetch thread, waiting up to ``timeout_s``; whether it ended."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            return not self._thread.is_alive()
        return True

    def _fail(self, failure: BaseException, *, stop: bool = False) -> None:
        """Keep ``failure`` for the trainer (raised by its next call), close the queue so
        a waiting reader wakes, and with ``stop`` end the fetch loop."""
        self._failure = failure
        if stop:
            self._stop.set()
        self.queue.close()

    # -- the trainer's side ------------------------------------------------------------------

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
