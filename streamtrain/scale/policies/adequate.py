"""The "Adequate Resources" baseline of KALE Table 3: a fixed allocation, never scaled."""

from __future__ import annotations

from dataclasses import dataclass

from streamtrain.scale.policy import Decision, Observation, PolicyContext
from streamtrain.scale.policy_settings import settings_from

__all__ = ["Adequate", "AdequateSettings"]


@dataclass(frozen=True, slots=True)
class AdequateSettings:
    workers: int | None = None  # None: the context's maximum


class Adequate:
    """Holds ``workers`` (default: the context's maximum) from the start."""

    name = "adequate"

    def __init__(self, context: PolicyContext, **settings: object) -> None:
        self.settings = settings_from(AdequateSettings, settings, policy=self.name)
        workers = self.settings.workers
        self.workers = context.clamp(workers if workers is not None else context.max_workers)
        self.initial_workers = self.workers
        self.decision_interval_s = 60.0

    def decide(self, obs: Observation) -> Decision | None:
        if obs.pending is not None or obs.current_workers == self.workers:
            return None
        return Decision(
            target_workers=self.workers,
            reason="manual",
            explanation=f"fixed allocation of {self.workers} workers",
        )
