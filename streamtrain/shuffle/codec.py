"""The shuffle layer's ZeroMQ frames: record batches, ACKs, credit grants, state events.

Owned here: the two-frame layout ``[kind, protobuf]`` every shuffle message uses, the
kinds, the one-to-one mapping between :class:`~streamtrain.records.RecordColumns`
and the ``RecordBatch`` protobuf, and the encoders of the control messages
(:func:`encode_ack`, :func:`encode_grant`, :func:`encode_state`; wall-clock stamps are
the caller's). Everything that comes off a socket goes through
:func:`decode_batch` or :func:`decode_control`, which raise
:class:`~streamtrain.errors.SchemaError` for anything unusable; callers drop and count.

A ``RecordBatch`` is written as the ``payloads`` field by hand (tag, length, bytes)
followed by the other fields serialized by protobuf. Protobuf defines a concatenation of
encodings as their merge, so the result is byte-for-byte a valid ``RecordBatch``; it
avoids the runtime's slow path for large byte fields, and lets :func:`decode_batch` cut
the payloads out of the frame with one copy (the runtime would make two large
allocations per batch, and on glibc their churn cost more than everything else).

Two forms (:data:`BATCH_SCHEMA_VERSION`): version 2 carries the per-record columns as
packed little-endian buffers, written from and read into numpy arrays without a Python
object per record; version 1 carried them as repeated fields. Both are decoded; a
worker writes version 1 only to a peer that announced it reads nothing newer (a rolling
upgrade: ``encode_batch(..., version=1)``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from google.protobuf.message import DecodeError
from numpy.typing import NDArray

from streamtrain import wire
from streamtrain.errors import SchemaError
from streamtrain.proto.data_plane_pb2 import (
    BatchAck,
    CreditGrant,
    RecordBatch,
    WorkerStateEvent,
)
from streamtrain.records import RecordColumns, payload_bounds

__all__ = [
    "BATCH_SCHEMA_VERSION",
    "KIND_ACK",
    "KIND_BATCH",
    "KIND_CREDIT",
    "KIND_STATE",
    "BatchHeader",
    "DecodedBatch",
    "decode_batch",
    "decode_control",
    "encode_ack",
    "encode_batch",
    "encode_grant",
    "encode_state",
    "peek_batch",
]

KIND_BATCH: Final = b"B"
KIND_ACK: Final = b"A"
KIND_CREDIT: Final = b"C"
KIND_STATE: Final = b"S"

_CONTROL_TYPES: Final[dict[bytes, type[BatchAck] | type[CreditGrant] | type[WorkerStateEvent]]] = {
    KIND_ACK: BatchAck,
    KIND_CREDIT: CreditGrant,
    KIND_STATE: WorkerStateEvent,
}

BATCH_SCHEMA_VERSION: Final = 2
"""The newest ``RecordBatch`` form this build writes and reads (version 2: columns as
packed buffers); the other messages stay at :data:`streamtrain.wire.SCHEMA_VERSION`."""

# Field 10 (`payloads`), wire type 2 (length-delimited): (10 << 3) | 2.
_PAYLOADS_TAG: Final = bytes([(10 << 3) | 2])
_LITTLE_ENDIAN: Final = sys.byteorder == "little"


@dataclass(frozen=True, slots=True)
class DecodedBatch:
    """A received ``RecordBatch``: who sent it and its records, marked forwarded."""

    job: str
    batch_id: str
    origin_worker: str
    sent_at_ms: int
    columns: RecordColumns


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """Who sent a ``RecordBatch`` and what it is, read whatever its schema version."""

    schema_version: int
    job: str
    batch_id: str
    origin_worker: str
    topic: str


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def encode_batch(
    columns: RecordColumns,
    *,
    job: str,
    batch_id: str,
    origin_worker: str,
    sent_at_ms: int,
    version: int = BATCH_SCHEMA_VERSION,
) -> bytes:
    """``columns`` as one ``RecordBatch`` frame of schema ``version``, marked forwarded."""
    if version >= 2:
        header = RecordBatch(
            schema_version=BATCH_SCHEMA_VERSION,
            job=job,
            batch_id=batch_id,
            origin_worker=origin_worker,
            topic=columns.topic,
            forwarded=True,
            sent_at_ms=sent_at_ms,
            record_count=len(columns),
            partitions_le32=_le_bytes(columns.partitions, "<i4"),
            offsets_le64=_le_bytes(columns.offsets, "<i8"),
            timestamps_ms_le64=_le_bytes(columns.timestamps_ms, "<i8"),
            payload_lengths_le32=_le_bytes(columns.payload_lengths(), "<u4"),
        ).SerializeToString()
    else:
        header = RecordBatch(
            schema_version=1,
            job=job,
            batch_id=batch_id,
            origin_worker=origin_worker,
            topic=columns.topic,
            partitions=columns.partitions.tolist(),
            offsets=columns.offsets.tolist(),
            timestamps_ms=columns.timestamps_ms.tolist(),
            payload_lengths=columns.payload_lengths().tolist(),
            forwarded=True,
            sent_at_ms=sent_at_ms,
        ).SerializeToString()
    if not columns.payloads:
        return header
    return b"".join((_PAYLOADS_TAG, _varint(len(columns.payloads)), columns.payloads, header))


def _le_bytes(array: NDArray[np.int32] | NDArray[np.int64], dtype: str) -> bytes:
    """``array`` as packed little-endian ``dtype`` bytes (no copy beyond ``tobytes``)."""
    if _LITTLE_ENDIAN and array.dtype == np.dtype(dtype):
        return array.tobytes()
    return array.astype(dtype).tobytes()


def _column(data: bytes, dtype: str, n: int, name: str, batch_id: str) -> NDArray[Any]:
    """A packed column of ``n`` entries as a read-only numpy array (a view of ``data``)."""
    width = np.dtype(dtype).itemsize
    if len(data) != n * width:
        raise SchemaError(
            f"RecordBatch {batch_id!r}: column {name} has {len(data)} bytes, not {n} x {width}"
        )
    array = np.frombuffer(data, dtype=dtype)
    return array if _LITTLE_ENDIAN else array.astype(dtype[1:])


def _columns_v2(message: RecordBatch) -> tuple[Any, Any, Any, Any]:
    n, batch_id = message.record_count, message.batch_id
    return (
        _column(message.partitions_le32, "<i4", n, "partitions", batch_id),
        _column(message.offsets_le64, "<i8", n, "offsets", batch_id),
        _column(message.timestamps_ms_le64, "<i8", n, "timestamps", batch_id),
        _column(message.payload_lengths_le32, "<u4", n, "payload lengths", batch_id),
    )


def _columns_v1(message: RecordBatch) -> tuple[Any, Any, Any, Any]:
    n = len(message.offsets)
    if not (
        len(message.partitions) == n
        and len(message.timestamps_ms) == n
        and len(message.payload_lengths) == n
    ):
        raise SchemaError(
            f"RecordBatch {message.batch_id!r}: per-record columns have different lengths"
        )
    return (
        np.array(message.partitions, dtype=np.int32),
        np.array(message.offsets, dtype=np.int64),
        np.array(message.timestamps_ms, dtype=np.int64),
        np.array(message.payload_lengths, dtype=np.int64),
    )


def _split_payloads(data: memoryview) -> tuple[bytes, bytes] | None:
    """A frame written by :func:`encode_batch` (``payloads`` first) split into the rest
    of its fields and the payload bytes; ``None`` for any other layout (the protobuf
    runtime then parses it whole). The protobuf runtime would copy the payloads twice
    (into the message, then out as ``bytes``); this copies them once."""
    if len(data) < 2 or data[0] != _PAYLOADS_TAG[0]:
        return None
    length, start = _read_varint(data, 1)
    if start < 0 or start + length > len(data):
        return None
    return bytes(data[start + length :]), bytes(data[start : start + length])


def _read_varint(data: memoryview, pos: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it (``-1`` past the end)."""
    value = shift = 0
    size = len(data)
    while pos < size and shift < 64:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    return 0, -1


