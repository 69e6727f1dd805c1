"""The physical step-time model of KALE Eq. 2-4, for generating synthetic throughput
observations that the fitted models (streamtrain.scale.models) are checked against.

Owned here: :class:`PSJobPhysics` (T_forward, T_backward, S, D, B0, T_update, λ, λ′ of
a parameter-server job) and the synchronous throughput of Eq. 4,
``f_sync(w, p) = M / (M/w·T_forward + T_backward + (2·(M/w)·S + D) / (min(B0/w, B0/p)·p)
+ (M/w)·S/p·T_update + λ·p + λ′·w)``, plus the θ of Eq. 6 that it reduces to when the
worker/PS ratio r = w/p is constant and w ≥ p. Pure; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["EXAMPLE_SYNC_JOB", "PSJobPhysics"]


@dataclass(frozen=True, slots=True)
class PSJobPhysics:
    t_forward_s: float  # forward time per sample
    t_backward_s: float  # backward time per step
    sparse_size: float  # S: sparse parameters touched per sample
    dense_size: float  # D: dense parameters
    bandwidth: float  # B0: per-node bandwidth, parameters/s
    t_update_s: float  # optimizer time per sparse parameter
    lambda_ps_s: float  # λ: overhead per parameter server
    lambda_worker_s: float  # λ′: overhead per worker

    def step_time_s(
        self, batch_size: float, workers: NDArray[np.float64], ps: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        m = batch_size / workers
        bandwidth = np.minimum(self.bandwidth / workers, self.bandwidth / ps)
        result: NDArray[np.float64] = (
            m * self.t_forward_s
            + self.t_backward_s
            + (2 * m * self.sparse_size + self.dense_size) / (bandwidth * ps)
            + m * self.sparse_size / ps * self.t_update_s
            + self.lambda_ps_s * ps
            + self.lambda_worker_s * workers
        )
        return result

    def sync_samples_per_s(
        self, batch_size: float, workers: NDArray[np.float64], ps: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """Eq. 4."""
        return batch_size / self.step_time_s(batch_size, workers, ps)

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
