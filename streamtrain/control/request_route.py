"""Where the planner's decisions go: straight to the executors, or to the cluster
allocator (``streamtrain lag run --allocator``).

Owned here: :func:`as_request` turns the planner's ``ScaleCommand`` into a
``ScaleRequest`` for the allocator (the wanted count is the command's target, with the
plan, the job's bounds, its expected pause, its class and the step time its workers
reported, the AntMan throttle's signal; the allocator, not the planner's
``--max-workers`` alone, decides what the pool can give), and :func:`command_sender`
gives the planner agent one function to send either. Without an allocator the planner
sends its commands as it always has.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from streamtrain.control.service import LagAppSettings
from streamtrain.errors import ConfigError
from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.scale.planner_settings import PlannerSettings
from streamtrain.wire import encode

__all__ = ["JOB_CLASSES", "as_request", "command_sender"]

JOB_CLASSES = {
    "guarantee": pb.ScaleRequest.GUARANTEE,
    "opportunistic": pb.ScaleRequest.OPPORTUNISTIC,
}


def as_request(
    command: pb.ScaleCommand,
    planner: PlannerSettings,
    job_class: str,
    step_time_ms: float | None = None,
) -> pb.ScaleRequest:
    """The request for ``command``; ``step_time_ms``: the job's recent training step as
    its workers reported it (AntMan's interference signal), when known."""
    if job_class not in JOB_CLASSES:
        raise ConfigError(f"the job class must be one of {', '.join(JOB_CLASSES)}")
    request = pb.ScaleRequest(
        request_id=command.command_id,
        job=command.job,
        job_class=JOB_CLASSES[job_class],
        current_workers=command.current_workers,
        wanted_workers=command.target_workers,
        plan=list(command.plan),
        plan_step_s=command.plan_step_s,
        min_workers=planner.min_workers,
        max_workers=planner.max_workers,
        action_pause_s=planner.action_pause_s,
        reason=command.reason,
        created_at_ms=command.created_at_ms,
        explanation=command.explanation,
    )
    if step_time_ms is not None:
        request.step_time_ms = step_time_ms
    return request


def command_sender(
    app: Any,
    settings: LagAppSettings,
    commands: Any,
    planner: PlannerSettings,
    step_time_ms: Callable[[], float | None] | None = None,
) -> tuple[Callable[[pb.ScaleCommand], Awaitable[object]], str]:
    """A function that sends one planner command where it should go, and that topic
    (``step_time_ms``: the job's recent step time for its requests to the allocator)."""
    topic_name = settings.requests_topic
    if topic_name is None:

        def to_executors(command: pb.ScaleCommand) -> Awaitable[object]:
            send: Awaitable[object] = commands.send(key=command.job.encode(), value=encode(command))
            return send

        return to_executors, settings.commands_topic
    requests = app.topic(topic_name, key_serializer="raw", value_serializer="raw", partitions=1)

    def to_allocator(command: pb.ScaleCommand) -> Awaitable[object]:
        step_ms = None if step_time_ms is None else step_time_ms()
        request = as_request(command, planner, settings.job_class, step_ms)
        send: Awaitable[object] = requests.send(key=command.job.encode(), value=encode(request))
        return send

    return to_allocator, topic_name
