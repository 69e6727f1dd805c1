"""Warm start (DLRover-RM Algorithm 1): a new job's first resource plan from similar
finished jobs instead of a default.

A :class:`JobRecord` is what a finished (or settled) job leaves behind: its model type,
its traffic level (records/s it had to absorb, or its data size: any positive scale)
and the value to carry over (the worker count it settled at, or its measured
one-worker rate). :func:`warm_start`:

1. keeps the records of the same model type and ranks them by how close their traffic
   level is to the new job's (distance ``|log(level / new level)|``), keeping the ``k``
   closest;
2. orders them from the least to the most similar, ``A_0 .. A_{k-1}``;
3. smooths: ``Â_0 = A_0``, ``Â_i = μ·A_i + (1 - μ)·Â_{i-1}``, and returns ``Â_{k-1}``: the
   most similar job weighs ``μ``, the others geometrically less.

No record of that model type: ``None`` (the caller falls back to its default).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from streamtrain.errors import ConfigError

__all__ = ["JobRecord", "similar", "warm_start"]


@dataclass(frozen=True, slots=True)
class JobRecord:
    model_type: str
    traffic_level: float  # records/s (or data size): any positive scale, compared in log
    value: float  # what carries over: workers, or a one-worker rate

    def __post_init__(self) -> None:
        if not self.traffic_level > 0 or not math.isfinite(self.value):
            raise ConfigError("a job record needs a positive traffic level and a finite value")


def similar(
    history: Iterable[JobRecord], model_type: str, traffic_level: float, k: int
) -> list[JobRecord]:
    """The ``k`` most similar records, least similar first (Algorithm 1, lines 1-2)."""
    if traffic_level <= 0 or k < 1:
        raise ConfigError("warm start needs a positive traffic level and k >= 1")
    same = [r for r in history if r.model_type == model_type]
    ranked = sorted(same, key=lambda r: abs(math.log(r.traffic_level / traffic_level)))[:k]
    return ranked[::-1]


def warm_start(
    history: Iterable[JobRecord],
    model_type: str,
    traffic_level: float,
    *,
    k: int = 5,
    mu: float = 0.5,
) -> float | None:
    """Algorithm 1: exponentially smoothed values of the top-``k`` similar jobs."""
    if not 0 < mu < 1:
        raise ConfigError(f"the smoothing factor must be in (0, 1), got {mu}")
    ranked = similar(history, model_type, traffic_level, k)
    if not ranked:
        return None
    smoothed = ranked[0].value
    for record in ranked[1:]:
        smoothed = mu * record.value + (1 - mu) * smoothed
    return smoothed
