"""The record types the data plane shares: ingest, shuffle and the worker all use these.

Owned here (no I/O, no threads):

* :class:`RecordColumns`, records of one topic as parallel arrays plus one concatenated
  payload buffer. It is what the consumer hands out, what the shuffle layer queues and
  forwards (it maps one-to-one onto the ``RecordBatch`` protobuf), and what a decoder
  turns into feature columns. Payloads are addressed by ``payload_bounds`` (``n + 1``
  increasing offsets into ``payloads``), so slicing a chunk copies no payload bytes
  until it is sent; :meth:`RecordColumns.concat` is the one way chunks are joined.
* Offset runs (:data:`OffsetRun`): ``(partition, first_offset, last_offset)`` ranges of
  consecutive offsets, what an offset tracker is told. :func:`offset_runs` follows
  record order (the consumer's hand-outs; the optional C extension
  :mod:`streamtrain._columns` finds them fast), :func:`contiguous_runs` sorts and merges
  duplicates (what a trainer acknowledges); both cut runs with :func:`runs_of`.
* :class:`Acknowledger`: what acknowledges trained records (exactly the ``ack`` method of
  ``streamtrain.ingest.tracker.OffsetTracker``, so the shuffle layer needs nothing else
  of ingest).
* :func:`drop_partitions`: chunks without the records of revoked partitions, and
  :func:`payload_bounds`: payload offsets from record lengths.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError

__all__ = [
    "Acknowledger",
    "OffsetRun",
    "RecordColumns",
    "contiguous_runs",
    "drop_partitions",
    "offset_runs",
    "payload_bounds",
    "runs_of",
]

_MAX_UNSORTED_RUNS = 64  # more runs than this in record order: sort by partition first

try:  # the optional C extension (setup.py); numpy does the same, slower on small chunks
    from streamtrain._columns import offset_runs as _c_offset_runs
except ImportError:  # pragma: no cover - built wherever a C compiler was found
    _c_offset_runs = None  # type: ignore[assignment]

OffsetRun = tuple[int, int, int]
"""``(partition, first_offset, last_offset)``, both offsets inclusive."""


def payload_bounds(lengths: NDArray[np.int64] | Sequence[int]) -> NDArray[np.int64]:
    """The ``n + 1`` offsets into a payload buffer of records with these byte ``lengths``
    (``0`` first, the total last): how every chunk addresses its payloads."""
    bounds = np.empty(len(lengths) + 1, dtype=np.int64)
    bounds[0] = 0
    np.cumsum(lengths, out=bounds[1:])
    return bounds


class Acknowledger(Protocol):
    """Receives acknowledged offset ranges; thread-safe; any order."""

    def ack(self, topic: str, partition: int, first_offset: int, last_offset: int) -> int: ...


def runs_of(partitions: NDArray[np.int32], offsets: NDArray[np.int64]) -> list[OffsetRun]:
    """The runs of records in the order given: a run ends where the partition changes or
    the next offset is not one more (a gap, a repeat, a step back)."""
    return _runs_at(partitions, offsets, _breaks(partitions, offsets))


def _breaks(partitions: NDArray[np.int32], offsets: NDArray[np.int64]) -> NDArray[np.intp]:
    """Indices of the records that start a new run (the first record excluded)."""
    return (
        np.flatnonzero((partitions[1:] != partitions[:-1]) | (offsets[1:] - offsets[:-1] != 1)) + 1
    )


def _runs_at(
    partitions: NDArray[np.int32], offsets: NDArray[np.int64], breaks: NDArray[np.intp]
) -> list[OffsetRun]:
    n = offsets.shape[0]
    if n == 0:
        return []
    starts = np.empty(breaks.size + 1, dtype=np.intp)
    starts[0] = 0
    starts[1:] = breaks
    ends = np.empty_like(starts)
    ends[:-1] = breaks - 1
    ends[-1] = n - 1
    return list(
        zip(
            partitions[starts].tolist(),
            offsets[starts].tolist(),
            offsets[ends].tolist(),
            strict=True,
        )
    )


def offset_runs(partitions: NDArray[np.int32], offsets: NDArray[np.int64]) -> list[OffsetRun]:
    """Runs of consecutive offsets in record order, split wherever offsets skip or repeat.

    ``consume()`` delivers long per-partition stretches, so record order gives a few runs,
    found without sorting; records that interleave partitions finely (more than
    ``_MAX_UNSORTED_RUNS`` breaks) are sorted by partition first (stably), giving at most
    one run per partition and gap. The C extension does the same when it is built.
    """
    if offsets.shape[0] == 0:
        return []
    if (
        _c_offset_runs is not None
        and partitions.dtype == np.int32
        and offsets.dtype == np.int64
        and partitions.flags.c_contiguous
        and offsets.flags.c_contiguous
    ):
        runs: list[OffsetRun] | None = _c_offset_runs(partitions, offsets, _MAX_UNSORTED_RUNS)
        if runs is not None:
            return runs
    breaks = _breaks(partitions, offsets)
    if breaks.size > _MAX_UNSORTED_RUNS:
        order = np.argsort(partitions, kind="stable")
        partitions, offsets = partitions[order], offsets[order]
        breaks = _breaks(partitions, offsets)
    return _runs_at(partitions, offsets, breaks)


def contiguous_runs(partitions: NDArray[np.int32], offsets: NDArray[np.int64]) -> list[OffsetRun]:
    """The records as maximal runs of consecutive offsets per partition (duplicates merged)."""
    if offsets.size == 0:
        return []
    order = np.lexsort((offsets, partitions))
    parts, offs = partitions[order], offsets[order]
    if parts.size > 1:
        distinct = np.ones(parts.size, dtype=bool)
        distinct[1:] = (np.diff(parts) != 0) | (np.diff(offs) != 0)
        parts, offs = parts[distinct], offs[distinct]
    return runs_of(parts, offs)


@dataclass(frozen=True, slots=True, eq=False)
class RecordColumns:
    """``n`` records of ``topic``: partition, offset and timestamp (ms) per record.

    ``forwarded`` is set on records a peer forwarded to this worker; they are never
    forwarded again (KALE §3.5). ``lease_ids``, set by the shard reader, is the lease of
    the shard each record was read under (its acknowledgement counts for that lease
    only); ``None`` elsewhere. The arrays are not to be changed once built (the offset
    runs are computed once and kept).
    """

    topic: str
    partitions: NDArray[np.int32]
    offsets: NDArray[np.int64]
    timestamps_ms: NDArray[np.int64]
    payloads: bytes
    payload_bounds: NDArray[np.int64]
    forwarded: bool = False
    lease_ids: NDArray[np.int64] | None = None
    _ranges: list[OffsetRun] | None = field(default=None, init=False, repr=False, compare=False)
    _lengths: NDArray[np.int64] | None = field(default=None, init=False, repr=False, compare=False)
    _length_range: tuple[int, int] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        n = self.offsets.shape[0] if self.offsets.ndim == 1 else -1
        if (
            n < 0
            or self.partitions.shape != (n,)
            or self.timestamps_ms.shape != (n,)
            or self.payload_bounds.shape != (n + 1,)
            or (self.lease_ids is not None and self.lease_ids.shape != (n,))
        ):
            raise ConfigError(
                "record columns must be 1-D: partitions, offsets, timestamps (and lease "
                "ids) of one length n, payload_bounds of n + 1"
            )
        if int(self.payload_bounds[0]) != 0 or int(self.payload_bounds[-1]) != len(self.payloads):
            raise ConfigError("payload_bounds must start at 0 and end at len(payloads)")

    @classmethod
    def from_values(
        cls,
        topic: str,
        partitions: Sequence[int],
        offsets: Sequence[int],
        timestamps_ms: Sequence[int],
        values: Sequence[bytes],
        *,
        forwarded: bool = False,
    ) -> RecordColumns:
        """Build from per-record Python values (tests, small batches)."""
        bounds = payload_bounds([len(v) for v in values])
        return cls(
            topic,
            np.asarray(partitions, dtype=np.int32),
            np.asarray(offsets, dtype=np.int64),
            np.asarray(timestamps_ms, dtype=np.int64),
            b"".join(values),
            bounds,
            forwarded,
        )

    @classmethod
    def concat(cls, chunks: Sequence[RecordColumns]) -> RecordColumns:
        """One chunk of ``chunks`` in order; all must share topic and ``forwarded``, and
        have lease ids all or none."""
        if not chunks:
            raise ConfigError("concat needs at least one chunk")
        first = chunks[0]
        if len(chunks) == 1:
            return first
        if any(
            c.topic != first.topic
            or c.forwarded != first.forwarded
            or (c.lease_ids is None) != (first.lease_ids is None)
            for c in chunks
        ):
            raise ConfigError(
                "only chunks of one topic, one forwarded flag and lease ids all or none "
                "can be joined"
            )
        bounds = payload_bounds(np.concatenate([c.payload_lengths() for c in chunks]))
        leases = [c.lease_ids for c in chunks if c.lease_ids is not None]
        return cls(
            first.topic,
            np.concatenate([c.partitions for c in chunks]),
            np.concatenate([c.offsets for c in chunks]),
            np.concatenate([c.timestamps_ms for c in chunks]),
            b"".join(c.payloads for c in chunks),
            bounds,
            first.forwarded,
            np.concatenate(leases) if leases else None,
        )

    def leased(self, lease_ids: NDArray[np.int64]) -> RecordColumns:
        """These records, each tagged with the lease it was read under."""
        return RecordColumns(
            self.topic,
            self.partitions,
            self.offsets,
            self.timestamps_ms,
            self.payloads,
            self.payload_bounds,
            self.forwarded,
            lease_ids,
        )

    def __len__(self) -> int:
        return int(self.offsets.shape[0])

    @property
    def payload_bytes(self) -> int:
        return len(self.payloads)

    def payload_lengths(self) -> NDArray[np.int64]:
        """Bytes of each record's payload (read-only; computed once per chunk)."""
        lengths = self._lengths
        if lengths is None:
            lengths = np.diff(self.payload_bounds)
            lengths.setflags(write=False)
            object.__setattr__(self, "_lengths", lengths)
        return lengths

    def payload_length_range(self) -> tuple[int, int]:
        """The shortest and the longest payload (``(0, 0)`` without records), computed
        once per chunk unless its builder already knew them (:meth:`knowing_lengths`):
        what a decoder of fixed-size records checks."""
        known = self._length_range
        if known is None:
            lengths = self.payload_lengths()
            known = (int(lengths.min()), int(lengths.max())) if lengths.size else (0, 0)
            object.__setattr__(self, "_length_range", known)
        return known

    def knowing_lengths(self, shortest: int, longest: int) -> RecordColumns:
        """This chunk, told its shortest and longest payload by the code that built it
        (the C column builder sees every length anyway); returns ``self``."""
        object.__setattr__(self, "_length_range", (shortest, longest))
        return self

    def offset_ranges(self) -> list[OffsetRun]:
        """The chunk's :func:`offset_runs` (record order), computed once per chunk.

        This is what the offset tracker is told. The runs cover exactly the chunk's
        records, split wherever offsets skip (compaction, transaction markers) or repeat.
        The consumer tells the tracker when it hands a chunk out, and again when the
        chunk is acknowledged.
        """
        ranges = self._ranges
        if ranges is None:
            ranges = offset_runs(self.partitions, self.offsets)
            object.__setattr__(self, "_ranges", ranges)
        return list(ranges)

    def value(self, i: int) -> bytes:
        """The payload of record ``i``."""
        return self.payloads[int(self.payload_bounds[i]) : int(self.payload_bounds[i + 1])]

    def values(self) -> Iterator[bytes]:
        view = memoryview(self.payloads)
        bounds = self.payload_bounds.tolist()
        for start, end in itertools.pairwise(bounds):
            yield bytes(view[start:end])

    def without(self, topic: str, partitions: Collection[int]) -> RecordColumns:
        """The records not in ``topic``'s ``partitions`` (``self`` itself when none is)."""
        if self.topic != topic or not partitions or not len(self):
            return self
        wanted = np.fromiter(partitions, dtype=np.int64, count=len(partitions))
        doomed = np.isin(self.partitions, wanted)
        if not doomed.any():
            return self
        return self.take(np.flatnonzero(~doomed))

    def omit(self, index: NDArray[np.intp]) -> RecordColumns:
        """The records not at ``index`` (what :meth:`take` leaves), in their order."""
        keep = np.ones(len(self), dtype=bool)
        keep[index] = False
        return self.take(np.flatnonzero(keep))

    def take(self, index: NDArray[np.intp] | slice) -> RecordColumns:
        """The records at ``index`` (a slice or an index array), payloads re-packed."""
        picked = np.arange(len(self))[index]
        starts, ends = self.payload_bounds[picked], self.payload_bounds[picked + 1]
        if isinstance(index, slice) and index.step in (None, 1) and picked.size:
            lo, hi = int(starts[0]), int(ends[-1])
            payloads = self.payloads[lo:hi]
            bounds = np.concatenate([[0], ends - lo]).astype(np.int64)
        else:
            view = memoryview(self.payloads)
            payloads = b"".join(
                view[s:e] for s, e in zip(starts.tolist(), ends.tolist(), strict=True)
            )
            bounds = payload_bounds(ends - starts)
        return RecordColumns(
            self.topic,
            self.partitions[picked],
            self.offsets[picked],
            self.timestamps_ms[picked],
            payloads,
            bounds,
            self.forwarded,
            None if self.lease_ids is None else self.lease_ids[picked],
        )


def drop_partitions(
    chunks: Iterable[RecordColumns], topic: str, partitions: set[int]
) -> tuple[collections.deque[RecordColumns], int]:
    """``chunks`` without the records of ``topic``'s ``partitions``, and how many went."""
    kept: collections.deque[RecordColumns] = collections.deque()
    dropped = 0
    for chunk in chunks:
        rest = chunk.without(topic, partitions)
        dropped += len(chunk) - len(rest)
        if len(rest):
            kept.append(rest)
    return kept, dropped
