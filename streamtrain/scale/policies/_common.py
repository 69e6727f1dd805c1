"""Helpers shared by the policies: the throughput model a policy believes, and lookups.

* :func:`fitted_model`: KALE's way: fit ``context.model_kind`` (Eq. 6 for synchronous
  jobs) by NNLS to the context's ``(workers, records/s)`` observations.
* :func:`capacity_table`: ``F(w)`` for ``w = 0..max_workers`` (index = workers).
* :func:`workers_for`: Eq. 10 on a table: the smallest ``w`` in ``[lo, hi]`` with
  ``F(w) > load``, or the ``w`` with the highest ``F`` when none reaches it.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError
from streamtrain.scale.models import ThroughputModel, fit
from streamtrain.scale.policy import PolicyContext

__all__ = ["capacity_table", "fitted_model", "workers_for"]

FloatArray = NDArray[np.float64]


def fitted_model(context: PolicyContext) -> ThroughputModel:
    """See the module docstring; needs at least as many observations as coefficients."""
    if not context.throughput_observations:
        raise ConfigError("this policy needs throughput observations (workers, records/s)")
    workers = [w for w, _ in context.throughput_observations]
    rates = [r for _, r in context.throughput_observations]
    return fit(context.model_kind, workers, rates)


def capacity_table(model: ThroughputModel, max_workers: int) -> FloatArray:
    workers = np.arange(1, max_workers + 1, dtype=np.float64)
    table: FloatArray = np.concatenate([[0.0], model.samples_per_s(workers)])
    return table


def workers_for(table: FloatArray, load: float, lo: int, hi: int) -> int:
    """See the module docstring."""
    segment = table[lo : hi + 1]
    enough = np.flatnonzero(segment > load)
    if enough.size:
        return lo + int(enough[0])
    return lo + int(np.argmax(segment))
