"""lag: per-partition lag in records and seconds, CPS, status and alerts (KALE §2.2).

The pure metrics (no broker, no clock) are ``metrics`` (lag records, the per-group
tick), ``history`` (HWM history, lag seconds by interpolation, CPS), ``window`` and
``status`` (Burrow-style OK/WARN/STALL/STOP/REWIND), ``slo`` (lag-seconds thresholds
with hysteresis) and ``results`` (the value types). ``report`` turns a result into the
``LagReport`` protobuf; ``offsets`` is the only module that talks to Kafka (batched
ListOffsets and OffsetFetch, record timestamps); ``monitor`` runs one tick of them;
``history_keys`` and ``history_tables`` say how the history is persisted; ``prometheus``
exports it. The Faust app that wires all of it to timers, topics and HTTP is
:mod:`streamtrain.control` (an assembly, like the worker).
"""

from streamtrain.lag.history import HwmHistory, TopicRate, interpolate_lag_s, records_per_s
from streamtrain.lag.metrics import (
    PartitionOffsets,
    TopicOffsets,
    compute_group_lag,
    compute_topics_lag,
    lag_records,
    lag_s_from_timestamp,
)
from streamtrain.lag.results import GroupLag, PartitionLag, TopicLag
from streamtrain.lag.slo import SloSettings, SloState, SloTracker, SloTransition
from streamtrain.lag.status import Status, StatusChange, StatusSettings, StatusTracker

__all__ = [
    "GroupLag",
    "HwmHistory",
    "PartitionLag",
    "PartitionOffsets",
    "SloSettings",
    "SloState",
    "SloTracker",
    "SloTransition",
    "Status",
    "StatusChange",
    "StatusSettings",
    "StatusTracker",
    "TopicLag",
    "TopicOffsets",
    "TopicRate",
    "compute_group_lag",
    "compute_topics_lag",
    "interpolate_lag_s",
    "lag_records",
    "lag_s_from_timestamp",
    "records_per_s",
]
