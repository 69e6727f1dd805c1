"""The Burrow-style evaluation window of one (group, topic), and the rules applied to it.

Burrow (linkedin/Burrow wiki, "Consumer Lag Evaluation Rules") judges a consumer from a
sliding window of its commits, not from a lag threshold. This module keeps such a window
per (group, topic, partition) from the offsets the control app polls each tick, vectorized
per (group, topic) with numpy (:class:`TopicWindows`), and evaluates, in this order:

* UNKNOWN: no committed offset or no HWM this tick; nothing to judge.
* REWIND (Burrow rule 2, as changed in Burrow PR #716): the committed offset went down
  within the window and has not come back to where it was. Checked before rule 1, so a
  rewind is reported even when the lag was zero a moment ago.
* OK (rule 1): the lag is zero now or was zero at some entry of the window.
* STOP / STALL (rules 3 and 4): the committed offset has not moved while there was
  something to read for longer than the window; STALL when the group moved some other
  partition's offset within the window, STOP when nothing in the group moved
  (:meth:`TopicWindows.evaluate`).
* WARN (rule 5): a full window in which the offset moves but the lag never decreases
  (a constant lag counts as not decreasing, as in Burrow).
* OK otherwise.

Status values are ordered by severity (``max`` gives the worst); they are not the
protobuf numbers (see :func:`streamtrain.lag.report.status_to_proto`).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError, SchemaError

__all__ = ["Status", "StatusSettings", "TopicObservation", "TopicWindows"]


class Status(enum.IntEnum):
    """Partition or group status, ordered by severity (names match ``PartitionStatus``)."""

    OK = 0
    UNKNOWN = 1
    WARN = 2
    STALL = 3
    STOP = 4
    REWIND = 5


@dataclass(frozen=True, slots=True)
class StatusSettings:
    """The window follows Burrow's storage: an entry per observation, but observations
    closer than ``min_distance_s`` to the newest entry overwrite it, keeping its time
    (Burrow's ``min-distance``), so ``window_entries`` entries span about
    ``window_entries · min_distance_s`` (10 entries of 60 s = 10 min by default,
    Burrow's default window with 60 s commits)."""

    window_entries: int = 10
    min_distance_s: float = 60.0
    expire_s: float = 3600.0  # forget a partition not observed for this long

    def __post_init__(self) -> None:
        if self.window_entries < 2:
            raise ConfigError(f"the status window needs >= 2 entries, got {self.window_entries}")
        if not math.isfinite(self.min_distance_s) or self.min_distance_s <= 0:
            raise ConfigError(f"min_distance_s must be positive, got {self.min_distance_s}")
        if not math.isfinite(self.expire_s) or self.expire_s <= 0:
            raise ConfigError(f"expire_s must be positive, got {self.expire_s}")

    @property
    def window_s(self) -> float:
        """How long an offset may stand still, with records waiting, before STOP or STALL."""
        return self.window_entries * self.min_distance_s


@dataclass(frozen=True, slots=True, eq=False)
class TopicObservation:
    """One tick of one group on one topic, as arrays (negative offsets: unknown)."""

    topic: str
    partitions: NDArray[np.int64]
    committed: NDArray[np.int64]
    high_watermarks: NDArray[np.int64]
    lag_records: NDArray[np.int64]
    lag_s: NDArray[np.float64]  # NaN: unknown


_INT_FIELDS = ("n_valid", "last_committed", "last_hwm", "rewind_from", "status")
_FLOAT_FIELDS = ("last_change_at", "last_move_at", "rewind_at", "last_seen_at")


class TopicWindows:
    """State of one (group, topic): a window of W rows (oldest first) per partition column."""

    def __init__(self, window: int, partitions: Sequence[int] = ()) -> None:
        self.partitions: list[int] = []
        self.columns: dict[int, int] = {}
        self.row_at: NDArray[np.float64] = np.full(window, np.nan)
        self.n_rows = 0
        self.committed: NDArray[np.int64] = np.zeros((window, 0), np.int64)
        self.lag: NDArray[np.int64] = np.zeros((window, 0), np.int64)
        self.n_valid: NDArray[np.int64] = np.zeros(0, np.int64)
        self.last_committed: NDArray[np.int64] = np.zeros(0, np.int64)
        self.last_hwm: NDArray[np.int64] = np.zeros(0, np.int64)
        self.rewind_from: NDArray[np.int64] = np.zeros(0, np.int64)
        self.status: NDArray[np.int64] = np.zeros(0, np.int64)
        self.last_change_at: NDArray[np.float64] = np.zeros(0)
        self.last_move_at: NDArray[np.float64] = np.zeros(0)
        self.rewind_at: NDArray[np.float64] = np.zeros(0)
        self.last_seen_at: NDArray[np.float64] = np.zeros(0)
        if partitions:
            self.add_columns(list(partitions))

    def add_columns(self, partitions: list[int]) -> None:
        k = len(partitions)
        for p in partitions:
            self.columns[p] = len(self.partitions)
            self.partitions.append(p)
        window = self.row_at.shape[0]
        self.committed = np.concatenate([self.committed, np.zeros((window, k), np.int64)], axis=1)
        self.lag = np.concatenate([self.lag, np.zeros((window, k), np.int64)], axis=1)
        self.n_valid = np.concatenate([self.n_valid, np.zeros(k, np.int64)])
        for name in ("last_committed", "last_hwm", "rewind_from", "status"):
            setattr(self, name, np.concatenate([getattr(self, name), np.full(k, -1, np.int64)]))
        for name in _FLOAT_FIELDS:
            setattr(self, name, np.concatenate([getattr(self, name), np.full(k, np.nan)]))

    def keep_columns(self, keep: NDArray[np.bool_]) -> None:
        self.committed = self.committed[:, keep]
        self.lag = self.lag[:, keep]
        for name in _INT_FIELDS + _FLOAT_FIELDS:
            setattr(self, name, getattr(self, name)[keep])
        self.partitions = [p for p, k in zip(self.partitions, keep.tolist(), strict=True) if k]
        self.columns = {p: i for i, p in enumerate(self.partitions)}

    def column_indices(self, partitions: list[int]) -> NDArray[np.intp]:
        if partitions == self.partitions:  # the common case: same partitions, same order
            return np.arange(len(partitions), dtype=np.intp)
        new = [p for p in partitions if p not in self.columns]
        if new:
            self.add_columns(new)
        columns = self.columns
        return np.fromiter((columns[p] for p in partitions), dtype=np.intp, count=len(partitions))

    def update(
        self, now_s: float, cols: NDArray[np.intp], obs: TopicObservation, settings: StatusSettings
    ) -> NDArray[np.bool_]:
        """Fold one observation into the state; returns which observed columns were known.
        A decreasing HWM (topic recreated) clears the partition's window."""
        known = (obs.committed >= 0) & (obs.high_watermarks >= 0) & (obs.lag_records >= 0)
        kc = cols[known]
        c = obs.committed[known]
        h = obs.high_watermarks[known]
        lh = self.last_hwm[kc]
        reset = kc[(lh >= 0) & (h < lh)]  # topic recreated or truncated: start over
        self.n_valid[reset] = 0
        self.rewind_from[reset] = -1
        self.last_committed[reset] = -1
        lc = self.last_committed[kc]
        down = (lc >= 0) & (c < lc)
        dc = kc[down]
        self.rewind_from[dc] = np.maximum(self.rewind_from[dc], lc[down])
        self.rewind_at[dc] = now_s
        rf = self.rewind_from[kc]
        over = (rf >= 0) & ((c >= rf) | (now_s - self.rewind_at[kc] > settings.window_s))
        self.rewind_from[kc[over]] = -1
        moved = (lc >= 0) & (c != lc)
        self.last_change_at[kc[moved | (lc < 0)]] = now_s
        self.last_move_at[kc[moved]] = now_s
        self.last_committed[kc] = c
        self.last_hwm[kc] = h
        self.last_seen_at[cols] = now_s
        window = self.row_at.shape[0]
        if self.n_rows == 0 or now_s - self.row_at[-1] >= settings.min_distance_s:
            self.committed[:-1] = self.committed[1:]
            self.lag[:-1] = self.lag[1:]
            self.row_at[:-1] = self.row_at[1:]
            self.row_at[-1] = now_s
            self.n_rows = min(self.n_rows + 1, window)
            grown = np.minimum(self.n_valid[kc] + 1, window)
            self.n_valid[:] = 0  # unobserved or unknown this tick: the window starts over
            self.n_valid[kc] = grown
        else:  # Burrow's min-distance: overwrite the newest entry, keep its time
            self.n_valid[cols[~known]] = 0
            self.n_valid[kc] = np.maximum(self.n_valid[kc], 1)
        self.committed[-1, kc] = c
        self.lag[-1, kc] = obs.lag_records[known]
        return known

    def moved_within(self, now_s: float, window_s: float) -> bool:
        with np.errstate(invalid="ignore"):
            return bool(np.any(now_s - self.last_move_at <= window_s))

    def evaluate(
        self,
        now_s: float,
        cols: NDArray[np.intp],
        known: NDArray[np.bool_],
        lag_s: NDArray[np.float64],
        group_moved: bool,
        settings: StatusSettings,
    ) -> NDArray[np.int8]:
        """The status per observed column (module docstring for the rules).

        Polling cannot see commits that repeat an offset, so STOP and STALL are told
        apart by the rest of the group (``group_moved``): STALL when the consumer is
        alive and committing elsewhere (this partition is stuck), STOP when it stopped
        committing. Burrow's known false STOP on slow partitions (Burrow #303, PR #338):
        a partition with rare traffic whose consumer commits only when a message arrives
        has its last commit long ago; a new message makes the lag non-zero and the "no
        commit for longer than the window" rule fires at once. Here the consumer is
        blamed only for the time the record at its committed offset has existed:
        ``behind_s = min(now - last move of the offset, lag_s)``, where ``lag_s`` comes
        from the HWM history (:mod:`streamtrain.lag.history`). A message that arrived
        10 s ago cannot make a partition STOP, however old the last commit is.
        """
        codes = np.full(cols.shape[0], Status.UNKNOWN, dtype=np.int8)
        kc = cols[known]
        if kc.size == 0:
            return codes
        # Every column, in order: slices (views) instead of gathers (copies).
        sel: NDArray[np.intp] | slice = kc
        if kc.size == len(self.partitions) and kc[0] == 0 and np.all(kc[1:] > kc[:-1]):
            sel = slice(None)
        window = self.row_at.shape[0]
        n_valid = self.n_valid[sel]
        lags = self.lag[:, sel]
        current_lag = lags[-1]
        rewind_from = self.rewind_from[sel]
        # Rule 2 (REWIND, PR #716): went down within the window, not recovered yet.
        rewind = (rewind_from >= 0) & (self.committed[-1, sel] < rewind_from)
        # Rule 1 (OK): lag zero now or at any entry of the window.
        zeros = lags == 0
        if int(n_valid.min()) < window:  # some windows are not full yet: mask the unfilled
            zeros &= np.arange(window)[:, None] >= (window - n_valid)[None, :]
        zero = zeros.any(axis=0)
        # Rules 3 and 4 (STOP, STALL): standing still with records waiting for longer than
        # the window, counting only the time the waiting record has existed (the fix).
        waiting = lag_s[known]
        behind_s = np.fmin(now_s - self.last_change_at[sel], waiting)  # fmin: NaN -> the other
        stuck = (current_lag > 0) & (behind_s > settings.window_s)
        result = np.full(kc.size, Status.OK, dtype=np.int8)
        # Rule 5 (WARN): a full window in which the offset moves and the lag never decreases.
        candidates = np.flatnonzero(~(rewind | zero | stuck) & (n_valid >= window))
        if candidates.size:
            offsets = self.committed[:, kc[candidates]]
            moving = (offsets[:-1] != offsets[-1]).any(axis=0)
            candidate_lags = lags[:, candidates]
            rising = (candidate_lags[1:] >= candidate_lags[:-1]).all(axis=0)
            result[candidates[moving & rising]] = Status.WARN
        result[stuck & ~zero] = Status.STALL if group_moved else Status.STOP
        result[rewind] = Status.REWIND  # before rule 1, as in PR #716
        codes[known] = result
        return codes

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "partitions": list(self.partitions),
            "row_at": _floats_out(self.row_at),
            "n_rows": self.n_rows,
            "committed": self.committed.tolist(),
            "lag": self.lag.tolist(),
        }
        for name in _INT_FIELDS:
            data[name] = getattr(self, name).tolist()
        for name in _FLOAT_FIELDS:
            data[name] = _floats_out(getattr(self, name))
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any], window: int) -> TopicWindows:
        block = cls(window)
        block.partitions = [int(p) for p in data["partitions"]]
        block.columns = {p: i for i, p in enumerate(block.partitions)}
        k = len(block.partitions)
        block.row_at = _floats_in(data["row_at"], window)
        block.n_rows = int(data["n_rows"])
        block.committed = np.asarray(data["committed"], dtype=np.int64).reshape(window, k)
        block.lag = np.asarray(data["lag"], dtype=np.int64).reshape(window, k)
        for name in _INT_FIELDS:
            setattr(block, name, np.asarray(data[name], dtype=np.int64).reshape(k))
        for name in _FLOAT_FIELDS:
            setattr(block, name, _floats_in(data[name], k))
        if not 0 <= block.n_rows <= window or np.any(block.n_valid > block.n_rows):
            raise SchemaError("status window JSON is inconsistent")
        return block


def _floats_out(values: NDArray[np.float64]) -> list[float | None]:
    return [None if math.isnan(v) else v for v in values.tolist()]


def _floats_in(values: Sequence[float | None], size: int) -> NDArray[np.float64]:
    out = np.asarray([math.nan if v is None else float(v) for v in values], dtype=np.float64)
    if out.shape != (size,):
        raise SchemaError(f"expected {size} values, got {out.shape[0]}")
    return out
