"""An Autopilot-style reactive baseline (Rzadca et al., EuroSys '20; KALE Table 3).

Autopilot's recommenders summarize recent usage in an exponentially decaying histogram
over a sliding window, take a high percentile and add a safety margin; downscaling is
deferred (the recommendation used is the highest of a window). Here the usage signal
is what the job consumes, in records/s: measured utilization times the training speed
of the current workers (a saturated job uses all of it, so a lagging job asks for
more), sampled at every decision; the resource is workers, converted with the training
speed per worker measured at the current count (a linear model: Autopilot knows
nothing of ``F``):

``recommendation = ceil(P_pct(decayed window of usage) · (1 + margin) / per_worker)``

then scale-ups at once, scale-downs only to the highest recommendation of the last
``downscale_window_s``. Every ``decision_interval_s``; no forecast.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from streamtrain.errors import ConfigError
from streamtrain.scale.fallback import HpaSettings, stabilize_scale_down
from streamtrain.scale.policy import Decision, Observation, PolicyContext
from streamtrain.scale.policy_settings import settings_from

__all__ = ["Autopilot", "AutopilotSettings", "decayed_percentile"]


@dataclass(frozen=True, slots=True)
class AutopilotSettings:
    decision_interval_s: float = 60.0
    window_s: float = 3600.0
    half_life_s: float = 900.0
    percentile: float = 95.0
    margin: float = 0.10
    downscale_window_s: float = 1800.0

    def __post_init__(self) -> None:
        if self.window_s <= 0 or self.half_life_s <= 0 or self.decision_interval_s <= 0:
            raise ConfigError("window, half-life and decision interval must be positive")
        if not 0 < self.percentile <= 100 or self.margin < 0:
            raise ConfigError("need 0 < percentile <= 100 and margin >= 0")


def decayed_percentile(
    values: np.ndarray, ages_s: np.ndarray, half_life_s: float, pct: float
) -> float:
    """The ``pct`` percentile of ``values`` weighted by ``0.5 ** (age / half_life)``."""
    if values.size == 0:
        raise ConfigError("no samples")
    weights = 0.5 ** (np.asarray(ages_s, dtype=np.float64) / half_life_s)
    order = np.argsort(values)
    cumulative = np.cumsum(weights[order])
    index = int(np.searchsorted(cumulative, pct / 100 * cumulative[-1]))
    return float(values[order][min(index, values.size - 1)])


class Autopilot:
    """See the module docstring."""

    name = "autopilot"

    def __init__(self, context: PolicyContext, **settings: object) -> None:
        self.settings = settings_from(AutopilotSettings, settings, policy=self.name)
        self.context = context
        self.decision_interval_s = self.settings.decision_interval_s
        self._stabilizer = HpaSettings(
            target=1.0,
            min_workers=context.min_workers,
            max_workers=context.max_workers,
            scale_down_window_s=self.settings.downscale_window_s,
        )
        self._recommendations: list[tuple[float, int]] = []
        self._usage: deque[tuple[float, float]] = deque()
        self._per_worker: float | None = None

    def decide(self, obs: Observation) -> Decision | None:
        s = self.settings
        measured = obs.throughput_per_worker_records_per_s
        if measured and obs.utilization is not None and obs.pending is None:
            self._per_worker = measured
            consumed = obs.utilization * measured * obs.current_workers
            self._usage.append((obs.now_s, consumed))
        while self._usage and self._usage[0][0] < obs.now_s - s.window_s:
            self._usage.popleft()
        if obs.pending is not None or self._per_worker is None or not self._usage:
            return None
        values = np.array([u for _, u in self._usage])
        ages = obs.now_s - np.array([t for t, _ in self._usage])
        usage = decayed_percentile(values, ages, s.half_life_s, s.percentile)
        wanted = self.context.clamp(math.ceil(usage * (1 + s.margin) / self._per_worker))
        window_start = obs.now_s - s.downscale_window_s
        self._recommendations = [r for r in self._recommendations if r[0] >= window_start]
        self._recommendations.append((obs.now_s, wanted))
        current = obs.current_workers
        final = stabilize_scale_down(current, self._recommendations, obs.now_s, self._stabilizer)
        if final == current:
            return None
        return Decision(
            target_workers=final,
            reason="fallback",
            explanation=(
                f"Autopilot: p{s.percentile:g} of decayed usage {usage:,.0f} records/s "
                f"+{s.margin:.0%} at {self._per_worker:,.0f}/worker -> {final}"
            ),
        )
