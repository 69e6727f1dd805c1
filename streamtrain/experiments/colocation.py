"""AntMan (OSDI '20) on one machine: a guarantee job and opportunistic jobs sharing its
CPU cores, and the local coordinator that keeps the guarantee job's pace.

Owned here:

* the two training loops, run as processes (``python -m
  streamtrain.experiments.colocation guarantee|opportunistic ...``), each taking real
  Adam steps of the MMoE CTR model on one torch thread: the **guarantee** job at a
  steady rate (:func:`_run_guarantee`), **opportunistic** ones back to back within
  their compute share (:func:`_run_opportunistic`);
* :class:`ShareCoordinator`: the throttle's feedback as a compute share per
  opportunistic job;
* :class:`CapCoordinator`: the same feedback at the pool level only, as the allocator
  applies it: a number of opportunistic *workers*;
* :func:`read_step_times` / :func:`read_opportunistic` parse the report files.

The measurement that uses them is ``benchmarks/colocation.py``.
"""

from __future__ import annotations

import argparse
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from streamtrain.cluster.throttle import Throttle, ThrottleSettings, ThrottleStep
from streamtrain.errors import ConfigError
from streamtrain.units import ms_to_s, s_to_ms

__all__ = [
    "CapCoordinator",
    "ShareCoordinator",
    "read_opportunistic",
    "read_share",
    "read_step_times",
    "wait_s",
    "write_share",
]

GUARANTEE = "guarantee"
_IDLE_POLL_S = 0.05  # an opportunistic job at share 0 re-reads its file this often


def wait_s(busy_s: float, share: float) -> float:
    """How long a job that was busy ``busy_s`` waits so its busy share is ``share``:
    ``busy_s · (1 - share) / share``."""
    if not 0 <= share <= 1:
        raise ConfigError(f"a compute share is in [0, 1], got {share}")
    if share >= 1:
        return 0.0
    if share <= 0:
        return _IDLE_POLL_S
    return busy_s * (1.0 - share) / share


def read_share(path: Path) -> float:
    """The share in ``path`` (1 when missing or unreadable: unthrottled)."""
    try:
        value = float(path.read_text().strip())
    except (OSError, ValueError):
        return 1.0
    return min(max(value, 0.0), 1.0)


def write_share(path: Path, share: float) -> None:
    """Write ``share`` to ``path`` atomically (a reader sees the old or the new one)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"{share:.4f}\n")
    os.replace(tmp, path)


def read_step_times(path: Path, since_s: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """``(wall s, step ms)`` of the guarantee job's steps after ``since_s``."""
    times: list[float] = []
    steps: list[float] = []
    if path.exists():
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2:
                at, step = float(parts[0]), float(parts[1])
                if at > since_s:
                    times.append(at)
                    steps.append(step)
    return np.asarray(times), np.asarray(steps)


def read_opportunistic(path: Path, start_s: float, end_s: float) -> tuple[int, float]:
    """Steps an opportunistic job finished in ``[start_s, end_s)`` and their busy
    seconds."""
    steps, busy_ms = 0, 0.0
    if path.exists():
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 3 and start_s <= float(parts[0]) < end_s:
                steps += 1
                busy_ms += float(parts[1])
    return steps, ms_to_s(busy_ms)


@dataclass
class _Cursor:
    since_s: float


class ShareCoordinator:
    """The finer control: one compute share for every opportunistic job, set by the
    throttle's level in percent.

    Each round, the mean of the guarantee job's step times since the last round goes
    to the :class:`~streamtrain.cluster.throttle.Throttle` (level in percent of a core
    per opportunistic job: raise 10 points while the guarantee job stays within its
    baseline + 10 ms, halve on interference) and the new share is written to every
    opportunistic job's file (atomically: write, then rename).
    """

    def __init__(
        self,
        report: Path,
        share_files: Sequence[Path],
        baseline_ms: float,
        *,
        interference_ms: float = 10.0,
        step_pct: int = 10,
        start_s: float | None = None,
    ) -> None:
        self.report = report
        self.share_files = list(share_files)
        self.throttle = Throttle(
            ThrottleSettings(
                ceiling_workers=100,
                start_workers=0,
                step_workers=step_pct,
                interference_ms=interference_ms,
            ),
            {GUARANTEE: baseline_ms},
        )
        self._cursor = _Cursor(time.time() if start_s is None else start_s)
        self.history: list[tuple[float, float | None, ThrottleStep]] = []
        for path in self.share_files:
            write_share(path, 0.0)

    def round(self) -> ThrottleStep:
        """Read the new step times, feed the throttle, write the shares."""
        observed, step = _observe(self.report, self._cursor, self.throttle)
        share = step.level_workers / 100.0 if self.throttle.signalled else 0.0
        for path in self.share_files:
            write_share(path, share)
        self.history.append((time.time(), observed, step))
        return step


