"""``streamtrain scale``: what-if planning with the throughput models (issue #7).

``plan`` solves Eq. 10 for given loads, ``stabilize`` runs Algorithm 1 on a plan, and
``fit`` fits a throughput model to a CSV of observations. All of the math lives in
:mod:`streamtrain.scale`; this module parses, calls and prints.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import click

from streamtrain.commands.common import handle_errors, option, parse_float_list
from streamtrain.errors import ConfigError
from streamtrain.scale.models import MODEL_KINDS, ThroughputModel, fit, fit_report
from streamtrain.scale.plan import basic_plan, stabilize

__all__ = ["scale"]

_MODEL_HELP = (
    "sync (Eq. 6), sync_ps (Eq. 5), async (Eq. 9), async_ps (Eq. 8), "
    "optimus or ernest (comparison fits)."
)


_model_option = option(
    "--model",
    "kind",
    env="SCALE_MODEL",
    type=click.Choice(MODEL_KINDS),
    required=True,
    help=_MODEL_HELP,
)
_batch_size_option = option(
    "--batch-size",
    env="SCALE_BATCH_SIZE",
    type=click.FloatRange(min=0, min_open=True),
    default=1.0,
    show_default=True,
    help="M: global batch (sync) or per-worker batch (async).",
)


@click.group()
def scale() -> None:
    """Throughput models, proactive plans and their stabilization (KALE §3.3-3.4)."""


@scale.command("plan")
@_model_option
@option("--theta", env="SCALE_THETA", required=True, help="Model coefficients, comma-separated.")
@_batch_size_option
@option(
    "--load",
    "loads",
    env="SCALE_LOAD",
    required=True,
    help="Forecast records/s, one value or a comma-separated series.",
)
@option(
    "--min-workers",
    env="SCALE_MIN_WORKERS",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
)
@option(
    "--max-workers",
    env="SCALE_MAX_WORKERS",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
)
@option(
    "--ps-per-worker",
    env="SCALE_PS_PER_WORKER",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Parameter servers per worker, for the *_ps models.",
)
@handle_errors
def plan_command(
    kind: str,
    theta: str,
    batch_size: float,
    loads: str,
    min_workers: int,
    max_workers: int,
    ps_per_worker: float | None,
) -> None:
    """Print the smallest worker count whose throughput exceeds each load (Eq. 10)."""
    model = ThroughputModel(kind, tuple(parse_float_list("--theta", theta)), batch_size)
    plan = basic_plan(
        model,
        parse_float_list("--load", loads),
        min_workers=min_workers,
        max_workers=max_workers,
        ps_per_worker=ps_per_worker,
    )
    click.echo(",".join(str(w) for w in plan.workers))
    if plan.any_cannot_keep_up:
        steps = [i for i, flag in enumerate(plan.cannot_keep_up) if flag]
        click.echo(
            f"warning: no worker count in [{min_workers}, {max_workers}] keeps up with the "
            f"load at step(s) {steps}; planned the count with the highest throughput",
            err=True,
        )


@scale.command("stabilize")
@option(
    "--plan", "plan_text", env="SCALE_PLAN", required=True, help="Worker counts, comma-separated."
)
@option(
    "--step-min",
    env="SCALE_STEP_MIN",
    type=click.FloatRange(min=0, min_open=True),
    default=1.0,
    show_default=True,
    help="Minutes between plan steps.",
)
@option(
    "--tau-min",
    env="SCALE_TAU_MIN",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="τ: runs shorter than this are calibrated away.",
)
@option(
    "--rho",
    env="SCALE_RHO",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="ρ: changes smaller than this many workers are ignored.",
)
@handle_errors
def stabilize_command(plan_text: str, step_min: float, tau_min: float, rho: int) -> None:
    """Print the plan calibrated by KALE Algorithm 1."""
    counts = parse_float_list("--plan", plan_text)
    result = stabilize(counts, step_s=step_min * 60, tau_s=tau_min * 60, rho=rho)
    click.echo(",".join(str(w) for w in result))


def _read_observations(path: Path) -> tuple[list[float], list[float], list[float] | None]:
    try:
        with path.open(newline="") as handle:
            rows = list(csv.DictReader(handle))
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    except (csv.Error, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not a CSV file: {exc}") from exc
    if not rows:
        raise ConfigError(f"{path} has no data rows (expected columns workers,samples_per_s[,ps])")
    missing = {"workers", "samples_per_s"} - set(rows[0])
    if missing:
        raise ConfigError(f"{path} lacks column(s) {', '.join(sorted(missing))}")
    has_ps = "ps" in rows[0]
    workers, rates, ps = [], [], []
    for line, row in enumerate(rows, start=2):
        try:
            workers.append(float(row["workers"]))
            rates.append(float(row["samples_per_s"]))
            if has_ps:
                ps.append(float(row["ps"]))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{path} line {line}: not a number in {dict(row)}") from exc
    return workers, rates, ps if has_ps else None


@scale.command("fit")
@option(
    "--data",
    "data_path",
    env="SCALE_DATA",
    type=click.Path(path_type=Path),
    required=True,
    help="CSV with columns workers,samples_per_s and optionally ps.",
)
@_model_option
@_batch_size_option
@option("--json", "as_json", env="JSON", is_flag=True, help="Print one JSON object.")
@handle_errors
def fit_command(data_path: Path, kind: str, batch_size: float, as_json: bool) -> None:
    """Fit a throughput model by NNLS and print its coefficients and errors."""
    workers, rates, ps = _read_observations(data_path)
    model = fit(kind, workers, rates, ps=ps, batch_size=batch_size)
    report = fit_report(model, workers, rates, ps)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "model": kind,
                    "theta": list(model.theta),
                    "mae": report.mae,
                    "rmse": report.rmse,
                    "mape_pct": report.mape_pct,
                }
            )
        )
        return
    click.echo(f"model     {kind} (batch size {batch_size:g}, {len(workers)} observations)")
    click.echo("theta     " + ", ".join(f"{t:.6g}" for t in model.theta))
    click.echo(f"MAE       {report.mae:,.2f} samples/s")
    click.echo(f"RMSE      {report.rmse:,.2f} samples/s")
    click.echo(f"MAPE      {report.mape_pct:.2f} %")
