"""CommandApplier guards: worker-count limits and command order; no real executor (the
pool's and the consumer's sides are in tests/integration/test_scale_guards.py)."""

import pytest

from streamtrain.errors import ConfigError
from streamtrain.executors import ApplierSettings, ApplyResult, CommandApplier, Outcome
from streamtrain.executors.base import MAX_TARGET_WORKERS
from streamtrain.executors.webhook import redact_url
from streamtrain.proto import control_plane_pb2 as cp


class CountingExecutor:
    name = "counting"

    def __init__(self):
        self.workers = 2
        self.calls: list[tuple[int, str]] = []

    def current_workers(self):
        return self.workers

    def scale_to(self, target_workers, command):
        self.calls.append((target_workers, command.command_id))
        self.workers = target_workers
        return target_workers


def command(command_id, target=3, created_at_ms=1_000, job="demo"):
    return cp.ScaleCommand(
        command_id=command_id, job=job, target_workers=target, created_at_ms=created_at_ms
    )


def applier(settings=None, results=None):
    executor = CountingExecutor()
    made = CommandApplier(
        executor,
        settings,
        on_result=results.append if results is not None else None,
        sleep=lambda _: None,
    )
    return made, executor


def test_a_target_of_zero_is_refused_unless_scale_to_zero_is_asked_for():
    """An unset target_workers decodes to 0; it must not stop the job."""
    refusing, executor = applier()
    result = refusing.apply(command("zero", target=0))
    assert (result.outcome, result.attempts) == (Outcome.FAILED, 0)
    assert "scale-to-zero" in (result.error or "")
    assert executor.calls == []
    allowing, executor = applier(ApplierSettings(allow_scale_to_zero=True))
    assert allowing.apply(command("zero", target=0)).outcome is Outcome.APPLIED
    assert executor.calls == [(0, "zero")]


def test_an_absurd_count_is_refused_even_without_a_configured_bound():
    """4e9 workers (or anything past MAX_TARGET_WORKERS) is never
    handed to an executor, whatever max_target_workers says."""
    results: list[ApplyResult] = []
    unbounded, executor = applier(ApplierSettings(), results)
    result = unbounded.apply(command("huge", target=4_000_000_000))
    assert (result.outcome, result.attempts) == (Outcome.FAILED, 0)
    assert "absurd" in (result.error or "")
    assert unbounded.apply(command("edge", target=MAX_TARGET_WORKERS + 1)).outcome is (
        Outcome.FAILED
    )
    assert executor.calls == []
    assert [r.outcome for r in results] == [Outcome.FAILED, Outcome.FAILED]
    with pytest.raises(ConfigError):
        ApplierSettings(max_target_workers=MAX_TARGET_WORKERS + 1)


def test_an_older_command_than_one_applied_is_superseded_not_applied(tmp_path):
    """The outbox may re-send an older command after a newer one; the
    applier compares created_at_ms per job and refuses the older, across a restart too
    (the journal keeps the newest time)."""
    journal = tmp_path / "applied.jsonl"
    first, executor = applier(ApplierSettings(journal_path=journal))
    assert first.apply(command("new", target=6, created_at_ms=2_000)).outcome is Outcome.APPLIED
    old = first.apply(command("old", target=2, created_at_ms=1_000))
    assert old.outcome is Outcome.SUPERSEDED
    assert old.ok and old.attempts == 0
    assert executor.calls == [(6, "new")]
    assert first.apply(command("same-time", target=5, created_at_ms=2_000)).outcome is (
        Outcome.APPLIED
    )
    assert first.apply(command("other-job", created_at_ms=1, job="x")).outcome is Outcome.APPLIED

    restarted, executor = applier(ApplierSettings(journal_path=journal))
    assert restarted.apply(command("old", created_at_ms=1_000)).outcome is Outcome.SUPERSEDED
    assert restarted.apply(command("newer", created_at_ms=3_000)).outcome is Outcome.APPLIED
    assert executor.calls == [(3, "newer")]


def test_a_compacted_journal_keeps_the_newest_time(tmp_path):
    journal = tmp_path / "applied.jsonl"
    first, _ = applier(ApplierSettings(journal_path=journal, remember_ids=1))
    for i in range(4):  # past 2 x remember_ids lines: compacted
        first.apply(command(f"c{i}", created_at_ms=1_000 + i))
    restarted, executor = applier(ApplierSettings(journal_path=journal, remember_ids=1))
    assert restarted.apply(command("late", created_at_ms=1_001)).outcome is Outcome.SUPERSEDED
    assert executor.calls == []


@pytest.mark.parametrize(
    "url,shown",
    [
        ("https://hooks.example.com/services/T0/B0/s3cr3t", "https://hooks.example.com/…"),
        ("http://user:pw@127.0.0.1:8080/hook?token=abc", "http://127.0.0.1:8080/…"),
        ("http://[::1]:9/x", "http://[::1]:9/…"),
    ],
)
def test_redacted_urls_keep_no_secret(url, shown):
    """A webhook URL may hold a token; what is shown keeps only the
    scheme, host and port."""
    assert redact_url(url) == shown
