"""Pure shuffle logic: watermark hysteresis, basic split, settings and policies."""

import subprocess
import sys

import pytest

from streamtrain.errors import ConfigError
from streamtrain.shuffle.policy import ShufflePolicy
from streamtrain.shuffle.settings import CurveKeys, ShuffleSettings
from streamtrain.shuffle.watermarks import basic_local_share, next_receiving


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


def test_heartbeat_pair_is_checked_with_the_settings():
    settings = ShuffleSettings(
        job="j", worker_id="w", heartbeat_interval_ms=200, heartbeat_timeout_ms=900
    )
    assert (settings.heartbeat_interval_ms, settings.heartbeat_timeout_ms) == (200, 900)
    with pytest.raises(ConfigError, match="heartbeat interval < heartbeat timeout"):
        ShuffleSettings(job="j", worker_id="w", heartbeat_interval_ms=5_000)
    with pytest.raises(ConfigError, match="heartbeat"):
        ShuffleSettings(job="j", worker_id="w", heartbeat_interval_ms=0)


def test_policy_module_loads_no_zeromq():
    code = (
        "import sys; import streamtrain.shuffle.policy as p; "
        "assert 'zmq' not in sys.modules, 'zmq imported'; "
        "import streamtrain.shuffle as s; assert s.ShufflePolicy is p.ShufflePolicy; "
        "assert 'zmq' not in sys.modules; s.ShuffleNode; assert 'zmq' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
