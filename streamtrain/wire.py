"""Encoding and decoding of streamtrain's protobuf messages, with schema-version checks.

Owned here: the schema version this build writes, and the one rule for reading: a
frame must be a value (not a tombstone), must parse, must not carry a schema version
newer than ours, and (unless the caller reads enums itself) must hold only enum values
this build knows; anything else raises :class:`streamtrain.errors.SchemaError` with its
``kind``, so callers drop and count it. :class:`DecodeFailures` is that count for one
reader: by kind, each kind logged once. No other serialization (and never pickle)
crosses a wire.

Why unknown enum values are refused here: protobuf keeps an enum value it does not know
as a bare integer, and the first ``Enum.Name(value)`` or table lookup downstream raises
a ``ValueError`` or ``KeyError`` nobody expects (a newer planner's reason stopped the
KEDA scaler at every start). Refused at the boundary, such a message is one undecodable
message like any other.
"""

from __future__ import annotations

import logging
from collections import Counter
from functools import cache
from typing import TypeVar

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message

from streamtrain.errors import SchemaError

__all__ = ["SCHEMA_VERSION", "DecodeFailures", "decode", "encode", "unknown_enum"]

SCHEMA_VERSION = 1

log = logging.getLogger(__name__)

M = TypeVar("M", bound=Message)


def encode(message: Message) -> bytes:
    """Serialize ``message``, stamping the current schema version when it has none."""
    if getattr(message, "schema_version", None) == 0:
        message.schema_version = SCHEMA_VERSION  # type: ignore[attr-defined]
    return message.SerializeToString()


def decode(
    message_type: type[M],
    data: bytes | bytearray | memoryview | None,
    *,
    newest: int = SCHEMA_VERSION,
    known_enums: bool = True,
) -> M:
    """Parse ``data`` as ``message_type``; raise :class:`SchemaError` if it cannot be used.

    ``newest``: the newest schema version of ``message_type`` this build reads (a message
    whose form changed on its own, as ``RecordBatch`` did, has its own). ``known_enums``:
    refuse an enum value this build does not know (module docstring); a reader with its
    own rules for newer values (the shuffle's dialects) turns it off."""
    name = message_type.DESCRIPTOR.full_name
    if not isinstance(data, bytes | bytearray | memoryview):
        raise SchemaError(
            f"a {name} message without a value ({type(data).__name__})", kind="no_value"
        )
    message = message_type()
    try:
        message.ParseFromString(bytes(data))
    except DecodeError as exc:
        raise SchemaError(
            f"{len(data)}-byte frame is not a valid {name}", kind="unparsable"
        ) from exc
    version = getattr(message, "schema_version", SCHEMA_VERSION)
    if version > newest:
        raise SchemaError(
            f"{name} has schema version {version}, newer than {newest} which this "
            "streamtrain reads; upgrade the reader",
            kind="newer_schema",
        )
    if known_enums:
        problem = unknown_enum(message)
        if problem is not None:
            raise SchemaError(f"{name}: {problem}; upgrade the reader", kind="unknown_enum")
    return message


def unknown_enum(message: Message) -> str | None:
    """The first enum field (nested messages included) holding a value this build does
    not know, in words; ``None`` when every value is known."""
    if not _has_enums(message.DESCRIPTOR):
        return None
    for field, value in message.ListFields():
        if field.type == FieldDescriptor.TYPE_ENUM:
            known = _enum_numbers(field)
            values = value if _repeated(field) else (value,)
            for number in values:
                if number not in known:
                    return f"{field.full_name} = {number} is not a value this build knows"
        elif field.type == FieldDescriptor.TYPE_MESSAGE and not _is_map(field):
            for child in value if _repeated(field) else (value,):
                problem = unknown_enum(child)
                if problem is not None:
                    return problem
    return None


def _repeated(field: FieldDescriptor) -> bool:
    return bool(field.is_repeated)


def _is_map(field: FieldDescriptor) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


@cache
def _enum_numbers(field: FieldDescriptor) -> frozenset[int]:
    enum = field.enum_type
    return frozenset(value.number for value in enum.values) if enum is not None else frozenset()


@cache
def _has_enums(descriptor: Descriptor) -> bool:
    """Whether a message of this type can hold an enum anywhere (cached per type)."""
    return _reaches_enum(descriptor, frozenset())


def _reaches_enum(descriptor: Descriptor, seen: frozenset[str]) -> bool:
    if descriptor.full_name in seen:
        return False
    seen = seen | {descriptor.full_name}
    for field in descriptor.fields:
        if field.type == FieldDescriptor.TYPE_ENUM:
            return True
        child = field.message_type
        if (
            field.type == FieldDescriptor.TYPE_MESSAGE
            and child is not None
            and not _is_map(field)
            and _reaches_enum(child, seen)
        ):
            return True
    return False


class DecodeFailures:
    """The undecodable messages one reader met: counted by kind, the first of each kind
    logged at WARNING (with where it was read), the rest at DEBUG, so a topic full of
    one bad producer's messages costs one log line, not one per message."""

    def __init__(self, what: str, logger: logging.Logger | None = None) -> None:
        self.what = what  # e.g. "scale command", "throughput sample"
        self.by_kind = Counter[str]()
        self._log = logger or log

    @property
    def total(self) -> int:
        return sum(self.by_kind.values())

    def add(self, error: SchemaError, where: str = "") -> None:
        """Count one undecodable message; log it if it is the first of its kind."""
        kind = getattr(error, "kind", "malformed")
        self.by_kind[kind] += 1
        place = f" at {where}" if where else ""
        if self.by_kind[kind] == 1:
            self._log.warning(
                "skipping an undecodable %s%s (%s; further ones of this kind are counted, "
                "not logged): %s",
                self.what,
                place,
                kind,
                error,
            )
        else:
            self._log.debug("skipping an undecodable %s%s (%s): %s", self.what, place, kind, error)