def decode_batch(data: bytes | memoryview) -> DecodedBatch:
    """Parse and check a ``RecordBatch`` frame of either form; raise
    :class:`SchemaError` if unusable."""
    view = memoryview(data).cast("B")
    split = _split_payloads(view)
    if split is None:
        message = wire.decode(RecordBatch, bytes(view), newest=BATCH_SCHEMA_VERSION)
        payloads = message.payloads
    else:
        header, payloads = split
        message = wire.decode(RecordBatch, header, newest=BATCH_SCHEMA_VERSION)
        if message.payloads:  # the field again further on: protobuf's last one wins
            payloads = message.payloads
    if message.schema_version >= 2:
        partitions, offsets, timestamps, lengths = _columns_v2(message)
    else:
        partitions, offsets, timestamps, lengths = _columns_v1(message)
    if len(offsets) == 0 or not message.topic or not message.batch_id or not message.origin_worker:
        raise SchemaError("RecordBatch without records, topic, batch id or origin worker")
    bounds = payload_bounds(lengths)
    if int(bounds[-1]) != len(payloads):
        raise SchemaError(
            f"RecordBatch {message.batch_id!r}: payload lengths sum to {int(bounds[-1])} "
            f"bytes but {len(payloads)} arrived"
        )
    if int(partitions.min()) < 0 or int(offsets.min()) < 0:
        raise SchemaError(f"RecordBatch {message.batch_id!r}: negative partition or offset")
    columns = RecordColumns(
        message.topic,
        partitions,
        offsets,
        timestamps,
        payloads,
        bounds,
        forwarded=True,
    )
    return DecodedBatch(
        job=message.job,
        batch_id=message.batch_id,
        origin_worker=message.origin_worker,
        sent_at_ms=message.sent_at_ms,
        columns=columns,
    )


