"""Policy settings from a mapping of overrides: the one parser every policy uses.

Owned here (pure):

* :func:`parse_policy_settings`: the CLI's ``KEY=VALUE`` texts to typed values
  (``--policy-setting target=5``): ints, floats, booleans (``true``/``false``), else the
  string. It knows no policy; :func:`settings_from` checks the values against one.
* :func:`settings_from`: a policy's frozen settings dataclass (every field with a
  default) from a mapping of overrides, checked against the fields' annotated types:

  - an unknown key is a :class:`~streamtrain.errors.ConfigError` naming the policy, the
    key and the keys it knows;
  - a value of the wrong type is one too (naming the policy, the key and the type it
    expects). Accepted: the field's own type; an int for a float field; an integral
    float for an int field; 0 or 1 for a bool field; a string parsed as the field's
    type (``"3"`` for an int, ``"0.5"`` for a float, ``"true"``/``"false"`` for a bool);
    ``None`` for an optional field; one of a ``Literal`` field's values;
  - a field whose type is itself a settings dataclass (the fallback trigger of the
    ``streamtrain`` policy) takes its own fields as ``<field>_<subfield>`` keys
    (``trigger_lag_exit_s``), applied on top of the field's default (or of a whole
    value given under ``<field>``);
  - a bad value (what the dataclass's ``__post_init__`` rejects) is re-raised as a
    :class:`ConfigError` naming the policy.
"""

from __future__ import annotations

import dataclasses
import math
import types
from collections.abc import Mapping
from typing import (
    TYPE_CHECKING,
    Any,
    Literal,
    TypeVar,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

from streamtrain.errors import ConfigError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["parse_policy_settings", "settings_from"]

S = TypeVar("S", bound="DataclassInstance")


def parse_policy_settings(items: Mapping[str, str]) -> tuple[tuple[str, Any], ...]:
    """``{"target": "5"}`` to typed values: ints, floats, booleans, else the string."""
    parsed: list[tuple[str, Any]] = []
    for key, text in items.items():
        value: Any = text
        lowered = text.strip().lower()
        if lowered in ("true", "false"):
            value = lowered == "true"
        else:
            for convert in (int, float):
                try:
                    value = convert(text)
                    break
                except ValueError:
                    continue
        parsed.append((key, value))
    return tuple(parsed)


def settings_from(cls: type[S], overrides: Mapping[str, object], *, policy: str) -> S:
    """``cls``'s defaults with ``overrides`` applied (see the module docstring)."""
    return _settings(cls, cls(), overrides, policy=policy, prefix="")


def _settings(
    cls: type[S], base: S, overrides: Mapping[str, object], *, policy: str, prefix: str
) -> S:
    hints = get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(base) if f.init]
    nested_fields = [n for n in names if _is_settings_class(hints[n])]
    changes: dict[str, object] = {}
    nested: dict[str, dict[str, object]] = {}
    for key, value in overrides.items():
        if key in names:
            changes[key] = _coerce(value, hints[key], policy=policy, key=prefix + key)
            continue
        head = next((n for n in nested_fields if key.startswith(n + "_")), None)
        if head is None:
            known = ", ".join(prefix + n for n in names if n not in nested_fields)
            known += "".join(f", {prefix}{n}_<field>" for n in nested_fields)
            raise ConfigError(
                f"bad settings for policy {policy!r}: unknown key {prefix + key!r} (known: {known})"
            )
        nested.setdefault(head, {})[key[len(head) + 1 :]] = value
    for head, sub in nested.items():
        inner: Any = changes.get(head, getattr(base, head))
        changes[head] = _settings(type(inner), inner, sub, policy=policy, prefix=f"{prefix}{head}_")
    try:
        return dataclasses.replace(base, **changes)
    except ConfigError as exc:
        raise ConfigError(f"bad settings for policy {policy!r}: {exc}") from exc


def _is_settings_class(hint: object) -> bool:
    return isinstance(hint, type) and dataclasses.is_dataclass(hint)


def _coerce(value: object, hint: object, *, policy: str, key: str) -> object:
    """``value`` as a value of type ``hint`` (module docstring), or a ConfigError."""
    if get_origin(hint) in (Union, types.UnionType):
        options = get_args(hint)
        if value is None and type(None) in options:
            return None
        problems = []
        for option in (o for o in options if o is not type(None)):
            try:
                return _coerce(value, option, policy=policy, key=key)
            except ConfigError as exc:
                problems.append(exc)
        raise problems[-1]
    if get_origin(hint) is Literal:
        if value in get_args(hint):
            return value
        choices = ", ".join(repr(c) for c in get_args(hint))
        raise ConfigError(
            f"bad settings for policy {policy!r}: {key} must be one of {choices}, got {value!r}"
        )
    converted = _convert(value, hint)
    if converted is _WRONG:
        expected = getattr(hint, "__name__", str(hint))
        raise ConfigError(
            f"bad settings for policy {policy!r}: {key} must be of type {expected}, got {value!r}"
        )
    return converted


_WRONG = object()  # what _convert returns for a value it cannot accept


def _convert(value: object, hint: object) -> object:
    """``value`` as ``hint`` where the module docstring allows it; ``_WRONG`` if not."""
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        return _WRONG
    if hint is int:
        if isinstance(value, bool):
            return _WRONG
        if isinstance(value, int):
            return value
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                return _WRONG
        return _WRONG
    if hint is float:
        if isinstance(value, bool):
            return _WRONG
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                return _WRONG
        return _WRONG
    if isinstance(hint, type):
        return value if isinstance(value, hint) else _WRONG
    return value  # an annotation this parser does not check (none of the policies')
