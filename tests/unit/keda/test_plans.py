"""The plan book: the newest command is the plan; before it, the workers the job has;
a plan whose planner is not heard for max_plan_age_s is stale; nothing from the future."""

import pytest

from streamtrain.errors import ConfigError, PlanUnavailableError, ScalerRequestError
from streamtrain.keda.plans import PlanBook, PlanSettings
from streamtrain.proto import control_plane_pb2 as cp
from streamtrain.roster import RosterSettings

NOW_S = 1_800_000_000.0
NOW_MS = int(NOW_S * 1000)


class Clock:
    def __init__(self, now_s=NOW_S):
        self.now_s = now_s

    def __call__(self):
        return self.now_s


def book_at(clock=None, declared=(), **settings):
    return PlanBook(declared, PlanSettings(**settings), clock=clock or Clock())


def command(job, target, command_id="c1", reason=cp.ScaleCommand.PROACTIVE, at_ms=NOW_MS):
    return cp.ScaleCommand(
        job=job,
        command_id=command_id,
        current_workers=1,
        target_workers=target,
        reason=reason,
        created_at_ms=at_ms,
    )


def sample(job, workers, at_ms=NOW_MS, worker_id="w0"):
    return cp.ThroughputSample(job=job, worker_id=worker_id, workers=workers, observed_at_ms=at_ms)


def beat(job, at_ms=NOW_MS, note=""):
    return cp.PlannerHeartbeat(job=job, sent_at_ms=at_ms, note=note)


def test_newest_command_is_the_plan():
    book = book_at()
    assert book.add_command(command("j", 3, "c1", at_ms=NOW_MS - 2_000))
    assert book.add_command(command("j", 5, "c2", reason=cp.ScaleCommand.FALLBACK, at_ms=NOW_MS))
    plan = book.planned("j")
    assert (plan.planned_workers, plan.source, plan.command_id) == (5, "command", "c2")
    assert (plan.reason, plan.planned_at_s, plan.commands, plan.active) == (
        "FALLBACK",
        NOW_S,
        2,
        True,
    )


def test_before_any_command_the_workers_the_job_has_are_the_plan():
    book = book_at()
    assert book.add_sample(sample("j", 4))
    plan = book.planned("j")
    assert (plan.planned_workers, plan.source, plan.reported_workers) == (4, "pool_size", 4)
    book.add_command(command("j", 6))
    book.add_sample(sample("j", 5, at_ms=NOW_MS + 1))  # the HPA on its way to 6
    plan = book.planned("j")
    assert (plan.planned_workers, plan.source, plan.reported_workers) == (6, "command", 5)


def test_plain_workers_are_counted_by_their_ids_without_any_pool_size():
    """On the embedded broker the workers' samples say workers=0 (Tansu describes the
    group with no members): the count comes from the distinct worker ids."""
    clock = Clock()
    book = book_at(clock, workers=RosterSettings(expiry_s=30))
    for worker in ("w0", "w1", "w0"):  # w0 twice: one worker
        book.add_sample(sample("j", 0, worker_id=worker))
    assert book.planned("j").planned_workers == 2
    clock.now_s += 20
    book.add_sample(sample("j", 0, at_ms=int(clock.now_s * 1000), worker_id="w1"))
    clock.now_s += 15  # w0 silent for 35 s: gone (kill -9 sends no goodbye)
    assert book.planned("j").reported_workers == 1
    clock.now_s += 60  # every worker gone: no count, no plan
    with pytest.raises(PlanUnavailableError, match="no plan for job 'j' yet"):
        book.planned("j")


def test_an_older_sample_changes_nothing():
    book = book_at()
    book.add_sample(sample("j", 4, at_ms=NOW_MS))
    assert not book.add_sample(sample("j", 2, at_ms=NOW_MS - 1_000))
    assert book.planned("j").planned_workers == 4


def test_a_job_seen_with_no_count_yet_is_known_but_unavailable():
    book = book_at()
    book.add_heartbeat(beat("j", note="waiting for the worker count (no samples yet)"))
    assert book.plan("j").planned_workers is None
    assert book.plan("j").active is None
    with pytest.raises(PlanUnavailableError, match=r"no plan for job 'j' yet.*worker count"):
        book.planned("j")


