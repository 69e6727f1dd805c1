"""Test doubles shipped with the package (as httpx ships ``MockTransport``).

Owned here: small, real implementations of the package's protocols for tests and
benchmarks where the real component is not the thing under test.

* :class:`ScriptedForecaster`: a :class:`~streamtrain.forecast.base.Forecaster` whose
  prediction after ``n`` observed steps is ``profile[n:]`` (a policy only ever sees what
  ``predict`` returns, so a scripted profile tests the policy alone);
* :class:`ScriptedPolicy`: a :class:`~streamtrain.scale.policy.Policy` that asks for
  ``targets[t]`` at time ``t`` and records every observation it was given;
* :func:`records`: a :class:`~streamtrain.records.RecordColumns` chunk of consecutive
  offsets of one partition;
* :class:`RecordingAcknowledger`: an :class:`~streamtrain.records.Acknowledger` that
  records every acknowledged range and answers, per partition, which offsets are covered
  and the commit position a tracker would reach (the lowest offset at or above a start
  that is not acknowledged), with :func:`merge_ranges`; for tests and benchmarks where
  ingest's OffsetTracker is not the thing under test (the shuffle's scripted worker,
  :mod:`streamtrain.experiments.shuffle_harness`, uses the real tracker).

Library code never imports this module (the shuffle's harness and experiment are
scripted test processes, not library code). Importing it loads neither the scale nor
the forecast package (they are imported when a scripted policy decides).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Self

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ForecastError
from streamtrain.records import RecordColumns

if TYPE_CHECKING:
    from streamtrain.scale.policy import Decision, Observation

__all__ = [
    "RecordingAcknowledger",
    "ScriptedForecaster",
    "ScriptedPolicy",
    "merge_ranges",
    "records",
]


class ScriptedForecaster:
    """The prediction from ``n`` observed steps is ``profile[n:]`` (its last value repeated
    past its end)."""

    name = "scripted"

    def __init__(self, profile: Sequence[float] | NDArray[np.float64], step_s: int = 60) -> None:
        self.profile = np.asarray(profile, dtype=np.float64)
        self.step_s = step_s
        self.n = 0

    def fit(self, history: NDArray[np.float64]) -> Self:
        self.n = len(history)
        return self

    def update(self, new_points: NDArray[np.float64]) -> Self:
        self.n += len(new_points)
        return self

    def predict(self, horizon_steps: int) -> NDArray[np.float64]:
        out = self.profile[self.n : self.n + horizon_steps]
        return np.pad(out, (0, horizon_steps - out.size), mode="edge")

    def predict_quantiles(
        self, horizon_steps: int, levels: Sequence[float]
    ) -> dict[float, NDArray[np.float64]]:
        raise ForecastError("a scripted forecaster has no error model")

    def save(self, path: str | Path) -> None:
        raise NotImplementedError("a scripted forecaster has nothing to save")


class ScriptedPolicy:
    """Asks for ``targets[t]`` at observation time ``t`` (seconds); records what it saw."""

    name = "scripted"

    def __init__(self, targets: Mapping[float, int], decision_interval_s: float = 15.0) -> None:
        self.targets = dict(targets)
        self.decision_interval_s = decision_interval_s
        self.seen: list[Observation] = []

    def decide(self, obs: Observation) -> Decision | None:
        from streamtrain.scale.policy import Decision

        self.seen.append(obs)
        target = self.targets.get(obs.now_s)
        return None if target is None else Decision(target_workers=target, reason="manual")


# -- the data plane ------------------------------------------------------------------------


def records(
    first: int,
    n: int,
    partition: int = 0,
    *,
    topic: str = "t",
    forwarded: bool = False,
    payload: bytes | None = None,
) -> RecordColumns:
    """``n`` records of ``topic``'s ``partition`` at offsets ``first ..``, timestamps 0.

    Each payload is ``payload``, or by default ``b"r<partition>-<offset>"`` (so a record
    can be recognised after a trip through the shuffle).
    """
    offsets = range(first, first + n)
    return RecordColumns.from_values(
        topic,
        [partition] * n,
        list(offsets),
        [0] * n,
        [f"r{partition}-{o}".encode() if payload is None else payload for o in offsets],
        forwarded=forwarded,
    )


def merge_ranges(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Inclusive ranges sorted and merged where they overlap or touch."""
    merged: list[tuple[int, int]] = []
    for first, last in sorted(ranges):
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return merged


class RecordingAcknowledger:
    """Records ``ack(topic, partition, first, last)`` calls; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ranges: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
        self.calls = 0

    def ack(self, topic: str, partition: int, first_offset: int, last_offset: int) -> int:
        with self._lock:
            self.calls += 1
            ranges = self._ranges[(topic, partition)]
            ranges.append((first_offset, last_offset))
            if len(ranges) > 64:
                ranges[:] = merge_ranges(ranges)
            return self._position_locked(topic, partition, 0)

    def covered(self, topic: str, partition: int) -> list[tuple[int, int]]:
        """The acknowledged offsets of a partition as merged inclusive ranges."""
        with self._lock:
            merged = merge_ranges(self._ranges.get((topic, partition), []))
            self._ranges[(topic, partition)] = list(merged)
            return merged

    def acked_records(self, topic: str, partition: int) -> int:
        return sum(last - first + 1 for first, last in self.covered(topic, partition))

    def position(self, topic: str, partition: int, start: int = 0) -> int:
        """The commit position: the lowest offset >= ``start`` not acknowledged."""
        with self._lock:
            return self._position_locked(topic, partition, start)

    def _position_locked(self, topic: str, partition: int, start: int) -> int:
        merged = merge_ranges(self._ranges.get((topic, partition), []))
        self._ranges[(topic, partition)] = list(merged)
        position = start
        for first, last in merged:
            if first > position:
                break
            position = max(position, last + 1)
        return position

    def partitions(self) -> list[tuple[str, int]]:
        with self._lock:
            return sorted(self._ranges)
