"""What a scaling action costs per assignment mode, as measured: the one home of the numbers.

Owned here (pure): :data:`MEASURED_COSTS`, per
:class:`~streamtrain.config.AssignmentMode`, the preparation time of a scale-up and the
pause of an action (mean and spread, **wall seconds**), and :func:`measured_cost`. The
live planner's defaults (``streamtrain lag run --plan-assignment``) come from here,
scaled to its model clock; the simulator reads its defaults from here too, so the
simulated policy and the live one make the same assumption.

* ``prep_s``: from the executor's command until every new worker said READY (process
  up, app warm-started, connected): the two-phase executor's preparation, during which
  the running workers keep training;
* ``pause_s``: the action's pause as full-stop seconds of the whole job: the backlog's
  peak above its steady level divided by the arrival rate
  (:func:`streamtrain.scale.handover.action_costs`).

Measured by ``python -m benchmarks.scaling --json FILE`` (embedded Tansu 0.6.0 broker,
16 partitions, 800 records/s, workers of 300 records/s whose step sleeps, 4 -> 8 -> 4 ->
12 -> 4 workers, 20 s at each size; a 2-core machine shared with other jobs; the runs
are recorded in docs/benchmarks.md, "Scaling a live job"). Means and population
standard deviations over the actions of two runs for ``group`` and ``cooperative`` (8
actions; ``prep_s`` over their 4 scale-ups) and of the second run for ``shards`` (4
actions: the shard hand-over changed between the runs). Re-measure and update these
numbers together with that section when the hand-over changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from streamtrain.config import AssignmentMode

__all__ = ["MEASURED_COSTS", "ActionCostEstimate", "measured_cost"]


@dataclass(frozen=True, slots=True)
class ActionCostEstimate:
    """Preparation and pause of one scaling action, wall seconds."""

    prep_s: float
    prep_spread_s: float
    pause_s: float
    pause_spread_s: float


MEASURED_COSTS: Mapping[AssignmentMode, ActionCostEstimate] = {
    # every join or leave stops every worker for the eager rebalance
    AssignmentMode.GROUP: ActionCostEstimate(
        prep_s=2.08, prep_spread_s=0.85, pause_s=3.63, pause_spread_s=1.0
    ),
    # joins move only what changes hands; leaves stall the moved partitions ~3 s on Tansu
    AssignmentMode.COOPERATIVE: ActionCostEstimate(
        prep_s=2.64, prep_spread_s=0.9, pause_s=2.02, pause_spread_s=1.14
    ),
    # no group: a join or leave moves no partition; the pause is shard hand-over noise
    AssignmentMode.SHARDS: ActionCostEstimate(
        prep_s=1.9, prep_spread_s=0.54, pause_s=0.75, pause_spread_s=0.56
    ),
}


def measured_cost(mode: AssignmentMode | str) -> ActionCostEstimate:
    """The measured cost of an action in ``mode``."""
    return MEASURED_COSTS[AssignmentMode(mode)]
