"""The Table 2 experiment's metrics, pure: lag in seconds, accumulated lag, AUC, traffic.

Owned here:

* :func:`lag_seconds`: per partition, how long the oldest record not yet committed has
  waited (KALE's lag: sojourn time), from the producer's history of cumulative counts;
* :func:`accumulated_lag`: KALE Eq. 11 per partition, ∫ lag dt (trapezoids);
* :func:`auc_summary`: from each worker's evaluations, the mean AUC while the producer
  ran, the AUC when it stopped and the last one;
* :data:`PAPER_TABLE2` and :func:`relative_change`: KALE's numbers and how ours compare.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "PAPER_TABLE2",
    "AucSummary",
    "accumulated_lag",
    "auc_summary",
    "lag_seconds",
    "relative_change",
]

#: KALE Table 2: traffic (MB), CPU utilization (%), model AUC (%), each ± its spread.
PAPER_TABLE2: dict[str, tuple[float, float, float]] = {
    "none": (905.0, 75.5, 95.7),
    "basic": (1097.0, 80.0, 96.4),
    "advanced": (948.0, 77.0, 96.5),
}


def lag_seconds(
    history_s: NDArray[np.float64],
    history_counts: NDArray[np.int64],
    committed: NDArray[np.int64],
    now_s: float,
) -> NDArray[np.float64]:
    """Per partition: ``now_s`` minus the time record number ``committed[p]`` (the oldest
    not committed) was produced, 0 when every produced record is committed.

    ``history_s[k]`` is when the producer had produced ``history_counts[k, p]`` records
    of partition ``p`` (non-decreasing in ``k``); a record counts as produced at the first
    history point that includes it.
    """
    times = np.asarray(history_s, dtype=np.float64)
    offsets = np.asarray(committed, dtype=np.int64)
    lag = np.zeros(offsets.size, dtype=np.float64)
    if times.size == 0:
        return lag
    counts = np.asarray(history_counts, dtype=np.int64).reshape(times.size, -1)
    for p, offset in enumerate(offsets.tolist()):
        k = int(np.searchsorted(counts[:, p], offset, side="right"))
        if k < times.size:
            lag[p] = max(now_s - float(times[k]), 0.0)
    return lag


def accumulated_lag(times_s: NDArray[np.float64], lag_s: NDArray[np.float64]) -> NDArray[Any]:
    """KALE Eq. 11 per partition: ∫ lag dt over the samples (lag-seconds times seconds)."""
    times = np.asarray(times_s, dtype=np.float64)
    lag = np.asarray(lag_s, dtype=np.float64).reshape(times.size, -1)
    if times.size < 2:
        return np.zeros(lag.shape[1])
    widths = np.diff(times)[:, None]
    return np.asarray(((lag[1:] + lag[:-1]) / 2 * widths).sum(axis=0))


@dataclass(frozen=True, slots=True)
class AucSummary:
    """Mean over workers of: the time-mean AUC while the producer ran
    (``during``), the last AUC at or before it stopped (``at_stop``), the last one
    (``final``); ``min_during``: the worst worker's ``during``."""

    during: float
    at_stop: float
    final: float
    min_during: float
    evaluations: int


def auc_summary(
    evaluations: Mapping[str, Sequence[Mapping[str, float]]],
    *,
    started_at_s: float,
    stopped_at_s: float,
) -> AucSummary:
    """:class:`AucSummary` of ``{worker: [{"at_s", "auc"}, ...]}`` (time order); a worker
    with no evaluation while the producer ran is left out of ``during``."""
    during: list[float] = []
    at_stop: list[float] = []
    final: list[float] = []
    count = 0
    for lines in evaluations.values():
        points = [(float(x["at_s"]), float(x["auc"])) for x in lines if math.isfinite(x["auc"])]
        count += len(points)
        if not points:
            continue
        final.append(points[-1][1])
        running = [a for t, a in points if started_at_s <= t <= stopped_at_s]
        if running:
            during.append(float(np.mean(running)))
        before = [a for t, a in points if t <= stopped_at_s]
        if before:
            at_stop.append(before[-1])

    def mean(values: list[float]) -> float:
        return float(np.mean(values)) if values else float("nan")

    return AucSummary(
        during=mean(during),
        at_stop=mean(at_stop),
        final=mean(final),
        min_during=min(during) if during else float("nan"),
        evaluations=count,
    )


def relative_change(new: float, old: float) -> float:
    """``(new - old) / old`` in percent (NaN when ``old`` is 0)."""
    return (new - old) / old * 100 if old else float("nan")
