"""Proactive plans: the basic plan of KALE Eq. 10 and its stabilization (Algorithm 1).

* :func:`basic_plan`: for each forecast step, the smallest integer worker count w in
  [min, max] with F(w) > L(t). When no count reaches L(t) (a synchronous job past its
  throughput peak, or a max too low), the step gets the count that maximizes F and is
  flagged so the caller can raise a "cannot keep up" alert.
* :func:`stabilize`: KALE Algorithm 1. Scanning the plan, wherever two successive steps
  differ by at least ρ workers, the run of equal values that starts after the change is
  measured; if it lasts less than τ and has a neighbour on both sides, it is raised or
  lowered to the larger of its two neighbours. A run that reaches the end of the plan
  is never calibrated: how long it lasts is not known.

Pure functions; no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError
from streamtrain.scale.models import ThroughputModel

__all__ = ["BasicPlan", "basic_plan", "stabilize"]


@dataclass(frozen=True, slots=True)
class BasicPlan:
    workers: tuple[int, ...]
    cannot_keep_up: tuple[bool, ...]  # per step: no count in range reaches the load

    @property
    def any_cannot_keep_up(self) -> bool:
        return any(self.cannot_keep_up)


def basic_plan(
    model: ThroughputModel,
    loads_records_per_s: Sequence[float],
    *,
    min_workers: int = 1,
    max_workers: int = 64,
    ps_per_worker: float | None = None,
) -> BasicPlan:
    """Eq. 10 for each load. ``ps_per_worker`` (the constant w/p ratio's inverse) is
    required for models with parameter servers: p = max(1, round(w · ps_per_worker))."""
    if min_workers < 1 or max_workers < min_workers:
        raise ConfigError(f"need 1 <= min workers <= max workers, got {min_workers}, {max_workers}")
    loads = np.asarray(loads_records_per_s, dtype=np.float64)
    if loads.ndim != 1 or not np.all(np.isfinite(loads)) or np.any(loads < 0):
        raise ConfigError("loads must be finite, non-negative records/s")
    candidates = np.arange(min_workers, max_workers + 1, dtype=np.float64)
    ps = None
    if model.uses_parameter_servers:
        if ps_per_worker is None or ps_per_worker <= 0:
            raise ConfigError(f"model {model.kind!r} needs a positive ps_per_worker")
        ps = np.maximum(1.0, np.round(candidates * ps_per_worker))
    capacity = model.samples_per_s(candidates, ps)
    # Smallest index whose capacity exceeds the load: capacity need not be monotonic
    # (synchronous jobs slow down past their peak), so search, don't bisect.
    enough = capacity[None, :] > loads[:, None]
    reachable: NDArray[np.bool_] = np.asarray(enough.any(axis=1))
    first = np.argmax(enough, axis=1)
    best = int(np.argmax(capacity))
    chosen = np.where(reachable, first, best)
    workers = tuple(int(candidates[i]) for i in chosen)
    return BasicPlan(workers=workers, cannot_keep_up=tuple(bool(not r) for r in reachable))


def stabilize(
    plan: Sequence[float], *, step_s: float, tau_s: float = 600.0, rho: int = 1
) -> list[int]:
    """KALE Algorithm 1: calibrate short-lived changes away. ``[4, 4, 5, 6, 6, 6]`` at
    600 s steps with τ = 900 s becomes ``[4, 4, 6, 6, 6, 6]``."""
    if step_s <= 0 or tau_s < 0 or rho < 1:
        raise ConfigError(f"need step > 0, tau >= 0, rho >= 1; got {step_s}, {tau_s}, {rho}")
    if any(int(r) != r or r < 0 for r in plan):
        raise ConfigError(f"a plan is non-negative whole worker counts, got {list(plan)}")
    calibrated = [int(r) for r in plan]
    n = len(calibrated)
    i = 0
    while i < n - 1:
        if abs(calibrated[i] - calibrated[i + 1]) >= rho:
            run_end = i + 1  # last index of the run that starts after the change
            while run_end + 1 < n and calibrated[run_end + 1] == calibrated[i + 1]:
                run_end += 1
            duration_s = (run_end - i) * step_s
            if run_end + 1 < n and duration_s < tau_s:
                smooth = max(calibrated[i], calibrated[run_end + 1])
                calibrated[i + 1 : run_end + 1] = [smooth] * (run_end - i)
        i += 1
    return calibrated
