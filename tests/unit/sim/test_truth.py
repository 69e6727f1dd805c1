"""The simulated job's ground truth: KALE Eq. 4 with stragglers, sized to the trace, and
the noisy profiled points policies learn from."""

import numpy as np
import pytest

from streamtrain.errors import ConfigError
from streamtrain.scale.models import fit
from streamtrain.scale.physics import SIM_SYNC_JOB, ps_count, slowest_of_first
from streamtrain.scale.plan import basic_plan
from streamtrain.sim.truth import TruthSettings, draw_truth

NOMINAL = TruthSettings(speed_sigma=0.0, straggler_share=0.0)


def _truth(settings=NOMINAL, seed=0, peak=260_000.0, peak_workers=24, max_workers=28):
    return draw_truth(
        settings,
        max_workers=max_workers,
        peak_records_per_s=peak,
        peak_workers=peak_workers,
        seed=seed,
    )


def test_eq4_reduces_to_eq6_with_fractional_servers_and_no_stragglers():
    w = np.arange(2.0, 40.0, 2.0)  # even counts: p = w / 2 exactly
    eq4 = SIM_SYNC_JOB.sync_samples_per_s(16_384, w, w / 2)
    theta = np.asarray(SIM_SYNC_JOB.sync_theta(16_384, 2.0))
    eq6 = 16_384 / (theta[0] + theta[1] / w + theta[2] / w**2 + theta[3] * w)
    np.testing.assert_allclose(eq4, eq6, rtol=1e-9)


def test_whole_servers_and_the_slowest_worker():
    np.testing.assert_array_equal(ps_count(np.array([1.0, 2.0, 3.0, 7.0]), 2.0), [1, 1, 2, 4])
    np.testing.assert_array_equal(
        slowest_of_first(np.array([1.0, 0.9, 1.1, 0.7])), [1, 0.9, 0.9, 0.7]
    )
    with pytest.raises(ConfigError):
        slowest_of_first(np.array([1.0, 0.0]))


@pytest.mark.parametrize("seed", range(6))
def test_the_peak_needs_the_peak_count_or_the_next_that_adds_speed(seed):
    truth = _truth(TruthSettings(), seed=seed)
    table = truth.capacity_records_per_s
    needed = int(np.flatnonzero(table > 260_000.0)[0])
    best_below = table[1:24].max()
    assert best_below < 260_000.0 < table[needed]
    assert needed == 24 or table[24] <= best_below  # only a straggler at 24 moves it


def test_a_straggler_holds_every_synchronous_step_after_it_joins():
    fast = _truth()
    slow_pool = TruthSettings(speed_sigma=0.0, straggler_share=0.0)
    speeds = np.ones(28)
    speeds[9] = 0.5  # the tenth worker of the pool is slow
    w = np.arange(1.0, 29.0)
    p = ps_count(w, slow_pool.workers_per_ps)
    curve = SIM_SYNC_JOB.sync_samples_per_s(16_384, w, p, slowest_of_first(speeds))
    nominal = SIM_SYNC_JOB.sync_samples_per_s(16_384, w, p)
    np.testing.assert_allclose(curve[:9], nominal[:9])
    assert np.all(curve[9:] < 0.75 * nominal[9:])
    assert fast.capacity_records_per_s[0] == 0


def test_async_workers_each_run_at_their_own_speed():
    truth = _truth(TruthSettings(kind="async", batch_size=256.0, speed_sigma=0.1), seed=3)
    table = truth.capacity_records_per_s
    assert np.all(np.diff(table) > 0)  # nobody waits: every worker adds speed


def test_profiles_are_noisy_few_and_not_the_truth():
    truth = _truth(TruthSettings(), seed=2)
    points = truth.profile(2)
    counts = sorted({w for w, _ in points})
    assert counts == [1, 2, 4, 8, 16, 24] and len(points) == 12
    assert truth.profile(2) == points and truth.profile(3) != points
    ratios = [r / truth.capacity_records_per_s[int(w)] for w, r in points]
    assert 0.85 < min(ratios) < 1 < max(ratios) < 1.15
    model = fit("sync", [w for w, _ in points], [r for _, r in points])
    error = model.samples_per_s(np.arange(1.0, 29.0)) / truth.capacity_records_per_s[1:] - 1
    assert np.max(np.abs(error)) > 0.01  # Eq. 6 is a model of the truth, not the truth
    plan = basic_plan(model, [100_000.0], max_workers=28)
    assert 1 <= plan.workers[0] <= 28


def test_bad_truths():
    with pytest.raises(ConfigError):
        TruthSettings(kind="federated")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        TruthSettings(straggler_speed=0.0)
    with pytest.raises(ConfigError):
        TruthSettings(profile_workers=())
    with pytest.raises(ConfigError):
        _truth(peak=0.0)
    with pytest.raises(ConfigError):
        _truth(peak_workers=30)
    with pytest.raises(ConfigError, match="whole numbers"):
        _truth().samples_per_s([0.0])
