"""AntMan on this machine: does the throttle keep a guarantee job's step time within its
baseline + 10 ms while opportunistic jobs use what is left, against no throttle?

Run: .venv/bin/python -m benchmarks.colocation [--cycles 3] [--phase-s 40]
     [--opportunistic 2] [--batch-records 256] [--period-ms 100] [--round-s 1]

Processes of :mod:`streamtrain.experiments.colocation`, real MMoE Adam steps on one
torch thread each: one **guarantee** job (one step of ``--batch-records`` every
``--period-ms``: an online job fed at a steady rate) and ``--opportunistic`` jobs that
step back to back. Per cycle, four phases of ``--phase-s`` seconds, each with fresh
processes:

1. ``baseline``: the guarantee job alone (its p95 step time is the reference, and its
   mean the throttle's baseline);
2. ``unthrottled``: with the opportunistic jobs at full speed;
3. ``throttled``: AntMan's finer control: every ``--round-s`` the coordinator feeds the
   guarantee job's mean step time of the round to the throttle, whose level is each
   opportunistic job's compute share (0 at the start, +10 points a round while the
   guarantee job is within baseline + 10 ms, halved on interference), and the jobs'
   training loops hold their busy share to it (:class:`ShareCoordinator`);
4. ``capped``: the pool-level cap as the allocator applies it, the throttle's level a
   number of opportunistic processes allowed to run, the others stopped
   (:class:`CapCoordinator`).

Measured per phase, after its first 5 s: the guarantee job's step time (p50, p95, mean)
and the CPU the opportunistic jobs used (busy seconds per second, in cores). Noisy on a
shared machine: run it quiet, and read the spread over the cycles. The last line:
``guarantee_step_p95_ms_throttled=<x> unthrottled=<x> baseline=<x> capped=<x>
opportunistic_cores_throttled=<x> opportunistic_cores_unthrottled=<x>
opportunistic_cores_capped=<x> within_10ms_throttled=<0|1> within_10ms_capped=<0|1>
cycles=<n>`` (means over the cycles; ``within_10ms_*``: the phase's p95 at most the
baseline's p95 + 10 ms).
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from streamtrain.experiments.colocation import (
    CapCoordinator,
    ShareCoordinator,
    read_opportunistic,
    read_step_times,
)
from streamtrain.process import stop_children
from streamtrain.sim.stats import interval

PHASES = ("baseline", "unthrottled", "throttled", "capped")
WARMUP_S = 5.0


def _job(
    role: str, report: Path, args: argparse.Namespace, seed: int, share: Path | None = None
) -> subprocess.Popen[bytes]:
    argv = [
        sys.executable,
        "-m",
        "streamtrain.experiments.colocation",
        role,
        "--report",
        str(report),
        "--batch-records",
        str(args.batch_records),
        "--period-ms",
        str(args.period_ms),
        "--duration-s",
        str(args.phase_s + 30),
        "--seed",
        str(seed),
    ]
    if share is not None:
        argv += ["--share", str(share)]
    with Path(f"{report}.log").open("wb") as log:  # the child keeps its own descriptor
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)


@contextlib.contextmanager
def _stopped_at_exit(processes: list[subprocess.Popen[bytes]]) -> Iterator[None]:
    try:
        yield
    finally:
        stop_children([(p, f"colocation child {i}") for i, p in enumerate(processes)], 10)


def _wait_ready(reports: list[Path], timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(Path(f"{r}.ready").exists() for r in reports):
            return
        time.sleep(0.2)
    raise RuntimeError(f"the jobs were not warmed up within {timeout_s:.0f} s")


def _phase(
    phase: str, args: argparse.Namespace, out: Path, baseline_ms: float | None
) -> dict[str, Any]:
    out.mkdir(parents=True)
    report = out / "guarantee.steps"
    guarantee = _job("guarantee", report, args, seed=0)
    processes = [guarantee]
    opportunistic: list[tuple[subprocess.Popen[bytes], Path, Path]] = []
    with _stopped_at_exit(processes):
        if phase != "baseline":
            for k in range(args.opportunistic):
                share = out / f"opportunistic-{k}.share"
                if phase == "throttled":
                    share.write_text("0\n")
                steps_file = out / f"opportunistic-{k}.steps"
                proc = _job("opportunistic", steps_file, args, seed=k + 1, share=share)
                processes.append(proc)
                opportunistic.append((proc, share, steps_file))
        _wait_ready([report, *(path for _, _, path in opportunistic)])  # torch loaded
        start = time.time()
        coordinator: ShareCoordinator | CapCoordinator | None = None
        if phase == "throttled":
            assert baseline_ms is not None
            coordinator = ShareCoordinator(
                report, [s for _, s, _ in opportunistic], baseline_ms, start_s=start
            )
        elif phase == "capped":
            assert baseline_ms is not None
            coordinator = CapCoordinator(
                report, [p.pid for p, _, _ in opportunistic], baseline_ms, start_s=start
            )
        end = start + args.phase_s
        while time.time() < end:
            time.sleep(min(args.round_s, max(0.0, end - time.time())))
            if coordinator is not None:
                coordinator.round()
        if isinstance(coordinator, CapCoordinator):
            coordinator.release()
    times, steps = read_step_times(report, start + WARMUP_S)
    steps = steps[times < end]
    busy = sum(read_opportunistic(path, start + WARMUP_S, end)[1] for _, _, path in opportunistic)
    cuts = 0
    if coordinator is not None:
        cuts = sum(1 for _, _, step in coordinator.history if step.action == "cut")
    return {
        "p50_ms": float(np.percentile(steps, 50)),
        "p95_ms": float(np.percentile(steps, 95)),
        "mean_ms": float(np.mean(steps)),
        "steps": int(steps.size),
        "opportunistic_cores": busy / max(end - start - WARMUP_S, 1e-9),
        "cuts": cuts,
        "rounds": 0 if coordinator is None else len(coordinator.history),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--phase-s", type=float, default=40.0)
    parser.add_argument("--opportunistic", type=int, default=2)
    parser.add_argument("--batch-records", type=int, default=256)
    parser.add_argument("--period-ms", type=float, default=100.0)
    parser.add_argument("--round-s", type=float, default=1.0)
    args = parser.parse_args()
    if args.cycles < 1 or args.phase_s <= WARMUP_S + 1 or args.opportunistic < 1:
        parser.error("need a cycle, phases longer than the warm-up and an opportunistic job")
    results: dict[str, list[dict[str, Any]]] = {p: [] for p in PHASES}
    with tempfile.TemporaryDirectory() as tmp:
        for cycle in range(args.cycles):
            baseline_ms: float | None = None
            for phase in PHASES:
                r = _phase(phase, args, Path(tmp) / f"{cycle}-{phase}", baseline_ms)
                if phase == "baseline":
                    baseline_ms = r["mean_ms"]
                results[phase].append(r)
                print(
                    f"cycle {cycle + 1} {phase:<11}: guarantee step p50 {r['p50_ms']:6.1f} ms, "
                    f"p95 {r['p95_ms']:6.1f} ms ({r['steps']} steps); opportunistic "
                    f"{r['opportunistic_cores']:.2f} cores; throttle cuts {r['cuts']} of "
                    f"{r['rounds']} rounds",
                    flush=True,
                )
    print("\n| phase | guarantee p95 (ms) | p50 (ms) | opportunistic cores | within base + 10 ms |")
    print("|---|---|---|---|---|")
    base = [r["p95_ms"] for r in results["baseline"]]
    within: dict[str, bool] = {}
    for phase in PHASES:
        p95 = interval([r["p95_ms"] for r in results[phase]])
        p50 = interval([r["p50_ms"] for r in results[phase]])
        cores = interval([r["opportunistic_cores"] for r in results[phase]])
        within[phase] = all(
            r["p95_ms"] <= b + 10.0 for r, b in zip(results[phase], base, strict=True)
        )

        def cell(i: Any, fmt: str) -> str:
            return fmt.format(i.mean) + ("" if i.n < 2 else " ± " + fmt.format(i.half_width))

        print(
            f"| {phase} | {cell(p95, '{:.1f}')} | {cell(p50, '{:.1f}')} | "
            f"{cell(cores, '{:.2f}')} | {'yes' if within[phase] else 'no'} (every cycle) |"
        )

    def mean(phase: str, key: str) -> float:
        return float(np.mean([r[key] for r in results[phase]]))

    fields = {
        "guarantee_step_p95_ms_throttled": f"{mean('throttled', 'p95_ms'):.1f}",
        "unthrottled": f"{mean('unthrottled', 'p95_ms'):.1f}",
        "baseline": f"{mean('baseline', 'p95_ms'):.1f}",
        "capped": f"{mean('capped', 'p95_ms'):.1f}",
        "opportunistic_cores_throttled": f"{mean('throttled', 'opportunistic_cores'):.2f}",
        "opportunistic_cores_unthrottled": f"{mean('unthrottled', 'opportunistic_cores'):.2f}",
        "opportunistic_cores_capped": f"{mean('capped', 'opportunistic_cores'):.2f}",
        "within_10ms_throttled": str(int(within["throttled"])),
        "within_10ms_capped": str(int(within["capped"])),
        "cycles": str(args.cycles),
    }
    print("\n" + " ".join(f"{k}={v}" for k, v in fields.items()))


if __name__ == "__main__":
    main()
