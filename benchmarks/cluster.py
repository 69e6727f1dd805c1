"""Several jobs on one pool: the MILP allocator against the MILP without forecasts,
greedy, a static partition and one-way loaning, over seeds, with 95 % intervals.

Run: .venv/bin/python -m benchmarks.cluster [--scenario benchmarks/scenarios/pool150.json]
     [--seeds 20] [--jobs 0] [--node-limit 200] [--hard-minimum] [--forecaster mstl]

The default scenario (``benchmarks/scenarios/pool150.json``): 150 workers; 4 online jobs
(KALE-shaped, web, retail and bike-share traffic, each sized to peak at 16 workers, its
fixed cap 19 when alone, the ``streamtrain`` policy); 1 serving pool (web traffic, 4 to
40 servers); 40 offline jobs arriving over the first day (4-160 single-worker hours,
log-uniform; up to 16 workers in powers of two; deadlines 2-6x their duration at 16);
two simulated days (the second lets the queue drain); the allocator every 5 minutes
over a 25-minute horizon (ModelArts' f and look-ahead). ``--seeds N`` replays it with
every generator's seed offset by 0..N-1 (the traffic shapes, the offline jobs, the
online jobs' runs), spread over ``--jobs`` processes. The online jobs' policies forecast
with ``--forecaster`` (MSTL by default: their runs are the same under every allocator,
and ``auto`` trains a transformer per job and seed).

The allocators, on the same inputs in every seed (:mod:`streamtrain.sim.pool`):
``milp`` (rolling horizon, the online jobs' plans and serving's forecast, FaPES reclaim
between rounds), ``milp-noforecast`` (the same MILP seeing only this minute's online and
serving counts, as greedy does), ``greedy`` (ModelArts' four scenarios, never below one
worker, the same FaPES reclaim between rounds), ``partition`` (each online job its cap,
serving its peak) and ``one-way`` (the partition, serving's idle loaned). The MILP stops
at ``--node-limit`` branch-and-bound nodes (deterministic); its wall time is reported
apart. ``--hard-minimum`` makes ModelArts' Eq. 15 (every job on at least its minimum)
hard for the MILP rows.

Printed: every metric per allocator (mean ± 95 % interval over the seeds); the paired
differences that separate the information advantage from the optimization (MILP vs
MILP without forecasts vs greedy) and the MILP against the partitions; ModelArts' and
FaPES' headline metrics beside ours; the allocator goals on the means. The last line is
machine-readable: ``milp_vs_greedy_queue_pct=<x> milp_vs_greedy_completion_pct=<x>
milp_vs_partition_util_x=<x> milp_vs_one_way_util_x=<x> serving_shortfall_min=<x>
online_no_worse=<0|1> solve_p90_ms=<x> solve_max_ms=<x> milp_rounds=<n>
milp_fallback_rounds=<n> targets=<met>/<all>`` (means over the seeds; percentages: the
reduction of the means against the second allocator, positive is better), then
``<key>_low=<x> <key>_high=<x>`` for the first two (95 % interval of the per-seed
reduction), ``noforecast_vs_greedy_completion_pct``, ``milp_vs_noforecast_completion_pct``,
``nodes_p90``, ``node_limit`` and ``seeds=<N>``.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from streamtrain.cluster.milp import MilpSettings
from streamtrain.sim.parallel import map_seeds
from streamtrain.sim.pool_report import (
    POOL_METRICS,
    PoolMetrics,
    paired_difference,
    simulate_scenario,
    summarize_pool,
)
from streamtrain.sim.scenario import Scenario, load_scenario
from streamtrain.sim.stats import Interval, interval

DEFAULT = Path(__file__).parent / "scenarios" / "pool150.json"
Metrics = Mapping[str, PoolMetrics]


@dataclass(frozen=True, slots=True)
class _Job:
    scenario: Scenario
    milp: MilpSettings


def _reseeded(scenario: Scenario, offset: int) -> Scenario:
    return replace(
        scenario,
        seed=scenario.seed + offset,
        online=tuple(replace(o, seed=o.seed + offset) for o in scenario.online),
        serving=replace(scenario.serving, seed=scenario.serving.seed + offset),
        offline=replace(scenario.offline, seed=scenario.offline.seed + offset),
        name=f"{scenario.name}+{offset}",
    )


def _one_seed(job: _Job, offset: int) -> dict[str, PoolMetrics]:
    report = simulate_scenario(_reseeded(job.scenario, offset), milp=job.milp)
    return dict(report.metrics)


def _reduction(better: float, base: float) -> float:
    return 100.0 * (base - better) / base if base else 0.0


def _reduction_interval(runs: Sequence[Metrics], metric: str, first: str, second: str) -> Interval:
    """The per-seed reduction (%) of ``first``'s metric against ``second``'s."""
    return interval(
        [
            _reduction(float(getattr(r[first], metric)), float(getattr(r[second], metric)))
            for r in runs
        ]
    )


def _online_no_worse(runs: Sequence[Metrics]) -> tuple[bool, str]:
    worse = set()
    for run in runs:
        for o in run["milp"].online:
            if (
                o.violation_rate > o.alone_violation_rate
                or o.accumulated_lag_min > o.alone_accumulated_lag_min * 1.0001
            ):
                worse.add(o.job)
    return not worse, ", ".join(sorted(worse)) or "none"


def _cell(i: Interval, fmt: str) -> str:
    return fmt.format(i.mean) + ("" if i.n < 2 else " ± " + fmt.format(i.half_width))


def _table(summary: dict[str, dict[str, Interval]]) -> str:
    header = ["allocator", *(title for _, title, _ in POOL_METRICS)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for allocator, cells in summary.items():
        row = [allocator, *(_cell(cells[name], fmt) for name, _, fmt in POOL_METRICS)]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


_PAIRS = (
    ("milp", "greedy", "the whole advantage"),
    ("milp-noforecast", "greedy", "the optimization alone, same information"),
    ("milp", "milp-noforecast", "the forecasts alone, same optimizer"),
    ("milp", "partition", "pooling"),
)


def _differences(runs: Sequence[Metrics]) -> str:
    present = runs[0].keys()
    shown = [(n, t, f) for n, t, f in POOL_METRICS if n not in ("solve_p90_ms", "solve_nodes_p90")]
    header = ["first - second", *(title for _, title, _ in shown)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for first, second, what in _PAIRS:
        if first not in present or second not in present:
            continue
        cells = [_cell(paired_difference(runs, name, first, second), fmt) for name, _, fmt in shown]
        lines.append(f"| {first} - {second}: {what} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _goals(
    summary: dict[str, dict[str, Interval]], runs: Sequence[Metrics]
) -> list[tuple[str, bool]]:
    milp, greedy, partition = summary["milp"], summary["greedy"], summary["partition"]
    queue = _reduction_interval(runs, "offline_queue_min", "milp", "greedy")
    util_x = milp["utilization"].mean / partition["utilization"].mean
    shortfall = max(s["serving_shortfall_min"].mean for s in summary.values())
    no_worse, which = _online_no_worse(runs)
    p90 = milp["solve_p90_ms"].mean
    return [
        (
            f"offline queueing >= 20 % below greedy's ({milp['offline_queue_min'].mean:.1f} vs "
            f"{greedy['offline_queue_min'].mean:.1f} min: {_cell(queue, '{:.1f}')} %)",
            queue.mean >= 20.0,
        ),
        (
            f"utilization >= 1.1x the static partition's ({milp['utilization'].mean:.1%} vs "
            f"{partition['utilization'].mean:.1%}: x{util_x:.2f})",
            util_x >= 1.1,
        ),
        (f"serving shortfall 0 min under every allocator ({shortfall:.0f})", shortfall == 0),
        (f"online SLO and lag no worse in the pool than alone (worse: {which})", no_worse),
        (f"MILP solve p90 <= 600 ms (wall clock, {p90:.0f} ms)", p90 <= 600),
    ]


def _papers(summary: dict[str, dict[str, Interval]], runs: Sequence[Metrics]) -> str:
    queue = _reduction_interval(runs, "offline_queue_min", "milp", "greedy")
    done = _reduction_interval(runs, "offline_completion_min", "milp", "greedy")
    finished = paired_difference(runs, "offline_finished", "milp", "greedy")
    part_done = _reduction_interval(runs, "offline_completion_min", "milp", "partition")
    util_x = interval(
        [r["milp"].utilization / r["partition"].utilization for r in runs if r["partition"]]
    )
    rows = [
        (
            "ModelArts: queueing time, MILP vs greedy",
            "up to 32 % lower (150 nodes)",
            f"{_cell(queue, '{:.1f}')} % lower",
        ),
        (
            "ModelArts: total time (queueing + training), MILP vs greedy",
            "lower at every pool size (Fig. 10)",
            f"{_cell(done, '{:.1f}')} % lower",
        ),
        (
            "ModelArts: jobs trained, MILP vs greedy",
            "up to 17.4 more per 100",
            f"{_cell(finished, '{:+.1f}')} of {runs[0]['milp'].offline_jobs} in two days",
        ),
        (
            "FaPES: JCT, loaning vs dedicated partition",
            "-9.0 % to -42.8 %",
            f"{_cell(part_done, '{:.1f}')} % lower (MILP pool)",
        ),
        (
            "FaPES: utilization, loaning vs dedicated partition",
            "x1.09 to x1.67",
            f"x{_cell(util_x, '{:.2f}')}",
        ),
    ]
    lines = ["| claim | paper | here (mean ± 95 % over seeds) |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--scenario", type=Path, default=DEFAULT)
    parser.add_argument("--seeds", type=int, default=20, help="seed offsets 0..N-1")
    parser.add_argument("--jobs", type=int, default=0, help="processes (0: one per core)")
    parser.add_argument("--node-limit", type=int, default=MilpSettings().node_limit)
    parser.add_argument("--hard-minimum", action="store_true", help="ModelArts' Eq. 15, hard")
    parser.add_argument(
        "--forecaster",
        default="mstl",
        help="the online jobs' policies' forecaster (their runs are the same under every "
        "allocator; 'auto' trains a transformer per job and seed: hours on 2 cores)",
    )
    args = parser.parse_args()
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    scenario = replace(load_scenario(args.scenario), forecaster=args.forecaster)
    milp = MilpSettings(node_limit=args.node_limit, hard_minimum=args.hard_minimum)
    jobs = args.jobs or os.cpu_count() or 1
    started = time.perf_counter()

    def progress(message: str) -> None:
        print(f"  {message} ({time.perf_counter() - started:.0f} s)", flush=True)

    runs = map_seeds(
        _one_seed, _Job(scenario, milp), list(range(args.seeds)), jobs=jobs, progress=progress
    )
    spent_s = time.perf_counter() - started
    summary = summarize_pool(runs)
    print(
        f"\n## {scenario.name}: {scenario.capacity_workers} workers, {len(scenario.online)} "
        f"online jobs, 1 serving pool, {scenario.offline.jobs} offline jobs, {scenario.days} "
        f"days; {args.seeds} seeds in {spent_s:.0f} s; MILP node limit {milp.node_limit}"
        f"{', hard minimum per job (Eq. 15)' if milp.hard_minimum else ''}\n"
    )
    print("Every metric, mean ± 95 % interval over the seeds:\n")
    print(_table(summary) + "\n")
    print("Paired differences, seed by seed (first less second; negative is less):\n")
    print(_differences(runs) + "\n")
    print("Beside the papers:\n")
    print(_papers(summary, runs) + "\n")
    goals = _goals(summary, runs)
    print("## Goals (means over the seeds)\n")
    for text, ok in goals:
        print(f"{'PASS' if ok else 'FAIL'}  {text}")
    m = {name: {k: v.mean for k, v in cells.items()} for name, cells in summary.items()}
    queue = _reduction_interval(runs, "offline_queue_min", "milp", "greedy")
    done = _reduction_interval(runs, "offline_completion_min", "milp", "greedy")
    no_worse, _ = _online_no_worse(runs)
    solve_max = max(r["milp"].solve_max_ms for r in runs)

    def cut(first: str, second: str, metric: str) -> str:
        return f"{_reduction(m[first][metric], m[second][metric]):.1f}"

    def times(first: str, second: str) -> str:
        return f"{m[first]['utilization'] / m[second]['utilization']:.2f}"

    fields = {
        "milp_vs_greedy_queue_pct": cut("milp", "greedy", "offline_queue_min"),
        "milp_vs_greedy_completion_pct": cut("milp", "greedy", "offline_completion_min"),
        "milp_vs_partition_util_x": times("milp", "partition"),
        "milp_vs_one_way_util_x": times("milp", "one-way"),
        "serving_shortfall_min": f"{max(c['serving_shortfall_min'] for c in m.values()):.0f}",
        "online_no_worse": str(int(no_worse)),
        "solve_p90_ms": f"{m['milp']['solve_p90_ms']:.0f}",
        "solve_max_ms": f"{solve_max:.0f}",
        "milp_rounds": str(int(np.mean([r["milp"].rounds for r in runs]))),
        "milp_fallback_rounds": f"{m['milp']['fallback_rounds']:.1f}",
        "targets": f"{sum(ok for _, ok in goals)}/{len(goals)}",
        "milp_vs_greedy_queue_pct_low": f"{queue.low:.1f}",
        "milp_vs_greedy_queue_pct_high": f"{queue.high:.1f}",
        "milp_vs_greedy_completion_pct_low": f"{done.low:.1f}",
        "milp_vs_greedy_completion_pct_high": f"{done.high:.1f}",
        "noforecast_vs_greedy_completion_pct": cut(
            "milp-noforecast", "greedy", "offline_completion_min"
        ),
        "milp_vs_noforecast_completion_pct": cut(
            "milp", "milp-noforecast", "offline_completion_min"
        ),
        "nodes_p90": f"{m['milp']['solve_nodes_p90']:.0f}",
        "node_limit": str(milp.node_limit),
        "seeds": str(args.seeds),
    }
    print("\n" + " ".join(f"{k}={v}" for k, v in fields.items()))


if __name__ == "__main__":
    main()
