"""The simulated job's ground truth, kept apart from every policy's model of it.

Owned here: :class:`TruthSettings`, :class:`JobTruth` and :func:`draw_truth`.

* **Throughput.** KALE Eq. 4 (:class:`~streamtrain.scale.physics.PSJobPhysics`,
  :data:`~streamtrain.scale.physics.SIM_SYNC_JOB`): a whole number of parameter
  servers (``ceil(w / 2)``), Eq. 3's bandwidth, and **stragglers**: each of the
  ``max_workers`` slots of the pool gets a speed per run (log-normal with
  ``speed_sigma``; with probability ``straggler_share`` a slot is also a straggler at
  ``straggler_speed``), ``w`` workers are the pool's first ``w`` slots, and the slowest
  of them holds every synchronous step. ``kind="async"``: Eq. 7, each worker at its own
  speed. Eq. 6, which KALE and streamtrain fit, is the family Eq. 4 reduces to only
  without stragglers and with fractional servers, so no policy's model is the truth.
* **Sizing.** The physical throughput (samples/s) is multiplied by ``records_per_sample``
  so that the trace's peak rate needs ``peak_workers`` on this run's pool (Eq. 10 on the
  true curve; the peak sits midway between the best rate below ``peak_workers`` and the
  rate at it): traces in any units work, and a pool with a straggler is a slower
  pool, not a smaller job.
* **What policies learn from** (:meth:`JobTruth.profile`, KALE §3.3 / §4.2): a few
  profiled worker counts (``profile_workers``, clipped to the pool), each measured
  ``profile_repeats`` times with ``profile_noise`` relative Gaussian noise. Madu fits a
  line to them, KALE and streamtrain Eq. 6 (:mod:`streamtrain.scale.models`).

Seeded: the pool's speeds and the profiling noise come from their own random streams of
the run's seed. Pure; no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError
from streamtrain.scale.physics import (
    SIM_ASYNC_JOB,
    SIM_SYNC_JOB,
    PSJobPhysics,
    ps_count,
    slowest_of_first,
)

__all__ = ["JobKind", "JobTruth", "TruthSettings", "draw_truth"]

FloatArray = NDArray[np.float64]
JobKind = Literal["sync", "async"]
# Each random stream of a run has its own offset from the run's seed.
_SPEED_STREAM = 104_729
_PROFILE_STREAM = 7_919


@dataclass(frozen=True, slots=True)
class TruthSettings:
    kind: JobKind = "sync"
    batch_size: float = 16_384.0  # M (sync: global batch; async: per worker step)
    workers_per_ps: float = 2.0
    speed_sigma: float = 0.05
    straggler_share: float = 0.05
    straggler_speed: float = 0.8
    profile_workers: tuple[int, ...] = (1, 2, 4, 8, 16, 24)
    profile_repeats: int = 2
    profile_noise: float = 0.03

    def __post_init__(self) -> None:
        if self.kind not in ("sync", "async"):
            raise ConfigError(f"the job is sync or async, got {self.kind!r}")
        if self.batch_size <= 0 or self.workers_per_ps <= 0:
            raise ConfigError("batch size and worker/PS ratio must be positive")
        if self.speed_sigma < 0 or not 0 <= self.straggler_share <= 1:
            raise ConfigError("need speed_sigma >= 0 and a straggler share in [0, 1]")
        if not 0 < self.straggler_speed <= 1:
            raise ConfigError(f"a straggler's speed is in (0, 1], got {self.straggler_speed}")
        if not self.profile_workers or min(self.profile_workers) < 1:
            raise ConfigError("profile at least one worker count, each at least 1")
        if self.profile_repeats < 1 or not 0 <= self.profile_noise < 0.5:
            raise ConfigError("need >= 1 profiling repeat and a noise in [0, 0.5)")

    @property
    def physics(self) -> PSJobPhysics:
        return SIM_SYNC_JOB if self.kind == "sync" else SIM_ASYNC_JOB


@dataclass(frozen=True, slots=True, eq=False)
class JobTruth:
    """One run's true job: records/s per worker count (index = workers, 0 → 0)."""

    kind: JobKind
    capacity_records_per_s: FloatArray
    speeds: FloatArray  # per pool slot
    records_per_sample: float
    settings: TruthSettings

    @property
    def max_workers(self) -> int:
        return int(self.capacity_records_per_s.shape[0]) - 1

    def samples_per_s(self, workers: FloatArray | list[float]) -> FloatArray:
        """True records/s at each (whole) worker count in ``[1, max_workers]``."""
        w = np.asarray(workers, dtype=np.float64)
        index = np.rint(w).astype(np.int64)
        if np.any(index < 1) or np.any(index > self.max_workers) or np.any(abs(w - index) > 1e-9):
            raise ConfigError(f"worker counts must be whole numbers in [1, {self.max_workers}]")
        result: FloatArray = self.capacity_records_per_s[index]
        return result

    def profile(self, seed: int) -> tuple[tuple[float, float], ...]:
        """Noisy ``(workers, records/s)`` measurements at the profiled counts."""
        s = self.settings
        counts = sorted({min(w, self.max_workers) for w in s.profile_workers})
        workers = np.repeat(np.asarray(counts, dtype=np.float64), s.profile_repeats)
        rng = np.random.default_rng(seed + _PROFILE_STREAM)
        noise = np.clip(rng.normal(1.0, s.profile_noise, workers.size), 0.5, 1.5)
        rates = self.samples_per_s(workers) * noise
        return tuple((float(w), float(r)) for w, r in zip(workers, rates, strict=True))


