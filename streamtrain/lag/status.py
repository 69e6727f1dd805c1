"""Burrow-style consumer status per partition and group: OK, WARN, STOP, STALL, REWIND.

Owned here: :class:`StatusTracker`, which keeps the evaluation windows of many groups
(one :class:`~streamtrain.lag.window.TopicWindows` per group and topic), evaluates one
group per tick, reports status changes (so alerts fire on changes only), and
round-trips through JSON for the Faust app's changelogged table. The group's status is
its worst partition's. The rules themselves, which Burrow rule each implements, and
how Burrow's false STOP on slow partitions is avoided are documented in
:mod:`streamtrain.lag.window`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError, SchemaError
from streamtrain.lag.window import Status, StatusSettings, TopicObservation, TopicWindows

__all__ = [
    "GroupEvaluation",
    "Status",
    "StatusChange",
    "StatusSettings",
    "StatusTracker",
    "TopicObservation",
]

_JSON_VERSION = 1


@dataclass(frozen=True, slots=True)
class StatusChange:
    """A status that changed; ``topic``/``partition`` are None for the group's status.

    ``previous`` is None the first time a key is seen (reported only when not OK/UNKNOWN).
    """

    group: str
    topic: str | None
    partition: int | None
    previous: Status | None
    current: Status


@dataclass(frozen=True, slots=True, eq=False)
class GroupEvaluation:
    status: Status
    codes: tuple[NDArray[np.int8], ...]  # per observation, per partition: Status values
    changes: tuple[StatusChange, ...] = field(default=())


class StatusTracker:
    """Keeps the status windows of many groups and evaluates one group per call."""

    def __init__(self, settings: StatusSettings | None = None) -> None:
        self.settings = settings or StatusSettings()
        self._blocks: dict[tuple[str, str], TopicWindows] = {}
        self._group_status: dict[str, Status] = {}

    def group_status(self, group: str) -> Status | None:
        """The group's status at its last evaluation (None if never evaluated)."""
        return self._group_status.get(group)

    def partition_status(self, group: str, topic: str, partition: int) -> Status | None:
        block = self._blocks.get((group, topic))
        if block is None or partition not in block.columns:
            return None
        code = int(block.status[block.columns[partition]])
        return None if code < 0 else Status(code)

    def evaluate_group(
        self, group: str, now_s: float, observations: Sequence[TopicObservation]
    ) -> GroupEvaluation:
        """Fold one tick of ``group`` into its windows and evaluate every partition.

        ``observations`` hold one entry per topic; partitions the group reads that are
        missing from them start a new window when they return.
        """
        if not math.isfinite(now_s):
            raise ConfigError(f"now_s must be finite, got {now_s}")
        settings = self.settings
        seen: list[tuple[TopicWindows, NDArray[np.intp], NDArray[np.bool_]]] = []
        for obs in observations:
            parts = obs.partitions.tolist()
            if len(set(parts)) != len(parts):
                raise ConfigError(f"partition listed twice for {group!r} on {obs.topic!r}")
            block = self._blocks.get((group, obs.topic))
            if block is None:
                block = self._blocks[(group, obs.topic)] = TopicWindows(settings.window_entries)
            cols = block.column_indices(parts)
            seen.append((block, cols, block.update(now_s, cols, obs, settings)))
        self._expire(group, now_s)
        group_moved = any(
            block.moved_within(now_s, settings.window_s)
            for (g, _), block in self._blocks.items()
            if g == group
        )
        codes: list[NDArray[np.int8]] = []
        changes: list[StatusChange] = []
        worst = -1
        for obs, (block, cols, known) in zip(observations, seen, strict=True):
            result = block.evaluate(now_s, cols, known, obs.lag_s, group_moved, settings)
            codes.append(result)
            if result.size:
                worst = max(worst, int(result.max()))
            before = block.status[cols]
            differs = (before != result) & ((before >= 0) | (result > Status.UNKNOWN))
            for i in np.flatnonzero(differs).tolist():
                previous = int(before[i])
                changes.append(
                    StatusChange(
                        group,
                        obs.topic,
                        int(obs.partitions[i]),
                        None if previous < 0 else Status(previous),
                        Status(int(result[i])),
                    )
                )
            block.status[cols] = result
        status = Status.UNKNOWN if worst < 0 else Status(worst)
        before_group = self._group_status.get(group)
        if status != before_group and (before_group is not None or status > Status.UNKNOWN):
            changes.append(StatusChange(group, None, None, before_group, status))
        self._group_status[group] = status
        return GroupEvaluation(status, tuple(codes), tuple(changes))

    def _expire(self, group: str, now_s: float) -> None:
        cutoff = now_s - self.settings.expire_s
        for key in [k for k in self._blocks if k[0] == group]:
            block = self._blocks[key]
            stale = block.last_seen_at < cutoff
            if stale.all():
                del self._blocks[key]
            elif stale.any():
                block.keep_columns(~stale)

    def to_json(self) -> dict[str, Any]:
        s = self.settings
        return {
            "version": _JSON_VERSION,
            "settings": {
                "window_entries": s.window_entries,
                "min_distance_s": s.min_distance_s,
                "expire_s": s.expire_s,
            },
            "groups": {g: status.name for g, status in self._group_status.items()},
            "blocks": [
                {"group": g, "topic": t, **block.to_json()}
                for (g, t), block in self._blocks.items()
            ],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StatusTracker:
        """Rebuild a tracker written by :meth:`to_json`; :class:`SchemaError` if malformed."""
        version = data.get("version")
        if version != _JSON_VERSION:
            raise SchemaError(f"status tracker JSON version {version!r} is not supported")
        try:
            raw = data["settings"]
            settings = StatusSettings(
                window_entries=int(raw["window_entries"]),
                min_distance_s=float(raw["min_distance_s"]),
                expire_s=float(raw["expire_s"]),
            )
            tracker = cls(settings)
            for g, name in data["groups"].items():
                tracker._group_status[str(g)] = Status[name]
            for item in data["blocks"]:
                key = (str(item["group"]), str(item["topic"]))
                tracker._blocks[key] = TopicWindows.from_json(item, settings.window_entries)
        except (KeyError, TypeError, ValueError, ConfigError) as exc:
            raise SchemaError(f"malformed status tracker JSON: {exc}") from exc
        return tracker
