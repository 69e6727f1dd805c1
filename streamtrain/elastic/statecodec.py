"""Model and optimizer state as bytes, without pickle: what a joiner heals from and what a
checkpoint holds.

Owned here: :func:`encode` and :func:`decode` for the nested state a training job keeps
(``model.state_dict()``, ``optimizer.state_dict()``: dicts with string or integer keys,
lists, tuples, tensors, numbers, strings, booleans and ``None``), and
:func:`check_same_model`, which refuses a state whose model part is not this worker's
model (other keys, shapes or dtypes).

The form is a JSON header followed by the tensors' raw bytes::

    b"STSD1\\n" | header length (8 bytes, little-endian) | header (UTF-8 JSON) | tensor bytes

The header holds the tree with tagged nodes (``{"d": [[key, value], ...]}`` a dict,
``{"l": [...]}`` a list, ``{"t": [...]}`` a tuple, ``{"x": i}`` tensor ``i``, ``{"i": 3}``,
``{"f": "0x1.8p+1"}`` (``float.hex``, exact, NaN and infinities included), ``{"s": ...}``,
``{"b": true}``, ``{"n": null}``) and each tensor's dtype (from a fixed list), shape,
offset and length. Decoding checks every bound (lengths, offsets, dtypes, depth) and
raises :class:`~streamtrain.errors.SchemaError` on anything else: bytes from a peer are
never unpickled.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from typing import Any

import torch

from streamtrain.errors import ModelMismatchError, SchemaError

__all__ = ["MAGIC", "check_same_model", "decode", "encode", "tensor_layout"]

MAGIC = b"STSD1\n"
_LENGTH = struct.Struct("<Q")
_ALIGN = 64
_MAX_DEPTH = 32
_MAX_HEADER_BYTES = 64 << 20

_DTYPES: dict[str, torch.dtype] = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
_NAMES = {dtype: name for name, dtype in _DTYPES.items()}


def encode(state: object) -> bytes:
    """``state`` as bytes (module docstring); a value of another type raises ``TypeError``."""
    tensors: list[torch.Tensor] = []
    tree = _encode_node(state, tensors, 0)
    layout: list[dict[str, Any]] = []
    chunks: list[bytes] = []
    offset = 0
    for tensor in tensors:
        data = _tensor_bytes(tensor)
        pad = -offset % _ALIGN
        if pad:
            chunks.append(bytes(pad))
            offset += pad
        layout.append(
            {
                "dtype": _NAMES[tensor.dtype],
                "shape": list(tensor.shape),
                "offset": offset,
                "nbytes": len(data),
            }
        )
        chunks.append(data)
        offset += len(data)
    header = json.dumps({"tree": tree, "tensors": layout}, separators=(",", ":")).encode()
    return b"".join([MAGIC, _LENGTH.pack(len(header)), header, *chunks])


def decode(data: bytes | bytearray | memoryview, max_bytes: int | None = None) -> Any:
    """The state :func:`encode` wrote; :class:`SchemaError` for anything malformed.

    ``max_bytes`` refuses a larger input before any of it is parsed.
    """
    view = memoryview(data)
    if max_bytes is not None and len(view) > max_bytes:
        raise SchemaError(f"model state of {len(view)} bytes is over the {max_bytes}-byte limit")
    start = len(MAGIC) + _LENGTH.size
    if len(view) < start or bytes(view[: len(MAGIC)]) != MAGIC:
        raise SchemaError("not a streamtrain model state (bad magic)")
    (header_length,) = _LENGTH.unpack(view[len(MAGIC) : start])
    if header_length > min(_MAX_HEADER_BYTES, len(view) - start):
        raise SchemaError(f"model state header length {header_length} is out of bounds")
    try:
        header = json.loads(bytes(view[start : start + header_length]))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SchemaError(f"model state header is not JSON: {exc}") from exc
    if not isinstance(header, dict) or "tree" not in header:
        raise SchemaError("model state header has no tree")
    layout = header.get("tensors")
    if not isinstance(layout, list):
        raise SchemaError("model state header has no tensor list")
    payload = bytearray(view[start + header_length :])
    tensors = [_decode_tensor(entry, payload) for entry in layout]
    return _decode_node(header["tree"], tensors, 0)


def tensor_layout(state: Mapping[str, object]) -> dict[str, tuple[str, tuple[int, ...]]]:
    """``{key: (dtype, shape)}`` of the tensors of a flat ``state_dict`` (a module's)."""
    found: dict[str, tuple[str, tuple[int, ...]]] = {}
    for key, value in state.items():
        if isinstance(value, torch.Tensor):
            found[str(key)] = (_NAMES.get(value.dtype, str(value.dtype)), tuple(value.shape))
        else:
            found[str(key)] = (type(value).__name__, ())
    return found


def check_same_model(mine: Mapping[str, object], theirs: object, *, source: str) -> None:
    """Raise :class:`ModelMismatchError` unless ``theirs`` (a module's ``state_dict`` from
    ``source``) has exactly the keys, shapes and dtypes of ``mine``."""
    if not isinstance(theirs, Mapping):
        raise ModelMismatchError(f"{source} sent no model state_dict ({type(theirs).__name__})")
    expected, received = tensor_layout(mine), tensor_layout(theirs)
    missing = sorted(set(expected) - set(received))
    unexpected = sorted(set(received) - set(expected))
    differ = sorted(k for k in set(expected) & set(received) if expected[k] != received[k])
    if not (missing or unexpected or differ):
        return
    parts = []
    if missing:
        parts.append(f"missing keys {_first(missing)}")
    if unexpected:
        parts.append(f"unexpected keys {_first(unexpected)}")
    if differ:
        shown = [
            f"{k}: {received[k][0]}{list(received[k][1])} here {expected[k][0]}"
            f"{list(expected[k][1])}"
            for k in differ[:3]
        ]
        parts.append(f"other shapes or dtypes ({'; '.join(shown)})")
    raise ModelMismatchError(
        f"the model state from {source} is not this worker's model: {', '.join(parts)}; "
        "refusing to train on it (every worker of a job must run the same model)"
    )


def _first(keys: list[str], n: int = 5) -> str:
    more = f" and {len(keys) - n} more" if len(keys) > n else ""
    return ", ".join(keys[:n]) + more


def _tensor_bytes(tensor: torch.Tensor) -> bytes:
    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    if flat.numel() == 0:
        return b""
    return bytes(flat.view(torch.uint8).numpy().tobytes())


def _encode_node(value: object, tensors: list[torch.Tensor], depth: int) -> dict[str, Any]:
    if depth > _MAX_DEPTH:
        raise TypeError(f"state is nested deeper than {_MAX_DEPTH} levels")
    if isinstance(value, torch.Tensor):
        if value.dtype not in _NAMES or value.is_sparse:
            raise TypeError(f"cannot encode a {value.dtype} tensor (layout {value.layout})")
        tensors.append(value)
        return {"x": len(tensors) - 1}
    if value is None:
        return {"n": None}
    if isinstance(value, bool):
        return {"b": value}
    if isinstance(value, int):
        return {"i": value}
    if isinstance(value, float):
        return {"f": value.hex()}
    if isinstance(value, str):
        return {"s": value}
    if isinstance(value, Mapping):
        return {
            "d": [
                [_encode_node(k, tensors, depth + 1), _encode_node(v, tensors, depth + 1)]
                for k, v in value.items()
            ]
        }
    if isinstance(value, tuple):
        return {"t": [_encode_node(v, tensors, depth + 1) for v in value]}
    if isinstance(value, list):
        return {"l": [_encode_node(v, tensors, depth + 1) for v in value]}
    raise TypeError(f"cannot encode a {type(value).__name__} in a model state")


def _decode_tensor(entry: object, payload: bytearray) -> torch.Tensor:
    if not isinstance(entry, dict):
        raise SchemaError("a tensor entry of the model state is not an object")
    dtype = _DTYPES.get(str(entry.get("dtype")))
    shape, offset, nbytes = entry.get("shape"), entry.get("offset"), entry.get("nbytes")
    if (
        dtype is None
        or not isinstance(shape, list)
        or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)
        or not isinstance(offset, int)
        or not isinstance(nbytes, int)
        or offset < 0
        or nbytes < 0
        or offset + nbytes > len(payload)
    ):
        raise SchemaError(f"a tensor of the model state is out of bounds: {entry!r:.200}")
    numel = 1
    for dim in shape:
        numel *= dim
    itemsize = torch.empty((), dtype=dtype).element_size()
    if numel * itemsize != nbytes:
        raise SchemaError(f"a tensor's {nbytes} bytes do not fit its shape {shape} ({dtype})")
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    if offset % itemsize:
        raise SchemaError(f"a tensor's offset {offset} is not aligned to its {dtype}")
    flat = torch.frombuffer(payload, dtype=dtype, count=numel, offset=offset)
    return flat.reshape(shape)


