from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PartitionStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PARTITION_STATUS_UNSPECIFIED: _ClassVar[PartitionStatus]
    OK: _ClassVar[PartitionStatus]
    WARN: _ClassVar[PartitionStatus]
    STOP: _ClassVar[PartitionStatus]
    STALL: _ClassVar[PartitionStatus]
    REWIND: _ClassVar[PartitionStatus]
    UNKNOWN: _ClassVar[PartitionStatus]
PARTITION_STATUS_UNSPECIFIED: PartitionStatus
OK: PartitionStatus
WARN: PartitionStatus
STOP: PartitionStatus
STALL: PartitionStatus
REWIND: PartitionStatus
UNKNOWN: PartitionStatus

class ThroughputSample(_message.Message):
    __slots__ = ("schema_version", "job", "worker_id", "workers", "parameter_servers", "records_per_s_consumed", "records_per_s_trained", "window_s", "observed_at_ms", "positions", "busy_fraction", "step_time_ms", "disturbed_s")
    class Position(_message.Message):
        __slots__ = ("topic", "partition", "offset")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        OFFSET_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partition: int
        offset: int
        def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    PARAMETER_SERVERS_FIELD_NUMBER: _ClassVar[int]
    RECORDS_PER_S_CONSUMED_FIELD_NUMBER: _ClassVar[int]
    RECORDS_PER_S_TRAINED_FIELD_NUMBER: _ClassVar[int]
    WINDOW_S_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    POSITIONS_FIELD_NUMBER: _ClassVar[int]
    BUSY_FRACTION_FIELD_NUMBER: _ClassVar[int]
    STEP_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    DISTURBED_S_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    job: str
    worker_id: str
    workers: int
    parameter_servers: int
    records_per_s_consumed: float
    records_per_s_trained: float
    window_s: float
    observed_at_ms: int
    positions: _containers.RepeatedCompositeFieldContainer[ThroughputSample.Position]
    busy_fraction: float
    step_time_ms: float
    disturbed_s: float
    def __init__(self, schema_version: _Optional[int] = ..., job: _Optional[str] = ..., worker_id: _Optional[str] = ..., workers: _Optional[int] = ..., parameter_servers: _Optional[int] = ..., records_per_s_consumed: _Optional[float] = ..., records_per_s_trained: _Optional[float] = ..., window_s: _Optional[float] = ..., observed_at_ms: _Optional[int] = ..., positions: _Optional[_Iterable[_Union[ThroughputSample.Position, _Mapping]]] = ..., busy_fraction: _Optional[float] = ..., step_time_ms: _Optional[float] = ..., disturbed_s: _Optional[float] = ...) -> None: ...

class PartitionLag(_message.Message):
    __slots__ = ("topic", "partition", "committed", "high_watermark", "lag_records", "lag_s", "records_per_s", "status")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    LAG_RECORDS_FIELD_NUMBER: _ClassVar[int]
    LAG_S_FIELD_NUMBER: _ClassVar[int]
    RECORDS_PER_S_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    committed: int
    high_watermark: int
    lag_records: int
    lag_s: float
    records_per_s: float
    status: PartitionStatus
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., committed: _Optional[int] = ..., high_watermark: _Optional[int] = ..., lag_records: _Optional[int] = ..., lag_s: _Optional[float] = ..., records_per_s: _Optional[float] = ..., status: _Optional[_Union[PartitionStatus, str]] = ...) -> None: ...

class LagReport(_message.Message):
    __slots__ = ("schema_version", "group", "observed_at_ms", "partitions", "total_lag_records", "max_lag_s", "p99_lag_s", "records_per_s", "group_status")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_LAG_RECORDS_FIELD_NUMBER: _ClassVar[int]
    MAX_LAG_S_FIELD_NUMBER: _ClassVar[int]
    P99_LAG_S_FIELD_NUMBER: _ClassVar[int]
    RECORDS_PER_S_FIELD_NUMBER: _ClassVar[int]
    GROUP_STATUS_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    group: str
    observed_at_ms: int
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionLag]
    total_lag_records: int
    max_lag_s: float
    p99_lag_s: float
    records_per_s: float
    group_status: PartitionStatus
    def __init__(self, schema_version: _Optional[int] = ..., group: _Optional[str] = ..., observed_at_ms: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[PartitionLag, _Mapping]]] = ..., total_lag_records: _Optional[int] = ..., max_lag_s: _Optional[float] = ..., p99_lag_s: _Optional[float] = ..., records_per_s: _Optional[float] = ..., group_status: _Optional[_Union[PartitionStatus, str]] = ...) -> None: ...

