"""The plan book: the newest command is the plan; before it, the reported pool size."""

import pytest

from streamtrain.errors import PlanUnavailableError, ScalerRequestError
from streamtrain.keda.plans import PlanBook
from streamtrain.proto import control_plane_pb2 as cp


def command(job, target, command_id="c1", reason=cp.ScaleCommand.PROACTIVE, at_ms=1_000):
    return cp.ScaleCommand(
        job=job,
        command_id=command_id,
        current_workers=1,
        target_workers=target,
        reason=reason,
        created_at_ms=at_ms,
    )


def sample(job, workers, at_ms=1_000, worker_id="w0"):
    return cp.ThroughputSample(job=job, worker_id=worker_id, workers=workers, observed_at_ms=at_ms)


def test_newest_command_is_the_plan():
    book = PlanBook()
    assert book.add_command(command("j", 3, "c1", at_ms=1_000))
    assert book.add_command(command("j", 5, "c2", reason=cp.ScaleCommand.FALLBACK, at_ms=2_000))
    plan = book.planned("j")
    assert (plan.planned_workers, plan.source, plan.command_id) == (5, "command", "c2")
    assert (plan.reason, plan.planned_at_s, plan.commands, plan.active) == (
        "FALLBACK",
        2.0,
        2,
        True,
    )


def test_before_any_command_the_reported_pool_size_is_the_plan():
    book = PlanBook()
    assert book.add_sample(sample("j", 4))
    plan = book.planned("j")
    assert (plan.planned_workers, plan.source, plan.reported_workers) == (4, "pool_size", 4)
    book.add_command(command("j", 6))
    book.add_sample(sample("j", 5, at_ms=3_000))  # the HPA on its way to 6
    plan = book.planned("j")
    assert (plan.planned_workers, plan.source, plan.reported_workers) == (6, "command", 5)


def test_an_older_or_unknown_pool_size_changes_nothing():
    book = PlanBook()
    book.add_sample(sample("j", 4, at_ms=5_000))
    assert not book.add_sample(sample("j", 2, at_ms=4_000))
    assert not book.add_sample(sample("j", 0, at_ms=6_000))
    assert book.planned("j").planned_workers == 4


def test_a_job_seen_with_no_count_yet_is_known_but_unavailable():
    book = PlanBook()
    book.add_sample(sample("j", 0))
    assert book.plan("j").planned_workers is None
    assert book.plan("j").active is None
    with pytest.raises(PlanUnavailableError, match="no plan for job 'j' yet"):
        book.planned("j")


def test_an_unknown_job_is_a_request_error_naming_the_known_ones():
    book = PlanBook()
    book.add_command(command("a", 2))
    with pytest.raises(ScalerRequestError, match=r"unknown job 'b'.*known jobs: a"):
        book.plan("b")


def test_declared_jobs_are_known_from_the_start_and_the_only_ones_served():
    book = PlanBook(["a"])
    assert book.plan("a").planned_workers is None
    assert not book.add_command(command("other", 3))
    assert book.ignored == 1
    with pytest.raises(ScalerRequestError, match=r"not served by this scaler \(--job: a\)"):
        book.plan("other")


def test_plans_mapping_is_replaced_whole_and_read_only():
    book = PlanBook()
    book.add_command(command("j", 2))
    before = book.plans
    book.add_command(command("j", 3, "c2"))
    assert before["j"].planned_workers == 2  # a reader's view never changes under it
    assert book.plans["j"].planned_workers == 3
    with pytest.raises(TypeError):
        book.plans["x"] = before["j"]  # type: ignore[index]


def test_a_plan_of_zero_workers_is_inactive():
    book = PlanBook()
    book.add_command(command("j", 0))
    assert book.planned("j").active is False
