"""Percentiles of a sample, the one home for them (pure).

Lag (p99 over a group's partitions), the shuffle layer (ACK round-trip p50/p99) and the
pool simulator (solve time p50/p90) all summarise a sample the same way: numpy's
linear interpolation between the two nearest ranks (its default ``method="linear"``,
a selection rather than a full sort). An empty sample has no percentile: the caller
says what it reports then (``None`` unless it passes ``empty``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import overload

import numpy as np
from numpy.typing import ArrayLike

from streamtrain.errors import ConfigError

__all__ = ["percentile", "percentiles"]


@overload
def percentiles(values: ArrayLike, qs: Sequence[float]) -> tuple[float, ...] | None: ...
@overload
def percentiles(values: ArrayLike, qs: Sequence[float], *, empty: float) -> tuple[float, ...]: ...
def percentiles(
    values: ArrayLike, qs: Sequence[float], *, empty: float | None = None
) -> tuple[float, ...] | None:
    """The ``qs`` percentiles (each in [0, 100]) of ``values``, linearly interpolated;
    for no values, ``empty`` for each (``None`` when ``empty`` is not given)."""
    for q in qs:
        if not (math.isfinite(q) and 0.0 <= q <= 100.0):
            raise ConfigError(f"a percentile is in [0, 100], got {q}")
    arr = np.asarray(values, dtype=np.float64).reshape(-1)
    if arr.size == 0:
        return None if empty is None else tuple(empty for _ in qs)
    return tuple(float(x) for x in np.percentile(arr, list(qs)))


@overload
def percentile(values: ArrayLike, q: float) -> float | None: ...
@overload
def percentile(values: ArrayLike, q: float, *, empty: float) -> float: ...
def percentile(values: ArrayLike, q: float, *, empty: float | None = None) -> float | None:
    """The ``q`` percentile (in [0, 100]) of ``values``, linearly interpolated; for no
    values, ``empty`` (``None`` when not given)."""
    got = percentiles(values, (q,))
    return empty if got is None else got[0]
