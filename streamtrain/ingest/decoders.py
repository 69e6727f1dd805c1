"""Decoders: record payloads to named numpy columns, with per-record failures reported.

Owned here: the :class:`Decoder` protocol, its result :class:`Decoded`, the column
schema :class:`Field`, and the decoders streamtrain ships:

* :class:`RawDecoder`: the payload bytes as a ``uint8`` matrix (a zero-copy view when
  every record has the same length; padded plus a ``length`` column otherwise);
* :class:`StructDecoder`: fixed-size binary records described by a numpy structured
  dtype, decoded for the whole batch by one ``np.frombuffer`` (the fastest path);
* :class:`JsonDecoder`, :class:`ProtobufDecoder`: per record, then assembled into
  columns by a declared list of fields;
* :class:`FunctionDecoder` (a user function per record) and
  :class:`BatchFunctionDecoder` (a user function per batch, isolating a failing record
  by re-running record by record).

A decoder never raises for bad data: records it cannot decode are listed in
:attr:`Decoded.failed` with a reason, and the reader sends them to the dead-letter
topic. Columns may be read-only views of the payload buffer; copy before writing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message
from numpy.typing import DTypeLike, NDArray

from streamtrain.errors import ConfigError
from streamtrain.records import RecordColumns

__all__ = [
    "BatchFunctionDecoder",
    "Decoded",
    "Decoder",
    "Field",
    "FunctionDecoder",
    "JsonDecoder",
    "ProtobufDecoder",
    "RawDecoder",
    "StructDecoder",
]

Columns = dict[str, NDArray[Any]]
_NO_INDEX = np.zeros(0, dtype=np.intp)


@dataclass(frozen=True, slots=True)
class Field:
    """One output column: its name, element dtype and per-record shape (``()``: scalar)."""

    name: str
    dtype: np.dtype[Any]
    shape: tuple[int, ...] = ()

    def __init__(self, name: str, dtype: DTypeLike, shape: tuple[int, ...] = ()) -> None:
        if not name:
            raise ConfigError("a field needs a name")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "dtype", np.dtype(dtype))
        object.__setattr__(self, "shape", tuple(shape))


@dataclass(frozen=True, slots=True)
class Decoded:
    """Columns for the records that decoded (in order) and the indices of those that did not.

    ``failed`` indexes the input records; ``errors[i]`` is why ``failed[i]`` failed.
    """

    columns: Columns
    failed: NDArray[np.intp] = field(default_factory=lambda: _NO_INDEX)
    errors: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.failed.size


class Decoder(Protocol):
    """Turns a chunk of records into columns; reports, never raises on, bad records."""

    @property
    def fields(self) -> tuple[Field, ...] | None:
        """The columns every decoded batch has (``None``: not known in advance)."""

    def decode(self, records: RecordColumns) -> Decoded: ...


# -- binary decoders ----------------------------------------------------------------------


class RawDecoder:
    """``payload``: a ``(n, width)`` ``uint8`` matrix of the record bytes.

    With ``width`` given, records of another length fail. Without it, equal-length
    batches are a zero-copy view; ragged batches are zero-padded to the longest record
    and get a ``length`` column.
    """

    def __init__(self, width: int | None = None) -> None:
        if width is not None and width < 0:
            raise ConfigError(f"raw record width must not be negative, got {width}")
        self.width = width

    @property
    def fields(self) -> tuple[Field, ...] | None:
        if self.width is None:
            return None
        return (Field("payload", np.uint8, (self.width,)),)

    def decode(self, records: RecordColumns) -> Decoded:
        n = len(records)
        shortest, longest = records.payload_length_range()
        if self.width is not None:
            if n and shortest == self.width == longest:
                return Decoded(_raw_fixed(records, self.width))
            lengths = records.payload_lengths()
            bad = np.flatnonzero(lengths != self.width)
            if bad.size:
                kept = records.omit(bad)
                errors = tuple(
                    f"record has {int(lengths[i])} bytes, expected {self.width}" for i in bad
                )
                return Decoded(_raw_fixed(kept, self.width), bad, errors)
            return Decoded(_raw_fixed(records, self.width))
        if n and shortest == longest:
            return Decoded(_raw_fixed(records, shortest))
        lengths = records.payload_lengths()
        width = longest
        padded = np.zeros((n, width), dtype=np.uint8)
        flat = np.frombuffer(records.payloads, dtype=np.uint8)
        rows = np.repeat(np.arange(n), lengths)
        cols = np.arange(flat.size) - np.repeat(records.payload_bounds[:-1], lengths)
        padded[rows, cols] = flat
        return Decoded({"payload": padded, "length": lengths.copy()})


def _raw_fixed(records: RecordColumns, width: int) -> Columns:
    flat = np.frombuffer(records.payloads, dtype=np.uint8)
    return {"payload": flat.reshape(len(records), width)}


class StructDecoder:
    """Fixed-size binary records laid out as the numpy structured ``dtype``.

    Each named field becomes a column (fields whose name starts with ``_`` are padding
    and skipped). Records whose size is not ``dtype.itemsize`` fail.
    """

    def __init__(self, dtype: DTypeLike) -> None:
        self.dtype = np.dtype(dtype)
        if self.dtype.names is None:
            raise ConfigError("StructDecoder needs a structured dtype (with named fields)")
        self._names = [name for name in self.dtype.names if not name.startswith("_")]

    @property
    def fields(self) -> tuple[Field, ...]:
        layout: Mapping[str, Any] = self.dtype.fields or {}
        result = []
        for name in self._names:
            sub = layout[name][0]
            base, shape = (sub.base, sub.shape) if sub.subdtype else (sub, ())
            result.append(Field(name, base, shape))
        return tuple(result)

    def decode(self, records: RecordColumns) -> Decoded:
        size = self.dtype.itemsize
        n = len(records)
        if len(records.payloads) == n * size and (
            not n or records.payload_length_range() == (size, size)
        ):
            return Decoded(self._columns(records.payloads, n))
        lengths = records.payload_lengths()
        bad = np.flatnonzero(lengths != size)
        kept = records.omit(bad)
        errors = tuple(f"record has {int(lengths[i])} bytes, expected {size}" for i in bad)
        return Decoded(self._columns(kept.payloads, len(kept)), bad, errors)

    def _columns(self, payloads: bytes, n: int) -> Columns:
        table = np.frombuffer(payloads, dtype=self.dtype, count=n)
        return {name: table[name] for name in self._names}


# -- per-record decoders, assembled into columns by fields ----------------------------------


def _assemble(
    rows: list[tuple[Any, ...]], fields: Sequence[Field]
) -> tuple[Columns, list[int], list[str]]:
    """Columns from per-record value tuples; rows whose values do not fit their field fail.

    Fast path: one ``np.asarray`` per field. Only if that fails is each row checked.
    """
    try:
        return _columns_of(rows, fields), [], []
    except (ValueError, TypeError, OverflowError):
        pass
    bad: list[int] = []
    errors: list[str] = []
    for i, row in enumerate(rows):
        for value, spec in zip(row, fields, strict=True):
            try:
                converted = np.asarray(value, dtype=spec.dtype)
            except (ValueError, TypeError, OverflowError) as exc:
                reason = f"field {spec.name!r}: {exc}"
            else:
                if converted.shape == spec.shape:
                    continue
                reason = f"field {spec.name!r} has shape {converted.shape}, expected {spec.shape}"
            bad.append(i)
            errors.append(reason)
            break
    bad_set = set(bad)
    kept = [row for i, row in enumerate(rows) if i not in bad_set]
    return _columns_of(kept, fields), bad, errors


def _columns_of(rows: list[tuple[Any, ...]], fields: Sequence[Field]) -> Columns:
    columns: Columns = {}
    for j, spec in enumerate(fields):
        values = [row[j] for row in rows]
        if spec.dtype == np.dtype(object):
            array = np.empty(len(values), dtype=object)
            array[:] = values
        else:
            array = np.asarray(values, dtype=spec.dtype)
        if array.shape != (len(rows), *spec.shape):
            raise ValueError(f"field {spec.name!r} has shape {array.shape[1:]}")
        columns[spec.name] = array
    return columns


class FunctionDecoder:
    """A user function ``bytes -> mapping of field values`` per record.

    With ``fields`` the values are assembled into typed columns (a record whose values
    do not fit fails); without, the mappings land in one ``object`` column ``value``.
    Any exception the function raises fails that record only.
    """

    def __init__(
        self,
        function: Callable[[bytes], Any],
        fields: Sequence[Field] | None = None,
        *,
        name: str | None = None,
    ) -> None:
        self.function = function
        self._fields = tuple(fields) if fields is not None else None
        self.name = name or getattr(function, "__name__", "decoder")
        if self._fields is not None and len({f.name for f in self._fields}) != len(self._fields):
            raise ConfigError("field names must be unique")

    @property
    def fields(self) -> tuple[Field, ...] | None:
        return self._fields

    def decode(self, records: RecordColumns) -> Decoded:
        rows: list[tuple[Any, ...]] = []
        index: list[int] = []
        failed: list[int] = []
        errors: list[str] = []
        names = None if self._fields is None else [f.name for f in self._fields]
        for i, payload in enumerate(records.values()):
            try:
                value = self.function(payload)
                row = (value,) if names is None else tuple(value[name] for name in names)
            except Exception as exc:  # noqa: BLE001 - any decoder failure is a bad record
                failed.append(i)
                errors.append(f"{self.name}: {type(exc).__name__}: {exc}")
                continue
            rows.append(row)
            index.append(i)
        if self._fields is None:
            column = np.empty(len(rows), dtype=object)
            column[:] = [row[0] for row in rows]
            columns: Columns = {"value": column}
        else:
            columns, bad, bad_errors = _assemble(rows, self._fields)
            failed.extend(index[i] for i in bad)
            errors.extend(bad_errors)
        order = np.argsort(np.asarray(failed, dtype=np.intp), kind="stable")
        return Decoded(
            columns,
            np.asarray(failed, dtype=np.intp)[order],
            tuple(errors[i] for i in order),
        )


class JsonDecoder(FunctionDecoder):
    """JSON objects; ``fields`` picks and types the keys (missing key: the record fails)."""

    def __init__(self, fields: Sequence[Field] | None = None) -> None:
        super().__init__(json.loads, fields, name="json")


_PROTO_DTYPES: Mapping[int, DTypeLike] = {
    FieldDescriptor.TYPE_DOUBLE: np.float64,
    FieldDescriptor.TYPE_FLOAT: np.float32,
    FieldDescriptor.TYPE_INT64: np.int64,
    FieldDescriptor.TYPE_SINT64: np.int64,
    FieldDescriptor.TYPE_SFIXED64: np.int64,
    FieldDescriptor.TYPE_UINT64: np.uint64,
    FieldDescriptor.TYPE_FIXED64: np.uint64,
    FieldDescriptor.TYPE_INT32: np.int32,
    FieldDescriptor.TYPE_SINT32: np.int32,
    FieldDescriptor.TYPE_SFIXED32: np.int32,
    FieldDescriptor.TYPE_UINT32: np.uint32,
    FieldDescriptor.TYPE_FIXED32: np.uint32,
    FieldDescriptor.TYPE_ENUM: np.int32,
    FieldDescriptor.TYPE_BOOL: np.bool_,
    FieldDescriptor.TYPE_STRING: object,
    FieldDescriptor.TYPE_BYTES: object,
}


def _proto_scalar_fields(message_type: type[Message]) -> tuple[Field, ...]:
    found = []
    for descriptor in message_type.DESCRIPTOR.fields:
        dtype = _PROTO_DTYPES.get(descriptor.type)
        if dtype is None or descriptor.is_repeated:
            continue
        found.append(Field(descriptor.name, dtype))
    return tuple(found)


class ProtobufDecoder(FunctionDecoder):
    """Records that are serialized ``message_type`` messages.

    Default fields: every singular scalar, string and enum field of the message.
    Repeated fields need an explicit :class:`Field` with their fixed ``shape``.
    """

    def __init__(self, message_type: type[Message], fields: Sequence[Field] | None = None) -> None:
        self.message_type = message_type
        chosen = tuple(fields) if fields is not None else _proto_scalar_fields(message_type)
        known = {d.name for d in message_type.DESCRIPTOR.fields}
        unknown = [f.name for f in chosen if f.name not in known]
        if unknown:
            raise ConfigError(
                f"{message_type.DESCRIPTOR.full_name} has no field(s) {', '.join(unknown)}"
            )
        super().__init__(self._parse, chosen, name=message_type.DESCRIPTOR.full_name)

    def _parse(self, payload: bytes) -> Mapping[str, Any]:
        try:
            message = self.message_type.FromString(payload)
        except DecodeError as exc:
            raise ValueError(f"not a valid {self.name}: {exc}") from exc
        return _ProtoView(message)


class _ProtoView(Mapping[str, Any]):
    """A message read as a mapping; repeated fields become lists."""

    def __init__(self, message: Message) -> None:
        self._message = message

    def __getitem__(self, key: str) -> Any:
        value = getattr(self._message, key)
        if hasattr(value, "__len__") and not isinstance(value, str | bytes):
            return list(value)
        return value

    def __iter__(self) -> Any:
        return iter(d.name for d in self._message.DESCRIPTOR.fields)

    def __len__(self) -> int:
        return len(self._message.DESCRIPTOR.fields)


class BatchFunctionDecoder:
    """A user function ``RecordColumns -> mapping of columns`` for the whole batch.

    Each returned column must have one row per record. If the function raises (or
    returns the wrong number of rows), it is re-run record by record to find and fail
    only the bad records; the good ones' columns are concatenated.
    """

    def __init__(
        self,
        function: Callable[[RecordColumns], Mapping[str, Any]],
        fields: Sequence[Field] | None = None,
    ) -> None:
        self.function = function
        self._fields = tuple(fields) if fields is not None else None
        self.name = getattr(function, "__name__", "decoder")

    @property
    def fields(self) -> tuple[Field, ...] | None:
        return self._fields

    def _call(self, records: RecordColumns, like: Columns | None = None) -> Columns | str:
        """The function's columns for ``records``, or why they are not usable."""
        try:
            result = {name: np.asarray(value) for name, value in self.function(records).items()}
        except Exception as exc:  # noqa: BLE001 - any decoder failure is a bad record
            return f"{self.name}: {type(exc).__name__}: {exc}"
        for name, column in result.items():
            if column.ndim == 0 or column.shape[0] != len(records):
                return (
                    f"{self.name}: column {name!r} has {column.shape[:1]} rows for "
                    f"{len(records)} records"
                )
        if like is not None and result.keys() != like.keys():
            return f"{self.name}: columns {sorted(result)} differ from {sorted(like)}"
        return result

    def decode(self, records: RecordColumns) -> Decoded:
        whole = self._call(records)
        if not isinstance(whole, str):
            return Decoded(whole)
        parts: list[Columns] = []
        failed: list[int] = []
        errors: list[str] = []
        for i in range(len(records)):
            part = self._call(records.take(slice(i, i + 1)), parts[0] if parts else None)
            if isinstance(part, str):
                failed.append(i)
                errors.append(part)
            else:
                parts.append(part)
        columns: Columns = {}
        if parts:
            names = parts[0].keys()
            columns = {name: np.concatenate([part[name] for part in parts]) for name in names}
        return Decoded(columns, np.asarray(failed, dtype=np.intp), tuple(errors))
