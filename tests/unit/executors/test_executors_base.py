"""CommandApplier: idempotency (memory and journal), retries, reports; no real executor."""

import json
import logging

import pytest

from streamtrain.errors import ConfigError, ExecutorError
from streamtrain.executors import (
    ApplierSettings,
    ApplyResult,
    CommandApplier,
    Executor,
    Outcome,
)
from streamtrain.proto import control_plane_pb2 as cp


class FakeExecutor:
    """Scripted executor: ``failures`` are raised, in order, before calls succeed."""

    name = "fake"

    def __init__(self, workers=2, failures=(), current_error=None):
        self.workers = workers
        self.failures = list(failures)
        self.current_error = current_error
        self.calls: list[tuple[int, str]] = []

    def current_workers(self):
        if self.current_error is not None:
            raise self.current_error
        return self.workers

    def scale_to(self, target_workers, command):
        self.calls.append((target_workers, command.command_id))
        if self.failures:
            raise self.failures.pop(0)
        self.workers = target_workers
        return self.workers


class FakeTime:
    def __init__(self):
        self.now_s = 100.0
        self.sleeps: list[float] = []

    def clock(self):
        return self.now_s

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now_s += seconds


def command(command_id="c-1", target=5, job="demo"):
    return cp.ScaleCommand(
        command_id=command_id,
        job=job,
        current_workers=2,
        target_workers=target,
        reason=cp.ScaleCommand.PROACTIVE,
    )


def make(executor, settings=None, results=None):
    fake_time = FakeTime()
    applier = CommandApplier(
        executor,
        settings,
        on_result=results.append if results is not None else None,
        sleep=fake_time.sleep,
        clock=fake_time.clock,
    )
    return applier, fake_time


def test_the_fake_satisfies_the_protocol():
    assert isinstance(FakeExecutor(), Executor)
    assert not isinstance(object(), Executor)


def test_applies_a_command_and_reports_before_and_after():
    executor = FakeExecutor(workers=2)
    applier, _ = make(executor)
    result = applier.apply(command(target=5))
    assert result == ApplyResult(
        command_id="c-1",
        outcome=Outcome.APPLIED,
        attempts=1,
        workers_before=2,
        workers_after=5,
        error=None,
        duration_s=0.0,
        job="demo",
        target_workers=5,
        executor="fake",
    )
    assert result.ok
    assert executor.calls == [(5, "c-1")]


def test_a_duplicate_does_not_call_the_executor():
    executor = FakeExecutor()
    applier, _ = make(executor)
    applier.apply(command("c-1", target=5))
    second = applier.apply(command("c-1", target=5))
    assert second.outcome is Outcome.DUPLICATE
    assert second.attempts == 0
    assert second.workers_after == 5  # what the original apply reached
    assert second.ok
    assert executor.calls == [(5, "c-1")]


def test_memory_is_bounded_and_forgets_the_oldest():
    executor = FakeExecutor()
    applier, _ = make(executor, ApplierSettings(remember_ids=2))
    for command_id in ("a", "b", "c"):
        applier.apply(command(command_id))
    assert not applier.remembers("a")
    assert applier.remembers("b")
    assert applier.remembers("c")
    assert applier.apply(command("a")).outcome is Outcome.APPLIED


def test_a_duplicate_refreshes_its_place_in_the_memory():
    applier, _ = make(FakeExecutor(), ApplierSettings(remember_ids=2))
    applier.apply(command("a"))
    applier.apply(command("b"))
    applier.apply(command("a"))  # duplicate: "a" is now the most recent
    applier.apply(command("c"))  # evicts "b", not "a"
    assert applier.remembers("a")
    assert not applier.remembers("b")


