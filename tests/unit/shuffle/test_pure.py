"""Pure shuffle logic: offset runs, watermark hysteresis, basic split, settings, ranges."""

import numpy as np
import pytest

from streamtrain.errors import ConfigError
from streamtrain.shuffle.acks import contiguous_runs
from streamtrain.shuffle.settings import CurveKeys, ShufflePolicy, ShuffleSettings
from streamtrain.shuffle.testing import RecordingAcknowledger, merge_ranges
from streamtrain.shuffle.watermarks import basic_local_share, next_receiving


def _runs(partitions, offsets):
    return contiguous_runs(
        np.asarray(partitions, dtype=np.int32), np.asarray(offsets, dtype=np.int64)
    )


def test_runs_group_by_partition_and_split_on_gaps():
    assert _runs([0, 0, 0, 1, 1, 0], [5, 6, 7, 3, 4, 9]) == [(0, 5, 7), (0, 9, 9), (1, 3, 4)]


def test_runs_any_order_and_duplicates():
    assert _runs([2, 2, 2, 2], [11, 10, 10, 12]) == [(2, 10, 12)]


def test_runs_empty():
    assert _runs([], []) == []


def test_hysteresis_refuses_above_high_and_recovers_only_below_low():
    low, high = 20, 80
    receiving = True
    trace = []
    for queue in [0, 50, 80, 81, 60, 21, 20, 19, 50, 81]:
        receiving = next_receiving(receiving, queue, low, high)
        trace.append(receiving)
    assert trace == [True, True, True, False, False, False, False, True, True, False]


@pytest.mark.parametrize(
    ("records", "workers", "kept"),
    [(100, 1, 100), (100, 0, 100), (100, 4, 25), (101, 4, 26), (3, 4, 1), (0, 4, 0)],
)
def test_basic_share(records, workers, kept):
    assert basic_local_share(records, workers) == kept


def test_settings_validate():
    ShuffleSettings(job="j", worker_id="w")
    with pytest.raises(ConfigError, match="watermarks"):
        ShuffleSettings(job="j", worker_id="w", low_watermark_records=10, high_watermark_records=5)
    with pytest.raises(ConfigError, match="exceeds the queue capacity"):
        ShuffleSettings(job="j", worker_id="w", queue_capacity_records=10)
    with pytest.raises(ConfigError, match="batch_records"):
        ShuffleSettings(job="j", worker_id="w", batch_records=10_000, credit_window_records=100)
    with pytest.raises(ConfigError, match="ack_timeout_ms"):
        ShuffleSettings(job="j", worker_id="w", ack_timeout_ms=0)
    with pytest.raises(ConfigError, match="job name"):
        ShuffleSettings(job="", worker_id="w")
    with pytest.raises(ValueError, match="'sometimes'"):
        ShuffleSettings(job="j", worker_id="w", policy="sometimes")  # type: ignore[arg-type]
    assert ShuffleSettings(job="j", worker_id="w", policy="basic").policy is ShufflePolicy.BASIC  # type: ignore[arg-type]


def test_curve_keys():
    keys = CurveKeys.generate()
    assert len(keys.public_key) == 40
    assert "secret" not in repr(keys) or repr(keys.secret_key) not in repr(keys)
    with pytest.raises(ConfigError):
        CurveKeys(b"short", b"short")


def test_merge_ranges():
    assert merge_ranges([(5, 6), (0, 2), (3, 4), (8, 9)]) == [(0, 6), (8, 9)]


def test_recording_acknowledger_position_stops_at_first_gap():
    acks = RecordingAcknowledger()
    acks.ack("t", 0, 0, 9)
    acks.ack("t", 0, 20, 29)
    assert acks.position("t", 0) == 10
    acks.ack("t", 0, 10, 19)
    assert acks.position("t", 0) == 30
    assert acks.covered("t", 0) == [(0, 29)]
    assert acks.acked_records("t", 0) == 30
    assert acks.position("t", 1) == 0
