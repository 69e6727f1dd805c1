"""The baselines' grid search: the rule that picks a point, and a tuning run."""

from dataclasses import replace

import pytest

from streamtrain.errors import ConfigError
from streamtrain.forecast.trace import synth_trace
from streamtrain.sim.settings import SimSettings
from streamtrain.sim.tuning import (
    GRID_BUDGET,
    GRIDS,
    OWN_GRIDS,
    TuningRule,
    choose,
    tune,
    tuning_window,
    with_tuned,
)


def test_the_cheapest_point_that_meets_the_slo():
    rows: list[tuple[dict[str, object], float, float, float]] = [
        ({"target": 0.5}, 0.0, 100.0, 500.0),
        ({"target": 0.7}, 0.005, 300.0, 400.0),
        ({"target": 0.8}, 0.0, 250.0, 402.0),  # within 1 % of the cheapest, less lag
        ({"target": 0.9}, 0.05, 900.0, 300.0),  # cheapest, but violates the SLO
    ]
    assert choose(rows, TuningRule()) == {"target": 0.8}
    assert choose(rows, TuningRule(max_violation=0.1)) == {"target": 0.9}
    none_meet: list[tuple[dict[str, object], float, float, float]] = [
        ({"a": 1}, 0.2, 1.0, 100.0),
        ({"a": 2}, 0.1, 9.0, 200.0),
    ]
    assert choose(none_meet, TuningRule()) == {"a": 2}
    with pytest.raises(ConfigError):
        choose([], TuningRule())
    with pytest.raises(ConfigError):
        TuningRule(seeds=0)


def test_grids_name_real_settings():
    from streamtrain.scale.policies import make_policy
    from streamtrain.scale.policy import PolicyContext

    context = PolicyContext(throughput_observations=((1.0, 10.0), (2.0, 19.0)) * 3)
    for policy, points in GRIDS.items():
        assert len(points) >= 5
        for point in points:
            make_policy(policy, context, **point)  # a ConfigError for unknown keys
    assert GRID_BUDGET == 16  # Autopilot's percentile x margin
    for policy, points in OWN_GRIDS.items():
        assert len(points) == GRID_BUDGET  # KALE and streamtrain: the same budget
        assert len({tuple(sorted(p.items())) for p in points}) == len(points)
        for point in points:
            make_policy(policy, context, **point)


def test_tuning_on_the_days_before_the_window():
    trace = synth_trace(3, seed=4)
    settings = SimSettings(
        policies=("hpa", "kale"), partitions=16, tick_s=60, forecaster="seasonal_naive"
    )
    window = tuning_window(trace, settings)
    assert window is not None
    assert window.rates_records_per_s.shape[0] == 1440
    assert window.history_records_per_s.shape[0] == 1440  # day 1 is its history
    assert tuning_window(synth_trace(2, seed=4), settings) is None
    result = tune(window, settings, rule=TuningRule(seeds=1))
    assert set(result.chosen) == {"hpa"}  # KALE is not tuned
    assert len(result.scores["hpa"]) == len(GRIDS["hpa"])
    assert result.chosen["hpa"] in GRIDS["hpa"]
    given = replace(settings, policy_settings={"hpa": {"target": 0.55}})
    merged = with_tuned(given, result).policy_settings["hpa"]
    assert merged["target"] == 0.55  # what the user set wins
    assert merged["scale_down_window_s"] == result.chosen["hpa"]["scale_down_window_s"]


def test_kale_and_streamtrain_tuned_the_same_way_on_request():
    trace = synth_trace(3, seed=4)
    settings = SimSettings(
        policies=("hpa", "kale"), partitions=16, tick_s=60, forecaster="seasonal_naive"
    )
    window = tuning_window(trace, settings)
    assert window is not None
    small = {"kale": OWN_GRIDS["kale"][:2]}
    result = tune(window, settings, rule=TuningRule(seeds=1), policies=["kale"], grids=small)
    assert set(result.chosen) == {"kale"}
    assert result.chosen["kale"] in small["kale"]
    assert [row[0] for row in result.scores["kale"]] == list(small["kale"])
