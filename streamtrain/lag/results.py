"""Result values of a lag tick: per partition, per topic, per group.

Owned here: :class:`PartitionLag`, :class:`TopicLag` and :class:`GroupLag` (built by
:func:`streamtrain.lag.metrics.compute_group_lag`). ``GroupLag`` keeps its per-partition
values as numpy columns and builds ``partitions`` (frozen dataclasses) only on first
access; :meth:`GroupLag.rows` gives the same values as plain tuples, several times
cheaper for bulk export. Unknown values are None, never made-up numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from streamtrain.lag.status import Status, StatusChange

__all__ = ["GroupLag", "PartitionLag", "PartitionRow", "RecordKey", "TopicLag"]

RecordKey = tuple[str, int, int]  # (topic, partition, offset)
# PartitionLag's fields as a plain tuple: topic, partition, committed, high_watermark,
# lag_records, lag_s, records_per_s, status.
PartitionRow = tuple[
    str, int, int | None, int | None, int | None, float | None, float | None, Status
]
_STATUSES = tuple(Status)


@dataclass(frozen=True, slots=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int | None
    high_watermark: int | None
    lag_records: int | None
    lag_s: float | None
    records_per_s: float | None
    status: Status


@dataclass(frozen=True, slots=True)
class TopicLag:
    """Totals over one topic's partitions of the group; ``unknown_*`` count skipped ones."""

    topic: str
    partition_count: int
    total_lag_records: int
    unknown_lag_records: int
    max_lag_s: float | None
    p99_lag_s: float | None
    unknown_lag_s: int
    records_per_s: float | None
    status: Status


@dataclass(frozen=True, slots=True, eq=False)
class PartitionColumns:
    """Per-partition results, grouped by topic; ``order[i]`` is the input index of row i
    (None: rows are already in input order)."""

    topics: tuple[str, ...]
    counts: tuple[int, ...]
    order: NDArray[np.intp] | None
    partitions: NDArray[np.int64]
    committed: NDArray[np.int64]
    high_watermarks: NDArray[np.int64]
    lag_records: NDArray[np.int64]
    lag_s: NDArray[np.float64]
    records_per_s: NDArray[np.float64]
    status: NDArray[np.int8]

    def rows(self) -> list[PartitionRow]:
        names = [t for t, n in zip(self.topics, self.counts, strict=True) for _ in range(n)]
        rows = list(
            zip(
                names,
                self.partitions.tolist(),
                _optional_ints(self.committed),
                _optional_ints(self.high_watermarks),
                _optional_ints(self.lag_records),
                _optional_floats(self.lag_s),
                _optional_floats(self.records_per_s),
                [_STATUSES[s] for s in self.status.tolist()],
                strict=True,
            )
        )
        if self.order is None:
            return rows
        return [rows[i] for i in np.argsort(self.order).tolist()]


def _optional_ints(values: NDArray[np.int64]) -> list[int | None]:
    return [None if v < 0 else v for v in values.tolist()]


def _optional_floats(values: NDArray[np.float64]) -> list[float | None]:
    return [None if math.isnan(v) else v for v in values.tolist()]


@dataclass(frozen=True, slots=True, eq=False)
class GroupLag:
    """One tick of one group. ``partitions`` (in input order) is built on first access.

    Compared by identity (it holds numpy columns): compare fields or ``rows()`` instead.
    ``status_changes`` are this tick's partition and group status changes (from the
    status tracker), so alerts fire on changes only. ``timestamps_needed`` lists
    ``(topic, partition, offset)`` whose lag_s is unknown because the offset is older
    than the HWM history: read those records' timestamps and pass them as
    ``record_timestamps_s`` on the next tick.
    """

    group: str
    observed_at_s: float
    total_lag_records: int
    unknown_lag_records: int
    max_lag_s: float | None
    p99_lag_s: float | None
    unknown_lag_s: int
    records_per_s: float | None
    status: Status
    topics: tuple[TopicLag, ...]
    status_changes: tuple[StatusChange, ...]
    timestamps_needed: tuple[RecordKey, ...]
    _columns: PartitionColumns = field(repr=False)
    _built: list[tuple[PartitionLag, ...]] = field(default_factory=list, repr=False)

    @property
    def partitions(self) -> tuple[PartitionLag, ...]:
        if not self._built:
            self._built.append(tuple(PartitionLag(*row) for row in self._columns.rows()))
        return self._built[0]

    def rows(self) -> list[PartitionRow]:
        """The values of :attr:`partitions` as plain tuples, in the same order and field
        order; several times cheaper for bulk export (protobuf, JSON)."""
        return self._columns.rows()

    def produced(self) -> tuple[int, int]:
        """The sum of the HWMs this tick read, and over how many partitions (the
        records produced so far to them: its growth between ticks is the arrivals)."""
        hwms = self._columns.high_watermarks
        known = hwms >= 0
        return int(hwms[known].sum()), int(known.sum())
