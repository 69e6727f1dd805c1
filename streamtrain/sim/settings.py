"""The simulator's settings: one frozen :class:`SimSettings` for a whole comparison, and
:class:`Variant`, one row of it (a policy, its settings, and any tool switched apart
from the rest).

Defaults, each a field:

* **The job.** 800 partitions with drifting skew (sigma 0.5), 15-s ticks, the trace's
  peak sized to need ``peak_workers`` = 24 on each run's pool
  (:mod:`streamtrain.sim.truth`), ``max_workers`` ⌈7/6 · 24⌉ = 28 (so Adequate holds
  KALE Table 3's 672 worker-hours a day).
* **The tools, the same for every policy**: shuffling on and two-phase actions, in
  ``group`` assignment mode (today's live default) with
  :class:`~streamtrain.sim.execution.ActionCosts`. ``shuffle`` / ``restart`` switch
  them for everyone; ``policy`` gives each policy its own
  (:data:`POLICY_EXECUTION`: the baselines neither, KALE shuffling, streamtrain both:
  the paper's set-up plus ours).
* **Repetitions.** ``seeds`` runs from ``seed`` on; a seed draws the partition skew,
  the assignment order, the pool's speeds, the profiling noise and the pauses; the
  traffic is the trace's, the same in every seed (KALE repeats each experiment 20
  times on the same job).
* **Forecasts.** ``forecaster`` (a registry name; ``auto``, the FEDformer-style model
  KALE uses, by default) for Madu, KALE and streamtrain alike.
* ``jobs``: processes the seeds are spread over (1: in this process).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import cast

from streamtrain.config import AssignmentMode
from streamtrain.errors import ConfigError
from streamtrain.scale.policies import POLICY_NAMES
from streamtrain.scale.policies.feed import forecaster_factory as named_factory
from streamtrain.sim.execution import ActionCosts, Execution, RestartMode, ShuffleCosts, ShuffleMode
from streamtrain.sim.metrics import SLO_LAG_S
from streamtrain.sim.truth import JobKind, TruthSettings

__all__ = ["DEFAULT_FORECASTER", "POLICY_EXECUTION", "SimSettings", "Variant"]

DEFAULT_FORECASTER = "auto"
# (shuffle, two-phase) per policy under ShuffleMode.POLICY / RestartMode.POLICY.
POLICY_EXECUTION: dict[str, tuple[bool, bool]] = {
    "adequate": (False, False),
    "hpa": (False, False),
    "autopilot": (False, False),
    "madu": (False, False),
    "kale": (True, False),
    "streamtrain": (True, True),
}


@dataclass(frozen=True, slots=True)
class Variant:
    """One row: ``policy`` with ``settings`` overrides; ``shuffle`` / ``two_phase``
    override the comparison's switches for this row alone (None: as the others)."""

    label: str
    policy: str
    settings: Mapping[str, object] = field(default_factory=dict)
    shuffle: bool | None = None
    two_phase: bool | None = None

    def __post_init__(self) -> None:
        if self.policy not in POLICY_NAMES:
            raise ConfigError(
                f"unknown policy {self.policy!r}; use one of {', '.join(POLICY_NAMES)}"
            )