class Alert(_message.Message):
    __slots__ = ("schema_version", "alert_id", "kind", "severity", "group", "topic", "partition", "previous_state", "state", "message", "raised_at_ms", "resolved")
    class Severity(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        SEVERITY_UNSPECIFIED: _ClassVar[Alert.Severity]
        INFO: _ClassVar[Alert.Severity]
        WARNING: _ClassVar[Alert.Severity]
        CRITICAL: _ClassVar[Alert.Severity]
    SEVERITY_UNSPECIFIED: Alert.Severity
    INFO: Alert.Severity
    WARNING: Alert.Severity
    CRITICAL: Alert.Severity
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        KIND_UNSPECIFIED: _ClassVar[Alert.Kind]
        PARTITION_STATUS: _ClassVar[Alert.Kind]
        SLO: _ClassVar[Alert.Kind]
        CONTROL_APP: _ClassVar[Alert.Kind]
        CANNOT_KEEP_UP: _ClassVar[Alert.Kind]
        FORECASTER: _ClassVar[Alert.Kind]
    KIND_UNSPECIFIED: Alert.Kind
    PARTITION_STATUS: Alert.Kind
    SLO: Alert.Kind
    CONTROL_APP: Alert.Kind
    CANNOT_KEEP_UP: Alert.Kind
    FORECASTER: Alert.Kind
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    ALERT_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    SEVERITY_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_STATE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RAISED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    alert_id: str
    kind: Alert.Kind
    severity: Alert.Severity
    group: str
    topic: str
    partition: int
    previous_state: str
    state: str
    message: str
    raised_at_ms: int
    resolved: bool
    def __init__(self, schema_version: _Optional[int] = ..., alert_id: _Optional[str] = ..., kind: _Optional[_Union[Alert.Kind, str]] = ..., severity: _Optional[_Union[Alert.Severity, str]] = ..., group: _Optional[str] = ..., topic: _Optional[str] = ..., partition: _Optional[int] = ..., previous_state: _Optional[str] = ..., state: _Optional[str] = ..., message: _Optional[str] = ..., raised_at_ms: _Optional[int] = ..., resolved: _Optional[bool] = ...) -> None: ...

class Forecast(_message.Message):
    __slots__ = ("schema_version", "job", "model", "fallback_reason", "generated_at_ms", "first_step_at_ms", "step_s", "records_per_s", "quantiles")
    class Quantile(_message.Message):
        __slots__ = ("level", "records_per_s")
        LEVEL_FIELD_NUMBER: _ClassVar[int]
        RECORDS_PER_S_FIELD_NUMBER: _ClassVar[int]
        level: float
        records_per_s: _containers.RepeatedScalarFieldContainer[float]
        def __init__(self, level: _Optional[float] = ..., records_per_s: _Optional[_Iterable[float]] = ...) -> None: ...
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_REASON_FIELD_NUMBER: _ClassVar[int]
    GENERATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    FIRST_STEP_AT_MS_FIELD_NUMBER: _ClassVar[int]
    STEP_S_FIELD_NUMBER: _ClassVar[int]
    RECORDS_PER_S_FIELD_NUMBER: _ClassVar[int]
    QUANTILES_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    job: str
    model: str
    fallback_reason: str
    generated_at_ms: int
    first_step_at_ms: int
    step_s: int
    records_per_s: _containers.RepeatedScalarFieldContainer[float]
    quantiles: _containers.RepeatedCompositeFieldContainer[Forecast.Quantile]
    def __init__(self, schema_version: _Optional[int] = ..., job: _Optional[str] = ..., model: _Optional[str] = ..., fallback_reason: _Optional[str] = ..., generated_at_ms: _Optional[int] = ..., first_step_at_ms: _Optional[int] = ..., step_s: _Optional[int] = ..., records_per_s: _Optional[_Iterable[float]] = ..., quantiles: _Optional[_Iterable[_Union[Forecast.Quantile, _Mapping]]] = ...) -> None: ...

class ScaleCommand(_message.Message):
    __slots__ = ("schema_version", "command_id", "job", "current_workers", "target_workers", "reason", "plan", "plan_step_s", "created_at_ms", "explanation")
    class Reason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        REASON_UNSPECIFIED: _ClassVar[ScaleCommand.Reason]
        PROACTIVE: _ClassVar[ScaleCommand.Reason]
        FALLBACK: _ClassVar[ScaleCommand.Reason]
        MANUAL: _ClassVar[ScaleCommand.Reason]
    REASON_UNSPECIFIED: ScaleCommand.Reason
    PROACTIVE: ScaleCommand.Reason
    FALLBACK: ScaleCommand.Reason
    MANUAL: ScaleCommand.Reason
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    CURRENT_WORKERS_FIELD_NUMBER: _ClassVar[int]
    TARGET_WORKERS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    PLAN_FIELD_NUMBER: _ClassVar[int]
    PLAN_STEP_S_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    EXPLANATION_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    command_id: str
    job: str
    current_workers: int
    target_workers: int
    reason: ScaleCommand.Reason
    plan: _containers.RepeatedScalarFieldContainer[int]
    plan_step_s: int
    created_at_ms: int
    explanation: str
    def __init__(self, schema_version: _Optional[int] = ..., command_id: _Optional[str] = ..., job: _Optional[str] = ..., current_workers: _Optional[int] = ..., target_workers: _Optional[int] = ..., reason: _Optional[_Union[ScaleCommand.Reason, str]] = ..., plan: _Optional[_Iterable[int]] = ..., plan_step_s: _Optional[int] = ..., created_at_ms: _Optional[int] = ..., explanation: _Optional[str] = ...) -> None: ...

class PlannerHeartbeat(_message.Message):
    __slots__ = ("schema_version", "job", "sent_at_ms", "planned_workers", "current_workers", "last_command_id", "note")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    SENT_AT_MS_FIELD_NUMBER: _ClassVar[int]
    PLANNED_WORKERS_FIELD_NUMBER: _ClassVar[int]
    CURRENT_WORKERS_FIELD_NUMBER: _ClassVar[int]
    LAST_COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    job: str
    sent_at_ms: int
    planned_workers: int
    current_workers: int
    last_command_id: str
    note: str
    def __init__(self, schema_version: _Optional[int] = ..., job: _Optional[str] = ..., sent_at_ms: _Optional[int] = ..., planned_workers: _Optional[int] = ..., current_workers: _Optional[int] = ..., last_command_id: _Optional[str] = ..., note: _Optional[str] = ...) -> None: ...

class ScaleRequest(_message.Message):
    __slots__ = ("schema_version", "request_id", "job", "job_class", "current_workers", "wanted_workers", "plan", "plan_step_s", "min_workers", "max_workers", "action_pause_s", "remaining_work", "deadline_at_ms", "records_per_s_per_worker", "step_time_ms", "model_type", "traffic_records_per_s", "reason", "created_at_ms", "explanation", "power_of_two")
    class JobClass(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        JOB_CLASS_UNSPECIFIED: _ClassVar[ScaleRequest.JobClass]
        GUARANTEE: _ClassVar[ScaleRequest.JobClass]
        OPPORTUNISTIC: _ClassVar[ScaleRequest.JobClass]
        SERVING: _ClassVar[ScaleRequest.JobClass]
    JOB_CLASS_UNSPECIFIED: ScaleRequest.JobClass
    GUARANTEE: ScaleRequest.JobClass
    OPPORTUNISTIC: ScaleRequest.JobClass
    SERVING: ScaleRequest.JobClass
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    JOB_CLASS_FIELD_NUMBER: _ClassVar[int]
    CURRENT_WORKERS_FIELD_NUMBER: _ClassVar[int]
    WANTED_WORKERS_FIELD_NUMBER: _ClassVar[int]
    PLAN_FIELD_NUMBER: _ClassVar[int]
    PLAN_STEP_S_FIELD_NUMBER: _ClassVar[int]
    MIN_WORKERS_FIELD_NUMBER: _ClassVar[int]
    MAX_WORKERS_FIELD_NUMBER: _ClassVar[int]
    ACTION_PAUSE_S_FIELD_NUMBER: _ClassVar[int]
    REMAINING_WORK_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_AT_MS_FIELD_NUMBER: _ClassVar[int]
    RECORDS_PER_S_PER_WORKER_FIELD_NUMBER: _ClassVar[int]
    STEP_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    MODEL_TYPE_FIELD_NUMBER: _ClassVar[int]
    TRAFFIC_RECORDS_PER_S_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    EXPLANATION_FIELD_NUMBER: _ClassVar[int]
    POWER_OF_TWO_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    request_id: str
    job: str
    job_class: ScaleRequest.JobClass
    current_workers: int
    wanted_workers: int
    plan: _containers.RepeatedScalarFieldContainer[int]
    plan_step_s: int
    min_workers: int
    max_workers: int
    action_pause_s: float
    remaining_work: float
    deadline_at_ms: int
    records_per_s_per_worker: float
    step_time_ms: float
    model_type: str
    traffic_records_per_s: float
    reason: ScaleCommand.Reason
    created_at_ms: int
    explanation: str
    power_of_two: bool
    def __init__(self, schema_version: _Optional[int] = ..., request_id: _Optional[str] = ..., job: _Optional[str] = ..., job_class: _Optional[_Union[ScaleRequest.JobClass, str]] = ..., current_workers: _Optional[int] = ..., wanted_workers: _Optional[int] = ..., plan: _Optional[_Iterable[int]] = ..., plan_step_s: _Optional[int] = ..., min_workers: _Optional[int] = ..., max_workers: _Optional[int] = ..., action_pause_s: _Optional[float] = ..., remaining_work: _Optional[float] = ..., deadline_at_ms: _Optional[int] = ..., records_per_s_per_worker: _Optional[float] = ..., step_time_ms: _Optional[float] = ..., model_type: _Optional[str] = ..., traffic_records_per_s: _Optional[float] = ..., reason: _Optional[_Union[ScaleCommand.Reason, str]] = ..., created_at_ms: _Optional[int] = ..., explanation: _Optional[str] = ..., power_of_two: _Optional[bool] = ...) -> None: ...

class AllocationDecision(_message.Message):
    __slots__ = ("schema_version", "decision_id", "decided_at_ms", "capacity_workers", "grants", "refusals", "notes", "solver", "status", "solve_ms", "feasible", "plan_step_s")
    class Grant(_message.Message):
        __slots__ = ("job", "job_class", "current_workers", "wanted_workers", "granted_workers", "plan", "reason", "command_id")
        JOB_FIELD_NUMBER: _ClassVar[int]
        JOB_CLASS_FIELD_NUMBER: _ClassVar[int]
        CURRENT_WORKERS_FIELD_NUMBER: _ClassVar[int]
        WANTED_WORKERS_FIELD_NUMBER: _ClassVar[int]
        GRANTED_WORKERS_FIELD_NUMBER: _ClassVar[int]
        PLAN_FIELD_NUMBER: _ClassVar[int]
        REASON_FIELD_NUMBER: _ClassVar[int]
        COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
        job: str
        job_class: ScaleRequest.JobClass
        current_workers: int
        wanted_workers: int
        granted_workers: int
        plan: _containers.RepeatedScalarFieldContainer[int]
        reason: str
        command_id: str
        def __init__(self, job: _Optional[str] = ..., job_class: _Optional[_Union[ScaleRequest.JobClass, str]] = ..., current_workers: _Optional[int] = ..., wanted_workers: _Optional[int] = ..., granted_workers: _Optional[int] = ..., plan: _Optional[_Iterable[int]] = ..., reason: _Optional[str] = ..., command_id: _Optional[str] = ...) -> None: ...
    class Refusal(_message.Message):
        __slots__ = ("job", "request_id", "reason", "refused_at_ms")
        JOB_FIELD_NUMBER: _ClassVar[int]
        REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
        REASON_FIELD_NUMBER: _ClassVar[int]
        REFUSED_AT_MS_FIELD_NUMBER: _ClassVar[int]
        job: str
        request_id: str
        reason: str
        refused_at_ms: int
        def __init__(self, job: _Optional[str] = ..., request_id: _Optional[str] = ..., reason: _Optional[str] = ..., refused_at_ms: _Optional[int] = ...) -> None: ...
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    DECISION_ID_FIELD_NUMBER: _ClassVar[int]
    DECIDED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_WORKERS_FIELD_NUMBER: _ClassVar[int]
    GRANTS_FIELD_NUMBER: _ClassVar[int]
    REFUSALS_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    SOLVER_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SOLVE_MS_FIELD_NUMBER: _ClassVar[int]
    FEASIBLE_FIELD_NUMBER: _ClassVar[int]
    PLAN_STEP_S_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    decision_id: str
    decided_at_ms: int
    capacity_workers: int
    grants: _containers.RepeatedCompositeFieldContainer[AllocationDecision.Grant]
    refusals: _containers.RepeatedCompositeFieldContainer[AllocationDecision.Refusal]
    notes: _containers.RepeatedScalarFieldContainer[str]
    solver: str
    status: str
    solve_ms: float
    feasible: bool
    plan_step_s: int
    def __init__(self, schema_version: _Optional[int] = ..., decision_id: _Optional[str] = ..., decided_at_ms: _Optional[int] = ..., capacity_workers: _Optional[int] = ..., grants: _Optional[_Iterable[_Union[AllocationDecision.Grant, _Mapping]]] = ..., refusals: _Optional[_Iterable[_Union[AllocationDecision.Refusal, _Mapping]]] = ..., notes: _Optional[_Iterable[str]] = ..., solver: _Optional[str] = ..., status: _Optional[str] = ..., solve_ms: _Optional[float] = ..., feasible: _Optional[bool] = ..., plan_step_s: _Optional[int] = ...) -> None: ...

class ShardUpdate(_message.Message):
    __slots__ = ("schema_version", "job", "worker_id", "want_shards", "done", "held", "returned", "leaving", "sent_at_ms")
    class Range(_message.Message):
        __slots__ = ("topic", "partition", "start_offset", "end_offset", "epoch")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        START_OFFSET_FIELD_NUMBER: _ClassVar[int]
        END_OFFSET_FIELD_NUMBER: _ClassVar[int]
        EPOCH_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partition: int
        start_offset: int
        end_offset: int
        epoch: int
        def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., start_offset: _Optional[int] = ..., end_offset: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    WANT_SHARDS_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    RETURNED_FIELD_NUMBER: _ClassVar[int]
    LEAVING_FIELD_NUMBER: _ClassVar[int]
    SENT_AT_MS_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    job: str
    worker_id: str
    want_shards: int
    done: _containers.RepeatedCompositeFieldContainer[ShardUpdate.Range]
    held: _containers.RepeatedCompositeFieldContainer[ShardUpdate.Range]
    returned: _containers.RepeatedCompositeFieldContainer[ShardUpdate.Range]
    leaving: bool
    sent_at_ms: int
    def __init__(self, schema_version: _Optional[int] = ..., job: _Optional[str] = ..., worker_id: _Optional[str] = ..., want_shards: _Optional[int] = ..., done: _Optional[_Iterable[_Union[ShardUpdate.Range, _Mapping]]] = ..., held: _Optional[_Iterable[_Union[ShardUpdate.Range, _Mapping]]] = ..., returned: _Optional[_Iterable[_Union[ShardUpdate.Range, _Mapping]]] = ..., leaving: _Optional[bool] = ..., sent_at_ms: _Optional[int] = ...) -> None: ...

class ShardGrant(_message.Message):
    __slots__ = ("schema_version", "job", "worker_id", "shards", "revoked", "sent_at_ms")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    REVOKED_FIELD_NUMBER: _ClassVar[int]
    SENT_AT_MS_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    job: str
    worker_id: str
    shards: _containers.RepeatedCompositeFieldContainer[ShardUpdate.Range]
    revoked: _containers.RepeatedCompositeFieldContainer[ShardUpdate.Range]
    sent_at_ms: int
    def __init__(self, schema_version: _Optional[int] = ..., job: _Optional[str] = ..., worker_id: _Optional[str] = ..., shards: _Optional[_Iterable[_Union[ShardUpdate.Range, _Mapping]]] = ..., revoked: _Optional[_Iterable[_Union[ShardUpdate.Range, _Mapping]]] = ..., sent_at_ms: _Optional[int] = ...) -> None: ...

class ScaleOutcome(_message.Message):
    __slots__ = ("schema_version", "command_id", "job", "outcome", "assignment", "workers_before", "workers_after", "prep_s", "pause_s", "lost_records", "records_per_s_before", "records_per_s_after", "started_at_ms", "finished_at_ms", "error")
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    WORKERS_BEFORE_FIELD_NUMBER: _ClassVar[int]
    WORKERS_AFTER_FIELD_NUMBER: _ClassVar[int]
    PREP_S_FIELD_NUMBER: _ClassVar[int]
    PAUSE_S_FIELD_NUMBER: _ClassVar[int]
    LOST_RECORDS_FIELD_NUMBER: _ClassVar[int]
    RECORDS_PER_S_BEFORE_FIELD_NUMBER: _ClassVar[int]
    RECORDS_PER_S_AFTER_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    schema_version: int
    command_id: str
    job: str
    outcome: str
    assignment: str
    workers_before: int
    workers_after: int
    prep_s: float
    pause_s: float
    lost_records: float
    records_per_s_before: float
    records_per_s_after: float
    started_at_ms: int
    finished_at_ms: int
    error: str
    def __init__(self, schema_version: _Optional[int] = ..., command_id: _Optional[str] = ..., job: _Optional[str] = ..., outcome: _Optional[str] = ..., assignment: _Optional[str] = ..., workers_before: _Optional[int] = ..., workers_after: _Optional[int] = ..., prep_s: _Optional[float] = ..., pause_s: _Optional[float] = ..., lost_records: _Optional[float] = ..., records_per_s_before: _Optional[float] = ..., records_per_s_after: _Optional[float] = ..., started_at_ms: _Optional[int] = ..., finished_at_ms: _Optional[int] = ..., error: _Optional[str] = ...) -> None: ...
