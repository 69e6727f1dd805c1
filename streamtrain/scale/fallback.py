"""The threshold fallback path (KALE §3.4.3), written as Kubernetes HPA computes it.

Owned here, as pure functions:

* :func:`hpa_desired`: ``desired = ceil(current · metric / target)``, unchanged while
  ``|metric / target - 1| <= tolerance`` (HPA's default tolerance is 0.1), clamped to
  [min, max]. The metric is whatever the caller measures per worker: lag seconds,
  utilization, records/s per worker.
* :func:`stabilize_scale_down`: HPA's scale-down stabilization window. Scaling up
  takes effect at once; scaling down only to the highest recommendation seen within
  the window (default 300 s), so a brief dip does not remove workers.

The KALE and ``streamtrain`` policies use this path when the forecast is wrong; the
simulator's HPA baseline uses it alone. No I/O, no clocks: callers pass times.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from streamtrain.errors import ConfigError

__all__ = ["HpaSettings", "hpa_desired", "stabilize_scale_down"]


@dataclass(frozen=True, slots=True)
class HpaSettings:
    target: float
    tolerance: float = 0.1
    min_workers: int = 1
    max_workers: int = 64
    scale_down_window_s: float = 300.0

    def __post_init__(self) -> None:
        if not math.isfinite(self.target) or self.target <= 0:
            raise ConfigError(f"HPA target must be positive, got {self.target}")
        if not 0 <= self.tolerance < 1:
            raise ConfigError(f"HPA tolerance must be in [0, 1), got {self.tolerance}")
        if self.min_workers < 1 or self.max_workers < self.min_workers:
            raise ConfigError(
                f"need 1 <= min workers <= max workers, got {self.min_workers}, {self.max_workers}"
            )
        if self.scale_down_window_s < 0:
            raise ConfigError("the scale-down window cannot be negative")


def hpa_desired(current_workers: int, metric: float, settings: HpaSettings) -> int:
    """The worker count HPA would ask for, before scale-down stabilization."""
    if current_workers < 1:
        raise ConfigError(f"current workers must be at least 1, got {current_workers}")
    if not math.isfinite(metric) or metric < 0:
        raise ConfigError(f"the fallback metric must be finite and non-negative, got {metric}")
    ratio = metric / settings.target
    if abs(ratio - 1.0) <= settings.tolerance:
        desired = current_workers
    else:
        # Guard against float noise: 4 · 1.5 must be 6, not 7.
        desired = math.ceil(round(current_workers * ratio, 9))
    return max(settings.min_workers, min(settings.max_workers, desired))


def stabilize_scale_down(
    current_workers: int,
    recommendations: Sequence[tuple[float, int]],
    now_s: float,
    settings: HpaSettings,
) -> int:
    """Apply the scale-down window to timed recommendations ``(at_s, workers)``.

    The newest recommendation is the last one. A scale-up is returned as is; otherwise
    the result is the highest recommendation within ``scale_down_window_s`` of
    ``now_s``, never above the current count.
    """
    if not recommendations:
        raise ConfigError("no recommendations to stabilize")
    newest = recommendations[-1][1]
    if newest >= current_workers:
        return newest
    window_start = now_s - settings.scale_down_window_s
    recent = [workers for at_s, workers in recommendations if at_s >= window_start]
    return min(current_workers, max(recent, default=newest))
