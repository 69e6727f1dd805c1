"""AntMan's throttle with real processes: a guarantee job's reported step times drive
the compute share of an opportunistic job through the coordinator and their files.

A guarantee process and an opportunistic process take real MMoE steps; the
:class:`ShareCoordinator` reads the guarantee job's step-time reports and writes the
opportunistic job's share. While the guarantee job keeps its pace the share is raised;
once its steps slow down by more than the interference margin (injected through its
``--slow-file``: each step then takes ``--slow-ms`` longer, reported like any step time)
the share is cut, and the opportunistic process trains at the share it read (its own
report says which). No timing threshold: only the direction of the throttle's answers
and the shares the opportunistic process applied are checked.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamtrain.cluster.throttle import ThrottleAction
from streamtrain.experiments.colocation import ShareCoordinator, read_step_times

ROUNDS_S = 0.5
MARGIN_MS = 300.0  # far above the noise of a busy machine's 256-record steps
SLOW_MS = 2_000.0


def _start(role: str, report: Path, *extra: str) -> subprocess.Popen[bytes]:
    with Path(f"{report}.log").open("wb") as log:  # the child keeps its own descriptor
        return _popen(role, report, log, *extra)


def _popen(role: str, report: Path, log, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamtrain.experiments.colocation",
            role,
            "--report",
            str(report),
            "--batch-records",
            "64",
            "--period-ms",
            "50",
            "--duration-s",
            "300",
            *extra,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def _wait(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _shares_applied(report: Path) -> list[float]:
    if not report.exists():
        return []
    return [float(line.split()[2]) for line in report.read_text().splitlines() if line.strip()]


def test_the_share_rises_while_the_guarantee_job_keeps_pace_and_falls_when_it_slows(tmp_path):
    guarantee_report = tmp_path / "guarantee.steps"
    slow = tmp_path / "slow"
    share_file = tmp_path / "opportunistic.share"
    opportunistic_report = tmp_path / "opportunistic.steps"
    share_file.write_text("0\n")
    processes = [
        _start("guarantee", guarantee_report, "--slow-file", str(slow), "--slow-ms", str(SLOW_MS)),
        _start("opportunistic", opportunistic_report, "--share", str(share_file)),
    ]
    try:
        _wait(
            lambda: (
                Path(f"{guarantee_report}.ready").exists()
                and Path(f"{opportunistic_report}.ready").exists()
            ),
            180,
            "both jobs warmed up",
        )
        _wait(lambda: read_step_times(guarantee_report)[1].size >= 5, 60, "baseline steps")
        baseline_ms = float(read_step_times(guarantee_report)[1].mean())
        coordinator = ShareCoordinator(
            guarantee_report,
            [share_file],
            baseline_ms,
            interference_ms=MARGIN_MS,
            start_s=time.time(),
        )

        def rounds(n: int) -> list[ThrottleAction]:
            actions = []
            for _ in range(n):
                time.sleep(ROUNDS_S)
                actions.append(coordinator.round().action)
            return actions

        calm = rounds(8)
        raised_to = coordinator.throttle.level_workers
        assert ThrottleAction.RAISE in calm and raised_to > 0
        _wait(
            lambda: any(s > 0 for s in _shares_applied(opportunistic_report)),
            60,
            "the opportunistic job training at the share it was given",
        )
        slow.touch()  # the guarantee job's steps now take SLOW_MS longer
        interfered = rounds(8)
        assert ThrottleAction.CUT in interfered
        assert coordinator.throttle.level_workers < raised_to
        cut_share = coordinator.throttle.level_workers / 100
        assert float(share_file.read_text()) == pytest.approx(cut_share)
        slow.unlink()
        recovered = rounds(12)
        assert ThrottleAction.RAISE in recovered  # after the cool-down, raised again
        # the opportunistic job trained only at shares the coordinator wrote
        written = {round(step.level_workers / 100, 3) for _, _, step in coordinator.history}
        applied = set(_shares_applied(opportunistic_report))
        assert applied and applied <= written
        # each round's signal is the mean of the step times reported since the last one
        observed = [o for _, o, _ in coordinator.history if o is not None]
        assert max(observed) > baseline_ms + MARGIN_MS
    finally:
        for p in processes:
            p.terminate()
        for p in processes:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
