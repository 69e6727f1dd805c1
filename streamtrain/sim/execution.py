"""How a scaling action is carried out and what shuffling costs: the two tools the
simulator can give every policy.

Owned here: :class:`ActionCosts` (preparation, hand-over stall and checkpoint per
assignment mode), :class:`ShuffleCosts` (global shuffling, KALE §3.5),
:class:`Execution` (one run's choices: shuffling, two-phase actions, the assignment
mode, the costs, the seed of the pauses' random stream) and :func:`action_phases`
(one action's preparation and pause, pause-and-restart or two-phase). During an action
the job holds ``max(from, to)`` workers (old and new pods overlap); that is what
worker-hours count.

:class:`ShuffleMode` and :class:`RestartMode` are the simulator's switches: on / off
and pause / two-phase for every policy alike, or ``policy``: each policy's own
(:data:`~streamtrain.sim.settings.POLICY_EXECUTION`: the paper's set-up, and streamtrain
with both).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from streamtrain.config import AssignmentMode
from streamtrain.errors import ConfigError
from streamtrain.sim.handover import ModeCost, measured_mode_costs

__all__ = [
    "ActionCosts",
    "Execution",
    "RestartMode",
    "ShuffleCosts",
    "ShuffleMode",
    "action_phases",
]


class ShuffleMode(StrEnum):
    """Global shuffling: on or off for every policy, or the paper's set-up."""

    POLICY = "policy"
    ON = "on"
    OFF = "off"


class RestartMode(StrEnum):
    """How actions run: pause-and-restart or two-phase for every policy, or the paper's."""

    POLICY = "policy"
    PAUSE = "pause"
    TWO_PHASE = "two-phase"


@dataclass(frozen=True, slots=True)
class ActionCosts:
    """Per assignment mode, the preparation of new workers and the stall of the data
    hand-over (:mod:`streamtrain.sim.handover`: the preparation at a real job's scale,
    the stall as the live system measures it), and the checkpoint a pause-and-restart
    saves (60 s: KALE §4.1 lists saving the model among the steps of an action).
    ``two_phase_checkpoint_s`` (0 by default) pauses two-phase actions for one too: a
    job that re-partitions its parameter servers on every action, without DLRover-RM's
    flash checkpoint."""

    checkpoint_s: float = 60.0
    modes: Mapping[AssignmentMode, ModeCost] = field(default_factory=measured_mode_costs)
    two_phase_checkpoint_s: float = 0.0

    def __post_init__(self) -> None:
        if min(self.checkpoint_s, self.two_phase_checkpoint_s) < 0:
            raise ConfigError("checkpoint times cannot be negative")
        missing = [m.value for m in AssignmentMode if m not in self.modes]
        if missing:
            raise ConfigError(f"action costs are missing for {', '.join(missing)}")

    def mode(self, assignment: AssignmentMode) -> ModeCost:
        return self.modes[assignment]

    def restart_s(self, assignment: AssignmentMode) -> float:
        """The mean pause of one pause-and-restart action in ``assignment`` mode."""
        cost = self.modes[assignment]
        return self.checkpoint_s + cost.prep_s + cost.pause_s

    def with_restart_s(self, restart_s: float) -> ActionCosts:
        """The same costs with a pause-and-restart of ``restart_s`` on average in every
        mode (KALE §1: about 10 minutes): the preparation is what the checkpoint and the
        hand-over stall leave of it."""
        modes = {}
        for mode, cost in self.modes.items():
            prep_s = restart_s - self.checkpoint_s - cost.pause_s
            if prep_s < 0:
                raise ConfigError(
                    f"a {restart_s:g}-s restart cannot hold the {self.checkpoint_s:g}-s "
                    f"checkpoint and the {cost.pause_s:g}-s hand-over ({mode.value})"
                )
            modes[mode] = cost.with_means(prep_s=prep_s)
        return ActionCosts(self.checkpoint_s, modes, self.two_phase_checkpoint_s)

    def with_mode(self, assignment: AssignmentMode, cost: ModeCost) -> ActionCosts:
        return ActionCosts(
            self.checkpoint_s, {**self.modes, assignment: cost}, self.two_phase_checkpoint_s
        )


@dataclass(frozen=True, slots=True)
class ShuffleCosts:
    """What global shuffling costs, as ``benchmarks/shuffle.py`` measured it: the
    worker CPU per forwarded record (between two ShuffleNodes), the p99 ACK latency a
    forwarded record's commit waits for, and the record size for the forwarded bytes."""

    forward_cpu_s: float = 1.0 / 1_097_542  # worker CPU per forwarded record
    ack_latency_s: float = 0.00132  # a forwarded record's commit waits for its ACK
    record_bytes: float = 200.0

    def __post_init__(self) -> None:
        if min(self.forward_cpu_s, self.ack_latency_s) < 0 or self.record_bytes <= 0:
            raise ConfigError("shuffle costs cannot be negative and records have a size")


@dataclass(frozen=True, slots=True)
class Execution:
    shuffle: bool = False
    two_phase: bool = False
    costs: ActionCosts = field(default_factory=ActionCosts)
    assignment: AssignmentMode = AssignmentMode.GROUP
    shuffle_costs: ShuffleCosts = field(default_factory=ShuffleCosts)
    seed: int = 0  # the pauses' random stream (the same for every policy of a run)


def action_phases(
    from_workers: int, to_workers: int, execution: Execution, draw: float = 0.5
) -> tuple[float, float]:
    """``(prep_s, pause_s)`` of an action from ``from_workers`` to ``to_workers``;
    ``draw`` in [0, 1) places its hand-over stall in the mode's range (0.5: the mean).

    **Pause-and-restart** (KALE §3.4.1, "the simple yet working pause-and-restart
    policy"): every action, up or down, stops the job for the checkpoint, the new
    workers' preparation and the hand-over of every partition (60 + 420 + 4.5 s ≈ 8 min
    in ``group`` mode; KALE §1 reports ≈10 min). **Two-phase** (DLRover-RM §5.2,
    "seamless migration"; the live system's two-phase start): a scale-up prepares its
    new workers (they load the latest checkpoint) while the old ones train; then the
    job pauses only for the hand-over (``group``: every partition stalls;
    ``cooperative``, ``shards``: only the share that changes hands), plus
    ``two_phase_checkpoint_s``. A scale-down starts nothing, so it has no preparation.
    """
    if from_workers < 0 or to_workers < 1:
        raise ConfigError(f"bad action {from_workers} -> {to_workers}")
    if not 0 <= draw <= 1:
        raise ConfigError(f"the draw is in [0, 1], got {draw}")
    costs = execution.costs
    cost = costs.mode(execution.assignment)
    stall_s = cost.pause_s + cost.pause_spread_s * (2 * draw - 1)
    if not execution.two_phase:
        return 0.0, costs.checkpoint_s + cost.prep_s + stall_s
    moved = abs(to_workers - from_workers) / max(from_workers, to_workers, 1)
    share = moved if cost.moved_only else 1.0
    prep_s = cost.prep_s if to_workers > from_workers else 0.0
    return prep_s, costs.two_phase_checkpoint_s + stall_s * share
