"""ingest: the worker-side consumer library (at-least-once, batched, torch and tf.data).

A worker reads its share of a topic with :class:`IngestConsumer`: a background thread
consumes in batches into a bounded local queue of columnar
:class:`~streamtrain.records.RecordColumns` chunks; a :class:`BatchReader` decodes them
(:mod:`~streamtrain.ingest.decoders`) into :class:`Batch` objects, sending bad records
to ``<topic>.dlq``; ``batch.ack()`` after the training step tells the
:class:`OffsetTracker`, and only the contiguous acknowledged prefix of each partition is
ever committed. Adapters: ``as_torch_dataset()`` (:mod:`~streamtrain.ingest.torch_data`)
and ``as_tf_dataset()`` / ``tf_feed()`` (:mod:`~streamtrain.ingest.tf_data`). Metrics
are published as ``ThroughputSample`` protobufs and to Prometheus
(:mod:`~streamtrain.ingest.reporting`).
Loops that stop after a while without records share one
:class:`~streamtrain.ingest.idle.IdleClock`.

ingest imports nothing of the shuffle layer; the worker that runs a consumer (with or
without the shuffle) is assembled in :mod:`streamtrain.worker`.

torch and TensorFlow are imported only by the modules that need them
(``torch_data``, ``mmoe``, ``tf_data``), never by ``import streamtrain.ingest``.
"""

from streamtrain.ingest.consumer import IngestConsumer
from streamtrain.ingest.decoders import (
    BatchFunctionDecoder,
    Decoded,
    Decoder,
    Field,
    FunctionDecoder,
    JsonDecoder,
    ProtobufDecoder,
    RawDecoder,
    StructDecoder,
)
from streamtrain.ingest.dlq import DeadLetterQueue
from streamtrain.ingest.idle import IdleClock
from streamtrain.ingest.localqueue import LocalQueue
from streamtrain.ingest.metrics import MetricsSnapshot, WorkerMetrics
from streamtrain.ingest.reader import Batch, BatchReader, RecordSource
from streamtrain.ingest.settings import IngestSettings
from streamtrain.ingest.tracker import OffsetTracker, PartitionProgress

__all__ = [
    "Batch",
    "BatchFunctionDecoder",
    "BatchReader",
    "DeadLetterQueue",
    "Decoded",
    "Decoder",
    "Field",
    "FunctionDecoder",
    "IdleClock",
    "IngestConsumer",
    "IngestSettings",
    "JsonDecoder",
    "LocalQueue",
    "MetricsSnapshot",
    "OffsetTracker",
    "PartitionProgress",
    "ProtobufDecoder",
    "RawDecoder",
    "RecordSource",
    "StructDecoder",
    "WorkerMetrics",
]
