"""From the ``list[Message]`` that confluent-kafka's ``consume()`` returns to columns, fast.

Owned here: :func:`to_columns`, which splits error events from records and builds one
:class:`~streamtrain.records.RecordColumns` per topic, and :func:`active_builder`, which
says how. It is the per-record hot path of ingest. Two builders
(:data:`~streamtrain.ingest.settings.ColumnBuilder`):

* ``"c"``: the optional C extension :mod:`streamtrain._columns` (built by
  ``pip install`` when a C compiler is there) reads each ``Message`` object's fields
  straight from its memory, at the offsets :func:`message_layout` finds: about 20 ns a
  record instead of 250 (:func:`_build_c`). Where the extension is not built or the
  layout is not found, ``"c"`` runs the accessor path.
* ``"python"``: each ``Message`` accessor through ``map`` over the unbound method
  (C-level iteration, no Python frame per record) straight into ``np.fromiter``, the
  payloads joined once. Always correct; the fallback for everything else.

A null value (tombstone) becomes an empty payload. The builder is a parameter
(``IngestSettings.column_builder``; the worker command's ``--column-builder``, from
``STREAMTRAIN_INGEST_BUILDER``): nothing here reads the environment, and importing this
module builds no probe.
"""

from __future__ import annotations

import ctypes
import logging
import struct
import threading
from collections.abc import Sequence
from operator import itemgetter
from types import ModuleType
from typing import Any, cast

import numpy as np
from confluent_kafka import KafkaError as ClientError
from confluent_kafka import Message

from streamtrain.ingest.settings import ColumnBuilder
from streamtrain.records import RecordColumns, payload_bounds

__all__ = ["active_builder", "message_layout", "to_columns"]

log = logging.getLogger(__name__)

_SECOND = itemgetter(1)

FILL_VERSION = 2
"""The ``_columns.fill`` signature this module calls (it cuts batches)."""

Layout = tuple[int, int, int, int, int]
"""Byte offsets in a ``Message`` of its value and error pointers, int32 partition, int64
offset and int64 timestamp (the order ``_columns.fill`` takes them in)."""


def message_layout() -> Layout | None:
    """Where confluent-kafka keeps a Message's fields, found from probes; ``None`` if unsure.

    Each probe carries values that occur once in its memory (a partition, an offset and
    a timestamp of distinctive bit patterns; its value and error objects, found by
    address). Only the object's own ``__basicsize__`` bytes are read. Two probes with
    different values must give the same offsets.
    """
    from confluent_kafka import KafkaError

    size = Message.__basicsize__
    found = []
    for partition, offset, timestamp_ms in (
        (0x2BADC0DE, 0x0123456789AB, 0x0FEDCBA98765),
        (0x1CEDFACE, 0x0A1B2C3D4E5F, 0x05F4E3D2C1B0),
    ):
        value, error = bytes([partition & 0xFF]) * 7, KafkaError(KafkaError._PARTITION_EOF)
        probe = Message(
            topic="streamtrain-probe",
            partition=partition,
            offset=offset,
            value=value,
            timestamp=(1, timestamp_ms),
            error=error,
        )
        if probe.value() is not value or probe.error() is not error:
            return None
        memory = ctypes.string_at(id(probe), size)

        def where(pattern: bytes, align: int, memory: bytes = memory) -> int | None:
            hits = [
                i
                for i in range(0, size - len(pattern) + 1, align)
                if memory[i : i + len(pattern)] == pattern
            ]
            return hits[0] if len(hits) == 1 else None

        layout = (
            where(struct.pack("P", id(value)), 8),
            where(struct.pack("P", id(error)), 8),
            where(struct.pack("=i", partition), 4),
            where(struct.pack("=q", offset), 8),
            where(struct.pack("=q", timestamp_ms), 8),
        )
        if None in layout:
            return None
        found.append(layout)
    return cast(Layout, found[0]) if found[0] == found[1] else None


def _find_c_builder() -> tuple[ModuleType, Layout] | None:
    try:
        from streamtrain import _columns
    except ImportError:
        return None
    if getattr(_columns, "FILL_VERSION", 1) != FILL_VERSION:
        log.warning(
            "streamtrain._columns was built from an older source (rebuild it: "
            "python setup.py build_ext --inplace); using the accessor path"
        )
        return None
    try:
        layout = message_layout()
    except Exception:
        log.debug("cannot find the Message layout; using the accessor path", exc_info=True)
        return None
    return None if layout is None else (_columns, layout)


_C: tuple[ModuleType, Layout] | None = None
"""The C extension and the Message layout, once found (``None``: not usable)."""
_c_probed = False
_c_lock = threading.Lock()


def _c_builder() -> tuple[ModuleType, Layout] | None:
    """The C builder of this process, probed on the first call (thread-safe)."""
    global _C, _c_probed
    if not _c_probed:
        with _c_lock:
            if not _c_probed:
                _C = _find_c_builder()
                _c_probed = True
    return _C


