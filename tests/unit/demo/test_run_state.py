"""DemoRun.supervise: what a child's exit counts as, and when the demo gives up."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamtrain.config import KafkaSettings
from streamtrain.demo.run_state import DemoRun
from streamtrain.demo.settings import DemoSettings
from streamtrain.errors import StreamtrainError
from streamtrain.executors.local import WorkerExit


class _Pool:
    """A pool whose next reap() returns the exits it is given (no process)."""

    def __init__(self) -> None:
        self.exits: list[WorkerExit] = []

    def reap(self) -> list[WorkerExit]:
        exits, self.exits = self.exits, []
        return exits


def _exit(worker_id: str, replaced_by_pid: int | None) -> WorkerExit:
    return WorkerExit(0, worker_id, 100, -9, replaced_by_pid)


@pytest.fixture
def run(tmp_path: Path) -> DemoRun:
    demo = DemoRun(KafkaSettings("127.0.0.1:9"), DemoSettings(run_dir=tmp_path), print)
    demo.pool = _Pool()  # type: ignore[assignment]
    demo.control = _Pool()  # type: ignore[assignment]
    return demo


def test_a_replaced_worker_and_a_restarted_control_app_are_counted_apart(run):
    run.pool.exits = [_exit("worker-1", 201), _exit("worker-2", 202)]
    run.control.exits = [_exit("control-app-0", 301)]
    run.supervise()
    assert (run.replaced, run.control_restarts) == (2, 1)
    events = [e["message"] for e in run.timeline.to_json()["events"]]
    assert any("worker worker-1 (pid 100)" in e and "replaced by pid 201" in e for e in events)
    assert any("control app control-app-0" in e for e in events)


def test_a_worker_not_replaced_is_noted_and_not_counted(run):
    run.pool.exits = [_exit("worker-1", None)]
    run.supervise()
    assert (run.replaced, run.control_restarts) == (0, 0)
    assert any("not replaced" in e["message"] for e in run.timeline.to_json()["events"])


def test_the_demo_stops_when_the_control_app_is_not_replaced_or_dies_a_fourth_time(run):
    for pid in (301, 302, 303):
        run.control.exits = [_exit("control-app-0", pid)]
        run.supervise()
    assert run.control_restarts == 3
    run.control.exits = [_exit("control-app-0", 304)]
    with pytest.raises(StreamtrainError, match="the control app exited"):
        run.supervise()
    run.control.exits = [_exit("control-app-0", None)]
    with pytest.raises(StreamtrainError, match=r"control-app-0\.log"):
        run.supervise()
