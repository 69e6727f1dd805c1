"""Encoding and decoding of streamtrain's protobuf messages, with schema-version checks.

Owned here: the schema version this build writes, and the one rule for reading:
a frame must parse and must not carry a schema version newer than ours; anything else
raises :class:`streamtrain.errors.SchemaError` so callers can drop and count it. No
other serialization (and never pickle) crosses a wire.
"""

from __future__ import annotations

from typing import TypeVar

from google.protobuf.message import DecodeError, Message

from streamtrain.errors import SchemaError

__all__ = ["SCHEMA_VERSION", "decode", "encode"]

SCHEMA_VERSION = 1


M = TypeVar("M", bound=Message)


def encode(message: Message) -> bytes:
    """Serialize ``message``, stamping the current schema version when it has none."""
    if getattr(message, "schema_version", None) == 0:
        message.schema_version = SCHEMA_VERSION  # type: ignore[attr-defined]
    return message.SerializeToString()


def decode(message_type: type[M], data: bytes, *, newest: int = SCHEMA_VERSION) -> M:
    """Parse ``data`` as ``message_type``; raise :class:`SchemaError` if it cannot be used.

    ``newest``: the newest schema version of ``message_type`` this build reads (a message
    whose form changed on its own, as ``RecordBatch`` did, has its own)."""
    message = message_type()
    try:
        message.ParseFromString(data)
    except DecodeError as exc:
        raise SchemaError(
            f"{len(data)}-byte frame is not a valid {message_type.DESCRIPTOR.full_name}"
        ) from exc
    version = getattr(message, "schema_version", SCHEMA_VERSION)
    if version > newest:
        raise SchemaError(
            f"{message_type.DESCRIPTOR.full_name} has schema version {version}, newer than "
            f"{newest} which this streamtrain reads; upgrade the reader"
        )
    return message
