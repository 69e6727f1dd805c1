"""What the live system measures per assignment mode, in one place: the simulator's only
source for the preparation of new workers and the stall of the data hand-over.

Owned here: :class:`ModeCost`, :func:`measured_mode_costs` (one :class:`ModeCost` per
:class:`~streamtrain.config.AssignmentMode`) and :func:`from_live` (the conversion of
the live system's measurement). The numbers are the live system's own,
``streamtrain.scale.action_costs.MEASURED_COSTS`` (``python -m benchmarks.scaling`` on the
embedded broker; docs/benchmarks.md, "Scaling a live job"): nothing else in the simulator
knows where they come from, and the live planner reads the same module.

* The pause of an action is taken as measured: the whole job's full-stop equivalent
  (the backlog's peak above its steady level over the arrival rate), in every mode,
  drawn uniformly with the measured standard deviation as ``sqrt(3)`` times the spread.
  ``group`` is the eager rebalance that stops every worker, ``cooperative`` moves only
  what changes hands, ``shards`` moves no partition (its pause is the shard hand-over).
* The preparation of a new worker (containers, image pull, model load) cannot be
  measured on the demo's tiny model and one machine: it keeps a real job's scale (KALE
  §1's ≈10-min restart: containers 30 s, image 30 s, model load 360 s, besides the 60-s
  checkpoint of :class:`~streamtrain.sim.execution.ActionCosts`): 420 s in every mode.

With one model on every worker (``streamtrain simulate --engine torchft|torchelastic``)
the pause is that engine's measured one (``ENGINE_COSTS`` in the same module).
``streamtrain simulate --<mode>-prep-s / --<mode>-pause-s`` replace them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from streamtrain.config import AssignmentMode
from streamtrain.errors import ConfigError
from streamtrain.scale.action_costs import MEASURED_COSTS, measured_cost

__all__ = ["LiveEstimate", "ModeCost", "from_live", "measured_mode_costs"]


class LiveEstimate(Protocol):
    """One mode's live measurement (the shape of ``ActionCostEstimate``): wall seconds;
    ``pause_s`` is the action's pause as full-stop seconds of the whole job."""

    @property
    def pause_s(self) -> float: ...

    @property
    def pause_spread_s(self) -> float: ...


@dataclass(frozen=True, slots=True)
class ModeCost:
    """One mode's action costs. The hand-over stall of an action is drawn uniformly from
    ``pause_s ± pause_spread_s``; with ``moved_only`` it stops only the share of the
    partitions that change hands (``|Δw| / max(from, to)``), so its cost in lost
    training is that share of the stall."""

    prep_s: float  # new workers: containers, image, model load (until READY)
    pause_s: float  # mean stall of the data hand-over
    pause_spread_s: float  # half-width of its uniform distribution
    moved_only: bool  # the stall hits only the partitions that change hands

    def __post_init__(self) -> None:
        if min(self.prep_s, self.pause_s, self.pause_spread_s) < 0:
            raise ConfigError("preparation, pause and spread cannot be negative")
        if self.pause_spread_s > self.pause_s:
            raise ConfigError("the pause's spread cannot exceed its mean (no negative pauses)")

    def with_means(self, *, prep_s: float | None = None, pause_s: float | None = None) -> ModeCost:
        """The same mode with other means; the spread keeps its share of the pause."""
        pause = self.pause_s if pause_s is None else pause_s
        share = self.pause_spread_s / self.pause_s if self.pause_s > 0 else 0.0
        return ModeCost(
            self.prep_s if prep_s is None else prep_s, pause, pause * share, self.moved_only
        )


_REAL_JOB_PREP_S = 420.0  # containers 30 s + image 30 s + model load 360 s


def from_live(
    estimates: Mapping[AssignmentMode, LiveEstimate], *, prep_s: float = _REAL_JOB_PREP_S
) -> dict[AssignmentMode, ModeCost]:
    """The simulator's costs from the live system's: the pause as measured (already the
    whole job's full-stop equivalent, so not ``moved_only``; its standard deviation as
    a uniform spread, ``sqrt(3)`` times it, at most the mean), the preparation at a real
    job's scale (the live workers' few seconds are a tiny model's on one machine)."""
    return {
        mode: ModeCost(
            prep_s,
            e.pause_s,
            min(e.pause_s, math.sqrt(3.0) * e.pause_spread_s),
            moved_only=False,
        )
        for mode, e in estimates.items()
    }


_MEASURED = from_live(MEASURED_COSTS)


def measured_mode_costs(engine: str = "none") -> dict[AssignmentMode, ModeCost]:
    """Preparation and hand-over stall per assignment mode (see the module docstring);
    with ``engine`` (``torchft``, ``torchelastic``: one model trained by every worker)
    the pause of that engine's measured action
    (:func:`~streamtrain.scale.action_costs.measured_cost`)."""
    if engine == "none":
        return dict(_MEASURED)
    return from_live({mode: measured_cost(mode, engine) for mode in AssignmentMode})
