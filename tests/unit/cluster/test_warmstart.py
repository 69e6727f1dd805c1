"""DLRover-RM Algorithm 1: top-k similar jobs, exponentially smoothed."""

import pytest

from streamtrain.cluster.warmstart import JobRecord, similar, warm_start
from streamtrain.errors import ConfigError

HISTORY = [
    JobRecord("mmoe", 1_000.0, 4.0),
    JobRecord("mmoe", 10_000.0, 16.0),
    JobRecord("mmoe", 20_000.0, 24.0),
    JobRecord("mmoe", 100_000.0, 64.0),
    JobRecord("dlrm", 10_000.0, 2.0),
]


def test_similar_keeps_the_model_type_and_orders_least_similar_first():
    # Distances |log(level / 12k)|: 10k 0.18, 20k 0.51, 100k 2.12, 1k 2.48.
    ranked = similar(HISTORY, "mmoe", 12_000.0, k=3)
    assert [r.value for r in ranked] == [64.0, 24.0, 16.0]


def test_smoothing_weighs_the_most_similar_job_by_mu():
    # A0 = 64, A1 = 24, A2 = 16: Â1 = 0.5·24 + 0.5·64 = 44, Â2 = 0.5·16 + 0.5·44 = 30.
    assert warm_start(HISTORY, "mmoe", 12_000.0, k=3, mu=0.5) == pytest.approx(30.0)
    assert warm_start(HISTORY, "mmoe", 12_000.0, k=3, mu=0.9) == pytest.approx(17.2)
    assert warm_start(HISTORY, "dlrm", 12_000.0) == pytest.approx(2.0)


def test_no_similar_job_means_no_warm_start():
    assert warm_start(HISTORY, "bert", 1_000.0) is None
    with pytest.raises(ConfigError):
        warm_start(HISTORY, "mmoe", 1_000.0, mu=1.0)
