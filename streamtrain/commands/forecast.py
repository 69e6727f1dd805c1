"""``streamtrain forecast`` and ``streamtrain trace``: evaluate forecasters, make traces.

``forecast eval`` runs the rolling-origin harness of :mod:`streamtrain.forecast.evaluate`
on a trace CSV at its own resolution (or ``--step-s``) and prints one row per model and
the MASE of each horizon step (or ``--json``); progress (fits done out of all, with an
estimate of the time left: :class:`~streamtrain.commands.progress.Meter`) goes to
stderr, none with ``--json``; ``--plot`` draws actual vs forecast with the quantile
band (:mod:`streamtrain.forecast.plot`). Fits go through one
:class:`~streamtrain.forecast.fitcache.FitCache`, as in ``benchmarks.forecast``: every
model is seeded and deterministic, so a fit made twice on the same history (``auto``'s
validation folds overlap from one daily refit to the next, and its candidates are the
other models) is made once.
``trace synth`` writes a synthetic trace CSV to stdout. All of the work lives in
:mod:`streamtrain.forecast`; this module parses, calls and prints.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import click

from streamtrain.commands.common import handle_errors, option
from streamtrain.commands.progress import Meter
from streamtrain.config import comma_list
from streamtrain.errors import ConfigError
from streamtrain.forecast.base import Forecaster
from streamtrain.forecast.evaluate import (
    EvalSettings,
    Scores,
    default_horizon_steps,
    evaluate,
    planned_fits,
)
from streamtrain.forecast.fitcache import CachedFit, FitCache
from streamtrain.forecast.registry import FORECASTER_NAMES, fit_key, make_forecaster
from streamtrain.forecast.series import SHAPES, make_trace
from streamtrain.forecast.trace import load_trace, native_step_s, write_trace
from streamtrain.units import DAY_S, MINUTE_S

__all__ = ["forecast", "trace"]

DEFAULT_MODELS = "seasonal_naive_daily,seasonal_naive_weekly,ets,mstl,fedformer,auto"
AUTO_HELP = (
    "auto: the best of the seasonal naive, AutoETS, MSTL and the transformer (or an "
    "inverse-error ensemble of the best few), chosen on daily validation folds over the "
    "last week (AutoETS or MSTL unless another is better on every day), behind a "
    "seasonal-naive safety net; its folds reuse the previous day's fits, the "
    "transformer is fine-tuned from its previous fit and validated in a second process."
)
BAND = (0.1, 0.9)


@click.group()
def forecast() -> None:
    """Traffic forecasters (KALE §3.2): evaluate them on a trace.

    auto, the default of the live planner and of simulate, picks per series: see
    `forecast eval --help`.
    """


def _parse_models(text: str) -> list[str]:
    names = comma_list(text)
    if not names:
        raise ConfigError("--models is empty")
    unknown = [name for name in names if name not in FORECASTER_NAMES]
    if unknown:
        raise ConfigError(
            f"unknown model(s) {', '.join(unknown)} in --models; known: "
            f"{', '.join(FORECASTER_NAMES)}"
        )
    return list(dict.fromkeys(names))


def _factory(name: str, step_s: int, seed: int, cache: FitCache) -> Callable[[], Forecaster]:
    """Models whose fits go through ``cache``: ``auto``'s validation folds of one day are
    the previous day's, and its candidates' fits are the other models' (module
    docstring)."""
    if name == "auto":
        return lambda: make_forecaster(name, step_s=step_s, seed=seed, cache=cache)
    key = fit_key(name, step_s=step_s, seed=seed)
    return lambda: CachedFit(cache, key, lambda: make_forecaster(name, step_s=step_s, seed=seed))


def _minutes_to_steps(flag: str, minutes: float, step_s: int) -> int:
    steps = minutes * MINUTE_S / step_s
    if steps < 1 or abs(steps - round(steps)) > 1e-9:
        raise ConfigError(f"{flag} {minutes:g} is not a whole number of {step_s}-s steps")
    return round(steps)


def _row(name: str, s: Scores) -> str:
    mape = f"{s.mape_pct:8.2f}" if s.mape_pct is not None else f"{'n/a':>8}"
    return (
        f"{name:24} {s.mase:7.3f} {s.mae:12.4g} {s.rmse:12.4g} {s.smape_pct:8.2f} {mape} "
        f"{s.fit_s:8.2f} {s.predict_ms:10.2f}"
    )


@forecast.command("eval")
@option(
    "--trace",
    "trace_path",
    env="FORECAST_TRACE",
    type=click.Path(path_type=Path),
    required=True,
    help="Trace CSV with timestamp and records_per_s columns.",
)
@option(
    "--horizon-min",
    env="FORECAST_HORIZON_MIN",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Forecast horizon in minutes [default: 30, or two steps on series of "
    "15-minute steps and coarser].",
)
@option(
    "--models",
    env="FORECAST_MODELS",
    default=DEFAULT_MODELS,
    show_default=True,
    help=f"Comma-separated models: {', '.join(FORECASTER_NAMES)}. {AUTO_HELP}",
)
@option(
    "--test-days",
    env="FORECAST_TEST_DAYS",
    type=click.FloatRange(min=0, min_open=True),
    default=7.0,
    show_default=True,
    help="Length of the test period at the end of the trace.",
)
@option(
    "--stride-min",
    env="FORECAST_STRIDE_MIN",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Minutes between forecast origins [default: the horizon].",
)
@option(
    "--refit-every-min",
    env="FORECAST_REFIT_EVERY_MIN",
    type=click.FloatRange(min=0),
    default=1440.0,
    show_default=True,
    help="Refit each model this often (0: fit once); new points reach it by update.",
)
@option(
    "--step-s",
    env="FORECAST_STEP_S",
    type=click.IntRange(min=1),
    default=None,
    help="Resolution the trace is put on, in seconds [default: the trace's own].",
)
@option(
    "--plot",
    "plot_path",
    env="FORECAST_PLOT",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write actual vs forecast with the 10-90 % quantile band over the test "
    "period to this image (needs matplotlib).",
)
@option("--seed", env="FORECAST_SEED", type=int, default=0, show_default=True, help="Model seed.")
@option("--json", "as_json", env="JSON", is_flag=True, help="Print one JSON object.")
@handle_errors
def eval_command(
    trace_path: Path,
    horizon_min: float | None,
    models: str,
    test_days: float,
    stride_min: float | None,
    refit_every_min: float,
    step_s: int | None,
    plot_path: Path | None,
    seed: int,
    as_json: bool,
) -> None:
    """Rolling-origin evaluation: fit on the past, forecast the next horizon, slide.

    Scores per model: MASE (primary; scale = mean absolute daily-seasonal difference of
    the training part), MAE, RMSE, sMAPE, MAPE (over actuals > 0), mean fit time and
    mean predict time; then the MASE of each horizon step (how error grows with the lead).
    Forecasts are clipped at 0; gap steps are not scored. The trace is read at its own
    resolution unless --step-s says otherwise; every model works at any step that
    divides a day. --plot draws each model's forecasts with their 10-90 % quantile band
    over the test period. A model fitted twice on the same history is fitted once (auto's
    validation folds overlap from one refit to the next). Progress on stderr: fits done
    out of all, with an estimate of the time left (none with --json).
    """
    names = _parse_models(models)
    step_s = step_s or native_step_s(trace_path)
    if DAY_S % step_s:
        raise ConfigError(f"--step-s {step_s} does not divide a day")
    loaded = load_trace(trace_path, step_s=step_s)
    if horizon_min is None:
        horizon_min = default_horizon_steps(step_s) * step_s / MINUTE_S
    settings = EvalSettings(
        horizon_steps=_minutes_to_steps("--horizon-min", horizon_min, step_s),
        test_steps=_minutes_to_steps("--test-days", test_days * (DAY_S // MINUTE_S), step_s),
        stride_steps=_minutes_to_steps("--stride-min", stride_min or horizon_min, step_s),
        season_steps=DAY_S // step_s,
        refit_every_steps=(
            _minutes_to_steps("--refit-every-min", refit_every_min, step_s)
            if refit_every_min
            else 0
        ),
    )
    cache = FitCache()
    factories = {name: _factory(name, step_s, seed, cache) for name in names}
    click.echo(
        f"{loaded.name}: {len(loaded)} steps of {step_s} s, {loaded.gaps} gaps; testing on the "
        f"last {test_days:g} days, horizon {horizon_min:g} min, models {', '.join(names)}",
        err=True,
    )
    fits = planned_fits(len(loaded), settings) * len(names)
    meter = Meter(fits, "fits", quiet=as_json, stream=click.get_text_stream("stderr"))

    def on_fit(name: str, steps: int, fit_s: float) -> None:
        meter.done(f"{name}: fitted on {steps} steps ({fit_s:.1f} s)")

    try:
        results = evaluate(
            loaded.records_per_s,
            factories,
            settings,
            progress=None if as_json else meter.note,
            band=BAND if plot_path is not None else None,
            on_fit=on_fit,
        )
    finally:
        meter.close()
    if plot_path is not None:
        from streamtrain.forecast.plot import plot_eval

        plot_eval(loaded.records_per_s, results, step_s, plot_path, title=loaded.name)
        click.echo(f"plot: {plot_path}", err=True)
    if as_json:
        click.echo(json.dumps({"models": {n: s.as_dict() for n, s in results.items()}}))
        return
    click.echo(
        f"{'model':24} {'MASE':>7} {'MAE':>12} {'RMSE':>12} {'sMAPE %':>8} {'MAPE %':>8} "
        f"{'fit s':>8} {'predict ms':>10}"
    )
    for name, scores in results.items():
        click.echo(_row(name, scores))
    click.echo(f"\nMASE by horizon step ({step_s} s steps; columns: steps ahead)")
    horizon_steps = settings.horizon_steps
    shown = sorted(
        {0, horizon_steps // 4, horizon_steps // 2, (3 * horizon_steps) // 4, horizon_steps - 1}
    )
    click.echo(f"{'model':24} " + " ".join(f"{h + 1:>7}" for h in shown))
    for name, scores in results.items():
        cells = " ".join(f"{scores.mase_by_step[h]:7.3f}" for h in shown)
        click.echo(f"{name:24} {cells}")


@click.group()
def trace() -> None:
    """Traffic traces: the CSV format of forecast eval and simulate."""


@trace.command("synth")
@option("--days", env="TRACE_DAYS", type=click.IntRange(min=1), default=28, show_default=True)
@option("--seed", env="TRACE_SEED", type=int, default=0, show_default=True)
@option(
    "--shape",
    env="TRACE_SHAPE",
    type=click.Choice(list(SHAPES)),
    default="kale",
    show_default=True,
    help="kale: KALE Fig. 2a; web, retail, callcentre, bikeshare: other arrival series.",
)
@option(
    "--step-s",
    env="TRACE_STEP_S",
    type=click.IntRange(min=1),
    default=60,
    show_default=True,
    help="Seconds between rows.",
)
@handle_errors
def synth_command(days: int, seed: int, shape: str, step_s: int) -> None:
    """Write a synthetic trace CSV (timestamp,records_per_s) to stdout."""
    write_trace(make_trace(shape, days, seed=seed, step_s=step_s), click.get_text_stream("stdout"))
