"""Test doubles shipped with the package (as httpx ships ``MockTransport``).

Owned here: small, real implementations of the package's protocols for tests and
benchmarks where the real component is not the thing under test.

* :class:`ScriptedForecaster`: a :class:`~streamtrain.forecast.base.Forecaster` whose
  prediction after ``n`` observed steps is ``profile[n:]`` (a policy only ever sees what
  ``predict`` returns, so a scripted profile tests the policy alone);
* :class:`ScriptedPolicy`: a :class:`~streamtrain.scale.policy.Policy` that asks for
  ``targets[t]`` at time ``t`` and records every observation it was given.

Library code never imports this module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Self

import numpy as np
from numpy.typing import NDArray

from streamtrain.scale.policy import Decision, Observation

__all__ = ["ScriptedForecaster", "ScriptedPolicy"]


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

    def predict(self, horizon: int) -> NDArray[np.float64]:
        out = self.profile[self.n : self.n + horizon]
        return np.pad(out, (0, horizon - out.size), mode="edge")

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
        self.seen.append(obs)
        target = self.targets.get(obs.now_s)
        return None if target is None else Decision(target_workers=target, reason="manual")
