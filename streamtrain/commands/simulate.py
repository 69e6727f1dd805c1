"""``streamtrain simulate``: replay a trace against the scaling policies (KALE Table 3).

Parses options, loads (or synthesizes) the trace, tunes the baselines on the days
before the replayed ones (:mod:`streamtrain.sim.tuning`), calls
:func:`streamtrain.sim.runner.simulate` over ``--seeds`` runs and prints KALE Table 3
for it with 95 % intervals: a text table, the paper's cells beside ours, or ``--json``;
``--plot`` writes workers and lag over time (first seed). The replayed window's
forecasts are computed in a thread while the baselines are tuned in worker processes
(they do not depend on the tuned settings), and then while the policies that do not
forecast are replayed; those worker processes run at a lower priority, since the other
policies' replays wait for the forecasts. Results go to stdout; to stderr go the run's
notes and its progress (the forecaster's fits and the seeds, with an estimate of the
time left; none with ``--json``). All of the modelling lives in :mod:`streamtrain.sim`.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import click

from streamtrain.commands.common import handle_errors, option, parse_names
from streamtrain.commands.progress import Meter, duration_text
from streamtrain.config import AssignmentMode
from streamtrain.forecast.trace import load_trace, synth_trace
from streamtrain.scale.policies import POLICY_NAMES
from streamtrain.scale.policies.feed import FORECASTER_CHOICES
from streamtrain.sim.execution import ActionCosts, RestartMode, ShuffleMode
from streamtrain.sim.handover import measured_mode_costs
from streamtrain.sim.parallel import nice_beside
from streamtrain.sim.report import format_paper_table, format_table, headline_ratios
from streamtrain.sim.runner import simulate as run
from streamtrain.sim.runner import window_forecasts, window_of
from streamtrain.sim.settings import DEFAULT_FORECASTER, SimSettings
from streamtrain.sim.tuning import planned_levels, tuning_window, with_tuned
from streamtrain.sim.tuning import tune as tune_baselines

__all__ = ["simulate"]

_MEASURED = measured_mode_costs()
F = TypeVar("F", bound=Callable[..., Any])


def _mode_options(command: F) -> F:
    """``--<mode>-prep-s`` and ``--<mode>-pause-s`` for every assignment mode."""
    for mode in reversed(list(AssignmentMode)):
        cost = _MEASURED[mode]
        name = mode.value.upper()
        command = option(
            f"--{mode.value}-pause-s",
            env=f"SIMULATE_{name}_PAUSE_S",
            type=click.FloatRange(min=0),
            default=None,
            help=f"Mean stall of the data hand-over in {mode.value} mode, drawn per action "
            f"within the measured spread. Default: the live measurement for --engine "
            f"({cost.pause_s:g} s with none).",
        )(command)
        command = option(
            f"--{mode.value}-prep-s",
            env=f"SIMULATE_{name}_PREP_S",
            type=click.FloatRange(min=0),
            default=cost.prep_s,
            show_default=True,
            help=f"Preparation of new workers in {mode.value} mode (containers, image, "
            "model load; a real job's scale).",
        )(command)
    return command


def _costs(
    checkpoint_s: float, two_phase_s: float, means: dict[str, Any], engine: str = "none"
) -> ActionCosts:
    measured = measured_mode_costs(engine)
    modes = {
        mode: measured[mode].with_means(
            prep_s=means[f"{mode.value}_prep_s"], pause_s=means[f"{mode.value}_pause_s"]
        )
        for mode in AssignmentMode
    }
    return ActionCosts(checkpoint_s, modes, two_phase_s)


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
    help="Size the job so the trace's peak rate needs this many workers.",
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
@option("--seed", env="SIMULATE_SEED", type=int, default=0, show_default=True, help="First seed.")
@option(
    "--seeds",
    env="SIMULATE_SEEDS",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="Runs per policy (skew, worker speeds, profiling noise and pauses drawn anew; "
    "the traffic is the trace's); tables show the mean and its 95 % interval.",
)
@option(
    "--jobs",
    env="SIMULATE_JOBS",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Processes to spread the seeds over (0: one per CPU core).",
)
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
    default=ShuffleMode.ON.value,
    show_default=True,
    help="Global shuffling for every policy (on/off), or policy: KALE and streamtrain "
    "shuffle, the baselines do not.",
)
@option(
    "--restart",
    env="SIMULATE_RESTART",
    type=click.Choice([mode.value for mode in RestartMode]),
    default=RestartMode.TWO_PHASE.value,
    show_default=True,
    help="Two-phase actions or pause-and-restart for every policy, or policy: "
    "streamtrain two-phase, the others pause and restart.",
)
@option(
    "--assignment",
    env="SIMULATE_ASSIGNMENT",
    type=click.Choice([mode.value for mode in AssignmentMode]),
    default=AssignmentMode.GROUP.value,
    show_default=True,
    help="How the simulated job hands data to its workers (sets which --<mode>-* costs apply).",
)
@option(
    "--engine",
    env="SIMULATE_ENGINE",
    type=click.Choice(["none", "torchft", "torchelastic"]),
    default="none",
    show_default=True,
    help="How the simulated job's workers train (streamtrain worker --engine): with one model "
    "(torchft, torchelastic) an action's pause is that engine's measured one "
    "(streamtrain.scale.action_costs), unless --<mode>-pause-s says otherwise.",
)
@_mode_options
@option(
    "--checkpoint-s",
    env="SIMULATE_CHECKPOINT_S",
    type=click.FloatRange(min=0),
    default=ActionCosts().checkpoint_s,
    show_default=True,
    help="Seconds a pause-and-restart action spends saving the model.",
)
@option(
    "--two-phase-checkpoint-s",
    env="SIMULATE_TWO_PHASE_CHECKPOINT_S",
    type=click.FloatRange(min=0),
    default=ActionCosts().two_phase_checkpoint_s,
    show_default=True,
    help="Seconds a two-phase action pauses to save the model on top of the hand-over "
    "(0: new workers load the latest checkpoint while the old ones train, as the live "
    "system does; e.g. 60 for a job that re-partitions its parameter servers per action).",
)
@option(
    "--model",
    env="SIMULATE_MODEL",
    type=click.Choice(["sync", "async"]),
    default="sync",
    show_default=True,
    help="The job's training mode (KALE Eq. 4 or Eq. 7) and the family policies fit.",
)
@option(
    "--forecaster",
    env="SIMULATE_FORECASTER",
    type=click.Choice(FORECASTER_CHOICES),
    default=DEFAULT_FORECASTER,
    show_default=True,
    help="Forecaster for madu, kale and streamtrain, fitted once a simulated day (a "
    "registry name; auto: the best of the seasonal naive, AutoETS, MSTL and the "
    "transformer, or an inverse-error ensemble of the best few, on daily validation "
    "folds over the last week, behind a seasonal-naive safety net; each day's fit "
    "reuses the previous day's folds and fine-tunes the transformer from its previous "
    "fit; see `forecast eval --help`).",
)
@option(
    "--tune/--no-tune",
    env="SIMULATE_TUNE",
    default=True,
    show_default=True,
    help="Grid-search HPA, Autopilot and Madu on the days before the replayed ones "
    "(needs twice --simulate-days plus a day of trace) and run them with the settings "
    "chosen there.",
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
    "--paper",
    env="SIMULATE_PAPER",
    is_flag=True,
    help="Print KALE Table 3's cells beside ours (Markdown) instead of the plain table.",
)
@option(
    "--plot",
    "plot_path",
    env="SIMULATE_PLOT",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Write workers and lag over time (first seed) to this image (needs matplotlib).",
)
@handle_errors
def simulate(
    trace_path: Path | None,
    policies: str,
    peak_workers: int,
    max_workers: int | None,
    simulate_days: int,
    seed: int,
    seeds: int,
    jobs: int,
    partitions: int,
    skew: float,
    shuffle: str,
    restart: str,
    assignment: str,
    checkpoint_s: float,
    two_phase_checkpoint_s: float,
    model: str,
    forecaster: str,
    tune: bool,
    step_s: int,
    as_json: bool,
    scenario_path: Path | None,
    paper: bool,
    plot_path: Path | None,
    engine: str,
    **mode_costs: float,
) -> None:
    """Replay traffic against scaling policies and print KALE Table 3 for it."""
    if scenario_path is not None:
        _scenario(scenario_path, as_json)
        return
    settings = SimSettings(
        policies=parse_names("--policies", policies, POLICY_NAMES),
        peak_workers=peak_workers,
        max_workers=max_workers,
        simulate_days=simulate_days,
        seed=seed,
        seeds=seeds,
        partitions=partitions,
        skew_sigma=skew,
        shuffle=ShuffleMode(shuffle),
        restart=RestartMode(restart),
        assignment=AssignmentMode(assignment),
        costs=_costs(checkpoint_s, two_phase_checkpoint_s, mode_costs, engine),
        model=model,
        forecaster=forecaster,
        jobs=jobs or os.cpu_count() or 1,
    )
    if trace_path is None:
        days = 2 * simulate_days + 5 if tune else simulate_days + 6
        trace = synth_trace(days, seed=seed, step_s=step_s)
        click.echo(f"no --trace: a synthetic KALE-shaped trace ({trace.name})", err=True)
    else:
        trace = load_trace(trace_path, step_s=step_s)

    progress = _Progress(quiet=as_json)

    tuned = False
    with ThreadPoolExecutor(max_workers=1) as background:
        forecasts = None
        window = tuning_window(trace, settings) if tune else None
        if tune and window is None:
            progress(
                f"--tune: the trace is too short to tune on the {simulate_days} day(s) "
                "before the replayed ones; the baselines run with their defaults"
            )
        elif window is not None:
            # The replayed window's forecasts do not depend on the tuned settings:
            # computed in a thread while the tuning runs in worker processes, and then
            # the replays of the policies that do not forecast.
            forecasts = background.submit(
                window_forecasts,
                window_of(trace, settings),
                settings,
                settings.variants(),
                progress=progress,
                levels=planned_levels(settings),
            )
            # The forecasts come first: the replays that need them wait for them.
            result = tune_baselines(
                window, settings, progress=progress, nice=nice_beside(forecasts)
            )
            settings = with_tuned(settings, result)
            tuned = bool(result.chosen)
            for policy, point in result.chosen.items():
                progress(f"tuned {policy}: {point}")
        report = run(trace, settings, cache=forecasts, progress=progress)
    if as_json:
        payload = report.as_json()
        payload["tuned"] = tuned
        payload["ratios"] = headline_ratios(report.summary())
        click.echo(json.dumps(payload))
    elif paper:
        click.echo(format_paper_table(report.summary()))
    else:
        click.echo(format_table(report.summary()))
    progress.close()
    if plot_path is not None:
        from streamtrain.sim.plot import plot_report

        written = plot_report(report, plot_path)
        click.echo(f"wrote {written}", err=True)


class _Progress:
    """The runner's messages on stderr: the forecaster's fits (``forecasting: fit k/K``)
    and the seeds (``seed s done (k/N)``, given an estimate of the time left here) are
    progress, on one line rewritten in place on a terminal and none with ``--json``;
    the rest (the trace, the tuned settings, warnings) are printed as they come."""

    _SEED = re.compile(r"seed \d+ (?:part )?done \((\d+)/(\d+)\)")

    def __init__(self, quiet: bool) -> None:
        self.meter = Meter(0, "", quiet=quiet, stream=click.get_text_stream("stderr"))
        self.seeds_started: float | None = None
        self.lock = threading.Lock()  # the forecasts' thread reports beside the tuning

    def __call__(self, message: str) -> None:
        with self.lock:
            self._show(message)

    def _show(self, message: str) -> None:
        seed = self._SEED.fullmatch(message)
        if message.startswith("simulating "):
            self.seeds_started = time.perf_counter()
        if seed is not None and self.seeds_started is not None:
            done, total = int(seed.group(1)), int(seed.group(2))
            spent = time.perf_counter() - self.seeds_started
            if done < total:
                message += f"; about {duration_text(spent / done * (total - done))} left"
            self.meter.show(message, last=done >= total)
        elif message.startswith("forecasting: fit "):
            self.meter.show(message)
        else:
            self.meter.note(message)

    def close(self) -> None:
        self.meter.close()


def _scenario(path: Path, as_json: bool) -> None:
    """``--scenario``: every cluster allocator on the scenario's pool."""
    from streamtrain.sim.pool_report import format_pool_table, simulate_scenario
    from streamtrain.sim.scenario import load_scenario

    report = simulate_scenario(
        load_scenario(path), progress=lambda message: click.echo(message, err=True)
    )
    click.echo(json.dumps(report.as_json()) if as_json else format_pool_table(report))
