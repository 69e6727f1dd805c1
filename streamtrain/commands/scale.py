"""``streamtrain scale``: what-if planning with the throughput models.

``plan`` solves Eq. 10 for given loads, ``stabilize`` runs Algorithm 1 on a plan,
``fit`` fits a throughput model to a CSV of observations, and ``apply`` applies a job's
ScaleCommands from Kafka through an executor (:mod:`streamtrain.executors.consumer`). All of
the work lives in :mod:`streamtrain.scale`; this module parses, calls and prints.
"""

from __future__ import annotations

import contextlib
import csv
import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from streamtrain.commands.common import (
    handle_errors,
    kafka_connection,
    kafka_options,
    option,
    parse_float_list,
)
from streamtrain.errors import ConfigError
from streamtrain.scale.models import MODEL_KINDS, ThroughputModel, fit, fit_report
from streamtrain.scale.plan import basic_plan, stabilize
from streamtrain.units import MINUTE_S

if TYPE_CHECKING:
    from streamtrain.executors import ApplyResult, Executor

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
    result = stabilize(counts, step_s=step_min * MINUTE_S, tau_s=tau_min * MINUTE_S, rho=rho)
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


@scale.command("apply")
@option(
    "--commands-topic",
    env="APPLY_COMMANDS_TOPIC",
    default="streamtrain.scale.commands",
    show_default=True,
)
@option("--job", env="APPLY_JOB", required=True, help="Apply the commands of this job only.")
@option(
    "--executor",
    env="APPLY_EXECUTOR",
    type=click.Choice(["local", "kubernetes", "webhook", "command"]),
    required=True,
)
@option(
    "--alerts-topic",
    env="APPLY_ALERTS_TOPIC",
    default="streamtrain.lag.alerts",
    show_default=True,
    help="Failed applies become alerts here.",
)
@option("--group-id", env="APPLY_GROUP_ID", default=None, help="Default: streamtrain-apply-JOB.")
@option(
    "--journal",
    env="APPLY_JOURNAL",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Applied command ids are kept here across restarts.",
)
@option("--max-attempts", env="APPLY_MAX_ATTEMPTS", type=click.IntRange(min=1), default=5)
@option(
    "--max-workers",
    env="PLAN_MAX_WORKERS",
    type=click.IntRange(min=1),
    default=32,
    show_default=True,
    help="The job's --max-workers (as `lag run`, same variable): the default of "
    "--max-target-workers.",
)
@option(
    "--max-target-workers",
    env="APPLY_MAX_TARGET_WORKERS",
    type=click.IntRange(min=1, max=10_000),
    default=None,
    help="Refuse (and alert on) commands above this many workers. Default: --max-workers.",
)
@option(
    "--allow-scale-to-zero",
    env="APPLY_ALLOW_SCALE_TO_ZERO",
    is_flag=True,
    help="Apply commands to 0 workers (refused otherwise: an unset target decodes to 0).",
)
@option(
    "--max-clock-skew-s",
    env="APPLY_MAX_CLOCK_SKEW_S",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="Commands created further ahead of this clock are refused (and alerted on), "
    "never applied or journaled.",
)
@option(
    "--max-age-s",
    env="APPLY_MAX_AGE_S",
    type=click.FloatRange(min=0, min_open=True),
    default=900.0,
    show_default=True,
    help="Older commands are not applied (reported instead).",
)
@option(
    "--worker-command",
    env="APPLY_WORKER_COMMAND",
    default=None,
    help="local: the worker program (a shell-like string, not run by a shell).",
)
@option("--initial-workers", env="APPLY_INITIAL_WORKERS", type=click.IntRange(min=0), default=0)
@option("--grace-s", env="APPLY_GRACE_S", type=click.FloatRange(min=0), default=10.0)
@option(
    "--replace-dead", env="APPLY_REPLACE_DEAD", is_flag=True, help="local: restart dead workers."
)
@option(
    "--worker-log-dir",
    env="APPLY_WORKER_LOG_DIR",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="local: append each worker's output to DIR/<worker id>.log.",
)
@option(
    "--pool-size-file",
    env="APPLY_POOL_SIZE_FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="local: keep the pool's size in this file (for `worker --pool-size-file`).",
)
@option(
    "--k8s-kind",
    env="APPLY_K8S_KIND",
    type=click.Choice(["Deployment", "StatefulSet"]),
    default="Deployment",
    show_default=True,
)
@option("--k8s-name", env="APPLY_K8S_NAME", default=None, help="kubernetes: the workload.")
@option("--k8s-namespace", env="APPLY_K8S_NAMESPACE", default=None)
@option("--kubeconfig", env="APPLY_KUBECONFIG", default=None)
@option("--k8s-context", env="APPLY_K8S_CONTEXT", default=None)
@option("--webhook-url", env="APPLY_WEBHOOK_URL", default=None, help="webhook: POST here.")
@option("--status-url", env="APPLY_STATUS_URL", default=None, help='webhook: GET {"workers": n}.')
@option(
    "--scale-command",
    env="APPLY_SCALE_COMMAND",
    default=None,
    help="command: the program, with {target}, {job}, {command_id} placeholders.",
)
@option("--status-command", env="APPLY_STATUS_COMMAND", default=None, help="command: prints N.")
@kafka_options
@handle_errors
def apply_command(
    commands_topic: str,
    job: str,
    executor: str,
    alerts_topic: str,
    group_id: str | None,
    journal: Path | None,
    max_attempts: int,
    max_workers: int,
    max_target_workers: int | None,
    allow_scale_to_zero: bool,
    max_clock_skew_s: float,
    max_age_s: float,
    initial_workers: int,
    **opts: Any,
) -> None:
    """Apply JOB's ScaleCommands from --commands-topic through an executor until Ctrl-C.

    Each command is applied once (idempotent on its id, --journal keeps the ids across
    restarts), retried on failure, and reported: the log, and an alert on
    --alerts-topic when it fails.
    """
    import threading

    from streamtrain.executors import ApplierSettings, CommandApplier, LocalProcessPool
    from streamtrain.executors.consumer import CommandConsumer, ConsumerSettings

    bound = max_target_workers or max_workers
    with kafka_connection(opts) as kafka, _executor(executor, opts, bound) as chosen:
        if initial_workers and isinstance(chosen, LocalProcessPool):
            chosen.scale_to(initial_workers)
        applier = CommandApplier(
            chosen,
            ApplierSettings(
                max_attempts=max_attempts,
                job=job,
                journal_path=journal,
                max_target_workers=bound,
                allow_scale_to_zero=allow_scale_to_zero,
                max_clock_skew_s=max_clock_skew_s,
            ),
        )
        settings = ConsumerSettings(
            job=job,
            commands_topic=commands_topic,
            alerts_topic=alerts_topic or None,
            group_id=group_id,
            max_age_s=max_age_s,
        )
        stop = threading.Event()
        supervisor = None
        if isinstance(chosen, LocalProcessPool) and opts["replace_dead"]:
            supervisor = threading.Thread(target=chosen.supervise, args=(stop,), daemon=True)
            supervisor.start()
        click.echo(f"applying {job}'s commands from {commands_topic} via {chosen.name}", err=True)
        with CommandConsumer(kafka, applier, settings, on_result=_echo_result) as consumer:
            try:
                consumer.run(stop)
            finally:
                stop.set()
                if supervisor is not None:
                    supervisor.join(timeout=5)


