"""SLO states on lag seconds, with hysteresis, so alerts fire on changes only.

KALE §4.1 counts lag over 20 minutes as an SLO violation; that is the default here
(``violation_s = 1200``, violated when lag_s > 1200). An optional warning threshold sits
below it. Hysteresis: a state is entered when lag_s goes above its threshold and left
only when lag_s falls below ``clear_ratio`` times it (default 0.8: a violation entered
above 1200 s clears below 960 s), so a lag hovering around a threshold does not flap.

:class:`SloTracker` keeps one state per key ``(group, topic, partition)``; a group-wide
key has topic and partition None. :meth:`SloTracker.update` returns a transition only
when the state changes. An unknown lag (None) leaves the state as it is: no made-up
numbers, no made-up recoveries.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from streamtrain.errors import ConfigError, SchemaError

if TYPE_CHECKING:
    from streamtrain.lag.metrics import GroupLag

__all__ = ["SloKey", "SloSettings", "SloState", "SloTracker", "SloTransition"]

_JSON_VERSION = 1

SloKey = tuple[str, str | None, int | None]  # (group, topic, partition)


class SloState(enum.IntEnum):
    """Ordered by severity."""

    OK = 0
    WARNING = 1
    VIOLATION = 2


@dataclass(frozen=True, slots=True)
class SloSettings:
    violation_s: float = 1200.0
    warning_s: float | None = None
    clear_ratio: float = 0.8

    def __post_init__(self) -> None:
        if not math.isfinite(self.violation_s) or self.violation_s <= 0:
            raise ConfigError(f"the SLO violation threshold must be > 0, got {self.violation_s}")
        if self.warning_s is not None and not 0 < self.warning_s < self.violation_s:
            raise ConfigError(
                f"the SLO warning threshold must be in (0, {self.violation_s}), "
                f"got {self.warning_s}"
            )
        if not 0 < self.clear_ratio <= 1:
            raise ConfigError(f"clear_ratio must be in (0, 1], got {self.clear_ratio}")

    def threshold_s(self, state: SloState) -> float | None:
        """The lag above which ``state`` is entered (None: the state has no threshold)."""
        if state is SloState.VIOLATION:
            return self.violation_s
        if state is SloState.WARNING:
            return self.warning_s
        return None

    def next_state(self, current: SloState, lag_s: float) -> SloState:
        """Enter the highest state whose threshold lag_s exceeds; keep any state up to
        ``current`` whose clear level (``clear_ratio`` · threshold) lag_s has not gone below."""
        entered = SloState.OK
        held = SloState.OK
        for state in (SloState.WARNING, SloState.VIOLATION):
            threshold = self.threshold_s(state)
            if threshold is None:
                continue
            if lag_s > threshold:
                entered = state
            if state <= current and lag_s >= self.clear_ratio * threshold:
                held = state
        return max(entered, held)


@dataclass(frozen=True, slots=True)
class SloTransition:
    key: SloKey
    previous: SloState
    current: SloState
    lag_s: float
    at_s: float


class SloTracker:
    """SLO state per key; new keys start OK."""

    def __init__(self, settings: SloSettings | None = None) -> None:
        self.settings = settings or SloSettings()
        self._states: dict[SloKey, SloState] = {}

    def state(self, key: SloKey) -> SloState:
        return self._states.get(key, SloState.OK)

    def forget(self, key: SloKey) -> None:
        self._states.pop(key, None)

    def update(self, key: SloKey, lag_s: float | None, now_s: float) -> SloTransition | None:
        """Feed one lag reading; the transition if the state changed, else None."""
        if lag_s is None:
            return None
        if math.isnan(lag_s) or lag_s < 0:
            raise ConfigError(f"lag_s must be a non-negative number or None, got {lag_s}")
        previous = self._states.get(key, SloState.OK)
        current = self.settings.next_state(previous, lag_s)
        if current is previous:
            return None
        if current is SloState.OK:
            del self._states[key]
        else:
            self._states[key] = current
        return SloTransition(key, previous, current, lag_s, now_s)

    def update_group(
        self, group_lag: GroupLag, *, per_partition: bool = False
    ) -> list[SloTransition]:
        """Feed a tick: the group's max lag_s (key ``(group, None, None)``) and, if asked,
        each partition's lag_s."""
        at_s = group_lag.observed_at_s
        transitions = []
        moved = self.update((group_lag.group, None, None), group_lag.max_lag_s, at_s)
        if moved is not None:
            transitions.append(moved)
        if per_partition:
            for p in group_lag.partitions:
                moved = self.update((group_lag.group, p.topic, p.partition), p.lag_s, at_s)
                if moved is not None:
                    transitions.append(moved)
        return transitions

    def to_json(self) -> dict[str, Any]:
        s = self.settings
        return {
            "version": _JSON_VERSION,
            "settings": {
                "violation_s": s.violation_s,
                "warning_s": s.warning_s,
                "clear_ratio": s.clear_ratio,
            },
            "states": [[g, t, p, state.name] for (g, t, p), state in self._states.items()],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SloTracker:
        """Rebuild a tracker written by :meth:`to_json`; :class:`SchemaError` if malformed."""
        version = data.get("version")
        if version != _JSON_VERSION:
            raise SchemaError(f"SLO tracker JSON version {version!r} is not supported")
        try:
            raw = data["settings"]
            warning = raw["warning_s"]
            tracker = cls(
                SloSettings(
                    violation_s=float(raw["violation_s"]),
                    warning_s=None if warning is None else float(warning),
                    clear_ratio=float(raw["clear_ratio"]),
                )
            )
            for group, topic, partition, name in data["states"]:
                key: SloKey = (
                    str(group),
                    None if topic is None else str(topic),
                    None if partition is None else int(partition),
                )
                tracker._states[key] = SloState[name]
        except (KeyError, TypeError, ValueError, ConfigError) as exc:
            raise SchemaError(f"malformed SLO tracker JSON: {exc}") from exc
        return tracker