def active_builder(preferred: ColumnBuilder = "c") -> ColumnBuilder:
    """The builder :func:`to_columns` runs for ``preferred``: ``"c"`` only where the C
    extension is built and the Message layout was found (and has not been switched off)."""
    if preferred == "python":
        return "python"
    return "c" if _c_builder() is not None else "python"


def to_columns(
    messages: Sequence[Message],
    single_topic: str | None = None,
    *,
    builder: ColumnBuilder = "c",
    batch_records: int | None = None,
) -> tuple[list[RecordColumns], list[ClientError]]:
    """Records grouped by topic (in arrival order within each), and the error events.

    ``single_topic`` skips reading each message's topic when the consumer reads only
    that topic; only then can the ``"c"`` builder run. With ``batch_records``, each
    topic's records come as chunks of that many (the last of each may have fewer), each
    with its own payload buffer: the consumer's fetch thread turns a whole ``consume()``
    into training batches at once, copying each payload once.
    """
    if single_topic is not None and builder == "c" and messages and _c_builder() is not None:
        built = _build_c(single_topic, messages, batch_records or len(messages))
        if built is not None:
            return built, []
    errors: list[ClientError] = []
    if any(map(Message.error, messages)):
        errors = [e for e in map(Message.error, messages) if e is not None]
        messages = [m for m in messages if m.error() is None]
    if not messages:
        return [], errors
    if single_topic is not None:
        return _build_cut(single_topic, messages, batch_records), errors
    by_topic: dict[str, list[Message]] = {}
    for message, topic in zip(messages, map(Message.topic, messages), strict=True):
        by_topic.setdefault(topic or "", []).append(message)
    return [
        chunk
        for topic, group in by_topic.items()
        for chunk in _build_cut(topic, group, batch_records)
    ], errors


def _build_cut(
    topic: str, messages: Sequence[Message], batch_records: int | None
) -> list[RecordColumns]:
    size = batch_records or len(messages)
    return [_build(topic, messages[i : i + size]) for i in range(0, len(messages), size)]


def _build(topic: str, messages: Sequence[Message]) -> RecordColumns:
    n = len(messages)
    values: list[Any] = list(map(Message.value, messages))
    try:
        payloads = b"".join(values)
    except TypeError:  # a null value: a tombstone carries no payload
        values = [b"" if v is None else v for v in values]
        payloads = b"".join(values)
    bounds = payload_bounds(np.fromiter(map(len, values), dtype=np.int64, count=n))
    return RecordColumns(
        topic,
        np.fromiter(map(Message.partition, messages), dtype=np.int32, count=n),
        np.fromiter(map(Message.offset, messages), dtype=np.int64, count=n),
        np.fromiter(map(_SECOND, map(Message.timestamp, messages)), dtype=np.int64, count=n),
        payloads,
        bounds,
    )


def _build_c(
    topic: str, messages: Sequence[Message], batch_records: int
) -> list[RecordColumns] | None:
    """The C builder's chunks of ``batch_records``, or ``None`` (not plain records, or
    the C path is off). One call for the whole list reads partition, offset, timestamp,
    value and error of each ``Message`` and copies the payloads into one buffer per
    chunk. Used for single-topic consumers, the common case. Every call is spot-checked
    against the accessors (its first and last record); a mismatch switches the C path
    off for good, with a warning."""
    global _C
    found = _C
    if found is None or not isinstance(messages, list) or not messages:
        return None
    module, layout = found
    n = len(messages)
    size = max(1, min(batch_records, n))
    cuts = range(0, n, size)
    partitions = np.empty(n, dtype=np.int32)
    offsets = np.empty(n, dtype=np.int64)
    timestamps = np.empty(n, dtype=np.int64)
    bounds = np.empty(n + len(cuts), dtype=np.int64)
    filled = module.fill(messages, Message, layout, size, partitions, offsets, timestamps, bounds)
    if filled is None:
        return None
    buffers, shortest, longest = filled
    for i in {0, n - 1}:  # the spot check: the struct reads agree with the accessors
        m = messages[i]
        k = i // size
        value = m.value() or b""
        if (
            m.error() is not None
            or int(partitions[i]) != m.partition()
            or int(offsets[i]) != m.offset()
            or int(timestamps[i]) != m.timestamp()[1]
            or buffers[k][int(bounds[i + k]) : int(bounds[i + k + 1])] != value
        ):
            log.warning(
                "the C column builder disagrees with confluent-kafka %s's accessors; "
                "using the accessor path from now on",
                confluent_version(),
            )
            _C = None
            return None
    chunks = []
    for k, (start, payloads) in enumerate(zip(cuts, buffers, strict=True)):
        end = min(start + size, n)
        chunk = RecordColumns(
            topic,
            partitions[start:end],
            offsets[start:end],
            timestamps[start:end],
            payloads,
            bounds[start + k : end + k + 1],
        )
        # every batch has the same lengths when the whole list has (the common case)
        chunks.append(chunk.knowing_lengths(shortest, longest) if shortest == longest else chunk)
    return chunks


def confluent_version() -> str:
    import confluent_kafka

    return str(confluent_kafka.version()[0])
