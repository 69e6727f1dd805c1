"""The two tools' costs: action phases per assignment mode (measured hand-over stalls,
a real job's preparation), and the measured numbers' one home."""

from dataclasses import dataclass

import pytest

from streamtrain.config import AssignmentMode
from streamtrain.errors import ConfigError
from streamtrain.scale.action_costs import MEASURED_COSTS
from streamtrain.sim.execution import ActionCosts, Execution, action_phases
from streamtrain.sim.handover import ModeCost, from_live, measured_mode_costs

GROUP_PAUSE_S = MEASURED_COSTS[AssignmentMode.GROUP].pause_s  # the live system's number
GROUP_SPREAD_S = min(GROUP_PAUSE_S, 3**0.5 * MEASURED_COSTS[AssignmentMode.GROUP].pause_spread_s)


def test_the_measured_costs_cover_every_mode():
    costs = measured_mode_costs()
    assert set(costs) == set(AssignmentMode)
    group = costs[AssignmentMode.GROUP]
    # the live measurement as it is: the whole job's full-stop pause in every mode
    assert (group.pause_s, group.pause_spread_s) == pytest.approx((GROUP_PAUSE_S, GROUP_SPREAD_S))
    assert not any(c.moved_only for c in costs.values())
    for mode, cost in costs.items():
        assert cost.pause_s == MEASURED_COSTS[mode].pause_s
    assert {c.prep_s for c in costs.values()} == {420.0}


def test_pause_and_restart_pauses_for_everything():
    execution = Execution(two_phase=False)
    assert action_phases(4, 8, execution) == pytest.approx((0.0, 60 + 420 + GROUP_PAUSE_S))
    low = GROUP_PAUSE_S - GROUP_SPREAD_S
    assert action_phases(8, 4, execution, draw=0.0) == pytest.approx((0.0, 60 + 420 + low))
    assert ActionCosts().restart_s(AssignmentMode.GROUP) == pytest.approx(480 + GROUP_PAUSE_S)


def test_two_phase_prepares_scale_ups_while_training():
    execution = Execution(two_phase=True)
    # the measured hand-over only
    assert action_phases(4, 8, execution) == pytest.approx((420.0, GROUP_PAUSE_S))
    high = GROUP_PAUSE_S + GROUP_SPREAD_S
    assert action_phases(8, 4, execution, draw=1.0) == pytest.approx((0.0, high))
    costs = ActionCosts(two_phase_checkpoint_s=60.0)  # parameter servers re-partitioned
    phases = action_phases(4, 8, Execution(two_phase=True, costs=costs))
    assert phases == pytest.approx((420.0, 60 + GROUP_PAUSE_S))


def test_only_the_moved_share_stalls_where_the_mode_allows():
    moved = ModeCost(420.0, 5.5, 2.5, moved_only=True)
    whole = ModeCost(420.0, 4.5, 1.5, moved_only=False)
    costs = ActionCosts(
        60.0,
        {
            AssignmentMode.GROUP: whole,
            AssignmentMode.COOPERATIVE: moved,
            AssignmentMode.SHARDS: ModeCost(420.0, 0.0, 0.0, moved_only=True),
        },
    )
    for mode, up, down in (
        (AssignmentMode.GROUP, 4.5, 4.5),
        (AssignmentMode.COOPERATIVE, 5.5 * 4 / 8, 5.5 * 2 / 8),
        (AssignmentMode.SHARDS, 0.0, 0.0),
    ):
        execution = Execution(two_phase=True, assignment=mode, costs=costs)
        assert action_phases(4, 8, execution)[1] == pytest.approx(up)
        assert action_phases(8, 6, execution)[1] == pytest.approx(down)


def test_other_means_keep_the_spread_share():
    cost = ModeCost(420.0, 4.5, 1.5, moved_only=False).with_means(pause_s=9.0, prep_s=100.0)
    assert (cost.prep_s, cost.pause_s, cost.pause_spread_s) == (100.0, 9.0, 3.0)
    zero = ModeCost(420.0, 0.0, 0.0, moved_only=True).with_means(pause_s=2.0)
    assert zero.pause_spread_s == 0.0


def test_bad_costs():
    with pytest.raises(ConfigError):
        ModeCost(-1.0, 1.0, 0.0, moved_only=False)
    with pytest.raises(ConfigError, match="spread"):
        ModeCost(1.0, 1.0, 2.0, moved_only=False)
    with pytest.raises(ConfigError, match="missing"):
        ActionCosts(60.0, {AssignmentMode.GROUP: measured_mode_costs()[AssignmentMode.GROUP]})
    with pytest.raises(ConfigError):
        action_phases(4, 0, Execution())
    with pytest.raises(ConfigError):
        action_phases(4, 5, Execution(), draw=1.5)


def test_the_live_measurement_converts_to_whole_job_pauses_at_a_real_jobs_prep():
    @dataclass(frozen=True)
    class Live:  # the shape of scale.action_costs.ActionCostEstimate
        prep_s: float
        prep_spread_s: float
        pause_s: float
        pause_spread_s: float

    costs = from_live(
        {
            AssignmentMode.GROUP: Live(2.08, 0.85, 3.63, 1.0),
            AssignmentMode.SHARDS: Live(1.9, 0.54, 0.75, 0.56),
        }
    )
    group, shards = costs[AssignmentMode.GROUP], costs[AssignmentMode.SHARDS]
    assert (group.prep_s, group.pause_s, group.moved_only) == (420.0, 3.63, False)
    assert group.pause_spread_s == pytest.approx(3**0.5)  # a uniform with the same sd
    assert shards.pause_spread_s == 0.75  # a uniform spread never below zero
    assert (
        from_live({AssignmentMode.GROUP: Live(2, 0, 3, 0)}, prep_s=30.0)[
            AssignmentMode.GROUP
        ].prep_s
        == 30.0
    )


def test_the_papers_restart_cost_for_every_mode():
    costs = ActionCosts().with_restart_s(600.0)
    for mode in AssignmentMode:
        assert costs.restart_s(mode) == pytest.approx(600.0)
        execution = Execution(two_phase=False, costs=costs, assignment=mode)
        prep_s, pause_s = action_phases(4, 6, execution)
        assert prep_s == 0.0
        assert pause_s == pytest.approx(600.0)
    with pytest.raises(ConfigError):
        ActionCosts().with_restart_s(30.0)  # shorter than the checkpoint


def test_one_model_engines_plan_with_their_own_measured_pause():
    from streamtrain.scale.action_costs import ENGINE_COSTS

    for engine in ("torchft", "torchelastic"):
        costs = measured_mode_costs(engine)
        assert costs[AssignmentMode.SHARDS].pause_s == ENGINE_COSTS[engine].pause_s
        # the same preparation at a real job's scale as without an engine
        assert (
            costs[AssignmentMode.SHARDS].prep_s
            == measured_mode_costs()[AssignmentMode.SHARDS].prep_s
        )
    assert (
        measured_mode_costs("torchelastic")[AssignmentMode.SHARDS].pause_s
        > 10 * measured_mode_costs("torchft")[AssignmentMode.SHARDS].pause_s
    )
