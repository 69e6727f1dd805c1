"""The keys of the control app's history: one encoder and one decoder for each of them.

Owned here (pure). The app persists three kinds of history step through its internal
history topic into three tables (:mod:`streamtrain.lag.history_tables`); each kind has
a small value type:

* :class:`HwmKey`: a topic's HWM snapshot in a history step (table ``hwm_history``);
* :class:`LagKey`: a group's per-step summary (table ``lag_history``);
* :class:`ArrivalKey`: one complete arrival step of the planner's group (table
  ``arrival_history``; the step is the planner's, on its model clock).

In a table the key is ``<name>|<step>`` (:func:`encode_table_key`); on the history
topic it carries its kind in front, ``<kind>:<name>|<step>`` with kind ``hwm``, ``lag``
or ``arr`` (:func:`encode_message_key`). Names (topics, groups) may hold any character
but the step is the text after the last ``|`` and the kind the text before the first
``:``. The decoders (:func:`decode_message_key`, :func:`decode_table_key`) return
``None`` for a malformed key (an unknown kind, no ``|``, an empty name, a step that is
not an integer) after logging it: a bad entry in a changelog is skipped, never fatal.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import ClassVar, TypeVar

__all__ = [
    "ArrivalKey",
    "HistoryKey",
    "HwmKey",
    "LagKey",
    "decode_message_key",
    "decode_table_key",
    "encode_message_key",
    "encode_table_key",
]

log = logging.getLogger(__name__)

_STEP = re.compile(r"-?[0-9]+")


@dataclass(frozen=True, slots=True)
class HwmKey:
    """A topic's HWM snapshot in history step ``step``."""

    topic: str
    step: int
    kind: ClassVar[str] = "hwm"

    @property
    def name(self) -> str:
        return self.topic


@dataclass(frozen=True, slots=True)
class LagKey:
    """A group's lag summary in history step ``step``."""

    group: str
    step: int
    kind: ClassVar[str] = "lag"

    @property
    def name(self) -> str:
        return self.group


@dataclass(frozen=True, slots=True)
class ArrivalKey:
    """The planner's arrival rate of ``group`` in (model-clock) planning step ``step``."""

    group: str
    step: int
    kind: ClassVar[str] = "arr"

    @property
    def name(self) -> str:
        return self.group


HistoryKey = HwmKey | LagKey | ArrivalKey
K = TypeVar("K", bound=HistoryKey)

_KINDS: dict[str, type[HwmKey] | type[LagKey] | type[ArrivalKey]] = {
    cls.kind: cls for cls in (HwmKey, LagKey, ArrivalKey)
}


def encode_table_key(key: HistoryKey) -> str:
    """``<name>|<step>``: the key in the kind's table."""
    return f"{key.name}|{key.step}"


def encode_message_key(key: HistoryKey) -> str:
    """``<kind>:<name>|<step>``: the key on the history topic."""
    return f"{key.kind}:{encode_table_key(key)}"


def decode_table_key(cls: type[K], text: str) -> K | None:
    """A key of ``cls``'s table; ``None`` (logged) when malformed."""
    key = _decode(cls, text)
    if key is None:
        log.warning("skipping a malformed %s history key %r", cls.kind, text)
    return key


def decode_message_key(text: str) -> HistoryKey | None:
    """A key from the history topic; ``None`` (logged) when malformed."""
    kind, sep, rest = text.partition(":")
    cls = _KINDS.get(kind) if sep else None
    key = None if cls is None else _decode(cls, rest)
    if key is None:
        log.warning("skipping a malformed history message key %r", text)
    return key


def _decode(cls: type[K], text: str) -> K | None:
    name, sep, step = text.rpartition("|")
    if not sep or not name or not _STEP.fullmatch(step):
        return None
    return cls(name, int(step))
