"""The physical step-time model of KALE Eq. 2-4 and 7: the ground truth that the fitted
models (streamtrain.scale.models) are checked against and the simulator's job runs on.

Owned here: :class:`PSJobPhysics` (a parameter-server job's synchronous and
asynchronous throughput, with stragglers), :func:`ps_count` (whole parameter servers
for ``w`` workers), :func:`slowest_of_first` (the running minimum of a pool's speeds:
the slowest of the first ``w`` workers, for every ``w``), :data:`EXAMPLE_SYNC_JOB`
(tests, benchmarks/throughput_models.py) and :data:`SIM_SYNC_JOB`,
:data:`SIM_ASYNC_JOB` (the simulator's jobs). Pure; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError

__all__ = [
    "EXAMPLE_SYNC_JOB",
    "SIM_ASYNC_JOB",
    "SIM_SYNC_JOB",
    "PSJobPhysics",
    "ps_count",
    "slowest_of_first",
]

FloatArray = NDArray[np.float64]


def ps_count(workers: FloatArray, workers_per_ps: float) -> FloatArray:
    """``ceil(w / r)``, at least one server: a real job cannot run half a server, so Eq. 6
    is only an approximation of Eq. 4 even without stragglers."""
    if workers_per_ps <= 0:
        raise ConfigError(f"the worker/PS ratio must be positive, got {workers_per_ps}")
    result: FloatArray = np.maximum(1.0, np.ceil(np.asarray(workers) / workers_per_ps - 1e-9))
    return result


def slowest_of_first(speeds: FloatArray) -> FloatArray:
    """Element ``w - 1``: the slowest speed among the first ``w`` workers of a pool."""
    values = np.asarray(speeds, dtype=np.float64)
    if values.ndim != 1 or values.size == 0 or np.any(values <= 0):
        raise ConfigError("worker speeds must be a non-empty series of positive numbers")
    result: FloatArray = np.minimum.accumulate(values)
    return result


@dataclass(frozen=True, slots=True)
class PSJobPhysics:
    """T_forward, T_backward, S, D, B0, T_update, λ, λ′ of a parameter-server job.

    * The synchronous step time of Eq. 2 with the bandwidth of Eq. 3 and its throughput
      Eq. 4, ``f_sync(w, p) = M / (M/w·T_forward + T_backward + (2·(M/w)·S + D) /
      (min(B0/w, B0/p)·p) + (M/w)·S/p·T_update + λ·p + λ′·w)``.
    * **Stragglers** (KALE §2.3, §3.3: "the time consumption depends on the slowest
      worker"): the compute part of a step (``m·T_forward + T_backward``) divided by the
      speed of the slowest worker in the step (``slowest_speed``, 1 = nominal), so one
      slow worker holds every synchronous step; the communication and overhead terms
      do not depend on it.
    * The asynchronous throughput of Eq. 7 summed over workers that each run at their
      own speed (no worker waits for another).
    * The θ of Eq. 6 that Eq. 4 reduces to when the worker/PS ratio r = w/p is constant,
      w ≥ p and every worker is nominal (:meth:`sync_theta`).
    """

    t_forward_s: float  # forward time per sample
    t_backward_s: float  # backward time per step
    sparse_size: float  # S: sparse parameters touched per sample
    dense_size: float  # D: dense parameters
    bandwidth: float  # B0: per-node bandwidth, parameters/s
    t_update_s: float  # optimizer time per sparse parameter
    lambda_ps_s: float  # λ: overhead per parameter server
    lambda_worker_s: float  # λ′: overhead per worker

    def step_time_s(
        self,
        batch_size: float,
        workers: NDArray[np.float64],
        ps: NDArray[np.float64],
        slowest_speed: NDArray[np.float64] | float = 1.0,
    ) -> NDArray[np.float64]:
        """Eq. 2 with Eq. 3's bandwidth; the compute part runs at ``slowest_speed``."""
        m = batch_size / workers
        bandwidth = np.minimum(self.bandwidth / workers, self.bandwidth / ps)
        compute = (m * self.t_forward_s + self.t_backward_s) / slowest_speed
        result: NDArray[np.float64] = (
            compute
            + (2 * m * self.sparse_size + self.dense_size) / (bandwidth * ps)
            + m * self.sparse_size / ps * self.t_update_s
            + self.lambda_ps_s * ps
            + self.lambda_worker_s * workers
        )
        return result

    def sync_samples_per_s(
        self,
        batch_size: float,
        workers: NDArray[np.float64],
        ps: NDArray[np.float64],
        slowest_speed: NDArray[np.float64] | float = 1.0,
    ) -> NDArray[np.float64]:
        """Eq. 4 (the slowest worker holds the step)."""
        return batch_size / self.step_time_s(batch_size, workers, ps, slowest_speed)

    def async_samples_per_s(
        self, batch_size: float, speeds: NDArray[np.float64], workers_per_ps: float
    ) -> NDArray[np.float64]:
        """Eq. 7 per worker count ``w = 1..len(speeds)``: each of the first ``w`` workers
        trains ``batch_size`` samples per step at its own speed, no one waits."""
        speeds = np.asarray(speeds, dtype=np.float64)
        w = np.arange(1, speeds.size + 1, dtype=np.float64)
        p = ps_count(w, workers_per_ps)
        compute = (batch_size * self.t_forward_s + self.t_backward_s) / speeds[None, :]
        shared = (
            (2 * batch_size * self.sparse_size + self.dense_size) / self.bandwidth
            + batch_size * self.sparse_size / p * self.t_update_s
            + self.lambda_ps_s * p
            + self.lambda_worker_s * w
        )
        per_worker = batch_size / (compute + shared[:, None])
        active = np.arange(speeds.size)[None, :] < w[:, None]
        result: NDArray[np.float64] = np.where(active, per_worker, 0.0).sum(axis=1)
        return result

    def sync_theta(self, batch_size: float, workers_per_ps: float) -> tuple[float, ...]:
        """θ of Eq. 6 (in the ``M · (θ·φ)^-1`` form) when p = w / r and w ≥ p."""
        r, big_m = workers_per_ps, batch_size
        return (
            self.t_backward_s + self.dense_size * r / self.bandwidth,
            big_m * self.t_forward_s + 2 * big_m * self.sparse_size * r / self.bandwidth,
            big_m * self.sparse_size * self.t_update_s * r,
            self.lambda_ps_s / r + self.lambda_worker_s,
        )


# A sparse synchronous job whose Eq. 6 coefficients (M = 16,384, w/p = 2) are of the same
# order as KALE's worked example; used by the tests and benchmarks/throughput_models.py.
EXAMPLE_SYNC_JOB = PSJobPhysics(
    t_forward_s=1.2e-4,
    t_backward_s=3e-4,
    sparse_size=40.0,
    dense_size=5e4,
    bandwidth=1e9,
    t_update_s=1.5e-6,
    lambda_ps_s=0.01,
    lambda_worker_s=0.02,
)

# The simulator's synchronous job (M = 16,384, w/p = 2): KALE §4.1's ranking model in
# shape: 520 embedding values per sample (64·2 + 8·18 + 64·2 + 8·12 + 8·3) pulled from
# the parameter servers, ≈ 480k dense parameters (MMoE + [512, 256, 256, 64]), a 10 Gbit/s
# link (3.2e8 float32 parameters/s). Its Eq. 6 reduction is θ ≈ (0.020 s, 2.0 s, 0.017 s,
# 0.0005 s): near-linear scaling up to a few dozen workers, peaking near 60.
SIM_SYNC_JOB = PSJobPhysics(
    t_forward_s=1.1557e-4,
    t_backward_s=0.017,
    sparse_size=520.0,
    dense_size=4.8e5,
    bandwidth=3.2e8,
    t_update_s=1e-9,
    lambda_ps_s=4e-4,
    lambda_worker_s=3e-4,
)
# The simulator's asynchronous job: the same model, 256 samples per worker step.
SIM_ASYNC_JOB = SIM_SYNC_JOB