def _decode_node(node: object, tensors: list[torch.Tensor], depth: int) -> Any:
    if depth > _MAX_DEPTH + 1 or not isinstance(node, dict) or len(node) != 1:
        raise SchemaError("a node of the model state is malformed or nested too deep")
    ((tag, value),) = node.items()
    if tag == "x":
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < len(tensors):
            raise SchemaError(f"the model state names tensor {value!r}, which it does not hold")
        return tensors[value]
    if tag == "n" and value is None:
        return None
    if tag == "b" and isinstance(value, bool):
        return value
    if tag == "i" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if tag == "f" and isinstance(value, str):
        try:
            return float.fromhex(value)
        except ValueError as exc:
            raise SchemaError(f"bad float {value!r:.40} in the model state") from exc
    if tag == "s" and isinstance(value, str):
        return value
    if tag in ("l", "t") and isinstance(value, list):
        items = [_decode_node(v, tensors, depth + 1) for v in value]
        return items if tag == "l" else tuple(items)
    if tag == "d" and isinstance(value, list):
        out: dict[Any, Any] = {}
        for pair in value:
            if not isinstance(pair, list) or len(pair) != 2:
                raise SchemaError("a dict entry of the model state is not a [key, value] pair")
            key = _decode_node(pair[0], tensors, depth + 1)
            if key is not None and not isinstance(key, str | int | float):
                raise SchemaError(f"a dict key of type {type(key).__name__} in the model state")
            out[key] = _decode_node(pair[1], tensors, depth + 1)
        return out
    raise SchemaError(f"unknown node {tag!r} in the model state")
