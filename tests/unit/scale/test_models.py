"""Throughput models: KALE's worked example, NNLS recovery from Eq. 4 data, comparisons."""

import numpy as np
import pytest

from streamtrain.errors import ConfigError
from streamtrain.scale.models import (
    MODEL_KINDS,
    ThroughputModel,
    fit,
    fit_report,
    modelarts_prior,
)
from streamtrain.scale.physics import EXAMPLE_SYNC_JOB

KALE = ThroughputModel("sync", (0.00035, 2.5726, 0.9824, 0.02786), batch_size=16384)

# A job whose Eq. 4 reduces to Eq. 6 with θ of the same order as KALE's example.
PHYSICS = EXAMPLE_SYNC_JOB
M, RATIO = 16384.0, 2.0


def _observations(seed, noise=0.02, workers=range(1, 33)):
    rng = np.random.default_rng(seed)
    w = np.repeat(np.asarray(list(workers), dtype=float), 3)
    p = w / RATIO
    clean = PHYSICS.sync_samples_per_s(M, w, p)
    return w, p, clean * rng.normal(1.0, noise, size=w.size)


def test_kale_worked_example():
    assert KALE.at(10) == pytest.approx(30007.3, rel=1e-3)
    assert KALE.at(9) == pytest.approx(29840, rel=1e-3)
    assert KALE.at(10) > 30000 > KALE.at(9)


def test_nnls_recovers_eq6_parameters_from_noisy_eq4_data():
    w, _, f = _observations(seed=1)
    model = fit("sync", w, f, batch_size=M)
    truth = PHYSICS.sync_theta(M, RATIO)
    # The dominant terms come back within 10 %; the constant is tiny and noise-bound.
    for got, want in zip(model.theta[1:], truth[1:], strict=True):
        assert got == pytest.approx(want, rel=0.10)
    assert fit_report(model, w, f).mape_pct < 3.0


def test_sync_fits_better_than_optimus_and_ernest_on_sparse_jobs():
    w, _, f = _observations(seed=2)
    mape = {
        k: fit_report(fit(k, w, f, batch_size=M), w, f).mape_pct
        for k in ("sync", "optimus", "ernest")
    }
    assert mape["sync"] < mape["optimus"]
    assert mape["sync"] < mape["ernest"]


def test_sync_ps_and_async_fit_their_own_forms():
    rng = np.random.default_rng(3)
    w = rng.integers(1, 40, size=200).astype(float)
    p = rng.integers(1, 10, size=200).astype(float)
    truth = ThroughputModel("async_ps", (0.01, 0.02, 0.001, 0.0005), batch_size=512)
    f = truth.samples_per_s(w, p)
    model = fit("async_ps", w, f, ps=p, batch_size=512)
    np.testing.assert_allclose(model.theta, truth.theta, rtol=1e-6, atol=1e-9)
    sync_ps = fit("sync_ps", w, PHYSICS.sync_samples_per_s(M, w, p), ps=p, batch_size=M)
    assert fit_report(sync_ps, w, PHYSICS.sync_samples_per_s(M, w, p), ps=p).mape_pct < 10


def test_async_throughput_grows_with_workers():
    model = ThroughputModel("async", (0.05, 0.0, 0.0001), batch_size=256)
    rates = model.samples_per_s([1, 2, 4, 8])
    assert np.all(np.diff(rates) > 0)


def test_every_kind_evaluates_and_fits():
    w, p, f = _observations(seed=4)
    for kind in MODEL_KINDS:
        model = fit(kind, w, f, ps=p, batch_size=M)
        assert np.all(model.samples_per_s(w, p) > 0)


@pytest.mark.parametrize(
    "call",
    [
        lambda: ThroughputModel("sync", (1.0, 2.0)),
        lambda: ThroughputModel("sync", (1.0, -2.0, 0.0, 0.0)),
        lambda: ThroughputModel("nope", (1.0,)),
        lambda: ThroughputModel("sync", (1.0, 1.0, 1.0, 1.0), batch_size=0),
        lambda: fit("sync", [], []),
        lambda: fit("sync", [1, 2, 3], [1, 2]),
        lambda: fit("sync", [1, 2], [10, 20]),  # fewer observations than coefficients
        lambda: fit("sync", [1, 2, 3, 4], [10, -1, 20, 30]),
        lambda: fit("sync_ps", [1, 2, 3, 4, 5, 6, 7], [1, 2, 3, 4, 5, 6, 7]),  # no ps
        lambda: KALE.samples_per_s([0]),
        lambda: modelarts_prior(0, 4),
    ],
)
def test_bad_input_is_a_config_error(call):
    with pytest.raises(ConfigError):
        call()


def test_modelarts_prior():
    assert modelarts_prior(1000, 1) == pytest.approx(1000)
    assert modelarts_prior(1000, 4) == pytest.approx(4 * 1000 * 0.64)
