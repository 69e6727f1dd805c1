"""High-watermark history: when each offset of a partition appeared (KALE §2.2 lag in seconds).

Owned here:

* :class:`HwmHistory`: per topic, snapshots ``(observed_at_s, {partition: HWM})`` in a
  numpy buffer of shape (partitions, points), bounded by age and point count, with a
  JSON form so the Faust app can keep it in a changelogged table across restarts.
* :func:`interpolate_lag_s`: the vectorized lag in seconds for one group over one topic.
  The record at offset ``c`` (the next one the group reads) was produced when the HWM
  first exceeded ``c``, i.e. reached ``c + 1``; that moment is interpolated linearly
  between the two snapshots around it and the lag is ``now - that moment``. This is the
  sojourn time of the oldest waiting record, KALE's lag. (kafka-lag-exporter interpolates
  the moment the HWM *was* ``c``, one record earlier.)
* :func:`records_per_s` and :func:`partition_rates`: CPS per topic and per partition, by
  differencing HWMs over a window (default 60 s), computed once per snapshot and shared
  by every group reading the topic.

No I/O, no clocks: callers pass times in seconds.
"""

from __future__ import annotations

import base64
import logging
import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from streamtrain.errors import ConfigError, SchemaError

__all__ = [
    "HwmHistory",
    "TopicRate",
    "interpolate_lag_s",
    "partition_rates",
    "records_per_s",
]

logger = logging.getLogger(__name__)

_JSON_VERSION = 1
_UNKNOWN = -1  # an HWM or offset that is not known


class _TopicBuffer:
    """Snapshots ``[lo, hi)`` of ``times`` and ``hwms[partition column]``, oldest first.

    ``hwms`` is (partitions, capacity): each partition's history is contiguous, which
    keeps the binary searches of :func:`interpolate_lag_s` cache-friendly.
    """

    __slots__ = ("columns", "hi", "hwms", "last_seen_s", "lo", "partitions", "rates", "times")

    def __init__(self, capacity: int, partitions: Sequence[int]) -> None:
        self.times: NDArray[np.float64] = np.zeros(capacity, dtype=np.float64)
        self.hwms: NDArray[np.int64] = np.full((len(partitions), capacity), _UNKNOWN, np.int64)
        self.lo = 0
        self.hi = 0
        self.partitions: list[int] = list(partitions)
        self.columns: dict[int, int] = {p: i for i, p in enumerate(self.partitions)}
        self.last_seen_s: NDArray[np.float64] = np.full(len(partitions), -math.inf)
        self.rates: dict[float, NDArray[np.float64]] = {}  # window_s -> CPS per column

    def all_rates(self, window_s: float) -> NDArray[np.float64]:
        """CPS of every column over ``window_s``, computed once per snapshot and window."""
        cached = self.rates.get(window_s)
        if cached is not None:
            return cached
        rates = np.full(len(self.partitions), np.nan)
        if self.size >= 2:
            times = self.times[self.lo : self.hi]
            t_new = float(times[-1])
            start = min(int(np.searchsorted(times, t_new - window_s, side="left")), self.size - 2)
            block = self.hwms[:, self.lo + start : self.hi]  # (partitions, snapshots)
            valid = block >= 0
            first = np.argmax(valid, axis=1)  # known snapshots are a suffix of each column
            base = block[np.arange(block.shape[0]), first]
            elapsed = t_new - times[start + first]
            with np.errstate(divide="ignore", invalid="ignore"):
                rates = np.where(
                    valid[:, -1] & (elapsed > 0), (block[:, -1] - base) / elapsed, np.nan
                )
        self.rates[window_s] = rates
        return rates

    @property
    def size(self) -> int:
        return self.hi - self.lo

    def column_indices(self, partitions: list[int]) -> NDArray[np.intp]:
        if partitions == self.partitions:  # the common case: same partitions, same order
            return np.arange(len(partitions), dtype=np.intp)
        get = self.columns.get
        return np.fromiter((get(p, _UNKNOWN) for p in partitions), dtype=np.intp)

    def add_columns(self, partitions: Sequence[int]) -> None:
        for p in partitions:
            self.columns[p] = len(self.partitions)
            self.partitions.append(p)
        extra = np.full((len(partitions), self.times.shape[0]), _UNKNOWN, np.int64)
        self.hwms = np.concatenate([self.hwms, extra], axis=0)
        self.last_seen_s = np.concatenate([self.last_seen_s, np.full(len(partitions), -math.inf)])

    def keep_columns(self, keep: NDArray[np.bool_]) -> None:
        self.hwms = np.ascontiguousarray(self.hwms[keep])
        self.last_seen_s = self.last_seen_s[keep]
        self.partitions = [p for p, k in zip(self.partitions, keep.tolist(), strict=True) if k]
        self.columns = {p: i for i, p in enumerate(self.partitions)}

    def push(self, at_s: float, row: NDArray[np.int64]) -> None:
        if self.hi == self.times.shape[0]:  # out of room: move the live rows to the front
            n = self.size
            self.times[:n] = self.times[self.lo : self.hi]
            self.hwms[:, :n] = self.hwms[:, self.lo : self.hi]
            self.lo, self.hi = 0, n
        self.times[self.hi] = at_s
        self.hwms[:, self.hi] = row
        self.hi += 1


