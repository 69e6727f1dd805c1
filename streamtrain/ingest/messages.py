"""From the ``list[Message]`` that confluent-kafka's ``consume()`` returns to columns, fast.

Owned here: :func:`to_columns`, which splits error events from records and builds one
:class:`~streamtrain.ingest.records.RecordColumns` per topic. It is the per-record hot
path of ingest, so it calls each ``Message`` accessor through ``map`` over the unbound
method (C-level iteration, no Python frame per record) straight into ``np.fromiter``,
and joins the payloads once. A null value (tombstone) becomes an empty payload.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any

import numpy as np
from confluent_kafka import KafkaError as ClientError
from confluent_kafka import Message

from streamtrain.ingest.records import RecordColumns

__all__ = ["to_columns"]

_SECOND = itemgetter(1)


def to_columns(
    messages: Sequence[Message], single_topic: str | None = None
) -> tuple[list[RecordColumns], list[ClientError]]:
    """Records grouped by topic (in arrival order within each), and the error events.

    ``single_topic`` skips reading each message's topic when the consumer reads only
    that topic.
    """
    errors: list[ClientError] = []
    if any(map(Message.error, messages)):
        errors = [e for e in map(Message.error, messages) if e is not None]
        messages = [m for m in messages if m.error() is None]
    if not messages:
        return [], errors
    if single_topic is not None:
        return [_build(single_topic, messages)], errors
    by_topic: dict[str, list[Message]] = {}
    for message, topic in zip(messages, map(Message.topic, messages), strict=True):
        by_topic.setdefault(topic or "", []).append(message)
    return [_build(topic, group) for topic, group in by_topic.items()], errors


def _build(topic: str, messages: Sequence[Message]) -> RecordColumns:
    n = len(messages)
    values: list[Any] = list(map(Message.value, messages))
    try:
        payloads = b"".join(values)
    except TypeError:  # a null value: a tombstone carries no payload
        values = [b"" if v is None else v for v in values]
        payloads = b"".join(values)
    bounds = np.empty(n + 1, dtype=np.int64)
    bounds[0] = 0
    np.cumsum(np.fromiter(map(len, values), dtype=np.int64, count=n), out=bounds[1:])
    return RecordColumns(
        topic,
        np.fromiter(map(Message.partition, messages), dtype=np.int32, count=n),
        np.fromiter(map(Message.offset, messages), dtype=np.int64, count=n),
        np.fromiter(map(_SECOND, map(Message.timestamp, messages)), dtype=np.int64, count=n),
        payloads,
        bounds,
    )
