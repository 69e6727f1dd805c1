"""What a scaling action costs per assignment mode and engine, as measured: the one home
of the numbers.

Owned here (pure): :data:`MEASURED_COSTS`, per
:class:`~streamtrain.config.AssignmentMode`, the preparation time of a scale-up and the
pause of an action (mean and spread, **wall seconds**) of workers that each train their
own model (``--engine none``); :data:`ENGINE_COSTS`, the same for one model trained by
every worker, per engine (``torchft``, ``torchelastic``); and :func:`measured_cost`. The
live planner's defaults (``streamtrain lag run --plan-assignment --plan-engine``) come
from here, scaled to its model clock; the simulator reads its defaults from here too
(``streamtrain simulate --engine``), so the simulated policy and the live one make the
same assumption. How each was measured: docs/benchmarks.md, "Scaling a live job" and
"Elastic training"; re-measure and update the numbers together with those sections.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from streamtrain.config import AssignmentMode
from streamtrain.errors import ConfigError

__all__ = ["ENGINES", "ENGINE_COSTS", "MEASURED_COSTS", "ActionCostEstimate", "measured_cost"]


@dataclass(frozen=True, slots=True)
class ActionCostEstimate:
    """Preparation and pause of one scaling action, wall seconds (mean and spread).

    ``prep_s``: from the executor's command until every new worker said READY (process
    up, app warm-started, connected): the two-phase executor's preparation, during which
    the running workers keep training. ``pause_s``: the action's pause as full-stop
    seconds of the whole job: the backlog's peak above its steady level divided by the
    arrival rate (:func:`streamtrain.scale.handover.action_costs`).
    """

    prep_s: float
    prep_spread_s: float
    pause_s: float
    pause_spread_s: float


# ``python -m benchmarks.scaling``: means and population standard deviations over the
# actions of two runs for group and cooperative (8 actions; prep over their 4 scale-ups),
# of the second run for shards (4 actions: the shard hand-over changed between the runs).
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


# The engines' names (streamtrain.elastic.settings.EngineKind's values; spelled out here so
# that the planner imports no torch).
ENGINES = ("none", "torchft", "torchelastic")

# ``python -m benchmarks.elastic`` (shards, three runs): pause_s is the largest gap between
# committed steps of the workers that stay (no step commits anywhere meanwhile, so it is
# the whole job's full stop), over the 9 actions; prep_s a joiner's start to its first
# committed step (it is READY just before: it holds the job's weights). With another
# assignment mode the mode's own hand-over comes on top (measured_cost).
ENGINE_COSTS: Mapping[str, ActionCostEstimate] = {
    # the others keep stepping: a join is one quorum change and a heal of the weights, a
    # drained leave waits for the lighthouse to miss the leaver's heartbeat (500 ms)
    "torchft": ActionCostEstimate(
        prep_s=10.0, prep_spread_s=3.1, pause_s=0.49, pause_spread_s=0.28
    ),
    # every join or leave restarts every worker from the newest checkpoint
    "torchelastic": ActionCostEstimate(
        prep_s=24.6, prep_spread_s=7.0, pause_s=25.3, pause_spread_s=14.3
    ),
}


def measured_cost(mode: AssignmentMode | str, engine: str = "none") -> ActionCostEstimate:
    """The measured cost of an action in ``mode`` on ``engine``: an engine's cost plus the
    mode's own hand-over (``shards`` was the engines' mode: their cost has it)."""
    base = MEASURED_COSTS[AssignmentMode(mode)]
    if engine == "none":
        return base
    if engine not in ENGINE_COSTS:
        raise ConfigError(f"the engine is one of {', '.join(ENGINES)}, got {engine!r}")
    cost = ENGINE_COSTS[engine]
    if AssignmentMode(mode) is AssignmentMode.SHARDS:
        return cost  # measured with shards: their hand-over is in it
    return ActionCostEstimate(
        prep_s=max(cost.prep_s, base.prep_s),
        prep_spread_s=max(cost.prep_spread_s, base.prep_spread_s),
        pause_s=cost.pause_s + base.pause_s,
        pause_spread_s=cost.pause_spread_s + base.pause_spread_s,
    )
