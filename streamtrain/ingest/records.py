"""The columnar record chunk the data plane passes around (consumer → shuffle → trainer).

Owned here: :class:`RecordColumns`, records of one topic as parallel arrays plus one
concatenated payload buffer. It is what the consumer hands out, what the shuffle layer
queues and forwards (it maps one-to-one onto the ``RecordBatch`` protobuf), and what a
decoder turns into feature columns. Payloads are addressed by ``payload_bounds``
(``n + 1`` increasing offsets into ``payloads``), so slicing a chunk copies no payload
bytes until it is sent.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError

__all__ = ["RecordColumns"]

_MAX_UNSORTED_RUNS = 64  # more runs than this in record order: sort by partition first

try:  # the optional C extension (setup.py); numpy does the same, slower on small chunks
    from streamtrain.ingest._columns import offset_runs as _c_offset_runs
except ImportError:  # pragma: no cover - built wherever a C compiler was found
    _c_offset_runs = None  # type: ignore[assignment]


@dataclass(frozen=True, slots=True, eq=False)
class RecordColumns:
    """``n`` records of ``topic``: partition, offset and timestamp (ms) per record.

    ``forwarded`` is set on records a peer forwarded to this worker; they are never
    forwarded again (KALE §3.5). The arrays are not to be changed once built (the
    offset runs are computed once and kept).
    """

    topic: str
    partitions: NDArray[np.int32]
    offsets: NDArray[np.int64]
    timestamps_ms: NDArray[np.int64]
    payloads: bytes
    payload_bounds: NDArray[np.int64]
    forwarded: bool = False
    _ranges: list[tuple[int, int, int]] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    _lengths: NDArray[np.int64] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        n = self.offsets.shape[0] if self.offsets.ndim == 1 else -1
        if (
            n < 0
            or self.partitions.shape != (n,)
            or self.timestamps_ms.shape != (n,)
            or self.payload_bounds.shape != (n + 1,)
        ):
            raise ConfigError(
                "record columns must be 1-D: partitions, offsets and timestamps of one "
                "length n, payload_bounds of n + 1"
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
        bounds = np.zeros(len(values) + 1, dtype=np.int64)
        np.cumsum([len(v) for v in values], out=bounds[1:])
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
        """One chunk of ``chunks`` in order; all must share topic and ``forwarded``."""
        if not chunks:
            raise ConfigError("concat needs at least one chunk")
        first = chunks[0]
        if len(chunks) == 1:
            return first
        if any(c.topic != first.topic or c.forwarded != first.forwarded for c in chunks):
            raise ConfigError("only chunks of one topic and one forwarded flag can be joined")
        lengths = np.concatenate([c.payload_lengths() for c in chunks])
        bounds = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
        np.cumsum(lengths, out=bounds[1:])
        return cls(
            first.topic,
            np.concatenate([c.partitions for c in chunks]),
            np.concatenate([c.offsets for c in chunks]),
            np.concatenate([c.timestamps_ms for c in chunks]),
            b"".join(c.payloads for c in chunks),
            bounds,
            first.forwarded,
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

    def offset_ranges(self) -> list[tuple[int, int, int]]:
        """``(partition, first_offset, last_offset)`` runs of consecutive offsets, inclusive.

        This is what the offset tracker is told. The runs cover exactly the chunk's
        records, split wherever offsets skip (compaction, transaction markers) or repeat.
        They follow record order (``consume()`` delivers long per-partition stretches,
        so that is a few runs, found without sorting); a chunk that interleaves
        partitions finely is sorted first, giving at most one run per partition and gap.
        Computed once per chunk: the consumer tells the tracker when it hands a chunk
        out, and again when the chunk is acknowledged.
        """
        ranges = self._ranges
        if ranges is None:
            ranges = self._offset_ranges()
            object.__setattr__(self, "_ranges", ranges)
        return list(ranges)

    def _offset_ranges(self) -> list[tuple[int, int, int]]:
        n = len(self)
        if n == 0:
            return []
        parts, offs = self.partitions, self.offsets
        if (
            _c_offset_runs is not None
            and parts.dtype == np.int32
            and offs.dtype == np.int64
            and parts.flags.c_contiguous
            and offs.flags.c_contiguous
        ):
            runs: list[tuple[int, int, int]] | None = _c_offset_runs(
                parts, offs, _MAX_UNSORTED_RUNS
            )
            if runs is not None:
                return runs
        breaks = np.flatnonzero((parts[1:] != parts[:-1]) | (offs[1:] - offs[:-1] != 1)) + 1
        if breaks.size > _MAX_UNSORTED_RUNS:
            order = np.argsort(parts, kind="stable")
            parts, offs = parts[order], offs[order]
            breaks = np.flatnonzero((parts[1:] != parts[:-1]) | (offs[1:] - offs[:-1] != 1)) + 1
        starts = np.empty(breaks.size + 1, dtype=np.intp)
        starts[0] = 0
        starts[1:] = breaks
        ends = np.empty_like(starts)
        ends[:-1] = breaks - 1
        ends[-1] = n - 1
        return list(
            zip(
                parts[starts].tolist(),
                offs[starts].tolist(),
                offs[ends].tolist(),
                strict=True,
            )
        )

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
            bounds = np.zeros(picked.size + 1, dtype=np.int64)
            np.cumsum(ends - starts, out=bounds[1:])
        return RecordColumns(
            self.topic,
            self.partitions[picked],
            self.offsets[picked],
            self.timestamps_ms[picked],
            payloads,
            bounds,
            self.forwarded,
        )