def test_the_journal_survives_a_restart(tmp_path):
    journal = tmp_path / "applied.jsonl"
    settings = ApplierSettings(journal_path=journal)
    first, _ = make(FakeExecutor(), settings)
    first.apply(command("c-1", target=4))
    first.apply(command("c-2", target=6))

    entries = [json.loads(line) for line in journal.read_text().splitlines()]
    assert [(e["command_id"], e["target_workers"], e["workers_after"]) for e in entries] == [
        ("c-1", 4, 4),
        ("c-2", 6, 6),
    ]

    executor = FakeExecutor()
    restarted, _ = make(executor, settings)
    again = restarted.apply(command("c-1", target=4))
    assert again.outcome is Outcome.DUPLICATE
    assert again.workers_after == 4
    assert executor.calls == []
    assert restarted.apply(command("c-3")).outcome is Outcome.APPLIED


def test_a_torn_journal_line_is_skipped(tmp_path, caplog):
    journal = tmp_path / "applied.jsonl"
    journal.write_text('{"command_id": "old", "workers_after": 3}\n{"command_id": "tor')
    executor = FakeExecutor()
    applier, _ = make(executor, ApplierSettings(journal_path=journal))
    with caplog.at_level(logging.WARNING):
        assert applier.apply(command("old")).outcome is Outcome.DUPLICATE
    assert "unreadable line 2" in caplog.text
    assert executor.calls == []


def test_the_journal_is_compacted_to_the_remembered_ids(tmp_path):
    journal = tmp_path / "applied.jsonl"
    settings = ApplierSettings(journal_path=journal, remember_ids=2)
    applier, _ = make(FakeExecutor(), settings)
    for i in range(7):
        applier.apply(command(f"c-{i}"))
    entries = [json.loads(line) for line in journal.read_text().splitlines()]
    ids = [entry["command_id"] for entry in entries if "command_id" in entry]
    assert len(ids) <= 4  # compacted whenever it passes 2 · remember_ids
    assert ids[-2:] == ["c-5", "c-6"]
    restarted, _ = make(FakeExecutor(), settings)
    assert restarted.apply(command("c-6")).outcome is Outcome.DUPLICATE
    assert restarted.apply(command("c-0")).outcome is Outcome.APPLIED


def test_an_unreadable_journal_fails_the_command_instead_of_guessing(tmp_path):
    journal = tmp_path / "journal-is-a-directory"
    journal.mkdir()
    executor = FakeExecutor()
    results: list[ApplyResult] = []
    applier, _ = make(executor, ApplierSettings(journal_path=journal), results)
    result = applier.apply(command())
    assert result.outcome is Outcome.FAILED
    assert "cannot be read" in (result.error or "")
    assert executor.calls == []
    assert results == [result]


def test_retriable_failures_are_retried_with_exponential_backoff():
    executor = FakeExecutor(failures=[ExecutorError("busy")] * 3)
    applier, fake_time = make(executor)
    result = applier.apply(command(target=7))
    assert result.outcome is Outcome.APPLIED
    assert result.attempts == 4
    assert result.workers_after == 7
    assert fake_time.sleeps == [0.5, 1.0, 2.0]
    assert result.duration_s == pytest.approx(3.5)


def test_backoff_is_capped():
    settings = ApplierSettings(backoff_initial_s=1.0, backoff_max_s=3.0)
    assert [settings.backoff_s(k) for k in range(1, 6)] == [1.0, 2.0, 3.0, 3.0, 3.0]
    assert settings.backoff_s(10_000) == 3.0


def test_gives_up_after_max_attempts_and_reports_at_error(caplog):
    executor = FakeExecutor(failures=[ExecutorError("API server down")] * 10)
    results: list[ApplyResult] = []
    applier, fake_time = make(executor, ApplierSettings(max_attempts=3), results)
    with caplog.at_level(logging.ERROR):
        result = applier.apply(command("c-9"))
    assert result.outcome is Outcome.FAILED
    assert result.attempts == 3
    assert result.workers_after is None
    assert result.workers_before == 2
    assert "API server down" in (result.error or "")
    assert "gave up after 3 attempts" in (result.error or "")
    assert len(executor.calls) == 3
    assert len(fake_time.sleeps) == 2  # no pause after the last attempt
    assert [r.levelno for r in caplog.records if "c-9" in r.getMessage()] == [logging.ERROR]
    assert results == [result]


