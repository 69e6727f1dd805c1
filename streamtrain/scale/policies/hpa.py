"""The Kubernetes HPA baseline, as the controller computes it (KALE Table 3 "HPA").

Every ``sync_period_s`` (15 s): ``desired = ceil(current · metric / target)``, unchanged
within the tolerance (0.1) (:func:`~streamtrain.scale.fallback.hpa_desired`); then the
default ``behavior``: a scale-up may at most double the count or add 4 pods per period,
whichever is more; a scale-down goes only to the highest recommendation of the last
300 s (:func:`~streamtrain.scale.fallback.stabilize_scale_down`).

The metric is ``utilization`` (records consumed / what the workers could consume, the
GPU-busy share a resource metric reports; default target 0.8) or ``lag`` (the
measured max lag in seconds, an external metric of type ``Value``), averaged over
``metric_window_s`` (300 s: a Prometheus ``rate(...[5m])`` behind the metrics adapter;
the aggregation over time that makes HPA "belated", KALE §1).

Pods that are starting report nothing: no decision while an action is in progress.
After it, the restarted pods' samples count only from ``readiness_delay_s`` (30 s)
plus one metric window after they became ready (the controller sets aside samples
taken before ``ready + window`` during the CPU initialization period), so the first
decision comes one full window of fresh samples after the restart.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Literal, get_args

from streamtrain.errors import ConfigError
from streamtrain.scale.fallback import HpaSettings, hpa_desired, stabilize_scale_down
from streamtrain.scale.policy import Decision, Observation, PolicyContext
from streamtrain.scale.policy_settings import settings_from

__all__ = ["HPA_METRICS", "Hpa", "HpaMetric", "HpaPolicySettings", "scale_up_limit"]

HpaMetric = Literal["utilization", "lag"]
HPA_METRICS: tuple[HpaMetric, ...] = get_args(HpaMetric)


@dataclass(frozen=True, slots=True)
class HpaPolicySettings:
    metric: HpaMetric = "utilization"
    target: float = 0.8
    tolerance: float = 0.1
    sync_period_s: float = 15.0
    scale_down_window_s: float = 300.0
    scale_up_percent: float = 100.0
    scale_up_pods: int = 4
    readiness_delay_s: float = 30.0
    metric_window_s: float = 300.0

    def __post_init__(self) -> None:
        if self.metric not in HPA_METRICS:
            raise ConfigError(f"HPA metric must be utilization or lag, got {self.metric!r}")
        if self.metric_window_s < 0:
            raise ConfigError("the metric window cannot be negative")
        if self.sync_period_s <= 0 or self.scale_up_percent < 0 or self.scale_up_pods < 0:
            raise ConfigError("need a positive sync period and non-negative scale-up limits")


def scale_up_limit(current: int, percent: float, pods: int) -> int:
    """The most workers one HPA period may reach from ``current`` (policy ``Max``)."""
    return max(math.floor(current * (1 + percent / 100)), current + pods)


class Hpa:
    """See the module docstring."""

    name = "hpa"

    def __init__(self, context: PolicyContext, **settings: object) -> None:
        self.settings = settings_from(HpaPolicySettings, settings, policy=self.name)
        s = self.settings
        self.hpa = HpaSettings(
            target=s.target,
            tolerance=s.tolerance,
            min_workers=context.min_workers,
            max_workers=context.max_workers,
            scale_down_window_s=s.scale_down_window_s,
        )
        self.decision_interval_s = s.sync_period_s
        # Oldest first (one per decision, in time order): the window drops a prefix.
        self._recommendations: deque[tuple[float, int]] = deque()
        # The metric's samples in the window: their times and values, oldest first.
        self._sample_times: deque[float] = deque()
        self._sample_values: deque[float] = deque()
        self._was_pending = False
        self._ready_at_s = math.nan  # set at the first call: metrics start then

    def _metric(self, obs: Observation) -> float | None:
        """The windowed metric, or None until a full window of fresh samples exists."""
        s = self.settings
        sample = obs.utilization if s.metric == "utilization" else obs.max_lag_s
        if obs.now_s - self._ready_at_s < s.readiness_delay_s:
            return None
        times, values = self._sample_times, self._sample_values
        if sample is not None:
            times.append(obs.now_s)
            values.append(sample)
        while times and times[0] < obs.now_s - s.metric_window_s:
            times.popleft()
            values.popleft()
        fresh_since = self._ready_at_s + s.readiness_delay_s
        if not values or obs.now_s - fresh_since < s.metric_window_s:
            return None
        return sum(values) / len(values)

    def decide(self, obs: Observation) -> Decision | None:
        if math.isnan(self._ready_at_s):
            self._ready_at_s = obs.now_s - self.settings.readiness_delay_s
        if obs.pending is not None:
            self._was_pending = True
            self._sample_times.clear()
            self._sample_values.clear()
            return None
        if self._was_pending:
            self._was_pending = False
            self._ready_at_s = obs.now_s
        s = self.settings
        metric = self._metric(obs)
        if metric is None or obs.current_workers < 1:
            return None
        current = obs.current_workers
        desired = hpa_desired(current, metric, self.hpa)
        desired = min(desired, scale_up_limit(current, s.scale_up_percent, s.scale_up_pods))
        window_start = obs.now_s - s.scale_down_window_s
        recommendations = self._recommendations
        while recommendations and recommendations[0][0] < window_start:
            recommendations.popleft()
        recommendations.append((obs.now_s, desired))
        final = stabilize_scale_down(current, self._recommendations, obs.now_s, self.hpa)
        if final == current:
            return None
        unit = "" if s.metric == "utilization" else " s"
        return Decision(
            target_workers=final,
            reason="fallback",
            explanation=(
                f"HPA: {s.metric} {metric:.3g}{unit} vs target {s.target:g}{unit} "
                f"at {current} workers -> {final}"
            ),
        )
