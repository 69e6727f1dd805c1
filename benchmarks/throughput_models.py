"""Fit quality of the throughput models on synthetic observations from KALE's full Eq. 4.

Run: .venv/bin/python -m benchmarks.throughput_models [--seed S] [--noise 0.03]

Observations: a synchronous PS job (Eq. 4 with T_forward, T_backward, S, D, B0, T_update,
λ, λ') at w = 1..32 workers, p = max(1, round(w / 2)) parameter servers (whole servers,
so Eq. 6 is an approximation, not the generator), three samples per w with Gaussian
noise. Each model is fitted on w <= 16 and scored on all w (in-sample) and on w = 17..32
(extrapolation, what planning ahead needs). Baseline: the Optimus-style fit. The last
line is machine-readable: ``sync_mape_pct=<x> optimus_mape_pct=<x> ernest_mape_pct=<x>
sync_extrapolation_mape_pct=<x> ratio=<optimus/sync in-sample MAPE>``.
"""

from __future__ import annotations

import argparse

import numpy as np

from streamtrain.scale.models import fit, fit_report
from streamtrain.scale.physics import EXAMPLE_SYNC_JOB

PHYSICS = EXAMPLE_SYNC_JOB
BATCH = 16384.0
MODELS = ("sync", "optimus", "ernest")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--noise", type=float, default=0.03, help="relative noise (std)")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    w = np.repeat(np.arange(1, 33, dtype=float), 3)
    p = np.maximum(1.0, np.round(w / 2))
    f = PHYSICS.sync_samples_per_s(BATCH, w, p) * rng.normal(1.0, args.noise, size=w.size)
    train, test = w <= 16, w > 16
    results = {}
    print(f"{'model':10} {'MAE':>10} {'RMSE':>10} {'MAPE %':>8} {'extrap. MAPE %':>15}")
    for kind in MODELS:
        model = fit(kind, w[train], f[train], batch_size=BATCH)
        whole = fit_report(model, w, f)
        extrapolation = fit_report(model, w[test], f[test])
        results[kind] = (whole.mape_pct, extrapolation.mape_pct)
        print(
            f"{kind:10} {whole.mae:10.1f} {whole.rmse:10.1f} {whole.mape_pct:8.2f} "
            f"{extrapolation.mape_pct:15.2f}"
        )
    print(
        f"sync_mape_pct={results['sync'][0]:.2f} optimus_mape_pct={results['optimus'][0]:.2f} "
        f"ernest_mape_pct={results['ernest'][0]:.2f} "
        f"sync_extrapolation_mape_pct={results['sync'][1]:.2f} "
        f"ratio={results['optimus'][0] / results['sync'][0]:.2f}"
    )


if __name__ == "__main__":
    main()