def _pool_speeds(settings: TruthSettings, max_workers: int, seed: int) -> FloatArray:
    rng = np.random.default_rng(seed + _SPEED_STREAM)
    speeds = np.exp(settings.speed_sigma * rng.standard_normal(max_workers))
    slow = rng.random(max_workers) < settings.straggler_share
    result: FloatArray = np.where(slow, speeds * settings.straggler_speed, speeds)
    return result


def _physical_samples_per_s(settings: TruthSettings, speeds: FloatArray) -> FloatArray:
    physics = settings.physics
    if settings.kind == "async":
        return physics.async_samples_per_s(settings.batch_size, speeds, settings.workers_per_ps)
    w = np.arange(1, speeds.size + 1, dtype=np.float64)
    p = ps_count(w, settings.workers_per_ps)
    return physics.sync_samples_per_s(settings.batch_size, w, p, slowest_of_first(speeds))


def draw_truth(
    settings: TruthSettings,
    *,
    max_workers: int,
    peak_records_per_s: float,
    peak_workers: int,
    seed: int,
) -> JobTruth:
    """This run's pool and its true curve, sized to the trace (module docstring)."""
    if not 2 <= peak_workers <= max_workers:
        raise ConfigError(f"need 2 <= peak workers ({peak_workers}) <= max ({max_workers})")
    if not math.isfinite(peak_records_per_s) or peak_records_per_s <= 0:
        raise ConfigError("the trace has no traffic to size the job to")
    speeds = _pool_speeds(settings, max_workers, seed)
    samples = _physical_samples_per_s(settings, speeds)
    best = np.maximum.accumulate(samples)  # the best rate with at most w workers
    below = float(best[peak_workers - 2])
    # A straggler at the peak count adds nothing: the peak then needs the next count
    # that does (or the pool's best).
    gains = np.flatnonzero(best[peak_workers - 1 :] > below)
    at = float(best[peak_workers - 1 + gains[0]]) if gains.size else below * 1.02
    factor = peak_records_per_s / ((below + at) / 2)
    table = np.concatenate([[0.0], samples * factor])
    return JobTruth(settings.kind, table, speeds, factor, settings)
