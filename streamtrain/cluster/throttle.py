"""AntMan's throttle on opportunistic workers (§3.3): raise step by step while the
guarantee jobs keep their pace, cut pessimistically when one does not.

The throttle holds one number, the level: in the allocator, how many workers all
opportunistic jobs may hold together (the MILP's ``opportunistic_budget_workers``); in
AntMan's finer control on one machine, the compute share of each opportunistic job in
percent (:class:`~streamtrain.experiments.colocation.ShareCoordinator`): the unit is the
caller's. Each round :meth:`Throttle.observe` gets every guarantee job's recent
training step time (the workers report it in their throughput samples, the planner
passes it on in its requests, :meth:`~streamtrain.cluster.book.RequestBook.fresh_step_times`
hands each one over once).

Pure; the caller supplies the step times and keeps the object between rounds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from streamtrain.errors import ConfigError

__all__ = ["Throttle", "ThrottleAction", "ThrottleSettings", "ThrottleStep"]


class ThrottleAction(StrEnum):
    RAISE = "raise"
    HOLD = "hold"
    CUT = "cut"


@dataclass(frozen=True, slots=True)
class ThrottleSettings:
    ceiling_workers: int
    start_workers: int = 0  # the level once step times start arriving
    step_workers: int = 4
    interference_ms: float = 10.0
    cut_factor: float = 0.5
    cooldown_rounds: int = 2

    def __post_init__(self) -> None:
        if not 0 <= self.start_workers <= self.ceiling_workers:
            raise ConfigError("the throttle needs 0 <= start <= ceiling")
        if self.step_workers < 1 or self.interference_ms < 0 or self.cooldown_rounds < 0:
            raise ConfigError("the throttle needs a step >= 1, interference >= 0, cool-down >= 0")
        if not 0 <= self.cut_factor < 1:
            raise ConfigError(f"the cut factor must be in [0, 1), got {self.cut_factor}")


@dataclass(frozen=True, slots=True)
class ThrottleStep:
    level_workers: int
    action: ThrottleAction
    reason: str


class Throttle:
    """The level and the guarantee jobs' baselines, round after round.

    * A job's **baseline** is the fastest step time it has shown (or one given up front:
      its step time running alone); a step time above ``baseline + interference_ms``
      counts as **interference**. The 10 ms default is AntMan's evaluation metric (§5:
      a step slower than its baseline by more than 10 ms counts as interference, small
      enough to be mini-batch noise); the paper's controller adjusts on the same
      performance feedback, so it is the control input here too.
    * Interference in any guarantee job: **cut** the level by ``cut_factor`` (halve),
      and hold it for ``cooldown_rounds`` rounds.
    * Otherwise, after the cool-down, **raise** it by ``step_workers`` (never above the
      ceiling, the pool's capacity); at the ceiling, **hold**.

    Until any step time has been reported the level is the ceiling: without a signal
    there is nothing to protect against (exclusive workers, as the simulator models
    them).
    """

    def __init__(
        self, settings: ThrottleSettings, baselines_ms: Mapping[str, float] | None = None
    ) -> None:
        self.settings = settings
        self.baselines_ms: dict[str, float] = dict(baselines_ms or {})
        self.level_workers = settings.ceiling_workers
        self.signalled = False
        self._cooldown = 0

    def observe(self, step_times_ms: Mapping[str, float]) -> ThrottleStep:
        """One round: the guarantee jobs' step times -> the new level and why."""
        s = self.settings
        if not step_times_ms:
            reason = "no step times reported: " + (
                "level kept" if self.signalled else "unthrottled (no interference signal)"
            )
            return ThrottleStep(self.level_workers, ThrottleAction.HOLD, reason)
        if not self.signalled:
            self.signalled = True
            self.level_workers = s.start_workers
        interfered = []
        for job, step_ms in sorted(step_times_ms.items()):
            if step_ms < 0:
                raise ConfigError(f"job {job}: a step time cannot be negative ({step_ms} ms)")
            baseline = self.baselines_ms.setdefault(job, step_ms)
            if step_ms > baseline + s.interference_ms:
                interfered.append(
                    f"{job} {step_ms:.0f} ms > {baseline:.0f} + {s.interference_ms:g}"
                )
            else:
                self.baselines_ms[job] = min(baseline, step_ms)
        if interfered:
            self.level_workers = int(self.level_workers * s.cut_factor)
            self._cooldown = s.cooldown_rounds
            return ThrottleStep(
                self.level_workers,
                ThrottleAction.CUT,
                f"interference ({'; '.join(interfered)}): cut to {self.level_workers}",
            )
        if self._cooldown > 0:
            self._cooldown -= 1
            return ThrottleStep(self.level_workers, ThrottleAction.HOLD, "cooling down after a cut")
        if self.level_workers >= s.ceiling_workers:
            return ThrottleStep(self.level_workers, ThrottleAction.HOLD, "at the ceiling")
        self.level_workers = min(s.ceiling_workers, self.level_workers + s.step_workers)
        return ThrottleStep(
            self.level_workers,
            ThrottleAction.RAISE,
            f"guarantee jobs within their baselines: raised to {self.level_workers}",
        )
