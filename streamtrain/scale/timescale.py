"""Planning on a compressed clock, and history to start the planner from.

Owned here (pure; no Kafka):

* :class:`TimeScale`: the planner's model clock runs ``factor`` times faster than the
  wall clock from ``origin_s`` (wall seconds since the epoch; at the origin the clocks
  agree). A demo that replays a day in 10 minutes runs the planner at ``factor=144``,
  so every time constant of a policy (decision interval, pauses, forecast season)
  keeps its production meaning: a record per wall second is ``1/factor`` per model
  second, a lag of one wall second is ``factor`` model seconds. ``factor=1`` is the
  identity, which is what a real deployment uses.
* :class:`SeedHistory`: arrival rates (records per *model* second, one per planning
  step) that ended at the origin: the days before the planner started, so a seasonal
  forecaster has a season to repeat from its first decision (an export of the topic's
  rate from the previous week, or the synthetic days before the demo's day).
  :func:`read_seed_history` loads it from JSON:
  ``{"step_s": 300, "end_at_ms": 1700000000000, "records_per_s": [...]}``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from streamtrain.errors import ConfigError
from streamtrain.proto import control_plane_pb2 as cp
from streamtrain.units import ms_to_s, s_to_ms

__all__ = ["SeedHistory", "TimeScale", "read_seed_history"]


@dataclass(frozen=True, slots=True)
class TimeScale:
    """See the module docstring."""

    factor: float = 1.0
    origin_s: float = 0.0

    def __post_init__(self) -> None:
        if not math.isfinite(self.factor) or self.factor <= 0:
            raise ConfigError(f"the time scale must be a positive factor, got {self.factor}")
        if not math.isfinite(self.origin_s):
            raise ConfigError("the time scale's origin must be finite")

    @property
    def identity(self) -> bool:
        return self.factor == 1.0

    def model_s(self, wall_s: float) -> float:
        return self.origin_s + (wall_s - self.origin_s) * self.factor

    def wall_s(self, model_s: float) -> float:
        return self.origin_s + (model_s - self.origin_s) / self.factor

    def model_rate(self, per_wall_s: float) -> float:
        """Records per wall second as records per model second."""
        return per_wall_s / self.factor

    def wall_rate(self, per_model_s: float) -> float:
        return per_model_s * self.factor

    def model_duration(self, wall_duration_s: float) -> float:
        return wall_duration_s * self.factor

    def model_sample(self, sample: cp.ThroughputSample) -> cp.ThroughputSample:
        """A copy of ``sample`` on the model clock (rates, durations and time converted)."""
        if self.identity:
            return sample
        converted = cp.ThroughputSample()
        converted.CopyFrom(sample)
        converted.records_per_s_consumed = self.model_rate(sample.records_per_s_consumed)
        converted.records_per_s_trained = self.model_rate(sample.records_per_s_trained)
        converted.window_s = self.model_duration(sample.window_s)
        if sample.HasField("disturbed_s"):
            converted.disturbed_s = self.model_duration(sample.disturbed_s)
        converted.observed_at_ms = round(s_to_ms(self.model_s(ms_to_s(sample.observed_at_ms))))
        return converted


@dataclass(frozen=True, slots=True)
class SeedHistory:
    """Arrival rates (records per model second) per ``step_s`` step, ending at the
    time scale's origin; the planner starts its arrival history with them."""

    step_s: int
    records_per_s: tuple[float, ...]

    def __post_init__(self) -> None:
        if self.step_s < 1:
            raise ConfigError(f"the seed history's step must be at least 1 s, got {self.step_s}")
        bad = [v for v in self.records_per_s if not math.isfinite(v) or v < 0]
        if bad:
            raise ConfigError(f"the seed history has {len(bad)} negative or non-finite rates")


def read_seed_history(path: Path) -> tuple[SeedHistory, float]:
    """The seed history in ``path`` and the wall time (s since the epoch) it ended at."""
    try:
        raw = json.loads(path.read_text())
        step_s = int(raw["step_s"])
        end_s = ms_to_s(float(raw["end_at_ms"]))
        rates = tuple(float(v) for v in raw["records_per_s"])
    except FileNotFoundError as exc:
        raise ConfigError(f"no seed history at {path}") from exc
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"{path} is not a seed history "
            '({"step_s": N, "end_at_ms": MS, "records_per_s": [...]}): ' + str(exc)
        ) from exc
    return SeedHistory(step_s, rates), end_s
