"""The control app's history that survives a restart: what is written, kept and read back.

Owned here (pure: the tables are any mutable string mappings; the app passes Faust
tables with changelogs, tests pass dicts). Keys are
:mod:`streamtrain.lag.history_keys`; values are JSON (HWM snapshots, group summaries)
or a float's ``repr`` (arrival rates).

* Messages for the internal history topic: :func:`hwm_message` (a topic's HWMs, per
  ``history_step_s`` step), :func:`lag_message` (a group's summary) and
  :func:`arrival_message` (a complete arrival step of the planner).
* :class:`HistoryTables`: the agent's side. :meth:`~HistoryTables.keep` stores one
  message in its table (``hwm_history``, ``lag_history``: ``name|step``;
  ``arrival_history``: ``group|step``). HWM and lag steps older than ``max_age_s`` are
  pruned from the table just written to, and from :attr:`~HistoryTables.group_history`
  (the in-memory per-group steps the ``/groups/{group}/lag`` page lists); the arrival
  steps of the planner's group are kept for ``max_arrival_steps`` steps after the
  newest. A malformed key or value is logged and skipped.
* Reading back after recovery: :meth:`~HistoryTables.hwm_points` (for the monitor's
  restore), :meth:`~HistoryTables.restore_group_history` and
  :meth:`~HistoryTables.arrival_steps` (for the planner's restore).
"""

from __future__ import annotations

import json
import logging
from collections.abc import MutableMapping
from typing import Any

from streamtrain.lag.history_keys import (
    ArrivalKey,
    HistoryKey,
    HwmKey,
    LagKey,
    decode_message_key,
    decode_table_key,
    encode_message_key,
    encode_table_key,
)
from streamtrain.lag.monitor import GroupPoint, HwmPoint, history_step

__all__ = ["HistoryTables", "arrival_message", "hwm_message", "lag_message"]

log = logging.getLogger(__name__)

Table = MutableMapping[str, str]
GroupHistory = dict[str, dict[int, dict[str, Any]]]


def hwm_message(point: HwmPoint, step_s: float) -> tuple[str, str]:
    """``(key, value)`` of a topic's HWM snapshot on the history topic."""
    key = HwmKey(point.topic, history_step(point.at_s, step_s))
    value = {"topic": point.topic, "at_s": point.at_s, "hwms": list(point.hwms)}
    return encode_message_key(key), json.dumps(value)


def lag_message(point: GroupPoint, step_s: float) -> tuple[str, str]:
    """``(key, value)`` of a group's step summary on the history topic."""
    key = LagKey(point.group, history_step(point.at_s, step_s))
    value = {
        "group": point.group,
        "at_s": point.at_s,
        "total_lag_records": point.total_lag_records,
        "max_lag_s": point.max_lag_s,
        "p99_lag_s": point.p99_lag_s,
        "records_per_s": point.records_per_s,
        "status": point.status,
    }
    return encode_message_key(key), json.dumps(value)


def arrival_message(group: str, step: int, records_per_s: float) -> tuple[str, str]:
    """``(key, value)`` of one complete arrival step on the history topic."""
    return encode_message_key(ArrivalKey(group, step)), repr(records_per_s)


def _json_object(key: HistoryKey, value: str) -> dict[str, Any] | None:
    try:
        point = json.loads(value)
    except ValueError as exc:
        log.warning("skipping a malformed history entry %r: %s", encode_table_key(key), exc)
        return None
    if not isinstance(point, dict):
        log.warning("skipping a malformed history entry %r: not an object", encode_table_key(key))
        return None
    return point


class HistoryTables:
    """See the module docstring."""

    def __init__(
        self,
        hwm: Table,
        lag: Table,
        arrivals: Table,
        *,
        step_s: float,
        max_age_s: float,
        planner_group: str | None = None,
        max_arrival_steps: int = 0,
    ) -> None:
        self.hwm, self.lag, self.arrivals = hwm, lag, arrivals
        self.step_s, self.max_age_s = step_s, max_age_s
        self.planner_group, self.max_arrival_steps = planner_group, max_arrival_steps
        self.group_history: GroupHistory = {}

    def keep(self, message_key: str, value: str, now_s: float) -> None:
        """Store one history-topic message (see the module docstring)."""
        key = decode_message_key(message_key)
        if key is None:
            return
        if isinstance(key, ArrivalKey):
            self._keep_arrival(key, value)
            return
        table = self.hwm if isinstance(key, HwmKey) else self.lag
        table[encode_table_key(key)] = value
        if isinstance(key, LagKey):
            point = _json_object(key, value)
            if point is not None:
                self.group_history.setdefault(key.group, {})[key.step] = point
        oldest = history_step(now_s - self.max_age_s, self.step_s)
        kind = type(key)
        for stale in [k for k in table if _step_of(kind, k, default=oldest) < oldest]:
            del table[stale]
        for history in self.group_history.values():
            for step in [s for s in history if s < oldest]:
                del history[step]

    def _keep_arrival(self, key: ArrivalKey, value: str) -> None:
        self.arrivals[encode_table_key(key)] = value
        if key.group != self.planner_group:
            return
        oldest = key.step - self.max_arrival_steps
        for stale in [
            k
            for k in self.arrivals
            if (kept := decode_table_key(ArrivalKey, k)) is not None
            and kept.group == key.group
            and kept.step <= oldest
        ]:
            del self.arrivals[stale]

    def hwm_points(self) -> list[HwmPoint]:
        """The persisted HWM snapshots, for :meth:`~streamtrain.lag.monitor.LagMonitor.restore`."""
        points = []
        for key, value in self.hwm.items():
            try:
                raw = json.loads(value)
                points.append(HwmPoint(str(raw["topic"]), float(raw["at_s"]), tuple(raw["hwms"])))
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("skipping a malformed history entry %r: %s", key, exc)
        return points

    def restore_group_history(self) -> None:
        """Fill :attr:`group_history` from the recovered ``lag_history`` table."""
        for text, value in self.lag.items():
            key = decode_table_key(LagKey, text)
            point = None if key is None else _json_object(key, value)
            if key is not None and point is not None:
                self.group_history.setdefault(key.group, {})[key.step] = point

    def arrival_steps(self, group: str) -> dict[int, float]:
        """The persisted arrival steps of ``group`` (step -> records/s)."""
        steps: dict[int, float] = {}
        for text, value in self.arrivals.items():
            key = decode_table_key(ArrivalKey, text)
            if key is None or key.group != group:
                continue
            try:
                steps[key.step] = float(value)
            except ValueError:
                log.warning("skipping a malformed arrival step %r: %r", text, value)
        return steps


def _step_of(kind: type[HwmKey] | type[LagKey], text: str, *, default: int) -> int:
    """A table key's step; ``default`` (kept) when the key is malformed."""
    key = decode_table_key(kind, text)
    return default if key is None else key.step
