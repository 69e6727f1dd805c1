"""Prometheus metrics of the planner in the control app (``lag run --plan-job``).

Owned here: :class:`PlannerCollector`, built at scrape time from what the planner agent
already keeps (read only, never changing the planner): the status dict its timer
replaces whole after each tick, the newest command, and the policy's fallback trigger.
Labels: ``streamtrain_job`` (a label named ``job`` would clash with the one Prometheus
gives every target) and ``group`` (the job's consumer group, as on the lag series, so
forecast and measured traffic line up). Unknown values are left out.

Series: ``streamtrain_planner_current_workers``, ``streamtrain_planner_target_workers``
(the newest command's target; the current count before any), ``streamtrain_planner_commands_total``,
``streamtrain_planner_last_command_timestamp_seconds`` (a change marks a scaling action),
``streamtrain_planner_fallback_active`` (1 while the policy's fallback trigger is active;
for a policy without one, while its newest command came from the fallback path),
``streamtrain_planner_forecast_records_per_second`` (the forecast for the current step,
records per wall second), ``streamtrain_planner_cannot_keep_up``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.scale.trigger import TriggerState
from streamtrain.units import MS_PER_S

if TYPE_CHECKING:
    from streamtrain.control.planner_agent import PlannerAgent

__all__ = ["PlannerCollector", "forecast_now"]

_LABELS = ["streamtrain_job", "group"]


def forecast_now(forecast: Mapping[str, Any] | None, now_s: float) -> float | None:
    """The point forecast for the step ``now_s`` falls in (``/planner``'s ``forecast``:
    ``first_step_at_ms``, ``step_s``, ``records_per_s``); None outside its horizon."""
    if not forecast:
        return None
    step_s = float(forecast.get("step_s") or 0.0)
    values = forecast.get("records_per_s") or []
    if step_s <= 0 or not values:
        return None
    index = math.floor((now_s - forecast["first_step_at_ms"] / MS_PER_S) / step_s)
    return float(values[index]) if 0 <= index < len(values) else None


class PlannerCollector(Collector):
    def __init__(self, agent: PlannerAgent, clock: Callable[[], float] = time.time) -> None:
        self.agent = agent
        self.clock = clock

    def describe(self) -> Iterator[Metric]:
        return iter(())

    def _fallback(self, last: pb.ScaleCommand | None) -> bool:
        trigger = getattr(self.agent.planner.policy, "trigger", None)
        if isinstance(trigger, TriggerState):
            return trigger.active
        return last is not None and last.reason == pb.ScaleCommand.FALLBACK

    def collect(self) -> Iterator[Metric]:
        planner = self.agent.planner
        status = self.agent.status  # replaced whole after each tick
        last = planner.last_command
        labels = [planner.settings.job, planner.settings.group]

        def gauge(name: str, text: str, value: float | None) -> GaugeMetricFamily:
            family = GaugeMetricFamily(f"streamtrain_planner_{name}", text, labels=_LABELS)
            if value is not None:
                family.add_metric(labels, value)
            return family

        current = status.get("current_workers")
        target = last.target_workers if last is not None else current
        yield gauge("current_workers", "The worker count the planner sees.", current)
        yield gauge("target_workers", "The newest command's target (else the current).", target)
        commands = CounterMetricFamily(
            "streamtrain_planner_commands", "ScaleCommands the planner sent.", labels=_LABELS
        )
        commands.add_metric(labels, planner.commands_sent)
        yield commands
        yield gauge(
            "last_command_timestamp_seconds",
            "When the newest ScaleCommand was created (a change is a scaling action).",
            last.created_at_ms / MS_PER_S if last is not None else None,
        )
        yield gauge(
            "fallback_active",
            "1 while the planner follows its threshold fallback instead of the forecast.",
            1.0 if self._fallback(last) else 0.0,
        )
        yield gauge(
            "forecast_records_per_second",
            "The forecast arrival rate for the current step (records per second).",
            forecast_now(status.get("forecast"), self.clock()),
        )
        behind = status.get("cannot_keep_up")
        yield gauge(
            "cannot_keep_up",
            "1 while no worker count within the limits reaches the recent traffic.",
            None if behind is None else float(bool(behind)),
        )
