"""Forecast accuracy and cost: every model on synthetic shapes and on real series.

Run: .venv/bin/python -m benchmarks.forecast [--series kale,web,retail,callcentre,bikeshare]
     [--real-dir ../shared/data] [--held-out PATH ...] [--days 28] [--seed 0]

1. Cost (each measurement ``--repeat`` times, median and range): the FEDformer-style
   model fitted on 7 days of per-minute history (10,080 points of the KALE-shaped
   trace) and the median time of a 60-minute prediction (21 origins, one step apart);
   on 28 days of it (40,320 points), the baseline, statsforecast's MSTL as the project
   runs it (``mstl``: daily and weekly seasons on 30-minute block means), and one
   ``auto`` fit without a cache (what one live refit costs; its transformer in a worker
   process when the machine has two cores), with the CPU seconds it used in this
   process and in its worker: on a busy machine the wall time says more about the
   other jobs, the larger of the two about the wall time on two idle cores.
2. Accuracy: the rolling-origin harness (``streamtrain forecast eval`` with its
   defaults) for the seasonal naive (weekly once two weeks exist), statsforecast's
   AutoETS and MSTL (``ets``, ``mstl``), the FEDformer-style model (``fedformer``: its
   transformer combined with MSTL by online weights, see
   :mod:`streamtrain.forecast.fedformer`) and ``auto``:
   on each synthetic shape (``--days`` days at one minute) and on each real series
   (every CSV in ``--real-dir``, at its own resolution), then on ``--held-out`` series
   (tuned on by nobody; reported apart). Test period: the last 7 days; horizon 30
   minutes, or two steps on series of 15-minute steps and coarser; a new origin every
   horizon; every model refitted daily. The baseline is the best statsforecast model
   measured in the same run. Fits go through one
   :class:`~streamtrain.forecast.fitcache.FitCache` per series: every model is seeded
   and deterministic, so ``auto``'s validation folds (whole days, like the refits)
   reuse the fits and walks that the baselines and ``auto``'s earlier refits made, as
   ``forecast eval`` and ``simulate`` do (the transformer's day-to-day chain of
   fine-tunes: :mod:`streamtrain.forecast.folds`); the ``fit s`` column is then the mean
   time of a fit, cache hits included. Progress (per series, per model, per fit) goes
   to stderr. ``--auto-option k=v`` passes an option to ``auto`` (experiments).

The last line is machine-readable: ``fit_7d_s=<s> predict_60min_ms=<ms> auto_fit_s=<s>
mstl_fit_s=<s> auto_main_cpu_s=<s> auto_worker_cpu_s=<s>`` (medians), then per series
``<series>_auto_ratio=<auto MASE / best of ets and mstl>`` and
``<series>_fedformer_ratio=<...>``, then ``auto_le_1=<series with auto's ratio <= 1>/<n>``
and ``fedformer_le_1=<...>/<n>`` (held-out series included, prefixed ``heldout_``), and
``wall_s=<the run's seconds>``.
"""

from __future__ import annotations

import argparse
import logging
import resource
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from streamtrain.commands.forecaster_options import parse_model_options
from streamtrain.forecast.base import Forecaster
from streamtrain.forecast.evaluate import EvalSettings, Scores, default_horizon_steps, evaluate
from streamtrain.forecast.fitcache import CachedFit, FitCache
from streamtrain.forecast.registry import fit_key, make_forecaster
from streamtrain.forecast.series import SHAPES, make_trace
from streamtrain.forecast.trace import Trace, load_trace, native_step_s, synth_trace
from streamtrain.units import DAY_S

MODELS = ("seasonal_naive", "ets", "mstl", "fedformer", "auto")
STATS = ("ets", "mstl")


def _timed(fit: Callable[[], object]) -> float:
    started = time.perf_counter()
    fit()
    return time.perf_counter() - started


