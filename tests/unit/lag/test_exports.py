"""The JSON object of `lag status --json` and the Prometheus series, from a pure tick."""

from types import SimpleNamespace

from prometheus_client import CollectorRegistry, generate_latest

from streamtrain.lag.history import HwmHistory
from streamtrain.lag.metrics import PartitionOffsets, compute_group_lag
from streamtrain.lag.monitor import MonitorSettings
from streamtrain.lag.prometheus import LagCollector
from streamtrain.lag.report import group_lag_json


def _tick():
    history = HwmHistory()
    history.record("t", 0.0, {0: 10, 1: 5})
    history.record("t", 10.0, {0: 20, 1: 5})
    offsets = [PartitionOffsets("t", 0, 12, 20), PartitionOffsets("t", 1, None, None)]
    return compute_group_lag("g", offsets, history, 10.0)


def test_json_has_the_contract_keys_and_null_for_unknown():
    body = group_lag_json(_tick())
    assert set(body) == {"group", "partitions", "total_lag_records", "max_lag_s"}
    known, unknown = body["partitions"]
    assert set(known) == {
        "topic",
        "partition",
        "committed",
        "high_watermark",
        "lag_records",
        "lag_s",
        "records_per_s",
    }
    assert known["lag_records"] == 8 and known["records_per_s"] == 1.0
    assert known["lag_s"] > 0
    assert unknown["high_watermark"] is None and unknown["lag_records"] is None
    assert body["total_lag_records"] == 8
    extended = group_lag_json(_tick(), extended=True)
    assert extended["status"] and extended["partitions"][0]["status"]


def test_prometheus_exports_known_values_and_leaves_unknown_out():
    lag = _tick()
    monitor = SimpleNamespace(latest={"g": lag}, last_tick=None, settings=MonitorSettings())
    registry = CollectorRegistry()
    registry.register(LagCollector(monitor))  # type: ignore[arg-type]
    text = generate_latest(registry).decode()
    assert 'streamtrain_lag_records{group="g",partition="0",topic="t"} 8.0' in text
    assert 'streamtrain_lag_records{group="g",partition="1"' not in text
    assert 'streamtrain_lag_group_records{group="g"} 8.0' in text
    assert "streamtrain_lag_up 0.0" in text  # no tick yet
    assert "streamtrain_lag_slo_violation_seconds 1200.0" in text  # KALE's 20 min
