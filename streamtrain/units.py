"""Time constants and conversions, the one home for them (seconds, milliseconds, minutes).

Everything that needs "a day in seconds" imports it from here, so a unit is never
written down twice with different types or spellings; seconds become milliseconds
(wire stamps, librdkafka timeouts) and back through :func:`s_to_ms` and :func:`ms_to_s`,
a wall-clock stamp in milliseconds is :func:`now_ms` (``time.time_ns() // NS_PER_MS``
where the stamp must be exact); seconds read as minutes are ``seconds / MINUTE_S``,
minutes as hours go by :data:`MIN_PER_H`.

Names carry their unit as a suffix: ``lag_s``, ``timeout_ms``, ``lag_min`` (minutes),
``horizon_steps``; ``min_`` and ``max_`` as a prefix are bounds (``min_workers``).
"""

from __future__ import annotations

import time

__all__ = [
    "DAY_S",
    "HOUR_S",
    "MINUTE_S",
    "MIN_PER_H",
    "MS_PER_S",
    "NS_PER_MS",
    "WEEK_S",
    "ms_to_s",
    "now_ms",
    "s_to_ms",
]

MS_PER_S = 1_000
NS_PER_MS = 1_000_000
MINUTE_S = 60
HOUR_S = 3_600
DAY_S = 86_400
WEEK_S = 7 * DAY_S
MIN_PER_H = HOUR_S // MINUTE_S


def s_to_ms(seconds: float) -> float:
    """Seconds in milliseconds (the caller rounds where it needs an integer)."""
    return seconds * MS_PER_S


def ms_to_s(milliseconds: float) -> float:
    """Milliseconds in seconds."""
    return milliseconds / MS_PER_S


def now_ms() -> int:
    """The wall clock in whole milliseconds since the epoch (the wire's ``*_at_ms``)."""
    return int(time.time() * MS_PER_S)
