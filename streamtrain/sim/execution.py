"""How a scaling action is carried out: the restart costs and the two execution modes.

Owned here:

* :class:`RestartCosts`: the parts of a pause-and-restart, in seconds. The defaults add
  up to KALE §1's "roughly 10 minutes" for a 1B-parameter job: save a checkpoint (60 s,
  KALE §4.1 lists saving the model among the steps), start containers (30 s), pull the
  image (30 s), load the model (6 min), rebuild the data streams / consumer group (2 min).
* :class:`Execution`: per policy, whether global shuffling is on (capacity shared
  across partitions, KALE §3.5) and whether actions are two-phase.
* :func:`action_phases`: ``(prep_s, pause_s)`` of one action:

  - **pause-and-restart** (KALE §3.4.1): every action, up or down, pauses the job for
    the whole restart (600 s by default);
  - **two-phase** (DLRover-RM §5.2, "seamless migration"): for a scale-up, new workers
    are started and load the model while the old ones keep training
    (``prep = container + image + model load``); only the checkpoint hand-over and the
    stream rebuild pause the job (``pause = checkpoint + stream rebuild``, 180 s). A
    scale-down starts nothing, so it has no prep, only that short pause.

During an action the job holds ``max(from, to)`` workers (old and new pods overlap);
that is what worker-hours count.

:class:`ShuffleMode` and :class:`RestartMode` are the simulator's choices of execution:
each policy's own (``policy``: see :data:`~streamtrain.sim.runner.POLICY_EXECUTION`) or
one mode forced on every policy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from streamtrain.errors import ConfigError

__all__ = ["Execution", "RestartCosts", "RestartMode", "ShuffleMode", "action_phases"]


class ShuffleMode(StrEnum):
    """Global shuffling: each policy's own choice, or on / off for every policy."""

    POLICY = "policy"
    ON = "on"
    OFF = "off"


class RestartMode(StrEnum):
    """How actions run: each policy's own choice, or pause-and-restart / two-phase for all."""

    POLICY = "policy"
    PAUSE = "pause"
    TWO_PHASE = "two-phase"


@dataclass(frozen=True, slots=True)
class RestartCosts:
    checkpoint_s: float = 60.0
    container_s: float = 30.0
    image_s: float = 30.0
    model_load_s: float = 360.0
    stream_rebuild_s: float = 120.0

    def __post_init__(self) -> None:
        for name in self.__slots__:
            if getattr(self, name) < 0:
                raise ConfigError(f"restart cost {name} cannot be negative")

    @property
    def restart_s(self) -> float:
        """The full pause of a pause-and-restart action."""
        return (
            self.checkpoint_s
            + self.container_s
            + self.image_s
            + self.model_load_s
            + self.stream_rebuild_s
        )

    @property
    def two_phase_prep_s(self) -> float:
        return self.container_s + self.image_s + self.model_load_s

    @property
    def two_phase_pause_s(self) -> float:
        return self.checkpoint_s + self.stream_rebuild_s

    @classmethod
    def with_restart_s(cls, restart_s: float) -> RestartCosts:
        """The default breakdown scaled so the full restart takes ``restart_s``."""
        if restart_s < 0:
            raise ConfigError(f"the restart time cannot be negative, got {restart_s}")
        base = cls()
        k = restart_s / base.restart_s
        return cls(
            base.checkpoint_s * k,
            base.container_s * k,
            base.image_s * k,
            base.model_load_s * k,
            base.stream_rebuild_s * k,
        )


@dataclass(frozen=True, slots=True)
class Execution:
    shuffle: bool = False
    two_phase: bool = False
    costs: RestartCosts = field(default_factory=RestartCosts)


def action_phases(from_workers: int, to_workers: int, execution: Execution) -> tuple[float, float]:
    """``(prep_s, pause_s)`` of an action from ``from_workers`` to ``to_workers``."""
    if from_workers < 0 or to_workers < 1:
        raise ConfigError(f"bad action {from_workers} -> {to_workers}")
    costs = execution.costs
    if not execution.two_phase:
        return 0.0, costs.restart_s
    if to_workers > from_workers:
        return costs.two_phase_prep_s, costs.two_phase_pause_s
    return 0.0, costs.two_phase_pause_s