@dataclass(frozen=True, slots=True)
class SimSettings:
    policies: tuple[str, ...] = POLICY_NAMES
    peak_workers: int = 24
    max_workers: int | None = None
    simulate_days: int = 1
    seed: int = 0
    seeds: int = 1
    partitions: int = 800
    skew_sigma: float = 0.5
    tick_s: int = 15
    shuffle: ShuffleMode = ShuffleMode.ON
    restart: RestartMode = RestartMode.TWO_PHASE
    assignment: AssignmentMode = AssignmentMode.GROUP
    costs: ActionCosts = field(default_factory=ActionCosts)
    shuffle_costs: ShuffleCosts = field(default_factory=ShuffleCosts)
    model: str = "sync"
    truth: TruthSettings = field(default_factory=TruthSettings)
    forecaster: str = DEFAULT_FORECASTER
    slo_lag_s: float = SLO_LAG_S
    policy_settings: dict[str, dict[str, object]] = field(default_factory=dict)
    jobs: int = 1

    def __post_init__(self) -> None:
        unknown = [p for p in self.policies if p not in POLICY_NAMES]
        if unknown or not self.policies:
            raise ConfigError(
                f"unknown policies {', '.join(unknown) or '(none given)'}; "
                f"use some of {', '.join(POLICY_NAMES)}"
            )
        if self.peak_workers < 2:
            raise ConfigError(f"--peak-workers must be at least 2, got {self.peak_workers}")
        if self.max_workers is not None and self.max_workers < self.peak_workers:
            raise ConfigError("max workers cannot be below peak workers")
        if self.simulate_days < 1:
            raise ConfigError(f"simulate at least one day, got {self.simulate_days}")
        if self.seeds < 1 or self.jobs < 1:
            raise ConfigError(f"need at least one seed and one job, got {self.seeds}, {self.jobs}")
        for name, enum in (
            ("shuffle", ShuffleMode),
            ("restart", RestartMode),
            ("assignment", AssignmentMode),
        ):
            value = getattr(self, name)
            try:  # plain strings are accepted and kept as the modes they name
                object.__setattr__(self, name, enum(value))
            except ValueError:
                choices = ", ".join(m.value for m in enum)
                raise ConfigError(f"{name} must be one of {choices}, got {value!r}") from None
        if self.model not in ("sync", "async"):
            raise ConfigError(f"model must be sync or async, got {self.model!r}")
        if self.truth.kind != self.model:
            kind = cast(JobKind, self.model)
            object.__setattr__(self, "truth", replace(self.truth, kind=kind))
        named_factory(self.forecaster)  # a ConfigError for unknown names

    @property
    def worker_cap(self) -> int:
        return self.max_workers or math.ceil(self.peak_workers * 7 / 6)

    @property
    def seed_list(self) -> tuple[int, ...]:
        return tuple(range(self.seed, self.seed + self.seeds))

    def variants(self) -> tuple[Variant, ...]:
        """One row per policy, with its ``policy_settings``."""
        return tuple(Variant(p, p, self.policy_settings.get(p, {})) for p in self.policies)

    def execution(self, variant: Variant | str, seed: int | None = None) -> Execution:
        """How ``variant``'s actions run and whether it shuffles, in run ``seed``."""
        row = Variant(variant, variant) if isinstance(variant, str) else variant
        shuffle, two_phase = POLICY_EXECUTION[row.policy]
        if self.shuffle != ShuffleMode.POLICY:
            shuffle = self.shuffle == ShuffleMode.ON
        if self.restart != RestartMode.POLICY:
            two_phase = self.restart == RestartMode.TWO_PHASE
        if row.shuffle is not None:
            shuffle = row.shuffle
        if row.two_phase is not None:
            two_phase = row.two_phase
        return Execution(
            shuffle=shuffle,
            two_phase=two_phase,
            costs=self.costs,
            assignment=self.assignment,
            shuffle_costs=self.shuffle_costs,
            seed=self.seed if seed is None else seed,
        )

    def describe_tools(self) -> str:
        """The switches in words, for report headers."""
        shuffle = {"on": "shuffling", "off": "no shuffling", "policy": "each policy's shuffling"}
        restart = {
            "two-phase": "two-phase actions",
            "pause": "pause-and-restart",
            "policy": "each policy's own actions",
        }
        cost = self.costs.mode(self.assignment)
        return (
            f"{shuffle[self.shuffle.value]}, {restart[self.restart.value]} "
            f"({self.assignment.value} mode: prep {cost.prep_s:.0f} s, hand-over "
            f"{cost.pause_s:g} ± {cost.pause_spread_s:g} s, checkpoint "
            f"{self.costs.checkpoint_s:g} s in a restart, "
            f"{self.costs.two_phase_checkpoint_s:g} s in a two-phase action) for every policy"
            if self.shuffle != ShuffleMode.POLICY and self.restart != RestartMode.POLICY
            else f"{shuffle[self.shuffle.value]}, {restart[self.restart.value]}"
        )
