"""KALE Table 3 in the simulator: timing, results on four traffic shapes, the targets.

Run: .venv/bin/python -m benchmarks.sim [--shapes kale,web,retail,callcentre]
     [--forecaster seasonal_naive] [--seed 0] [--plot-dir docs/img]

1. **Timing.** A 24-hour, 800-partition replay of all six policies on the synthetic
   KALE-shaped week (its last day), against a raw baseline measured in the same run:
   the same six replays with a policy that never decides (the engine alone). The issue
   budget is 60 s on 2 cores.
2. **Results.** For each shape (``kale``: ``synth_trace``, 7 days; ``web``, ``retail``,
   ``callcentre``: ``streamtrain.forecast.series``, 28 days, with gaps), the last day
   replayed with the defaults, printed as a Markdown table.
3. **Same execution.** On the KALE shape, KALE and streamtrain both with shuffling and
   pause-and-restart: what the policy logic alone is worth.
4. **Targets** of issue #8, checked per shape, as ``PASS``/``FAIL`` lines.

The last line is machine-readable: ``sim_s=<x> engine_s=<x> ratio=<sim/engine>
budget_s=60 kale_vs_hpa_lag_pct=<x> streamtrain_vs_kale_lag_pct=<x>
streamtrain_vs_kale_downtime_pct=<x> streamtrain_vs_kale_wh_pct=<x> targets=<met>/<all>``
(percentages: reduction against the second policy on the KALE shape; positive is better).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from streamtrain.forecast.series import make_trace
from streamtrain.forecast.trace import Trace
from streamtrain.sim.engine import run_policy
from streamtrain.sim.metrics import PolicyMetrics
from streamtrain.sim.report import format_markdown
from streamtrain.sim.runner import SimReport, SimSettings, initial_workers, prepare, simulate

HISTORY_DAYS = {"kale": 7, "web": 28, "retail": 28, "callcentre": 28, "bikeshare": 28}


class _Never:
    name = "never"
    decision_interval_s = 60.0

    def decide(self, obs):
        return None


def _trace(shape: str, seed: int) -> Trace:
    return make_trace(shape, HISTORY_DAYS[shape], seed=seed)


def _engine_only(trace: Trace, settings: SimSettings) -> float:
    """The same six replays with a policy that never decides: the engine's own cost."""
    started = time.perf_counter()
    workload = prepare(trace, settings)
    start = initial_workers(workload)
    for name in settings.policies:
        run_policy(workload, _Never(), settings.execution(name), initial_workers=start)
    return time.perf_counter() - started


def _reduction(better: float, base: float) -> float:
    return 100.0 * (base - better) / base if base else 0.0


def _targets(shape: str, m: dict[str, PolicyMetrics]) -> list[tuple[str, bool]]:
    hpa, kale, st = m["hpa"], m["kale"], m["streamtrain"]
    return [
        (
            f"{shape}: kale cuts hpa's accumulated lag by >= 60 % "
            f"({_reduction(kale.accumulated_lag_min, hpa.accumulated_lag_min):.1f} %)",
            _reduction(kale.accumulated_lag_min, hpa.accumulated_lag_min) >= 60,
        ),
        (
            f"{shape}: kale violation rate below hpa's "
            f"({kale.violation_rate:.2%} vs {hpa.violation_rate:.2%})",
            kale.violation_rate < hpa.violation_rate,
        ),
        (
            f"{shape}: kale worker-hours at most 110 % of hpa's "
            f"({kale.worker_hours / hpa.worker_hours:.0%})",
            kale.worker_hours <= 1.1 * hpa.worker_hours,
        ),
        (
            f"{shape}: streamtrain accumulated lag below kale's "
            f"({st.accumulated_lag_min:,.0f} vs {kale.accumulated_lag_min:,.0f})",
            st.accumulated_lag_min < kale.accumulated_lag_min,
        ),
        (
            f"{shape}: streamtrain downtime below kale's "
            f"({st.downtime_min:,.0f} vs {kale.downtime_min:,.0f} min)",
            st.downtime_min < kale.downtime_min,
        ),
        (
            f"{shape}: streamtrain worker-hours at most kale's "
            f"({st.worker_hours:,.1f} vs {kale.worker_hours:,.1f})",
            st.worker_hours <= kale.worker_hours,
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="kale,web,retail,callcentre")
    parser.add_argument("--forecaster", default="seasonal_naive")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot-dir", type=Path, default=None)
    args = parser.parse_args()
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    settings = SimSettings(forecaster=args.forecaster, seed=args.seed)

    kale_trace = _trace("kale", args.seed)
    started = time.perf_counter()
    reports: dict[str, SimReport] = {"kale": simulate(kale_trace, settings)}
    sim_s = time.perf_counter() - started
    engine_s = _engine_only(kale_trace, settings)
    print("## Timing: 24 h, 800 partitions, six policies, 15-s ticks\n")
    print(
        f"all six policies: {sim_s:.1f} s; engine alone: {engine_s:.1f} s; "
        f"ratio {sim_s / engine_s:.2f}; budget 60 s\n"
    )

    for shape in shapes:
        if shape not in reports:
            reports[shape] = simulate(_trace(shape, args.seed), settings)
        print(f"## {shape} ({reports[shape].trace_name}, last day)\n")
        print(format_markdown(reports[shape].metrics) + "\n")
        if args.plot_dir is not None:
            from streamtrain.sim.plot import plot_report

            path = plot_report(reports[shape], args.plot_dir / f"sim_{shape}.png")
            print(f"plot: {path}\n")

    same = SimSettings(
        policies=("kale", "streamtrain"),
        shuffle="on",
        restart="pause",
        forecaster=args.forecaster,
        seed=args.seed,
    )
    print("## kale shape, both shuffling and pausing 10 min per action\n")
    print(format_markdown(simulate(kale_trace, same).metrics) + "\n")

    checks = [c for shape in shapes for c in _targets(shape, reports[shape].metrics)]
    print("## Targets\n")
    for text, ok in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {text}")
    m = reports["kale"].metrics
    hpa, kale, st = m["hpa"], m["kale"], m["streamtrain"]
    fields = {
        "sim_s": f"{sim_s:.1f}",
        "engine_s": f"{engine_s:.1f}",
        "ratio": f"{sim_s / engine_s:.2f}",
        "budget_s": "60",
        "kale_vs_hpa_lag_pct": (
            f"{_reduction(kale.accumulated_lag_min, hpa.accumulated_lag_min):.1f}"
        ),
        "streamtrain_vs_kale_lag_pct": (
            f"{_reduction(st.accumulated_lag_min, kale.accumulated_lag_min):.1f}"
        ),
        "streamtrain_vs_kale_downtime_pct": f"{_reduction(st.downtime_min, kale.downtime_min):.1f}",
        "streamtrain_vs_kale_wh_pct": f"{_reduction(st.worker_hours, kale.worker_hours):.1f}",
        "targets": f"{sum(ok for _, ok in checks)}/{len(checks)}",
    }
    print("\n" + " ".join(f"{k}={v}" for k, v in fields.items()))


if __name__ == "__main__":
    main()
