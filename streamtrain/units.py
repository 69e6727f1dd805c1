"""Time constants, the one home for them (seconds and milliseconds).

Everything that needs "a day in seconds" imports it from here, so a unit is never
written down twice with different types or spellings.
"""

from __future__ import annotations

__all__ = ["DAY_S", "HOUR_S", "MINUTE_S", "MS_PER_S", "WEEK_S"]

MS_PER_S = 1_000
MINUTE_S = 60
HOUR_S = 3_600
DAY_S = 86_400
WEEK_S = 7 * DAY_S
