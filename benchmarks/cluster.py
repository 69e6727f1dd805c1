"""Several jobs on one pool: the MILP allocator against greedy, a static partition and
one-way loaning, on one seeded scenario, in one run.

Run: .venv/bin/python -m benchmarks.cluster [--scenario benchmarks/scenarios/pool150.json]
     [--seeds 0,1,2]

The default scenario (``benchmarks/scenarios/pool150.json``): 150 workers; 4 online jobs
(KALE-shaped, web, retail and bike-share traffic, each sized to peak at 16 workers, its
fixed cap 19 when alone, the ``streamtrain`` policy); 1 serving pool (web traffic, 4 to
40 servers); 40 offline jobs arriving over the first day (4-160 single-worker hours,
log-uniform; up to 16 workers in powers of two; deadlines 2-6x their duration at 16);
two simulated days (the second lets the queue drain); the allocator every 5 minutes
over a 25-minute horizon (ModelArts' f and look-ahead).

Printed: one line per allocator (the baselines are measured in the same run, on the
same inputs), each online job in the pool against alone, and the issue's goals as
``PASS``/``FAIL`` lines:

* offline queueing time (arrival to first start) at least 20 % below greedy's;
* utilization at least 1.1x the static partition's;
* no serving shortfall (minutes below ``min_scale``) under any allocator;
* every online job's SLO violation rate and accumulated lag no worse in the pool than
  alone with its fixed cap;
* MILP solve time p90 at most 600 ms.

``--seeds`` (optional) repeats the scenario with other seeds (every generator's seed
offset by it) and prints the goals for each.

The last line is machine-readable: ``milp_vs_greedy_queue_pct=<x>
milp_vs_greedy_completion_pct=<x> milp_vs_partition_util_x=<x>
milp_vs_one_way_util_x=<x> serving_shortfall_min=<x> online_no_worse=<0|1>
solve_p90_ms=<x> solve_max_ms=<x> milp_rounds=<n> milp_fallback_rounds=<n>
targets=<met>/<all>`` (percentages: reduction against
the second allocator; positive is better).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

from streamtrain.sim.pool_report import ScenarioReport, format_pool_table, simulate_scenario
from streamtrain.sim.scenario import Scenario, load_scenario

DEFAULT = Path(__file__).parent / "scenarios" / "pool150.json"


def _reduction(better: float, base: float) -> float:
    return 100.0 * (base - better) / base if base else 0.0


def _online_no_worse(report: ScenarioReport) -> tuple[bool, str]:
    worse = []
    for o in report.metrics["milp"].online:
        if (
            o.violation_rate > o.alone_violation_rate
            or o.accumulated_lag_min > o.alone_accumulated_lag_min * 1.0001
        ):
            worse.append(o.job)
    return not worse, ", ".join(worse) or "none"


def _goals(report: ScenarioReport) -> list[tuple[str, bool]]:
    m = report.metrics
    milp, greedy, partition = m["milp"], m["greedy"], m["partition"]
    queue_cut = _reduction(milp.offline_queue_min, greedy.offline_queue_min)
    util_x = milp.utilization / partition.utilization if partition.utilization else 0.0
    shortfall = max(x.serving_shortfall_min for x in m.values())
    no_worse, which = _online_no_worse(report)
    return [
        (
            f"offline queueing >= 20 % below greedy's ({milp.offline_queue_min:.1f} vs "
            f"{greedy.offline_queue_min:.1f} min: {queue_cut:.1f} %)",
            queue_cut >= 20.0,
        ),
        (
            f"utilization >= 1.1x the static partition's ({milp.utilization:.1%} vs "
            f"{partition.utilization:.1%}: x{util_x:.2f})",
            util_x >= 1.1,
        ),
        (f"serving shortfall 0 min under every allocator ({shortfall:.0f})", shortfall == 0),
        (f"online SLO and lag no worse in the pool than alone (worse: {which})", no_worse),
        (f"MILP solve p90 <= 600 ms ({milp.solve_p90_ms:.0f} ms)", milp.solve_p90_ms <= 600),
    ]


def _reseeded(scenario: Scenario, offset: int) -> Scenario:
    return replace(
        scenario,
        seed=scenario.seed + offset,
        online=tuple(replace(o, seed=o.seed + offset) for o in scenario.online),
        serving=replace(scenario.serving, seed=scenario.serving.seed + offset),
        offline=replace(scenario.offline, seed=scenario.offline.seed + offset),
        name=f"{scenario.name}+{offset}",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", type=Path, default=DEFAULT)
    parser.add_argument("--seeds", default="", help="comma-separated seed offsets, e.g. 1,2,3")
    args = parser.parse_args()
    scenario = load_scenario(args.scenario)
    started = time.perf_counter()
    report = simulate_scenario(scenario)
    spent_s = time.perf_counter() - started
    print(
        f"## {scenario.name}: {scenario.capacity_workers} workers, {len(scenario.online)} "
        f"online jobs, 1 serving pool, {scenario.offline.jobs} offline jobs, "
        f"{scenario.days} days ({spent_s:.0f} s)\n"
    )
    print(format_pool_table(report) + "\n")
    goals = _goals(report)
    print("## Goals\n")
    for text, ok in goals:
        print(f"{'PASS' if ok else 'FAIL'}  {text}")
    if args.seeds:
        print("\n## Other seeds\n")
        for offset in (int(x) for x in args.seeds.split(",") if x.strip()):
            other = simulate_scenario(_reseeded(scenario, offset))
            checks = _goals(other)
            met = sum(ok for _, ok in checks)
            failed = "; ".join(text for text, ok in checks if not ok) or "-"
            o = other.metrics
            print(
                f"seed +{offset}: {met}/{len(checks)} goals met; queue "
                f"{o['milp'].offline_queue_min:.1f} vs greedy {o['greedy'].offline_queue_min:.1f}"
                f" min, completion {o['milp'].offline_completion_min:.0f} vs "
                f"{o['greedy'].offline_completion_min:.0f} min, utilization x"
                f"{o['milp'].utilization / o['partition'].utilization:.2f} the partition's, "
                f"solve p90 {o['milp'].solve_p90_ms:.0f} ms; failed: {failed}"
            )
    m = report.metrics
    milp, greedy = m["milp"], m["greedy"]
    no_worse, _ = _online_no_worse(report)
    fields = {
        "milp_vs_greedy_queue_pct": (
            f"{_reduction(milp.offline_queue_min, greedy.offline_queue_min):.1f}"
        ),
        "milp_vs_greedy_completion_pct": (
            f"{_reduction(milp.offline_completion_min, greedy.offline_completion_min):.1f}"
        ),
        "milp_vs_partition_util_x": f"{milp.utilization / m['partition'].utilization:.2f}",
        "milp_vs_one_way_util_x": f"{milp.utilization / m['one-way'].utilization:.2f}",
        "serving_shortfall_min": f"{max(x.serving_shortfall_min for x in m.values()):.0f}",
        "online_no_worse": str(int(no_worse)),
        "solve_p90_ms": f"{milp.solve_p90_ms:.0f}",
        "solve_max_ms": f"{milp.solve_max_ms:.0f}",
        "milp_rounds": str(milp.rounds),
        "milp_fallback_rounds": str(milp.fallback_rounds),
        "targets": f"{sum(ok for _, ok in goals)}/{len(goals)}",
    }
    print("\n" + " ".join(f"{k}={v}" for k, v in fields.items()))


if __name__ == "__main__":
    main()