def peek_batch(data: bytes | memoryview) -> BatchHeader | None:
    """The header of a ``RecordBatch`` frame, whatever its schema version; ``None`` if it
    does not parse at all."""
    message = RecordBatch()
    try:
        message.ParseFromString(data)  # type: ignore[arg-type]
    except DecodeError:
        return None
    return BatchHeader(
        schema_version=message.schema_version,
        job=message.job,
        batch_id=message.batch_id,
        origin_worker=message.origin_worker,
        topic=message.topic,
    )


def decode_control(
    kind: bytes, data: bytes | memoryview
) -> BatchAck | CreditGrant | WorkerStateEvent:
    """Parse a control frame of ``kind``; raise :class:`SchemaError` if unusable."""
    message_type = _CONTROL_TYPES.get(bytes(kind))
    if message_type is None:
        raise SchemaError(f"unknown shuffle frame kind {bytes(kind)[:8]!r}")
    # newer peers' enum values are the shuffle's own business (its dialects)
    return wire.decode(message_type, bytes(data), known_enums=False)


def encode_ack(
    *, job: str, batch_id: str, receiver: str, status: BatchAck.Status, reason: str, at_ms: int
) -> bytes:
    """A ``BatchAck`` frame: ``receiver`` answers ``batch_id`` (ACKED, or REJECTED why)."""
    return wire.encode(
        BatchAck(
            job=job,
            batch_id=batch_id,
            receiver_worker=receiver,
            status=status,
            reason=reason,
            acked_at_ms=at_ms,
        )
    )


def encode_grant(*, job: str, receiver: str, sender: str, records: int) -> bytes:
    """A ``CreditGrant`` frame: ``receiver`` lets ``sender`` send ``records`` more. Sent
    only to senders of an older release, which regain credit from grants alone."""
    return wire.encode(
        CreditGrant(job=job, receiver_worker=receiver, sender_worker=sender, credit_records=records)
    )


def encode_state(
    *,
    job: str,
    worker_id: str,
    state: WorkerStateEvent.State,
    sequence: int,
    queue_records: int,
    at_ms: int,
) -> bytes:
    """A ``WorkerStateEvent`` frame: ``worker_id``'s state, its ``sequence`` number and
    local queue length."""
    return wire.encode(
        WorkerStateEvent(
            job=job,
            worker_id=worker_id,
            state=state,
            sequence=sequence,
            queue_length=queue_records,
            emitted_at_ms=at_ms,
        )
    )
