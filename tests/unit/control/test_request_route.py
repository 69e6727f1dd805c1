"""With --allocator, the planner's command becomes a request for the allocator."""

import pytest

from streamtrain.control.request_route import as_request
from streamtrain.errors import ConfigError
from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.scale.planner_settings import PlannerSettings


def test_a_command_becomes_a_request_with_the_jobs_bounds_and_class():
    command = pb.ScaleCommand(
        command_id="ads-1",
        job="ads",
        current_workers=2,
        target_workers=5,
        reason=pb.ScaleCommand.FALLBACK,
        plan=[5, 5, 6],
        plan_step_s=60,
        created_at_ms=1_000,
        explanation="lag above target",
    )
    planner = PlannerSettings(job="ads", group="g", min_workers=2, max_workers=12)
    request = as_request(command, planner, "opportunistic")
    assert request.job_class == pb.ScaleRequest.OPPORTUNISTIC
    assert (request.current_workers, request.wanted_workers) == (2, 5)
    assert list(request.plan) == [5, 5, 6] and request.plan_step_s == 60
    assert (request.min_workers, request.max_workers) == (2, 12)
    assert request.action_pause_s == planner.action_pause_s
    assert request.reason == pb.ScaleCommand.FALLBACK
    assert request.created_at_ms == 1_000 and request.request_id == "ads-1"
    with pytest.raises(ConfigError):
        as_request(command, planner, "serving")


def test_the_workers_step_time_goes_with_the_request():
    command = pb.ScaleCommand(command_id="ads-2", job="ads", current_workers=2, target_workers=3)
    planner = PlannerSettings(job="ads", group="g", min_workers=1, max_workers=8)
    assert not as_request(command, planner, "guarantee").HasField("step_time_ms")
    request = as_request(command, planner, "guarantee", step_time_ms=42.5)
    assert request.step_time_ms == 42.5
