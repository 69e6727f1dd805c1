"""Every policy on one trace: scaling the job to the trace, the history split, gaps,
determinism, and the JSON shape."""

from typing import Any

import numpy as np
import pytest

from streamtrain.errors import ConfigError
from streamtrain.forecast.trace import Trace, synth_trace
from streamtrain.scale.plan import basic_plan
from streamtrain.scale.policies import POLICY_NAMES
from streamtrain.sim.execution import RestartMode, ShuffleMode
from streamtrain.sim.runner import DEFAULT_MODELS, SimSettings, scaled_model, simulate

FAST: dict[str, Any] = dict(partitions=16, tick_s=60)


@pytest.fixture(scope="module")
def trace():
    return synth_trace(2, seed=1)


@pytest.fixture(scope="module")
def report(trace):
    return simulate(trace, SimSettings(**FAST))


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("peak_workers", [2, 8, 24])
def test_the_peak_needs_exactly_peak_workers(kind, peak_workers):
    model = scaled_model(DEFAULT_MODELS[kind], 123_456.0, peak_workers)
    assert basic_plan(model, [123_456.0], max_workers=64).workers == (peak_workers,)


def test_every_policy_reports_every_metric(report):
    payload = report.as_json()
    assert list(payload["policies"]) == list(POLICY_NAMES)
    for metrics in payload["policies"].values():
        assert set(metrics) == {
            "violation_rate",
            "accumulated_lag_min",
            "downtime_min",
            "worker_hours",
            "scaling_actions",
            "peak_lag_min",
        }
        assert 0 <= metrics["violation_rate"] <= 1


def test_adequate_holds_its_maximum_all_day(report):
    m = report.metrics["adequate"]
    assert report.max_workers == 28  # ceil(24 x 7 / 6)
    assert m.scaling_actions == 0 and m.downtime_min == 0
    assert m.worker_hours == pytest.approx(28 * 24)


def test_the_window_is_the_last_day_and_runs_are_conserving(report, trace):
    np.testing.assert_array_equal(report.rates_records_per_s, trace.zero_filled()[-1440:])
    for run in report.runs.values():
        assert run.consumed_records + run.final_backlog_records == pytest.approx(
            run.arrived_records, rel=1e-9
        )


def test_same_seed_same_table_other_seed_other_skew(trace):
    settings = SimSettings(policies=("hpa", "kale"), shuffle=ShuffleMode.OFF, **FAST)
    first = simulate(trace, settings).as_json()
    assert simulate(trace, settings).as_json() == first
    other = SimSettings(policies=("hpa", "kale"), shuffle=ShuffleMode.OFF, seed=9, **FAST)
    assert simulate(trace, other).as_json() != first


def test_gaps_are_no_traffic():
    values = np.full(2 * 1440, 100.0)
    values[-100:-50] = np.nan
    gappy = Trace(0.0, 60, values, "gappy")
    result = simulate(gappy, SimSettings(policies=("adequate",), **FAST))
    assert np.all(result.rates_records_per_s[-100:-50] == 0)
    assert result.runs["adequate"].arrived_records == pytest.approx(100.0 * 60 * 1390)


def test_forced_execution_modes():
    settings = SimSettings(shuffle=ShuffleMode.OFF, restart=RestartMode.TWO_PHASE)
    assert not settings.execution("kale").shuffle
    assert settings.execution("hpa").two_phase
    default = SimSettings()
    assert default.execution("streamtrain").two_phase and default.execution("kale").shuffle
    assert not default.execution("hpa").shuffle
    assert SimSettings(restart_s=300).execution("hpa").costs.restart_s == pytest.approx(300)


def test_execution_modes_are_typed_and_checked():
    settings = SimSettings(shuffle="on", restart="pause")  # type: ignore[arg-type]
    assert settings.shuffle is ShuffleMode.ON and settings.restart is RestartMode.PAUSE
    with pytest.raises(ConfigError, match="shuffle must be"):
        SimSettings(shuffle="sideways")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="restart must be"):
        SimSettings(restart="reboot")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"policies": ("oracle",)},
        {"policies": ()},
        {"peak_workers": 1},
        {"max_workers": 10},
        {"simulate_days": 0},
        {"shuffle": "sometimes"},
        {"restart": "never"},
        {"model": "linear"},
    ],
)
def test_bad_settings(kwargs):
    with pytest.raises(ConfigError):
        SimSettings(**kwargs)


def test_a_trace_shorter_than_the_window(trace):
    with pytest.raises(ConfigError, match="cannot simulate"):
        simulate(trace, SimSettings(simulate_days=3, **FAST))


def test_issue_targets_on_the_synthetic_kale_shaped_week():
    # The default scenario (`streamtrain simulate` without --trace): the last day of a
    # synthetic KALE-shaped week, 800 partitions. KALE Table 3's ordering: KALE cuts
    # HPA's accumulated lag by >= 60 % and its violation rate, within 110 % of HPA's
    # worker-hours; streamtrain beats KALE on lag and downtime with no more worker-hours.
    metrics = simulate(
        synth_trace(7, seed=0), SimSettings(policies=("hpa", "kale", "streamtrain"))
    ).metrics
    hpa, kale, ours = metrics["hpa"], metrics["kale"], metrics["streamtrain"]
    assert kale.accumulated_lag_min <= 0.4 * hpa.accumulated_lag_min
    assert kale.violation_rate < hpa.violation_rate
    assert kale.worker_hours <= 1.1 * hpa.worker_hours
    assert ours.accumulated_lag_min < kale.accumulated_lag_min
    assert ours.downtime_min < kale.downtime_min
    assert ours.worker_hours <= kale.worker_hours
