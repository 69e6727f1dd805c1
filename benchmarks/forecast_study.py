"""A study of ``auto``'s safety net and of the transformer's combinations.

Run: .venv/bin/python -m benchmarks.forecast_study --series web [--csv PATH ...]
     [--variants auto,auto_nonet,...] [--out DIR]

The rolling-origin harness of ``benchmarks.forecast`` (same splits, same daily refits,
one :class:`~streamtrain.forecast.fitcache.FitCache` per series) for the statsforecast
baselines, the transformer and ``auto`` under several safety-net rules. Every ``auto``
variant differs only in its :class:`~streamtrain.forecast.fallback.FallbackForecaster`,
so its selections are the same fits (cache hits): the variants cost about one ``auto``.

Variants (``--variants``): ``auto`` (the registry's default), ``auto_net`` (hand over
whenever the recent error is clearly worse: the rule before this study), ``auto_nonet``
(never hand over on recent error), ``auto_trust`` (no hand-over while the kept model is
a statsforecast model that beat the seasonal naive in validation), ``auto_carry3d``
(the tracked errors carry across refits, a window of three days), ``auto_halfday``
(at least half a day of scored steps before a hand-over).

``fedformer`` here is the transformer alone (``mstl_weight=0``), in ``auto`` too, as
the full run before this study ran it. Its combinations with MSTL at fixed weights are
computed from the two models' test forecasts (what the harness scored, so exactly what
``fedformer`` with ``mstl_weight=1-w`` and ``adapt_weight=False`` forecasts; the
registered model adapts the weight to the errors since each fit): ``mix<w>`` = ``w`` x transformer +
``(1 - w)`` x MSTL. With ``--out``, every model's test forecasts are saved per series
(``<series>.npz``: ``actual``, ``scale`` and one array per model). Prints MASE per
model and the number of hand-overs per ``auto`` variant; the last line is
``<series>_<model>_ratio=<MASE / best of ets and mstl>`` per series and model.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.forecast import _real, eval_settings
from streamtrain.forecast.base import Forecaster
from streamtrain.forecast.evaluate import EvalSettings, evaluate
from streamtrain.forecast.fitcache import CachedFit, FitCache
from streamtrain.forecast.registry import fit_key, make_forecaster
from streamtrain.forecast.series import make_trace
from streamtrain.forecast.trace import Trace
from streamtrain.units import DAY_S

BASE = ("ets", "mstl", "fedformer")
MIX_WEIGHTS = (0.3, 0.5, 0.7)
ALONE = {"mstl_weight": 0.0}  # the transformer alone, as before this study


def _variant(name: str, step_s: int) -> dict[str, Any]:
    day = DAY_S // step_s
    variants: dict[str, dict[str, Any]] = {
        "auto": {},
        "auto_net": {"trust_validated": False},
        "auto_nonet": {"min_tracked": 10**9},
        "auto_trust": {"trust_validated": True},
        "auto_carry3d": {"carry_errors": True, "window_steps": 3 * day},
        "auto_halfday": {"min_tracked": max(1, day // 2)},
    }
    return variants[name]


class _Count(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += "falling back" in record.getMessage()


def _study(
    trace: Trace, variants: list[str], seed: int
) -> tuple[dict[str, float], str, dict[str, np.ndarray], float]:
    settings = eval_settings(trace.step_s)
    cache = FitCache()
    counter = _Count()
    net_log = logging.getLogger("streamtrain.forecast.fallback")
    net_log.addHandler(counter)
    try:
        return _score_all(trace, variants, seed, settings, cache, counter)
    finally:
        net_log.removeHandler(counter)


def _score_all(
    trace: Trace,
    variants: list[str],
    seed: int,
    settings: EvalSettings,
    cache: FitCache,
    counter: _Count,
) -> tuple[dict[str, float], str, dict[str, np.ndarray], float]:
    step_s, horizon_steps = trace.step_s, settings.horizon_steps

    def base(name: str) -> Forecaster:
        opts = ALONE if name == "fedformer" else {}
        key = fit_key(name, step_s=step_s, seed=seed, **opts)
        return CachedFit(
            cache, key, lambda: make_forecaster(name, step_s=step_s, seed=seed, **opts)
        )

    mase: dict[str, float] = {}
    points: dict[str, np.ndarray] = {}
    notes = []
    values = trace.records_per_s
    for name in [*BASE, *variants]:
        if name in BASE:
            factory = {name: lambda name=name: base(name)}
        else:
            opts = _variant(name, step_s)
            factory = {
                name: lambda opts=opts: make_forecaster(
                    "auto", step_s=step_s, seed=seed, cache=cache, **ALONE, **opts
                )
            }
        before = counter.count
        scores = evaluate(values, factory, settings, band=(0.5, 0.5))[name]
        mase[name] = scores.mase
        assert scores.trail is not None
        points[name] = scores.trail.point
        origins, scale = scores.trail.origins, scores.mae / scores.mase
        if name not in BASE:
            notes.append(f"{name}: {counter.count - before} hand-over(s)")
    actual = np.stack([values[o : o + horizon_steps] for o in origins])
    seen = ~np.isnan(actual)
    for w in MIX_WEIGHTS:
        mix = w * points["fedformer"] + (1 - w) * points["mstl"]
        mase[f"mix{w}"] = float(np.abs(mix - actual)[seen].mean() / scale)
    points["actual"] = actual
    return mase, "; ".join(notes), points, scale


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--series", default="")
    parser.add_argument("--csv", type=Path, action="append", default=[])
    parser.add_argument("--variants", default="auto")
    parser.add_argument("--days", type=int, default=28)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    series = [
        (s.strip(), make_trace(s.strip(), args.days, seed=args.seed))
        for s in args.series.split(",")
        if s.strip()
    ]
    series += [(path.stem, _real(path)) for path in args.csv]
    summary = []
    for name, trace in series:
        print(f"== {name}", file=sys.stderr, flush=True)
        mase, notes, points, scale = _study(trace, variants, args.seed)
        best = min(mase["ets"], mase["mstl"])
        for model, value in mase.items():
            print(f"{name:28} {model:14} {value:7.3f} {value / best:7.3f}", flush=True)
            summary.append(f"{name}_{model}_ratio={value / best:.3f}")
        print(f"{name}: {notes}", flush=True)
        if args.out is not None:
            args.out.mkdir(parents=True, exist_ok=True)
            arrays: dict[str, Any] = {"scale": np.asarray(scale), **points}
            np.savez(args.out / f"{name}.npz", **arrays)
    print(" ".join(summary))


if __name__ == "__main__":
    main()
