"""``streamtrain simulate``: replay a trace against the scaling policies (issue #8).

Parses options, loads (or synthesizes) the trace, calls
:func:`streamtrain.sim.runner.simulate` and prints KALE Table 3 for it: a text table
or ``--json``; ``--plot`` writes workers and lag over time. Progress goes to stderr,
results to stdout. All of the modelling lives in :mod:`streamtrain.sim`.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from streamtrain.commands.common import handle_errors, option
from streamtrain.errors import ConfigError
from streamtrain.forecast.trace import load_trace, synth_trace
from streamtrain.scale.policies import POLICY_NAMES
from streamtrain.scale.policies.feed import FORECASTER_CHOICES
from streamtrain.sim.execution import RestartMode, ShuffleMode
from streamtrain.sim.report import format_table
from streamtrain.sim.runner import DEFAULT_MODELS, SimSettings
from streamtrain.sim.runner import simulate as run
from streamtrain.units import MINUTE_S

__all__ = ["simulate"]


def _policies(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not names:
        raise ConfigError("--policies is empty")
    unknown = [n for n in names if n not in POLICY_NAMES]
    if unknown:
        raise ConfigError(
            f"--policies: unknown {', '.join(unknown)}; choose from {', '.join(POLICY_NAMES)}"
        )
    if len(set(names)) != len(names):
        raise ConfigError("--policies names a policy twice")
    return names


@click.command("simulate")
@option(
    "--trace",
    "trace_path",
    env="SIMULATE_TRACE",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="CSV with timestamp,records_per_s. Default: a synthetic KALE-shaped week.",
)
@option(
    "--policies",
    env="SIMULATE_POLICIES",
    default=",".join(POLICY_NAMES),
    show_default=True,
    help="Comma-separated policies to compare.",
)
@option(
    "--peak-workers",
    env="SIMULATE_PEAK_WORKERS",
    type=click.IntRange(min=2),
    default=24,
    show_default=True,
    help="Scale the job so the trace's peak rate needs this many workers.",
)
@option(
    "--max-workers",
    env="SIMULATE_MAX_WORKERS",
    type=click.IntRange(min=2),
    default=None,
    help="Upper bound for every policy (Adequate holds it). Default: 7/6 of --peak-workers.",
)
@option(
    "--simulate-days",
    env="SIMULATE_DAYS",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Replay the trace's last D days; everything before is history.",
)
@option("--seed", env="SIMULATE_SEED", type=int, default=0, show_default=True)
@option(
    "--partitions",
    env="SIMULATE_PARTITIONS",
    type=click.IntRange(min=1),
    default=800,
    show_default=True,
)
@option(
    "--skew",
    env="SIMULATE_SKEW",
    type=click.FloatRange(min=0),
    default=0.5,
    show_default=True,
    help="Std of a partition's log-share (0: even partitions).",
)
@option(
    "--shuffle",
    env="SIMULATE_SHUFFLE",
    type=click.Choice([mode.value for mode in ShuffleMode]),
    default="policy",
    show_default=True,
    help="policy: KALE and streamtrain shuffle, the baselines do not.",
)
@option(
    "--restart",
    env="SIMULATE_RESTART",
    type=click.Choice([mode.value for mode in RestartMode]),
    default="policy",
    show_default=True,
    help="policy: streamtrain scales two-phase, the others pause and restart.",
)
@option(
    "--restart-min",
    env="SIMULATE_RESTART_MIN",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="Minutes of one pause-and-restart (its parts scale with it).",
)
@option(
    "--model",
    env="SIMULATE_MODEL",
    type=click.Choice(list(DEFAULT_MODELS)),
    default="sync",
    show_default=True,
    help="The job's throughput model family.",
)
@option(
    "--forecaster",
    env="SIMULATE_FORECASTER",
    type=click.Choice(FORECASTER_CHOICES),
    default="seasonal_naive",
    show_default=True,
    help="Forecaster for madu, kale and streamtrain (auto: FEDformer-style, slow to fit).",
)
@option(
    "--step-s",
    env="SIMULATE_STEP_S",
    type=click.IntRange(min=1),
    default=60,
    show_default=True,
    help="Trace grid step in seconds.",
)
@option("--json", "as_json", env="JSON", is_flag=True, help="Print one JSON object.")
@option(
    "--scenario",
    "scenario_path",
    env="SIMULATE_SCENARIO",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Several jobs on one pool (a JSON or TOML file: online jobs, a serving pool, "
    "offline jobs): compare the cluster allocators instead; the other flags but --json "
    "are ignored.",
)
@option(
    "--plot",
    "plot_path",
    env="SIMULATE_PLOT",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Write workers and lag over time to this image (needs matplotlib).",
)
@handle_errors
def simulate(
    trace_path: Path | None,
    policies: str,
    peak_workers: int,
    max_workers: int | None,
    simulate_days: int,
    seed: int,
    partitions: int,
    skew: float,
    shuffle: str,
    restart: str,
    restart_min: float,
    model: str,
    forecaster: str,
    step_s: int,
    as_json: bool,
    scenario_path: Path | None,
    plot_path: Path | None,
) -> None:
    """Replay traffic against scaling policies and print KALE Table 3 for it."""
    if scenario_path is not None:
        _scenario(scenario_path, as_json)
        return
    settings = SimSettings(
        policies=_policies(policies),
        peak_workers=peak_workers,
        max_workers=max_workers,
        simulate_days=simulate_days,
        seed=seed,
        partitions=partitions,
        skew_sigma=skew,
        shuffle=ShuffleMode(shuffle),
        restart=RestartMode(restart),
        restart_s=restart_min * MINUTE_S,
        model=model,
        forecaster=forecaster,
    )
    if trace_path is None:
        trace = synth_trace(simulate_days + 6, seed=seed, step_s=step_s)
        click.echo(f"no --trace: a synthetic KALE-shaped trace ({trace.name})", err=True)
    else:
        trace = load_trace(trace_path, step_s=step_s)
    report = run(trace, settings, progress=lambda message: click.echo(message, err=True))
    if as_json:
        click.echo(json.dumps(report.as_json()))
    else:
        click.echo(format_table(report.metrics))
    if plot_path is not None:
        from streamtrain.sim.plot import plot_report

        written = plot_report(report, plot_path)
        click.echo(f"wrote {written}", err=True)


def _scenario(path: Path, as_json: bool) -> None:
    """``--scenario``: every cluster allocator on the scenario's pool (issue #22)."""
    from streamtrain.sim.pool_report import format_pool_table, simulate_scenario
    from streamtrain.sim.scenario import load_scenario

    report = simulate_scenario(
        load_scenario(path), progress=lambda message: click.echo(message, err=True)
    )
    click.echo(json.dumps(report.as_json()) if as_json else format_pool_table(report))
