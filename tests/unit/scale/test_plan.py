"""Basic plan (Eq. 10) and stabilization (Algorithm 1)."""

import pytest

from streamtrain.errors import ConfigError
from streamtrain.scale.models import ThroughputModel
from streamtrain.scale.plan import basic_plan, stabilize

KALE = ThroughputModel("sync", (0.00035, 2.5726, 0.9824, 0.02786), batch_size=16384)
LINEAR = ThroughputModel("async", (0.01, 0.0, 0.0), batch_size=10)  # 1000 samples/s/worker


def test_kale_example_needs_exactly_ten_workers():
    assert basic_plan(KALE, [30000]).workers == (10,)


def test_plan_is_the_smallest_count_strictly_above_the_load():
    plan = basic_plan(LINEAR, [0, 999, 1000, 1001, 4500], min_workers=1, max_workers=10)
    assert plan.workers == (1, 1, 2, 2, 5)
    assert not plan.any_cannot_keep_up


def test_plan_respects_bounds_and_flags_what_cannot_be_reached():
    plan = basic_plan(LINEAR, [100, 50_000], min_workers=2, max_workers=8)
    assert plan.workers == (2, 8)
    assert plan.cannot_keep_up == (False, True)


def test_past_its_peak_a_sync_job_gets_the_best_count_not_the_max():
    plan = basic_plan(KALE, [10**6], max_workers=64)
    best = max(range(1, 65), key=KALE.at)
    assert plan.workers == (best,)
    assert plan.cannot_keep_up == (True,)


def test_ps_models_need_a_ratio():
    model = ThroughputModel("async_ps", (0.01, 0.0, 0.0, 0.0), batch_size=10)
    with pytest.raises(ConfigError):
        basic_plan(model, [100])
    assert basic_plan(model, [2500], ps_per_worker=0.5).workers == (3,)


@pytest.mark.parametrize("loads", [[-1.0], [float("nan")]])
def test_bad_loads(loads):
    with pytest.raises(ConfigError):
        basic_plan(LINEAR, loads)


def test_kale_stabilization_example():
    assert stabilize([4, 4, 5, 6, 6, 6], step_s=600, tau_s=900, rho=1) == [4, 4, 6, 6, 6, 6]


def test_long_enough_runs_are_kept():
    assert stabilize([4, 4, 5, 5, 6, 6], step_s=600, tau_s=900) == [4, 4, 5, 5, 6, 6]


def test_a_short_dip_is_raised_to_the_larger_neighbour():
    assert stabilize([6, 6, 3, 6, 6], step_s=60, tau_s=120) == [6, 6, 6, 6, 6]


def test_the_last_run_is_never_calibrated():
    assert stabilize([4, 4, 4, 9], step_s=600, tau_s=3600) == [4, 4, 4, 9]


def test_rho_ignores_small_changes():
    assert stabilize([4, 5, 4, 4], step_s=60, tau_s=600, rho=2) == [4, 5, 4, 4]
    # With rho=1 the one-step blip is short and both neighbours are 4: it goes (Algorithm 1
    # takes the larger neighbour, not the blip).
    assert stabilize([4, 5, 4, 4], step_s=60, tau_s=600, rho=1) == [4, 4, 4, 4]


@pytest.mark.parametrize(
    "kwargs", [{"step_s": 0}, {"step_s": 60, "rho": 0}, {"step_s": 60, "tau_s": -1}]
)
def test_bad_parameters(kwargs):
    with pytest.raises(ConfigError):
        stabilize([1, 2], **kwargs)
