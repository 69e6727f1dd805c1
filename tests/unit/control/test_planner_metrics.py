"""The planner's Prometheus series: read from the agent's state, unknowns left out."""

from types import SimpleNamespace

from prometheus_client import CollectorRegistry, generate_latest

from streamtrain.control.planner_metrics import PlannerCollector, forecast_now
from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.scale.trigger import TriggerState

FORECAST = {"first_step_at_ms": 100_000, "step_s": 60.0, "records_per_s": [10.0, 20.0, 30.0]}


def test_forecast_now_picks_the_current_step():
    assert forecast_now(FORECAST, 100.0) == 10.0
    assert forecast_now(FORECAST, 100.0 + 61) == 20.0
    assert forecast_now(FORECAST, 100.0 + 179.9) == 30.0
    assert forecast_now(FORECAST, 100.0 + 180) is None  # past the horizon
    assert forecast_now(FORECAST, 99.0) is None
    assert forecast_now(None, 100.0) is None
    assert forecast_now({**FORECAST, "records_per_s": []}, 100.0) is None


def _agent(status, last=None, policy=None, sent=0):
    planner = SimpleNamespace(
        settings=SimpleNamespace(job="ctr", group="ctr-group"),
        last_command=last,
        commands_sent=sent,
        policy=policy,
    )
    return SimpleNamespace(planner=planner, status=status)


def _scrape(agent, now_s=130.0):
    registry = CollectorRegistry()
    registry.register(PlannerCollector(agent, clock=lambda: now_s))
    return generate_latest(registry).decode()


LABELS = 'group="ctr-group",streamtrain_job="ctr"'


def test_series_from_the_status_and_the_newest_command():
    last = pb.ScaleCommand(
        target_workers=6, created_at_ms=120_000, reason=pb.ScaleCommand.PROACTIVE
    )
    policy = SimpleNamespace(trigger=TriggerState(active=True, cause="lag"))
    text = _scrape(
        _agent(
            {"current_workers": 4, "forecast": FORECAST, "cannot_keep_up": False}, last, policy, 3
        )
    )
    assert f"streamtrain_planner_current_workers{{{LABELS}}} 4.0" in text
    assert f"streamtrain_planner_target_workers{{{LABELS}}} 6.0" in text
    assert f"streamtrain_planner_commands_total{{{LABELS}}} 3.0" in text
    assert f"streamtrain_planner_last_command_timestamp_seconds{{{LABELS}}} 120.0" in text
    assert f"streamtrain_planner_fallback_active{{{LABELS}}} 1.0" in text
    assert f"streamtrain_planner_forecast_records_per_second{{{LABELS}}} 10.0" in text
    assert f"streamtrain_planner_cannot_keep_up{{{LABELS}}} 0.0" in text


def test_before_the_first_tick_unknowns_are_left_out():
    text = _scrape(_agent({}))
    assert "streamtrain_planner_current_workers{" not in text
    assert "streamtrain_planner_forecast_records_per_second{" not in text
    assert "streamtrain_planner_last_command_timestamp_seconds{" not in text
    assert f"streamtrain_planner_fallback_active{{{LABELS}}} 0.0" in text


def test_a_policy_without_a_trigger_is_in_fallback_when_its_newest_command_was():
    last = pb.ScaleCommand(target_workers=2, reason=pb.ScaleCommand.FALLBACK)
    text = _scrape(_agent({"current_workers": 1}, last, policy=SimpleNamespace()))
    assert f"streamtrain_planner_fallback_active{{{LABELS}}} 1.0" in text