def test_a_job_nothing_names_yet_is_unavailable_naming_the_known_ones():
    """It may appear (a planner starting later): not the caller's mistake (yet)."""
    book = book_at()
    book.add_command(command("a", 2))
    with pytest.raises(PlanUnavailableError, match=r"no plan for job 'b' yet.*known jobs: 'a'"):
        book.plan("b")


def test_declared_jobs_are_known_from_the_start_and_the_only_ones_served():
    book = book_at(declared=["a"])
    assert book.plan("a").planned_workers is None
    assert not book.add_command(command("other", 3))
    assert book.ignored == 1
    with pytest.raises(ScalerRequestError, match=r"not served by this scaler \(--job: 'a'\)"):
        book.plan("other")


def test_a_plan_of_zero_workers_is_inactive():
    book = book_at()
    book.add_command(command("j", 0))
    assert book.planned("j").active is False


def test_a_plan_goes_stale_when_its_planner_is_not_heard_and_fresh_again_when_it_is():
    """A dead control app's plan used to be served forever (ready stayed 1): with
    max_plan_age_s it is refused, so KEDA's fallback applies."""
    clock = Clock()
    book = book_at(clock, max_plan_age_s=60)
    book.add_command(command("j", 4, at_ms=NOW_MS))
    for step in range(1, 5):  # heartbeats keep an unchanged plan fresh
        clock.now_s = NOW_S + 30 * step
        book.add_heartbeat(beat("j", at_ms=int(clock.now_s * 1000)))
        assert book.planned("j").planned_workers == 4
    clock.now_s += 61  # the control app is killed: no more heartbeats
    plan = book.plan("j")
    assert plan.stale and plan.age_s == pytest.approx(61)
    with pytest.raises(PlanUnavailableError, match=r"stale: the planner was last heard 61 s ago"):
        book.planned("j")
    book.add_heartbeat(beat("j", at_ms=int(clock.now_s * 1000)))  # restarted
    assert not book.plan("j").stale and book.planned("j").planned_workers == 4


def test_a_declared_job_whose_planner_was_never_heard_is_stale():
    book = book_at(declared=["j"], max_plan_age_s=60)
    book.add_sample(sample("j", 3))
    assert book.plan("j").stale
    with pytest.raises(PlanUnavailableError, match="has not been heard"):
        book.planned("j")
    book.add_heartbeat(beat("j"))
    assert book.planned("j").planned_workers == 3


def test_without_a_maximum_age_a_plan_never_goes_stale():
    clock = Clock()
    book = book_at(clock)
    book.add_command(command("j", 4))
    clock.now_s += 365 * 86_400
    assert book.planned("j").planned_workers == 4


def test_messages_from_the_future_are_refused():
    """A command dated a year ahead would look fresh (and be the plan) for a year."""
    book = book_at(max_plan_age_s=60, max_clock_skew_s=60)
    year_ms = 365 * 86_400_000
    assert not book.add_command(command("j", 9, "future", at_ms=NOW_MS + year_ms))
    assert not book.add_heartbeat(beat("j", at_ms=NOW_MS + year_ms))
    assert not book.add_sample(sample("j", 9, at_ms=NOW_MS + year_ms))
    assert book.skewed == 3 and not book.known("j")
    # within the skew allowed, they count (clocks are never quite equal)
    assert book.add_command(command("j", 2, "soon", at_ms=NOW_MS + 30_000))
    assert book.planned("j").planned_workers == 2


def test_an_absurd_stated_pool_is_refused():
    book = book_at(workers=RosterSettings(max_workers=100))
    assert not book.add_sample(sample("j", 4_000_000_000))
    assert book.refused == 1 and not book.known("j")


def test_an_unknown_reason_is_named_by_its_number_not_raised():
    book = book_at()
    book.add_command(command("j", 3, reason=7))
    assert book.planned("j").reason == "UNKNOWN(7)"


def test_bad_settings():
    with pytest.raises(ConfigError):
        PlanSettings(max_plan_age_s=0)
    with pytest.raises(ConfigError):
        PlanSettings(max_clock_skew_s=-1)
