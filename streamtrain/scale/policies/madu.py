"""A Madu-style proactive baseline (Luo et al., SoCC '22; KALE Table 3 "Madu").

Madu forecasts the workload, provisions for its uncertainty, and sizes resources with
a linear model of throughput per instance. Here, every ``decision_interval_s`` (10
minutes, KALE's prediction period: re-planning every minute would pause a job whose
every action costs minutes):

* the forecast over ``horizon_s`` at its ``uncertainty_level`` quantile
  (:meth:`~streamtrain.scale.policies.feed.ForecastFeed.upper`);
* a linear throughput model, a per-worker capacity ``F(w) = b·w`` fitted by least
  squares (through the origin) to the same ``(workers, records/s)`` observations KALE
  fits Eq. 6 to;
* ``target = max over the horizon of ceil(load / b)``, applied at once in both
  directions (no stabilization: KALE §4.4 notes Madu's excessive, prolonged
  allocations at peaks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from streamtrain.errors import ConfigError
from streamtrain.scale.policies.feed import ForecastFeed, default_forecaster_factory
from streamtrain.scale.policy import Decision, Observation, PolicyContext
from streamtrain.scale.policy_settings import settings_from
from streamtrain.units import MINUTE_S

__all__ = ["Madu", "MaduSettings", "linear_fit"]


@dataclass(frozen=True, slots=True)
class MaduSettings:
    decision_interval_s: float = 600.0
    horizon_s: float = 1800.0
    uncertainty_level: float = 0.95

    def __post_init__(self) -> None:
        if self.decision_interval_s <= 0 or self.horizon_s <= 0:
            raise ConfigError("decision interval and horizon must be positive")
        if not 0 < self.uncertainty_level < 1:
            raise ConfigError("the uncertainty level is a quantile in (0, 1)")


def linear_fit(observations: tuple[tuple[float, float], ...]) -> float:
    """Least-squares ``b`` of ``F(w) = b·w``: records/s per worker."""
    if not observations:
        raise ConfigError("a linear throughput fit needs observations")
    w = np.array([o[0] for o in observations], dtype=np.float64)
    f = np.array([o[1] for o in observations], dtype=np.float64)
    return float(w @ f / (w @ w))


class Madu:
    """See the module docstring."""

    name = "madu"

    def __init__(
        self, context: PolicyContext, *, feed: ForecastFeed | None = None, **settings: object
    ) -> None:
        self.settings = settings_from(MaduSettings, settings, policy=self.name)
        self.context = context
        self.decision_interval_s = self.settings.decision_interval_s
        self.per_worker = linear_fit(context.throughput_observations)
        factory = context.forecaster_factory or default_forecaster_factory(context.step_s)
        self.feed = feed or ForecastFeed(factory)

    def decide(self, obs: Observation) -> Decision | None:
        if obs.pending is not None or obs.observed_steps == 0:
            return None
        steps = max(1, math.ceil(self.settings.horizon_s / obs.step_s))
        load = self.feed.upper(obs, steps, self.settings.uncertainty_level)
        needed = np.ceil(load / self.per_worker)
        plan = tuple(self.context.clamp(int(n)) for n in needed)
        target = max(plan)
        if target == obs.current_workers:
            return None
        return Decision(
            target_workers=target,
            reason="proactive",
            plan=plan,
            plan_step_s=obs.step_s,
            explanation=(
                f"Madu: peak forecast {load.max():,.0f} records/s "
                f"(q{self.settings.uncertainty_level:g}) over "
                f"{self.settings.horizon_s / MINUTE_S:.0f} min at {self.per_worker:,.0f}/worker "
                f"-> {target}"
            ),
        )
