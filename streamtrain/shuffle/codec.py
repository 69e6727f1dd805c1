"""The shuffle layer's ZeroMQ frames: record batches, ACKs, credit grants, state events.

Owned here: the two-frame layout ``[kind, protobuf]`` every shuffle message uses, the
kinds, the one-to-one mapping between :class:`~streamtrain.records.RecordColumns`
and the ``RecordBatch`` protobuf, and the encoders of the control messages
(:func:`encode_ack`, :func:`encode_grant`, :func:`encode_state`; wall-clock stamps are
the caller's). Everything that comes off a socket goes through
:func:`decode_batch` or :func:`decode_control`, which raise
:class:`~streamtrain.errors.SchemaError` for anything unusable; callers drop and count.

A ``RecordBatch`` is written as the serialized header fields followed by the
``payloads`` field appended by hand (tag, length, bytes). Protobuf defines a
concatenation of encodings as their merge, so the result is byte-for-byte a valid
``RecordBatch``; it just avoids the protobuf runtime's slow path for large byte fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
from google.protobuf.message import DecodeError

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

# Field 10 (`payloads`), wire type 2 (length-delimited): (10 << 3) | 2.
_PAYLOADS_TAG: Final = bytes([(10 << 3) | 2])


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
    columns: RecordColumns, *, job: str, batch_id: str, origin_worker: str, sent_at_ms: int
) -> bytes:
    """``columns`` as one ``RecordBatch`` frame, marked forwarded."""
    header = RecordBatch(
        schema_version=wire.SCHEMA_VERSION,
        job=job,
        batch_id=batch_id,
        origin_worker=origin_worker,
        topic=columns.topic,
        partitions=columns.partitions.tolist(),
        offsets=columns.offsets.tolist(),
        timestamps_ms=columns.timestamps_ms.tolist(),
        payload_lengths=np.diff(columns.payload_bounds).tolist(),
        forwarded=True,
        sent_at_ms=sent_at_ms,
    ).SerializeToString()
    if not columns.payloads:
        return header
    return b"".join((header, _PAYLOADS_TAG, _varint(len(columns.payloads)), columns.payloads))


def decode_batch(data: bytes | memoryview) -> DecodedBatch:
    """Parse and check a ``RecordBatch`` frame; raise :class:`SchemaError` if unusable."""
    message = wire.decode(RecordBatch, data)  # type: ignore[arg-type]
    n = len(message.offsets)
    if not (
        len(message.partitions) == n
        and len(message.timestamps_ms) == n
        and len(message.payload_lengths) == n
    ):
        raise SchemaError(
            f"RecordBatch {message.batch_id!r}: per-record columns have different lengths"
        )
    if n == 0 or not message.topic or not message.batch_id or not message.origin_worker:
        raise SchemaError("RecordBatch without records, topic, batch id or origin worker")
    bounds = payload_bounds(np.array(message.payload_lengths, dtype=np.int64))
    payloads = message.payloads
    if int(bounds[-1]) != len(payloads):
        raise SchemaError(
            f"RecordBatch {message.batch_id!r}: payload lengths sum to {int(bounds[-1])} "
            f"bytes but {len(payloads)} arrived"
        )
    partitions = np.array(message.partitions, dtype=np.int32)
    offsets = np.array(message.offsets, dtype=np.int64)
    if int(partitions.min()) < 0 or int(offsets.min()) < 0:
        raise SchemaError(f"RecordBatch {message.batch_id!r}: negative partition or offset")
    columns = RecordColumns(
        message.topic,
        partitions,
        offsets,
        np.array(message.timestamps_ms, dtype=np.int64),
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
    return wire.decode(message_type, bytes(data))


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