def _echo_result(result: ApplyResult) -> None:
    click.echo(
        json.dumps(
            {
                "command_id": result.command_id,
                "outcome": result.outcome.value,
                "workers_before": result.workers_before,
                "workers_after": result.workers_after,
                "attempts": result.attempts,
                "error": result.error,
            }
        )
    )


@contextlib.contextmanager
def _executor(kind: str, opts: dict[str, Any], max_workers: int) -> Iterator[Executor]:
    """The executor ``kind`` from the options, closed on exit when it holds resources."""
    from streamtrain.executors import (
        CommandExecutor,
        KubernetesExecutor,
        LocalProcessPool,
        WebhookExecutor,
    )

    def need(flag: str, value: str | None) -> str:
        if not value:
            raise ConfigError(f"--executor {kind} needs {flag}")
        return value

    if kind == "local":
        argv = shlex.split(need("--worker-command", opts["worker_command"]))
        with LocalProcessPool(
            argv,
            grace_s=opts["grace_s"],
            replace_dead=opts["replace_dead"],
            log_dir=opts["worker_log_dir"],
            size_path=opts["pool_size_file"],
            max_workers=max_workers,
        ) as pool:
            yield pool
    elif kind == "kubernetes":
        with KubernetesExecutor.from_environment(
            opts["k8s_kind"],
            need("--k8s-name", opts["k8s_name"]),
            opts["k8s_namespace"],
            kubeconfig=opts["kubeconfig"],
            context=opts["k8s_context"],
        ) as k8s:
            yield k8s
    elif kind == "webhook":
        yield WebhookExecutor(
            need("--webhook-url", opts["webhook_url"]), status_url=opts["status_url"]
        )
    else:
        status = opts["status_command"]
        yield CommandExecutor(
            shlex.split(need("--scale-command", opts["scale_command"])),
            status_argv=shlex.split(status) if status else None,
        )
