"""The HPA-style threshold fallback: Kubernetes' formula, tolerance, and scale-down window."""

import pytest

from streamtrain.errors import ConfigError
from streamtrain.scale.fallback import HpaSettings, hpa_desired, stabilize_scale_down

LAG = HpaSettings(target=60.0)  # e.g. 60 s of lag per worker is the goal


@pytest.mark.parametrize(
    "current,metric,expected",
    [
        (4, 60.0, 4),  # on target
        (4, 65.0, 4),  # +8 %: inside the 0.1 tolerance
        (4, 90.0, 6),  # 4 · 1.5 = 6 exactly, not 7
        (4, 67.0, 5),  # +11.7 %: ceil(4.47) = 5
        (10, 30.0, 5),  # half the target: halve
        (3, 0.0, 1),  # nothing to do: down to the minimum
        (2, 6000.0, 64),  # clamped to the maximum
    ],
)
def test_hpa_formula(current, metric, expected):
    assert hpa_desired(current, metric, LAG) == expected


def test_kubernetes_documentation_example():
    # 1 replica at 200 m CPU with a 100 m target asks for 2 replicas.
    assert hpa_desired(1, 200.0, HpaSettings(target=100.0)) == 2


def test_scale_up_is_immediate():
    recs = [(0.0, 4), (15.0, 4), (30.0, 7)]
    assert stabilize_scale_down(4, recs, now_s=30.0, settings=LAG) == 7


def test_scale_down_waits_for_the_window():
    recs = [(0.0, 8), (100.0, 5), (200.0, 4)]
    # 8 was recommended within the last 300 s: stay at 8.
    assert stabilize_scale_down(8, recs, now_s=200.0, settings=LAG) == 8
    # 400 s later, only 5 and 4 are in the window: go down to 5.
    assert stabilize_scale_down(8, [*recs, (350.0, 4)], now_s=350.0, settings=LAG) == 5
    # Much later, only the newest remains.
    assert stabilize_scale_down(8, [*recs, (900.0, 4)], now_s=900.0, settings=LAG) == 4


@pytest.mark.parametrize(
    "kwargs",
    [
        {"target": 0},
        {"target": 1, "tolerance": 1.5},
        {"target": 1, "min_workers": 0},
        {"target": 1, "min_workers": 5, "max_workers": 4},
        {"target": 1, "scale_down_window_s": -1},
    ],
)
def test_bad_settings(kwargs):
    with pytest.raises(ConfigError):
        HpaSettings(**kwargs)


def test_bad_inputs():
    with pytest.raises(ConfigError):
        hpa_desired(0, 1.0, LAG)
    with pytest.raises(ConfigError):
        hpa_desired(2, float("nan"), LAG)
    with pytest.raises(ConfigError):
        stabilize_scale_down(2, [], 0.0, LAG)
