"""Conversion of a group's lag tick to the ``LagReport`` protobuf (control_plane.proto).

Owned here: :func:`status_to_proto` (our :class:`~streamtrain.lag.status.Status`, ordered
by severity, to the wire enum ``PartitionStatus``) and :func:`to_proto`.

Unknown per-partition values are left unset (the fields are ``optional``). The group's
``max_lag_s``, ``p99_lag_s`` and ``records_per_s`` are written only when known if the
schema gives them presence; on the current schema (plain ``double``) an unknown value is
NaN, never a made-up 0. Times go on the wire in milliseconds.
"""

from __future__ import annotations

import math

from streamtrain.lag.metrics import GroupLag
from streamtrain.lag.status import Status
from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.wire import SCHEMA_VERSION

__all__ = ["status_to_proto", "to_proto"]

_STATUS_TO_PROTO: dict[Status, pb.PartitionStatus] = {
    Status.OK: pb.OK,
    Status.WARN: pb.WARN,
    Status.STOP: pb.STOP,
    Status.STALL: pb.STALL,
    Status.REWIND: pb.REWIND,
    Status.UNKNOWN: pb.UNKNOWN,
}


def status_to_proto(status: Status) -> pb.PartitionStatus:
    return _STATUS_TO_PROTO[status]


def _set_optional_double(message: pb.LagReport, name: str, value: float | None) -> None:
    has_presence = pb.LagReport.DESCRIPTOR.fields_by_name[name].has_presence
    if value is not None:
        setattr(message, name, value)
    elif not has_presence:
        setattr(message, name, math.nan)


def to_proto(group_lag: GroupLag) -> pb.LagReport:
    """The ``LagReport`` of one tick; the group's total CPS goes in ``records_per_s``."""
    report = pb.LagReport(
        schema_version=SCHEMA_VERSION,
        group=group_lag.group,
        observed_at_ms=round(group_lag.observed_at_s * 1000.0),
        total_lag_records=group_lag.total_lag_records,
        group_status=status_to_proto(group_lag.status),
    )
    _set_optional_double(report, "max_lag_s", group_lag.max_lag_s)
    _set_optional_double(report, "p99_lag_s", group_lag.p99_lag_s)
    _set_optional_double(report, "records_per_s", group_lag.records_per_s)
    add = report.partitions.add
    for topic, partition, committed, hwm, lag_records, lag_s, rate, status in group_lag.rows():
        item = add(topic=topic, partition=partition, status=_STATUS_TO_PROTO[status])
        if committed is not None:
            item.committed = committed
        if hwm is not None:
            item.high_watermark = hwm
        if lag_records is not None:
            item.lag_records = lag_records
        if lag_s is not None:
            item.lag_s = lag_s
        if rate is not None:
            item.records_per_s = rate
    return report
