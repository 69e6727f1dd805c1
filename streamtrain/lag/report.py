"""Conversion of a group's lag tick to the ``LagReport`` protobuf (control_plane.proto).

Owned here: :func:`status_to_proto` (our :class:`~streamtrain.lag.status.Status`, ordered
by severity, to the wire enum ``PartitionStatus``), :func:`to_proto`, and
:func:`group_lag_json`, the JSON form the CLI and the app's HTTP API share.

Unknown values are left unset (the fields are ``optional``), never a made-up 0: per
partition and the group's ``max_lag_s``, ``p99_lag_s`` and ``records_per_s``. Times go
on the wire in milliseconds.
"""

from __future__ import annotations

from typing import Any

from streamtrain.lag.metrics import GroupLag
from streamtrain.lag.status import Status
from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.units import s_to_ms
from streamtrain.wire import SCHEMA_VERSION

__all__ = ["group_lag_json", "status_to_proto", "to_proto"]

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
    if value is not None:
        setattr(message, name, value)


def to_proto(group_lag: GroupLag) -> pb.LagReport:
    """The ``LagReport`` of one tick; the group's total CPS goes in ``records_per_s``."""
    report = pb.LagReport(
        schema_version=SCHEMA_VERSION,
        group=group_lag.group,
        observed_at_ms=round(s_to_ms(group_lag.observed_at_s)),
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


def group_lag_json(group_lag: GroupLag, *, extended: bool = False) -> dict[str, Any]:
    """The JSON object of ``streamtrain lag status --json`` (None where unknown).

    ``{"group", "partitions": [{"topic", "partition", "committed", "high_watermark",
    "lag_records", "lag_s", "records_per_s"}], "total_lag_records", "max_lag_s"}``;
    ``extended`` adds the status (group and per partition), p99, the group's CPS, the
    count of partitions with unknown lag, and the observation time (the app's API).
    """
    partitions = []
    for topic, partition, committed, hwm, lag_records, lag_s, rate, status in group_lag.rows():
        row: dict[str, Any] = {
            "topic": topic,
            "partition": partition,
            "committed": committed,
            "high_watermark": hwm,
            "lag_records": lag_records,
            "lag_s": lag_s,
            "records_per_s": rate,
        }
        if extended:
            row["status"] = status.name
        partitions.append(row)
    body: dict[str, Any] = {
        "group": group_lag.group,
        "partitions": partitions,
        "total_lag_records": group_lag.total_lag_records,
        "max_lag_s": group_lag.max_lag_s,
    }
    if extended:
        body |= {
            "status": group_lag.status.name,
            "p99_lag_s": group_lag.p99_lag_s,
            "records_per_s": group_lag.records_per_s,
            "unknown_lag_records": group_lag.unknown_lag_records,
            "observed_at_s": group_lag.observed_at_s,
        }
    return body
