"""The Table 2 experiment end to end, small: real worker processes taking real MMoE
steps on the embedded broker, one skewed run per policy that needs one.

Checked: every produced record is committed by the group (the run drained), the Kafka
bytes the workers' consumers counted cover the records they fetched, `basic` forwards
while `none` never does, and every worker scored its model on held-out samples during
the run, better than chance (it starts from a pre-trained model and keeps training).
"""

from __future__ import annotations

import numpy as np
import pytest

from streamtrain.experiments.shuffle_table2 import ExperimentConfig, pretrain, run_policy
from streamtrain.shuffle.policy import ShufflePolicy

CONFIG = ExperimentConfig(
    workers=2,
    partitions=4,
    hot_partitions=(0,),
    hot_share=0.6,
    produce_records_per_s=800,
    produce_s=6.0,
    train_records_per_s=500,
    drift_turns=0.05,
    pretrain_records=10_000,
    drain_timeout_s=60.0,
)


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    return pretrain(CONFIG, tmp_path_factory.mktemp("table2") / "pretrained.pt")


@pytest.mark.parametrize("policy", [ShufflePolicy.NONE, ShufflePolicy.BASIC])
def test_a_small_run_drains_counts_its_bytes_and_scores_every_worker(
    broker, tmp_path, pretrained, policy
):
    result = run_policy(
        broker.kafka_settings(), policy, CONFIG, tmp_path / policy.value, init_state=pretrained
    )
    produced = int(result.produced_records.sum())
    assert produced == pytest.approx(800 * 6, rel=0.05)
    assert result.drained_after_s is not None, "the run did not drain"
    assert result.lag_records[-1].sum() == 0 and result.lag_s[-1].sum() == 0
    trained = sum(w["trained_records"] for w in result.per_worker.values())
    assert trained >= produced  # at-least-once: every record, maybe some twice
    # the consumers fetched every 200-byte record at least once
    assert result.wire.kafka_rx >= produced * CONFIG.record_bytes
    if policy is ShufflePolicy.NONE:
        assert result.wire.forwarded == 0 and result.forwarded_records == 0
    else:
        assert result.forwarded_records > 0.2 * produced
        assert result.wire.forwarded >= result.forwarded_records * CONFIG.record_bytes
        assert result.wire.answers > 0
    assert set(result.auc_series) == {"w0", "w1"}
    for points in result.auc_series.values():
        assert len(points) >= 3
    assert 0.6 < result.auc.during < 1.0
    assert 0 < result.cpu_pct < 100
    assert np.isfinite(result.auc.at_stop)
