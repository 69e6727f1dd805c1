"""Forecast accuracy and cost: every model on KALE's trace and on other arrival series.

Run: .venv/bin/python -m benchmarks.forecast [--series kale,web,retail,callcentre,bikeshare]
     [--days 28] [--seed 0] [--horizon-min 30] [--refit-every-min 1440]

1. Cost: the FEDformer-style model fitted on 7 days of per-minute history (10,080
   points of the KALE-shaped trace) and the median time of a 60-minute prediction.
2. Accuracy: the rolling-origin harness (``streamtrain forecast eval``) on each series:
   fit on the first ``days - 7`` days, forecast the next ``horizon`` minutes every
   ``horizon`` minutes through the last 7 days, refit every ``refit-every-min``.
   The baseline is the weekly seasonal naive measured in the same run; the ratio is
   the model's MASE over it.

The last line is machine-readable: ``fit_7d_s=<s> predict_60min_ms=<ms>`` then, per
series, ``<series>_mase=<fedformer MASE> <series>_ratio=<fedformer / weekly naive>``,
and ``beats_all=<series where fedformer has the lowest MASE>/<series>``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from streamtrain.forecast.evaluate import EvalSettings, Scores, evaluate
from streamtrain.forecast.registry import make_forecaster
from streamtrain.forecast.series import SHAPES, make_trace
from streamtrain.forecast.trace import synth_trace

MODELS = ("seasonal_naive_daily", "seasonal_naive_weekly", "ets", "fedformer")


def _cost(seed: int) -> tuple[float, float]:
    history = synth_trace(7, seed=seed).records_per_s
    model = make_forecaster("fedformer", seed=seed)
    started = time.perf_counter()
    model.fit(history)
    fit_s = time.perf_counter() - started
    times = []
    for _ in range(21):
        started = time.perf_counter()
        model.predict(60)
        times.append(time.perf_counter() - started)
    return fit_s, 1000 * statistics.median(times)


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", default="kale,web,retail,callcentre,bikeshare")
    parser.add_argument("--days", type=int, default=28)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--horizon-min", type=int, default=30)
    parser.add_argument("--refit-every-min", type=int, default=1440)
    parser.add_argument("--skip-cost", action="store_true", help="skip the 7-day timing")
    args = parser.parse_args()
    shapes = [s.strip() for s in args.series.split(",") if s.strip()]
    unknown = set(shapes) - set(SHAPES)
    if unknown:
        parser.error(f"unknown series {sorted(unknown)}; known: {', '.join(SHAPES)}")

    fit_s, predict_ms = (float("nan"), float("nan")) if args.skip_cost else _cost(args.seed)
    if not args.skip_cost:
        print(
            f"fedformer on 7 days (10,080 points): fit {fit_s:.1f} s, "
            f"predict 60 min {predict_ms:.1f} ms (median of 21)"
        )

    settings = EvalSettings(
        horizon_steps=args.horizon_min,
        test_steps=7 * 1440,
        stride_steps=args.horizon_min,
        season_steps=1440,
        refit_every_steps=args.refit_every_min,
    )
    print(f"{'series':12} {'model':22} {'MASE':>7} {'sMAPE %':>8} {'fit s':>7} {'pred ms':>8}")
    summary: list[str] = []
    wins = 0
    for shape in shapes:
        values = make_trace(shape, args.days, seed=args.seed).records_per_s
        factories = {
            name: (lambda name=name: make_forecaster(name, seed=args.seed)) for name in MODELS
        }
        results: dict[str, Scores] = evaluate(values, factories, settings, progress=_progress)
        for name, s in results.items():
            print(
                f"{shape:12} {name:22} {s.mase:7.3f} {s.smape_pct:8.2f} {s.fit_s:7.2f} "
                f"{s.predict_ms:8.2f}"
            )
        best = min(results, key=lambda n: results[n].mase)
        wins += best == "fedformer"
        ratio = results["fedformer"].mase / results["seasonal_naive_weekly"].mase
        summary.append(f"{shape}_mase={results['fedformer'].mase:.3f} {shape}_ratio={ratio:.2f}")
    print(
        f"fit_7d_s={fit_s:.1f} predict_60min_ms={predict_ms:.1f} "
        + " ".join(summary)
        + f" beats_all={wins}/{len(shapes)}"
    )


if __name__ == "__main__":
    main()
