"""The measured action costs: one entry per assignment mode, shards cheapest."""

import pytest

from streamtrain.config import AssignmentMode
from streamtrain.scale.action_costs import MEASURED_COSTS, measured_cost


def test_every_mode_has_a_measured_cost():
    assert set(MEASURED_COSTS) == set(AssignmentMode)
    for cost in MEASURED_COSTS.values():
        assert cost.prep_s > 0 and cost.pause_s > 0
        assert cost.prep_spread_s >= 0 and cost.pause_spread_s >= 0


def test_modes_are_looked_up_by_name_and_unknown_ones_refused():
    assert measured_cost("shards") is MEASURED_COSTS[AssignmentMode.SHARDS]
    assert measured_cost("shards").pause_s < measured_cost("group").pause_s
    with pytest.raises(ValueError, match="eager"):
        measured_cost("eager")