class HwmHistory:
    """HWM snapshots per topic, bounded by ``max_age_s`` and ``max_points`` per topic.

    Call :meth:`record` once per tick and topic, before computing the tick's lags; the
    history is shared by every group that reads the topic.

    Invariants. A partition's row holds ``-1`` where its history is not known (before it
    was first seen, or before its HWM went down) and is non-decreasing after that, so a
    binary search finds where any offset appeared. A decreasing HWM means the topic was
    recreated or truncated: that partition's history is dropped. A partition missing
    from a snapshot keeps its previous value (a lower bound; the column stays
    monotonic); one missing for longer than ``max_age_s`` is forgotten. A snapshot older
    than the newest one (the clock went back) restarts the topic's history. The newest
    snapshot at least ``max_age_s`` old is kept as an anchor, so the history spans the
    whole ``max_age_s`` once it is that old.
    """

    def __init__(self, *, max_age_s: float = 3600.0, max_points: int = 1000) -> None:
        if not math.isfinite(max_age_s) or max_age_s <= 0:
            raise ConfigError(f"max_age_s must be positive, got {max_age_s}")
        if max_points < 2:
            raise ConfigError(f"max_points must be at least 2, got {max_points}")
        self.max_age_s = float(max_age_s)
        self.max_points = int(max_points)
        self._topics: dict[str, _TopicBuffer] = {}

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(self._topics)

    def points(self, topic: str) -> int:
        """How many snapshots are held for ``topic`` (0 when unknown)."""
        buf = self._topics.get(topic)
        return 0 if buf is None else buf.size

    def snapshots(self, topic: str, partition: int) -> list[tuple[float, int]]:
        """``(observed_at_s, hwm)`` of one partition where known, oldest first (for debugging)."""
        buf = self._topics.get(topic)
        if buf is None or partition not in buf.columns:
            return []
        col = buf.columns[partition]
        times = buf.times[buf.lo : buf.hi].tolist()
        hwms = buf.hwms[col, buf.lo : buf.hi].tolist()
        return [(t, h) for t, h in zip(times, hwms, strict=True) if h != _UNKNOWN]

    def record(self, topic: str, observed_at_s: float, hwms: Mapping[int, int]) -> None:
        """Add the snapshot ``{partition: HWM}`` of ``topic`` taken at ``observed_at_s``."""
        if not math.isfinite(observed_at_s):
            raise ConfigError(f"observed_at_s must be finite, got {observed_at_s}")
        parts = [int(p) for p in hwms]
        values = np.fromiter(hwms.values(), dtype=np.int64, count=len(parts))
        if parts and (min(parts) < 0 or int(values.min()) < 0):
            raise ConfigError(f"partitions and high watermarks of {topic!r} must be >= 0")
        buf = self._topics.get(topic)
        if buf is not None and buf.size and observed_at_s < buf.times[buf.hi - 1]:
            logger.warning(
                "HWM snapshot of %r at %.3f s is older than the last one (%.3f s): the clock "
                "went back; restarting the topic's history",
                topic,
                observed_at_s,
                float(buf.times[buf.hi - 1]),
            )
            buf = None
        if buf is None:
            capacity = self.max_points + max(8, self.max_points // 4)
            buf = self._topics[topic] = _TopicBuffer(capacity, sorted(parts))
        new = [p for p in parts if p not in buf.columns]
        if new:
            buf.add_columns(new)
        cols = buf.column_indices(parts)
        if buf.size:
            row = buf.hwms[:, buf.hi - 1].copy()
        else:
            row = np.full(len(buf.partitions), _UNKNOWN, np.int64)
        previous = row[cols]
        went_down = (previous != _UNKNOWN) & (values < previous)
        if went_down.any():
            reset = cols[went_down]
            logger.info(
                "HWM of %r went down on partitions %s (topic recreated or truncated): "
                "dropping their history",
                topic,
                [buf.partitions[c] for c in reset.tolist()],
            )
            buf.hwms[reset, buf.lo : buf.hi] = _UNKNOWN
            row[reset] = _UNKNOWN
        row[cols] = values
        if buf.size and observed_at_s == buf.times[buf.hi - 1]:
            buf.hwms[:, buf.hi - 1] = row  # the same instant again: the newer reading wins
        else:
            buf.push(observed_at_s, row)
        buf.last_seen_s[cols] = observed_at_s
        self._prune(buf, observed_at_s)
        buf.rates.clear()

    def _prune(self, buf: _TopicBuffer, now_s: float) -> None:
        cutoff = now_s - self.max_age_s
        older = int(np.searchsorted(buf.times[buf.lo : buf.hi], cutoff, side="right"))
        drop = max(older - 1, buf.size - self.max_points, 0)  # keep one anchor row
        buf.lo += drop
        stale = buf.last_seen_s < cutoff
        if stale.any():
            buf.keep_columns(~stale)

    # -- persistence -------------------------------------------------------------------

    def to_json(self, *, stride: int = 1) -> dict[str, Any]:
        """A JSON-compatible dict; the HWM matrix is zlib-compressed row deltas, base64.

        ``stride`` > 1 keeps every stride-th snapshot counting back from the newest, to
        keep a changelog message small (interpolation gets coarser, nothing else changes).
        """
        if stride < 1:
            raise ConfigError(f"stride must be at least 1, got {stride}")
        topics: dict[str, Any] = {}
        for topic, buf in self._topics.items():
            keep = np.arange(buf.hi - 1, buf.lo - 1, -stride)[::-1]
            matrix = buf.hwms[:, keep].T  # one row per snapshot
            deltas = np.diff(matrix, axis=0, prepend=np.zeros((1, matrix.shape[1]), np.int64))
            packed = zlib.compress(deltas.astype("<i8").tobytes(), 6)
            topics[topic] = {
                "times_s": buf.times[keep].tolist(),
                "partitions": list(buf.partitions),
                "last_seen_s": [None if math.isinf(t) else t for t in buf.last_seen_s.tolist()],
                "hwm_deltas": base64.b64encode(packed).decode("ascii"),
            }
        return {
            "version": _JSON_VERSION,
            "max_age_s": self.max_age_s,
            "max_points": self.max_points,
            "topics": topics,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HwmHistory:
        """Rebuild a history written by :meth:`to_json`; :class:`SchemaError` if malformed."""
        version = data.get("version")
        if version != _JSON_VERSION:
            raise SchemaError(f"HWM history JSON version {version!r} is not supported")
        try:
            history = cls(max_age_s=float(data["max_age_s"]), max_points=int(data["max_points"]))
            for topic, item in data["topics"].items():
                history._topics[str(topic)] = _buffer_from_json(item, history.max_points)
        except (KeyError, TypeError, ValueError, AttributeError, ConfigError, zlib.error) as exc:
            raise SchemaError(f"malformed HWM history JSON: {exc}") from exc
        return history


def _buffer_from_json(item: Mapping[str, Any], max_points: int) -> _TopicBuffer:
    partitions = [int(p) for p in item["partitions"]]
    times = np.asarray(item["times_s"], dtype=np.float64).reshape(-1)
    raw = zlib.decompress(base64.b64decode(item["hwm_deltas"], validate=True))
    deltas = np.frombuffer(raw, dtype="<i8").astype(np.int64)
    matrix = np.cumsum(deltas.reshape(times.shape[0], len(partitions)), axis=0)
    seen = [-math.inf if t is None else float(t) for t in item["last_seen_s"]]
    if len(seen) != len(partitions) or np.any(np.diff(times) < 0):
        raise ValueError("times go backwards or partitions and last_seen_s differ in length")
    n = min(times.shape[0], max_points)
    buf = _TopicBuffer(max_points + max(8, max_points // 4), partitions)
    buf.times[:n] = times[times.shape[0] - n :]
    buf.hwms[:, :n] = matrix[matrix.shape[0] - n :].T
    buf.hi = n
    buf.last_seen_s = np.asarray(seen, dtype=np.float64)
    return buf


def interpolate_lag_s(
    history: HwmHistory,
    topic: str,
    partitions: ArrayLike,
    committed: ArrayLike,
    now_s: float,
    *,
    high_watermarks: ArrayLike | None = None,
) -> NDArray[np.float64]:
    """Lag in seconds of each ``committed`` offset (the next record to read) of ``topic``.

    Vectorized over partitions: one group over one topic. Returns ``0.0`` where the
    offset is at or past the HWM (caught up, however long the partition has been idle)
    and NaN where it cannot be said from the history: no commit (a negative offset), an
    unknown partition, or an offset older than the oldest snapshot (the caller then reads
    that record's timestamp; see :func:`streamtrain.lag.metrics.lag_s_from_timestamp`).

    ``high_watermarks`` are the current HWMs (negative: unknown). When given, an offset
    that the newest snapshot does not cover yet is interpolated between that snapshot and
    ``(now_s, current HWM)``; without them the newest snapshot is taken as current.
    """
    parts = np.asarray(partitions, dtype=np.int64).reshape(-1)
    offs = np.asarray(committed, dtype=np.int64).reshape(-1)
    if parts.shape != offs.shape:
        raise ConfigError("partitions and committed offsets must have the same length")
    if not math.isfinite(now_s):
        raise ConfigError(f"now_s must be finite, got {now_s}")
    out = np.full(offs.shape[0], np.nan)
    given = None
    if high_watermarks is not None:
        given = np.asarray(high_watermarks, dtype=np.int64).reshape(-1)
        if given.shape != offs.shape:
            raise ConfigError("high watermarks and committed offsets must have the same length")
        out[(offs >= 0) & (given >= 0) & (offs >= given)] = 0.0
    buf = history._topics.get(topic)
    if buf is None or buf.size == 0 or not buf.partitions:
        return out
    n = buf.size
    cols = buf.column_indices(parts.tolist())
    last = np.where(cols >= 0, buf.hwms[np.maximum(cols, 0), buf.hi - 1], _UNKNOWN)
    current = last if given is None else np.where(given >= 0, given, last)
    out[(offs >= 0) & (current >= 0) & (offs >= current)] = 0.0
    ask = np.flatnonzero((cols >= 0) & (offs >= 0) & (current > offs))
    if ask.size == 0:
        return out
    c = offs[ask]
    flat = buf.hwms.reshape(-1)
    base = cols[ask] * buf.hwms.shape[1] + buf.lo - 1  # + k: the k-th snapshot's HWM (k >= 1)
    # count[i] = how many snapshots have HWM <= c[i]: a branchless binary search (columns
    # are non-decreasing, unknown = -1 first). Snapshot `count` is the first above c.
    count = np.zeros(ask.size, dtype=np.int64)
    step = 1 << (n.bit_length() - 1)
    while step:
        candidate = np.minimum(count + step, n)
        count = np.where(flat[base + candidate] <= c, candidate, count)
        step >>= 1
    times = buf.times
    # Between snapshots count-1 (HWM <= c) and count (HWM > c); past the newest snapshot,
    # between it and (now, current HWM). Unknown where snapshot count-1 is not known.
    h0 = np.where(count > 0, flat[base + np.maximum(count, 1)], _UNKNOWN)
    t0 = times[buf.lo + np.maximum(count - 1, 0)]
    beyond = count == n
    k1 = np.minimum(count + 1, n)
    h1 = np.where(beyond, current[ask], flat[base + k1])
    t1 = np.where(beyond, max(now_s, float(times[buf.hi - 1])), times[buf.lo + k1 - 1])
    with np.errstate(divide="ignore", invalid="ignore"):
        produced = t0 + (c + 1 - h0) / (h1 - h0) * (t1 - t0)
    out[ask] = np.where(h0 >= 0, np.maximum(now_s - produced, 0.0), np.nan)
    return out


@dataclass(frozen=True, slots=True)
class TopicRate:
    """CPS of one topic: the sum over partitions with a known rate, and each partition's."""

    topic: str
    records_per_s: float | None
    partitions: Mapping[int, float | None]


def partition_rates(
    history: HwmHistory, topic: str, partitions: ArrayLike, *, window_s: float = 60.0
) -> NDArray[np.float64]:
    """Records/s per partition over the last ``window_s`` of history (NaN: unknown).

    The rate is the HWM difference between the newest snapshot and the oldest one within
    ``window_s`` of it, over their time difference. A shorter history uses what exists; a
    window holding only the newest snapshot uses the one before it; a partition with a
    single known point (new, or reset by a decreasing HWM) has no rate.
    """
    if not math.isfinite(window_s) or window_s <= 0:
        raise ConfigError(f"the CPS window must be positive, got {window_s}")
    parts = np.asarray(partitions, dtype=np.int64).reshape(-1)
    out = np.full(parts.shape[0], np.nan)
    buf = history._topics.get(topic)
    if buf is None or buf.size < 2:
        return out
    cols = buf.column_indices(parts.tolist())
    known = cols >= 0
    out[known] = buf.all_rates(float(window_s))[cols[known]]
    return out


def records_per_s(history: HwmHistory, topic: str, *, window_s: float = 60.0) -> TopicRate:
    """CPS of each partition of ``topic`` in the history and their sum (see partition_rates)."""
    buf = history._topics.get(topic)
    partitions = [] if buf is None else list(buf.partitions)
    rates = partition_rates(history, topic, partitions, window_s=window_s)
    by_partition = {
        p: (None if math.isnan(r) else r) for p, r in zip(partitions, rates.tolist(), strict=True)
    }
    known = [r for r in by_partition.values() if r is not None]
    return TopicRate(topic, math.fsum(known) if known else None, by_partition)
