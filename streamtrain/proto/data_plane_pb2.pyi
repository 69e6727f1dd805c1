from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RecordBatch(_message.Message):
    __slots__ = ("schema_version", "job", "batch_id", "origin_worker", "topic", "partitions", "offsets", "timestamps_ms", "payload_lengths", "payloads", "forwarded", "sent_at_ms", "record_count", "partitions_le32", "offsets_le64", "timestamps_ms_le64", "payload_lengths_le32")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_WORKER_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMPS_MS_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_LENGTHS_FIELD_NUMBER: _ClassVar[int]
    PAYLOADS_FIELD_NUMBER: _ClassVar[int]
    FORWARDED_FIELD_NUMBER: _ClassVar[int]
    SENT_AT_MS_FIELD_NUMBER: _ClassVar[int]
    RECORD_COUNT_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_LE32_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_LE64_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMPS_MS_LE64_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_LENGTHS_LE32_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    job: str
    batch_id: str
    origin_worker: str
    topic: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    offsets: _containers.RepeatedScalarFieldContainer[int]
    timestamps_ms: _containers.RepeatedScalarFieldContainer[int]
    payload_lengths: _containers.RepeatedScalarFieldContainer[int]
    payloads: bytes
    forwarded: bool
    sent_at_ms: int
    record_count: int
    partitions_le32: bytes
    offsets_le64: bytes
    timestamps_ms_le64: bytes
    payload_lengths_le32: bytes
    def __init__(self, schema_version: _Optional[int] = ..., job: _Optional[str] = ..., batch_id: _Optional[str] = ..., origin_worker: _Optional[str] = ..., topic: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ..., offsets: _Optional[_Iterable[int]] = ..., timestamps_ms: _Optional[_Iterable[int]] = ..., payload_lengths: _Optional[_Iterable[int]] = ..., payloads: _Optional[bytes] = ..., forwarded: _Optional[bool] = ..., sent_at_ms: _Optional[int] = ..., record_count: _Optional[int] = ..., partitions_le32: _Optional[bytes] = ..., offsets_le64: _Optional[bytes] = ..., timestamps_ms_le64: _Optional[bytes] = ..., payload_lengths_le32: _Optional[bytes] = ...) -> None: ...

class BatchAck(_message.Message):
    __slots__ = ("schema_version", "job", "batch_id", "receiver_worker", "status", "reason", "acked_at_ms")
    class Status(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        STATUS_UNSPECIFIED: _ClassVar[BatchAck.Status]
        ACKED: _ClassVar[BatchAck.Status]
        REJECTED: _ClassVar[BatchAck.Status]
        RECEIVED: _ClassVar[BatchAck.Status]
    STATUS_UNSPECIFIED: BatchAck.Status
    ACKED: BatchAck.Status
    REJECTED: BatchAck.Status
    RECEIVED: BatchAck.Status
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    RECEIVER_WORKER_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ACKED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    job: str
    batch_id: str
    receiver_worker: str
    status: BatchAck.Status
    reason: str
    acked_at_ms: int
    def __init__(self, schema_version: _Optional[int] = ..., job: _Optional[str] = ..., batch_id: _Optional[str] = ..., receiver_worker: _Optional[str] = ..., status: _Optional[_Union[BatchAck.Status, str]] = ..., reason: _Optional[str] = ..., acked_at_ms: _Optional[int] = ...) -> None: ...

class CreditGrant(_message.Message):
    __slots__ = ("schema_version", "job", "receiver_worker", "sender_worker", "credit_records")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    RECEIVER_WORKER_FIELD_NUMBER: _ClassVar[int]
    SENDER_WORKER_FIELD_NUMBER: _ClassVar[int]
    CREDIT_RECORDS_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    job: str
    receiver_worker: str
    sender_worker: str
    credit_records: int
    def __init__(self, schema_version: _Optional[int] = ..., job: _Optional[str] = ..., receiver_worker: _Optional[str] = ..., sender_worker: _Optional[str] = ..., credit_records: _Optional[int] = ...) -> None: ...

class WorkerStateEvent(_message.Message):
    __slots__ = ("schema_version", "job", "worker_id", "state", "sequence", "queue_length", "emitted_at_ms")
    class State(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        STATE_UNSPECIFIED: _ClassVar[WorkerStateEvent.State]
        RECEIVING: _ClassVar[WorkerStateEvent.State]
        NOT_RECEIVING: _ClassVar[WorkerStateEvent.State]
        JOINED: _ClassVar[WorkerStateEvent.State]
        LEFT: _ClassVar[WorkerStateEvent.State]
        STARTING: _ClassVar[WorkerStateEvent.State]
        READY: _ClassVar[WorkerStateEvent.State]
        DRAINING: _ClassVar[WorkerStateEvent.State]
        ADMITTED: _ClassVar[WorkerStateEvent.State]
    STATE_UNSPECIFIED: WorkerStateEvent.State
    RECEIVING: WorkerStateEvent.State
    NOT_RECEIVING: WorkerStateEvent.State
    JOINED: WorkerStateEvent.State
    LEFT: WorkerStateEvent.State
    STARTING: WorkerStateEvent.State
    READY: WorkerStateEvent.State
    DRAINING: WorkerStateEvent.State
    ADMITTED: WorkerStateEvent.State
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    QUEUE_LENGTH_FIELD_NUMBER: _ClassVar[int]
    EMITTED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    job: str
    worker_id: str
    state: WorkerStateEvent.State
    sequence: int
    queue_length: int
    emitted_at_ms: int
    def __init__(self, schema_version: _Optional[int] = ..., job: _Optional[str] = ..., worker_id: _Optional[str] = ..., state: _Optional[_Union[WorkerStateEvent.State, str]] = ..., sequence: _Optional[int] = ..., queue_length: _Optional[int] = ..., emitted_at_ms: _Optional[int] = ...) -> None: ...

class Member(_message.Message):
    __slots__ = ("schema_version", "job", "worker_id", "data_endpoint", "event_endpoint", "curve_public_key", "incarnation", "heartbeat_at_ms", "heartbeat_interval_ms", "batch_schema_version")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    DATA_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    EVENT_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    CURVE_PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_AT_MS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    BATCH_SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    job: str
    worker_id: str
    data_endpoint: str
    event_endpoint: str
    curve_public_key: str
    incarnation: int
    heartbeat_at_ms: int
    heartbeat_interval_ms: int
    batch_schema_version: int
    def __init__(self, schema_version: _Optional[int] = ..., job: _Optional[str] = ..., worker_id: _Optional[str] = ..., data_endpoint: _Optional[str] = ..., event_endpoint: _Optional[str] = ..., curve_public_key: _Optional[str] = ..., incarnation: _Optional[int] = ..., heartbeat_at_ms: _Optional[int] = ..., heartbeat_interval_ms: _Optional[int] = ..., batch_schema_version: _Optional[int] = ...) -> None: ...