class CapCoordinator:
    """The pool-level cap: the throttle's level is how many of the opportunistic
    processes may run; the jobs beyond it are stopped (SIGSTOP), the others continued
    (SIGCONT)."""

    def __init__(
        self,
        report: Path,
        pids: Sequence[int],
        baseline_ms: float,
        *,
        interference_ms: float = 10.0,
        start_s: float | None = None,
    ) -> None:
        self.report = report
        self.pids = list(pids)
        self.throttle = Throttle(
            ThrottleSettings(
                ceiling_workers=len(self.pids),
                start_workers=0,
                step_workers=1,
                interference_ms=interference_ms,
            ),
            {GUARANTEE: baseline_ms},
        )
        self._cursor = _Cursor(time.time() if start_s is None else start_s)
        self.history: list[tuple[float, float | None, ThrottleStep]] = []
        self._apply(0)

    def _apply(self, level: int) -> None:
        for k, pid in enumerate(self.pids):
            try:
                os.kill(pid, signal.SIGCONT if k < level else signal.SIGSTOP)
            except ProcessLookupError:
                continue

    def round(self) -> ThrottleStep:
        observed, step = _observe(self.report, self._cursor, self.throttle)
        self._apply(step.level_workers if self.throttle.signalled else 0)
        self.history.append((time.time(), observed, step))
        return step

    def release(self) -> None:
        """Continue every process (so it can be stopped cleanly)."""
        self._apply(len(self.pids))


def _observe(
    report: Path, cursor: _Cursor, throttle: Throttle
) -> tuple[float | None, ThrottleStep]:
    """The guarantee job's mean step time since ``cursor`` (None when it reported none),
    fed to ``throttle``; the cursor moves past what was read."""
    times, steps = read_step_times(report, cursor.since_s)
    observed = float(np.mean(steps)) if steps.size else None
    if times.size:
        cursor.since_s = float(times[-1])
    return observed, throttle.observe({} if observed is None else {GUARANTEE: observed})


def _batch(records: int, seed: int) -> tuple[Any, ...]:
    import torch

    from streamtrain.ingest.example import SyntheticCtr

    table = SyntheticCtr(seed=seed).sample(records, first_id=0, phase=0.0)
    return tuple(
        torch.from_numpy(np.array(table[name], order="C"))
        for name in ("sparse", "dense", "click", "conversion")
    )


def _stepper(records: int, seed: int) -> Callable[[], None]:
    import torch

    from streamtrain.ingest.mmoe import MmoeCtrApp, ctr_loss

    app = MmoeCtrApp(seed=seed, threads=1)
    sparse, dense, click, conversion = _batch(records, seed)

    def step() -> None:
        app.optimizer.zero_grad(set_to_none=True)
        loss = ctr_loss(app.model(sparse, dense), click, conversion)
        torch.autograd.backward(loss)
        app.optimizer.step()

    return step


def _warmed_up(args: argparse.Namespace) -> Callable[[], None]:
    """The job's step, after three unreported ones (torch warmed up); then
    ``<report>.ready`` is created, so whoever measures can start."""
    step = _stepper(args.batch_records, args.seed)
    for _ in range(3):
        step()
    Path(args.report + ".ready").touch()
    return step


def _run_guarantee(args: argparse.Namespace) -> None:
    """One step of ``batch_records`` every ``period_ms`` (an online job fed at a steady
    rate, not a CPU hog); after each step it appends ``"<wall s> <step ms>"`` to its
    report file (``<report>.ready`` once warmed up): the step times its coordinator reads
    (AntMan's framework reports mini-batch times to the local coordinator through the
    file system, §4)."""
    step = _warmed_up(args)
    period_s = ms_to_s(args.period_ms)
    deadline = time.monotonic() + args.duration_s
    slow = Path(args.slow_file) if args.slow_file else None
    with Path(args.report).open("a", buffering=1) as report:
        next_at = time.monotonic()
        while time.monotonic() < deadline:
            started = time.perf_counter()
            step()
            if slow is not None and slow.exists():  # interference injected by a test
                time.sleep(ms_to_s(args.slow_ms))
            report.write(f"{time.time():.4f} {s_to_ms(time.perf_counter() - started):.3f}\n")
            next_at += period_s
            time.sleep(max(0.0, next_at - time.monotonic()))


def _run_opportunistic(args: argparse.Namespace) -> None:
    """Steps back to back, but at most ``share`` of the time (:func:`wait_s`; AntMan's
    ``GpuOpManager`` delays operators to a percentage of the device, §4; here the
    training loop limits its own rate), re-reading ``share`` from its share file before
    every step (missing: 1, unthrottled; 0: wait and re-read). It appends
    ``"<wall s> <busy ms> <share>"`` per step."""
    step = _warmed_up(args)
    share_file = Path(args.share)
    deadline = time.monotonic() + args.duration_s
    with Path(args.report).open("a", buffering=1) as report:
        while time.monotonic() < deadline:
            share = read_share(share_file)
            if share <= 0:
                time.sleep(_IDLE_POLL_S)
                continue
            started = time.perf_counter()
            step()
            busy_s = time.perf_counter() - started
            report.write(f"{time.time():.4f} {s_to_ms(busy_s):.3f} {share:.3f}\n")
            time.sleep(wait_s(busy_s, share))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="one job of the co-location experiment")
    parser.add_argument("role", choices=(GUARANTEE, "opportunistic"))
    parser.add_argument("--report", required=True)
    parser.add_argument("--share", default="", help="the opportunistic job's share file")
    parser.add_argument("--batch-records", type=int, default=256)
    parser.add_argument("--period-ms", type=float, default=100.0)
    parser.add_argument("--duration-s", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--slow-file",
        default="",
        help="guarantee: while this file exists, each step takes --slow-ms longer (a test "
        "injects interference this way)",
    )
    parser.add_argument("--slow-ms", type=float, default=0.0)
    args = parser.parse_args(argv)
    if args.role == GUARANTEE:
        _run_guarantee(args)
    else:
        if not args.share:
            parser.error("an opportunistic job needs --share")
        _run_opportunistic(args)


if __name__ == "__main__":
    main()
