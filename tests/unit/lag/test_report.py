"""LagReport conversion: values, unset unknowns, status mapping, wire round trip."""

import pytest

from streamtrain.lag.history import HwmHistory
from streamtrain.lag.metrics import PartitionOffsets, compute_group_lag
from streamtrain.lag.report import status_to_proto, to_proto
from streamtrain.lag.status import Status
from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.wire import SCHEMA_VERSION, decode, encode


@pytest.mark.parametrize("status", list(Status))
def test_every_status_maps_to_the_protobuf_value_of_the_same_name(status):
    assert pb.PartitionStatus.Name(status_to_proto(status)) == status.name


def test_report_fields_and_unknowns_left_unset():
    history = HwmHistory()
    history.record("t", 0.0, {0: 0, 1: 0})
    history.record("t", 10.0, {0: 100, 1: 20})
    offsets = [PartitionOffsets("t", 0, 50, 100, 0), PartitionOffsets("t", 1, 3, None, 0)]
    lag = compute_group_lag("g", offsets, history, 20.5)
    report = decode(pb.LagReport, encode(to_proto(lag)))
    assert report.schema_version == SCHEMA_VERSION
    assert (report.group, report.observed_at_ms) == ("g", 20500)
    assert report.total_lag_records == 50
    assert report.max_lag_s == pytest.approx(lag.max_lag_s)
    assert report.p99_lag_s == pytest.approx(lag.p99_lag_s)
    assert report.records_per_s == pytest.approx(12.0)
    assert report.group_status == pb.UNKNOWN
    known, unknown = report.partitions
    assert (known.topic, known.partition, known.committed, known.high_watermark) == (
        "t",
        0,
        50,
        100,
    )
    assert known.lag_records == 50 and known.lag_s == pytest.approx(15.4)
    assert known.records_per_s == pytest.approx(10.0)
    assert unknown.HasField("committed")
    for name in ("high_watermark", "lag_records", "lag_s"):
        assert not unknown.HasField(name)
    assert unknown.status == pb.UNKNOWN


def test_unknown_group_lag_seconds_are_absent_not_zero():
    lag = compute_group_lag("g", [PartitionOffsets("t", 0, 1, None, 0)], HwmHistory(), 5.0)
    report = to_proto(lag)
    for name in ("max_lag_s", "p99_lag_s", "records_per_s"):
        assert not report.HasField(name), name
    assert report.total_lag_records == 0
