"""The torch adapter: an ``IterableDataset`` of tensor batches that acknowledges after the step.

Owned here: :class:`KafkaIterableDataset`. Each item is one batch as
``{column: torch.Tensor}`` (or whatever ``transform`` makes of the :class:`Batch`). A
batch is acknowledged when the next item is requested, which a training loop does only
after its optimizer step on the previous one; :meth:`KafkaIterableDataset.ack` does it
at once (before a checkpoint, say). Leaving the loop early leaves the current batch
unacknowledged: it is trained again after a restart, never lost.

Use it with ``DataLoader(dataset, batch_size=None, num_workers=0)`` (or iterate it
directly): the Kafka consumer lives in this process, so DataLoader worker processes
cannot read from it, and batching is already done.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeAlias

import numpy as np
import torch
from numpy.typing import NDArray
from torch.utils.data import IterableDataset, get_worker_info

from streamtrain.errors import ConfigError
from streamtrain.ingest.reader import Batch, PollingSource, poll_batches

__all__ = ["BatchSource", "KafkaIterableDataset", "to_tensors"]


#: What hands out batches: an ``IngestConsumer`` (or a shuffle layer's reader).
BatchSource: TypeAlias = PollingSource


def _tensor(name: str, column: NDArray[Any]) -> torch.Tensor:
    if column.dtype == np.dtype(object):
        raise ConfigError(
            f"column {name!r} holds Python objects and cannot be a tensor; declare typed "
            "fields in the decoder or pass a transform"
        )
    if not (column.flags.writeable and column.flags.c_contiguous):
        column = np.array(column, order="C")  # torch.from_numpy needs owned, writable memory
    return torch.from_numpy(column)


def to_tensors(batch: Batch) -> dict[str, torch.Tensor]:
    """Every column of ``batch`` as a CPU tensor (sharing memory where it can)."""
    return {name: _tensor(name, column) for name, column in batch.columns.items()}


class KafkaIterableDataset(IterableDataset[Any]):
    """Batches from ``source`` as tensors; stops after ``max_batches`` or ``idle_timeout_s``."""

    def __init__(
        self,
        source: BatchSource,
        batch_records: int | None = None,
        *,
        transform: Callable[[Batch], Any] = to_tensors,
        idle_timeout_s: float | None = None,
        max_batches: int | None = None,
        poll_s: float = 0.5,
    ) -> None:
        super().__init__()
        self.source = source
        self.batch_records = batch_records
        self.transform = transform
        self.idle_timeout_s = idle_timeout_s
        self.max_batches = max_batches
        self.poll_s = poll_s
        self._pending: Batch | None = None

    def ack(self) -> None:
        """Acknowledge the batch handed out last (its step is done)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.ack()

    def __iter__(self) -> Iterator[Any]:
        if get_worker_info() is not None:
            raise ConfigError(
                "KafkaIterableDataset must be read in the process that owns the consumer: "
                "use DataLoader(..., num_workers=0)"
            )
        for batch in poll_batches(
            self.source,
            self.batch_records,
            self.poll_s,
            max_batches=self.max_batches,
            idle_timeout_s=self.idle_timeout_s,
            before_each=self.ack,  # the step on the previous batch is over
        ):
            self._pending = batch
            yield self.transform(batch)
        self.ack()  # resumed after the last batch: its step finished too
