"""The planner's compressed clock and seed history, without a broker."""

import json
from typing import Any

import numpy as np
import pytest

from streamtrain.errors import ConfigError
from streamtrain.proto import control_plane_pb2 as cp
from streamtrain.scale.planner import LagReading, Planner
from streamtrain.scale.planner_settings import PlannerSettings
from streamtrain.scale.samples import SampleSettings
from streamtrain.scale.timescale import SeedHistory, TimeScale, read_seed_history

T0 = 1_700_000_000.0


def test_time_scale_converts_times_rates_and_durations_both_ways():
    clock = TimeScale(144.0, T0)
    assert clock.model_s(T0) == T0
    assert clock.model_s(T0 + 10) == T0 + 1440
    assert clock.wall_s(clock.model_s(T0 + 3.5)) == pytest.approx(T0 + 3.5)
    assert clock.model_rate(1440.0) == 10.0
    assert clock.wall_rate(10.0) == 1440.0
    assert clock.model_duration(2.0) == 288.0
    sample = cp.ThroughputSample(
        records_per_s_trained=288.0, window_s=1.0, observed_at_ms=int((T0 + 1) * 1000)
    )
    model = clock.model_sample(sample)
    assert model.records_per_s_trained == 2.0 and model.window_s == 144.0
    assert not model.HasField("disturbed_s")
    sample.disturbed_s = 5.0  # a dead peer's 5-s timeout is 12 model minutes at 144x
    assert clock.model_sample(sample).disturbed_s == 720.0
    assert model.observed_at_ms == int((T0 + 144) * 1000)
    assert sample.records_per_s_trained == 288.0  # the original is untouched
    identity = TimeScale()
    assert identity.identity and identity.model_sample(sample) is sample


@pytest.mark.parametrize("factor", [0.0, -1.0, float("inf"), float("nan")])
def test_time_scale_rejects_bad_factors(factor):
    with pytest.raises(ConfigError, match="positive factor"):
        TimeScale(factor)


def test_seed_history_reads_json_and_rejects_bad_files(tmp_path):
    path = tmp_path / "seed.json"
    path.write_text(json.dumps({"step_s": 300, "end_at_ms": T0 * 1000, "records_per_s": [1, 2]}))
    seed, end_s = read_seed_history(path)
    assert seed == SeedHistory(300, (1.0, 2.0)) and end_s == T0
    path.write_text(json.dumps({"step_s": 300, "records_per_s": [1]}))
    with pytest.raises(ConfigError, match="not a seed history"):
        read_seed_history(path)
    with pytest.raises(ConfigError, match="no seed history"):
        read_seed_history(tmp_path / "missing.json")
    with pytest.raises(ConfigError, match="negative or non-finite"):
        SeedHistory(300, (1.0, -2.0))


def _compressed_planner(**kwargs):
    settings: dict[str, Any] = {
        "job": "demo",
        "group": "trainer",
        "policy": "streamtrain",
        "step_s": 300,
        "max_workers": 8,
        "initial_workers": 1,
        "samples": SampleSettings(bucket_s=300.0, prior_single_worker_records_per_s=1.0),
        "time_scale": TimeScale(144.0, T0),
        "forecaster": "seasonal_naive",
    }
    return Planner(PlannerSettings(**(settings | kwargs)))


def test_a_seeded_planner_forecasts_the_seeded_day_on_the_wall_clock():
    day = 288  # 300-s steps
    shape = 1.0 + np.sin(np.linspace(0, 2 * np.pi, day, endpoint=False)) * 0.5
    seed = SeedHistory(300, tuple(np.tile(shape, 2)))
    p = _compressed_planner(history=seed)
    assert len(p.arrivals) == 2 * day
    assert p.arrivals.history_start_s + 2 * day * 300 <= T0  # it ends where the clock starts
    for wall in np.arange(T0, T0 + 20, 1.0):  # 20 wall s = 48 model min
        p.observe_lag(LagReading(wall, 144.0 * shape[0], 0.5, 0.0))
        p.tick(wall + 0.5)
    status = p.status()
    assert status["time_scale"] == 144.0
    forecast = status["forecast"]
    assert forecast is not None and forecast["step_s"] == pytest.approx(300 / 144)
    # Seasonal naive repeats the seeded day, one season back from the forecast's first
    # step; the rates come back per wall second and the step's start on the wall clock.
    first_model_s = T0 + (forecast["first_step_at_ms"] / 1000 - T0) * 144
    live = round((first_model_s - (T0 // 300) * 300) / 300)  # live steps before it
    assert 1 <= live <= len(p.arrivals) - 2 * day
    expected = 144.0 * shape[live : live + 10]
    assert forecast["records_per_s"][:10] == pytest.approx(expected, rel=1e-3)
    # which model answers, and its quantile band (the seasonal differences' quantiles)
    assert forecast["model"] == forecast["live"] == "seasonal_naive"
    low, high = forecast["low_records_per_s"], forecast["high_records_per_s"]
    assert forecast["quantiles"] == [0.1, 0.9] and len(low) == len(high)
    assert all(lo <= hi for lo, hi in zip(low, high, strict=True))


def test_commands_carry_wall_clock_times_and_lag_is_read_in_model_seconds():
    hpa = (
        ("metric", "lag"),
        ("target", 10),
        ("sync_period_s", 1),
        ("readiness_delay_s", 0),
        ("metric_window_s", 0),
        ("scale_down_window_s", 0),
    )
    p = _compressed_planner(policy="hpa", policy_settings=hpa, step_s=60, samples=SampleSettings())
    # 1 wall second of lag is 144 model seconds: HPA on lag (target 10 s) scales up.
    p.observe_lag(LagReading(T0 + 1, 100.0, 1.0, 100.0))
    out = p.tick(T0 + 2)
    assert out.command is not None and out.command.target_workers > 1
    assert abs(out.command.created_at_ms / 1000 - (T0 + 2)) < 0.01


def test_a_seeded_planner_does_not_decide_before_its_history_ends():
    p = _compressed_planner(history=SeedHistory(300, (1.0,) * 288))
    p.observe_lag(LagReading(T0 - 5, 0.0, 0.0, 0.0))
    out = p.tick(T0 - 4)
    assert out.command is None and "seed history" in out.note
    assert len(p.arrivals) == 288


def test_a_seed_with_another_step_is_a_config_error():
    with pytest.raises(ConfigError, match="seed history's step"):
        PlannerSettings(job="j", group="g", step_s=60, history=SeedHistory(300, (1.0,)))