def test_a_non_retriable_error_stops_at_once():
    executor = FakeExecutor(failures=[ExecutorError("404 not found", retriable=False)])
    applier, fake_time = make(executor)
    result = applier.apply(command())
    assert result.outcome is Outcome.FAILED
    assert result.attempts == 1
    assert "not retriable" in (result.error or "")
    assert fake_time.sleeps == []


def test_a_config_error_from_the_executor_is_not_retried():
    executor = FakeExecutor(failures=[ConfigError("pip install 'streamtrain[k8s]'")])
    applier, _ = make(executor)
    result = applier.apply(command())
    assert result.outcome is Outcome.FAILED
    assert result.attempts == 1


def test_a_failed_command_is_tried_again_when_redelivered():
    executor = FakeExecutor(failures=[ExecutorError("no", retriable=False)])
    applier, _ = make(executor)
    assert applier.apply(command("c-1")).outcome is Outcome.FAILED
    assert not applier.remembers("c-1")
    assert applier.apply(command("c-1")).outcome is Outcome.APPLIED
    assert len(executor.calls) == 2


def test_an_unreadable_worker_count_does_not_block_the_apply():
    executor = FakeExecutor(current_error=ExecutorError("no status endpoint", retriable=False))
    applier, _ = make(executor)
    result = applier.apply(command(target=3))
    assert result.outcome is Outcome.APPLIED
    assert result.workers_before is None
    assert result.workers_after == 3


@pytest.mark.parametrize(
    "bad,settings,why",
    [
        (command(command_id=""), ApplierSettings(), "no command_id"),
        (command(job="other"), ApplierSettings(job="demo"), "'other'"),
        (command(target=500), ApplierSettings(max_target_workers=64), "above the limit"),
    ],
)
def test_an_invalid_command_is_reported_not_raised(bad, settings, why, caplog):
    executor = FakeExecutor()
    results: list[ApplyResult] = []
    applier, _ = make(executor, settings, results)
    with caplog.at_level(logging.ERROR):
        result = applier.apply(bad)
    assert result.outcome is Outcome.FAILED
    assert result.attempts == 0
    assert why in (result.error or "")
    assert executor.calls == []
    assert results == [result]
    assert any(r.levelno == logging.ERROR for r in caplog.records)


def test_a_matching_job_is_accepted():
    applier, _ = make(FakeExecutor(), ApplierSettings(job="demo"))
    assert applier.apply(command(job="demo")).outcome is Outcome.APPLIED


def test_the_callback_sees_every_result():
    executor = FakeExecutor(failures=[ExecutorError("denied", retriable=False)])
    results: list[ApplyResult] = []
    applier, _ = make(executor, None, results)
    applier.apply(command("a"))  # failed
    applier.apply(command("b"))  # applied
    applier.apply(command("b"))  # duplicate
    applier.apply(command(""))  # invalid
    assert [(r.command_id, r.outcome) for r in results] == [
        ("a", Outcome.FAILED),
        ("b", Outcome.APPLIED),
        ("b", Outcome.DUPLICATE),
        ("", Outcome.FAILED),
    ]


def test_an_executor_bug_is_reported_not_raised():
    """A crash in the executor ends as a FAILED result (the command
    consumer commits it) instead of an exception that crash-loops ``scale apply``."""

    class Broken(FakeExecutor):
        def scale_to(self, target_workers, command):
            raise ZeroDivisionError("oops")

    results: list[ApplyResult] = []
    applier, _ = make(Broken(), None, results)
    result = applier.apply(command("c-1"))
    assert (result.outcome, result.attempts) == (Outcome.FAILED, 1)
    assert results == [result]
    assert "ZeroDivisionError" in (result.error or "")
    assert not applier.remembers("c-1")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_attempts": 0},
        {"backoff_initial_s": -1.0},
        {"backoff_initial_s": 20.0, "backoff_max_s": 10.0},
        {"remember_ids": 0},
        {"job": ""},
        {"max_target_workers": -1},
    ],
)
def test_bad_settings_are_config_errors(kwargs):
    with pytest.raises(ConfigError):
        ApplierSettings(**kwargs)
