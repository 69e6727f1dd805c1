"""Types of the optional C extension ``_columns.c`` (used by streamtrain/ingest/messages.py
and streamtrain/records.py)."""

from typing import Any

from confluent_kafka import Message

FILL_VERSION: int

def fill(
    messages: list[Message],
    message_type: type[Message],
    layout: tuple[int, int, int, int, int],
    batch_records: int,
    partitions: Any,
    offsets: Any,
    timestamps: Any,
    bounds: Any,
) -> tuple[list[bytes], int, int] | None: ...
def offset_runs(
    partitions: Any, offsets: Any, max_runs: int
) -> list[tuple[int, int, int]] | None: ...