def _children_cpu_s() -> float:
    """CPU seconds of this process's finished child processes (auto's worker)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cost(seed: int, repeats: int) -> dict[str, list[float]]:
    """Seconds and milliseconds of the cost measurements (module docstring), each
    measurement ``repeats`` times (the fedformer's prediction: its median of 21)."""
    days8 = synth_trace(8, seed=seed).records_per_s
    week, after = days8[: 7 * DAY_S // 60], days8[7 * DAY_S // 60 :]
    month = synth_trace(28, seed=seed).records_per_s
    out: dict[str, list[float]] = {"fit_7d_s": [], "predict_60min_ms": [], "mstl_fit_s": []}
    out["auto_fit_s"], out["auto_main_cpu_s"], out["auto_worker_cpu_s"] = [], [], []
    # statsforecast's import and compiled code are loaded once per process: not timed
    make_forecaster("mstl", seed=seed).fit(month[: 3 * DAY_S // 60])
    for _ in range(repeats):
        model = make_forecaster("fedformer", seed=seed)
        out["fit_7d_s"].append(_timed(partial(model.fit, week)))
        times = []
        for step in after[:21]:  # a new origin each time, as the live loop forecasts
            model.update(np.array([step]))
            times.append(1000 * _timed(partial(model.predict, 60)))
        out["predict_60min_ms"].append(statistics.median(times))
        # the baseline: statsforecast's MSTL as the project runs it (30-minute blocks)
        mstl = make_forecaster("mstl", seed=seed)
        out["mstl_fit_s"].append(_timed(partial(mstl.fit, month)))
        auto = make_forecaster("auto", seed=seed)  # no cache: what one live refit costs
        cpu_s, children_s = time.process_time(), _children_cpu_s()
        out["auto_fit_s"].append(_timed(partial(auto.fit, month)))
        out["auto_main_cpu_s"].append(time.process_time() - cpu_s)
        out["auto_worker_cpu_s"].append(_children_cpu_s() - children_s)
        _progress("cost: " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in out.items()))
    return out


def _spread(values: list[float], unit: str) -> str:
    """``median unit`` and, with several runs, their range."""
    text = f"{statistics.median(values):.2f} {unit}"
    return text + (f" ({min(values):.2f}-{max(values):.2f})" if len(values) > 1 else "")


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def eval_settings(step_s: int) -> EvalSettings:
    """The harness's splits at ``step_s`` (module docstring): the last 7 days, a new
    origin every horizon, a daily refit; also the study's (``benchmarks.forecast_study``)."""
    horizon_steps = default_horizon_steps(step_s)
    return EvalSettings(
        horizon_steps=horizon_steps,
        test_steps=7 * DAY_S // step_s,
        stride_steps=horizon_steps,
        season_steps=DAY_S // step_s,
        refit_every_steps=DAY_S // step_s,
    )


def _score(
    trace: Trace, seed: int, models: tuple[str, ...], auto_options: dict[str, Any] | None = None
) -> dict[str, Scores]:
    step_s = trace.step_s
    settings = eval_settings(step_s)
    cache = FitCache()  # every fit is deterministic: auto's folds reuse the baselines' fits

    def factory(name: str) -> Forecaster:
        if name == "auto":
            options = auto_options or {}
            return make_forecaster(name, step_s=step_s, seed=seed, cache=cache, **options)
        key = fit_key(name, step_s=step_s, seed=seed)
        return CachedFit(cache, key, lambda: make_forecaster(name, step_s=step_s, seed=seed))

    factories = {name: (lambda name=name: factory(name)) for name in models}
    results = evaluate(trace.records_per_s, factories, settings, progress=_progress)
    _progress(f"fit cache: {cache.hits} hits, {cache.misses} fits")
    return results


def _real(path: Path) -> Trace:
    return load_trace(path, step_s=native_step_s(path))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--series", default="kale,web,retail,callcentre,bikeshare")
    parser.add_argument("--real-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--held-out", type=Path, action="append", default=[])
    parser.add_argument("--days", type=int, default=28)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--skip-cost", action="store_true", help="skip the cost timings")
    parser.add_argument("--cost-only", action="store_true", help="only the cost timings")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each cost timing")
    parser.add_argument("--auto-option", action="append", default=[], help="k=v for auto")
    args = parser.parse_args()
    auto_options = parse_model_options(args.auto_option, "--auto-option")
    run_started = time.perf_counter()
    chooser = logging.getLogger("streamtrain.forecast.select")  # what auto chose, per fit
    chooser.setLevel(logging.INFO)
    chooser.addHandler(logging.StreamHandler(sys.stderr))
    shapes = [s.strip() for s in args.series.split(",") if s.strip()]
    unknown = set(shapes) - set(SHAPES)
    if unknown:
        parser.error(f"unknown series {sorted(unknown)}; known: {', '.join(SHAPES)}")
    models = tuple(m.strip() for m in args.models.split(",") if m.strip())

    cost: dict[str, list[float]] = {}
    if not args.skip_cost:
        _progress("cost: fedformer on 7 days; MSTL and auto (uncached) on 28 days")
        cost = _cost(args.seed, args.repeat)
        print(
            "fedformer on 7 days (10,080 points): fit "
            + _spread(cost["fit_7d_s"], "s")
            + ", predict 60 min "
            + _spread(cost["predict_60min_ms"], "ms")
            + " (median of 21); on 28 days (40,320 points): MSTL fit "
            + _spread(cost["mstl_fit_s"], "s")
            + ", auto fit (uncached) "
            + _spread(cost["auto_fit_s"], "s")
            + " using "
            + _spread(cost["auto_main_cpu_s"], "CPU-s")
            + " here and "
            + _spread(cost["auto_worker_cpu_s"], "CPU-s")
            + " in its worker process",
            flush=True,
        )
    series: list[tuple[str, Trace]] = [
        (shape, make_trace(shape, args.days, seed=args.seed)) for shape in shapes
    ]
    real = sorted(args.real_dir.glob("*.csv")) if args.real_dir.is_dir() else []
    if args.cost_only:
        series, real, args.held_out = [], [], []
    elif not real:
        print(f"no real series in {args.real_dir}", file=sys.stderr)
    series += [(path.stem, _real(path)) for path in real]
    series += [(f"heldout_{path.stem}", _real(path)) for path in args.held_out]

    print(f"{'series':28} {'model':16} {'MASE':>7} {'sMAPE %':>8} {'fit s':>7} {'pred ms':>8}")
    summary: list[str] = []
    counts = {"auto": [0, 0], "fedformer": [0, 0]}
    started = time.perf_counter()
    for index, (name, trace) in enumerate(series, start=1):
        _progress(
            f"== [{index}/{len(series)}] {name}: {trace.records_per_s.shape[0]} steps of "
            f"{trace.step_s} s ({time.perf_counter() - started:.0f} s elapsed)"
        )
        series_started = time.perf_counter()
        results = _score(trace, args.seed, models, auto_options)
        _progress(f"== {name} scored in {time.perf_counter() - series_started:.0f} s")
        for model, s in results.items():
            print(
                f"{name:28} {model:16} {s.mase:7.3f} {s.smape_pct:8.2f} {s.fit_s:7.2f} "
                f"{s.predict_ms:8.2f}",
                flush=True,
            )
        stats = [results[m].mase for m in STATS if m in results]
        if not stats:
            continue
        best = min(stats)
        for model in ("auto", "fedformer"):
            if model in results:
                ratio = results[model].mase / best
                summary.append(f"{name}_{model}_ratio={ratio:.3f}")
                counts[model][0] += int(ratio <= 1.0)
                counts[model][1] += 1
        print(f"{name:28} {'(best stats)':16} {best:7.3f}", flush=True)
    tail = " ".join(f"{m}_le_1={c[0]}/{c[1]}" for m, c in counts.items() if c[1])
    nan = float("nan")
    median = {k: statistics.median(v) if v else nan for k, v in cost.items()}
    head = (
        f"fit_7d_s={median.get('fit_7d_s', nan):.1f} "
        f"predict_60min_ms={median.get('predict_60min_ms', nan):.1f} "
        f"auto_fit_s={median.get('auto_fit_s', nan):.1f} "
        f"mstl_fit_s={median.get('mstl_fit_s', nan):.2f} "
        f"auto_main_cpu_s={median.get('auto_main_cpu_s', nan):.1f} "
        f"auto_worker_cpu_s={median.get('auto_worker_cpu_s', nan):.1f}"
    )
    wall = f"wall_s={time.perf_counter() - run_started:.0f}"
    print(f"{head} " + " ".join(summary) + f" {tail} {wall}")


if __name__ == "__main__":
    main()
