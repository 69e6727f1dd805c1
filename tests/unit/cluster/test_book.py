"""The live allocator's book: what it refuses and why, warm starts, the problem it
builds, the grants it keeps."""

from dataclasses import replace

import pytest

from streamtrain.cluster.book import Request, RequestBook
from streamtrain.cluster.milp import milp_allocate
from streamtrain.cluster.problem import JobClass
from streamtrain.errors import ConfigError

DECLARED = {"ads": JobClass.GUARANTEE, "batch": JobClass.OPPORTUNISTIC}


def _request(job="ads", wanted=4, at_s=100.0, **extra):
    return Request(
        request_id=f"{job}-{at_s}",
        job=job,
        job_class=None,
        current_workers=1,
        wanted_workers=wanted,
        created_at_s=at_s,
        max_workers=8,
        **extra,
    )


def test_bad_requests_are_refused_with_a_reason():
    book = RequestBook(DECLARED, default_max_workers=10)
    unknown = book.accept(_request(job="nobody"), 100.0)
    assert unknown is not None and "unknown job 'nobody'" in unknown.reason
    assert "ads, batch" in unknown.reason
    negative = book.accept(_request(wanted=-3), 100.0)
    assert negative is not None and negative.reason == "negative worker count -3"
    wrong = book.accept(replace(_request(), job_class=JobClass.SERVING), 100.0)
    assert wrong is not None and "declared guarantee, the request says serving" in wrong.reason
    upside_down = book.accept(_request(min_workers=9), 100.0)
    assert upside_down is not None and "min workers 9 above max workers 8" in upside_down.reason
    assert book.requests == {}


def test_a_request_older_than_the_last_decision_is_stale():
    book = RequestBook(DECLARED, default_max_workers=10)
    assert book.accept(_request(at_s=100.0), 100.0) is None
    problem = book.problem(101.0, capacity_workers=10, step_s=60.0, horizon_steps=2)
    assert problem is not None
    changes = book.record(milp_allocate(problem), now_s=150.0)
    assert [(c.job, c.current_workers, c.target_workers) for c in changes] == [("ads", 1, 4)]
    stale = book.accept(_request(wanted=6, at_s=120.0), 160.0)
    assert stale is not None and stale.reason.startswith("stale: created at 120.000")
    assert "last decision for ads at 150.000" in stale.reason
    assert book.accept(_request(wanted=6, at_s=170.0), 170.0) is None
    older = book.accept(_request(wanted=5, at_s=165.0), 171.0)
    assert older is not None and "already accepted" in older.reason


def test_the_current_count_is_the_newer_of_grant_and_report():
    book = RequestBook(DECLARED, default_max_workers=10)
    book.accept(_request(at_s=100.0), 100.0)
    problem = book.problem(100.0, capacity_workers=10, step_s=60.0, horizon_steps=1)
    assert problem is not None
    book.record(milp_allocate(problem), now_s=110.0)
    assert book.current("ads") == 4  # granted after the request said 1
    book.accept(replace(_request(at_s=200.0), current_workers=3), 200.0)
    assert book.current("ads") == 3  # the planner's newer report wins


def test_guarantee_jobs_win_a_short_pool():
    book = RequestBook(DECLARED, default_max_workers=10)
    book.accept(_request("ads", wanted=4), 100.0)
    book.accept(_request("batch", wanted=4, remaining_work=None), 100.0)
    problem = book.problem(100.0, capacity_workers=5, step_s=60.0, horizon_steps=3)
    assert problem is not None
    allocation = milp_allocate(problem)
    assert allocation.granted() == {"ads": 4, "batch": 1}
    assert sum(allocation.granted().values()) <= 5


def test_a_cold_job_is_warm_started_from_similar_jobs():
    declared = {"a": JobClass.GUARANTEE, "b": JobClass.GUARANTEE, "new": JobClass.GUARANTEE}
    book = RequestBook(declared, default_max_workers=32)
    for job, level, wanted in (("a", 1_000.0, 4), ("b", 9_000.0, 12)):
        book.accept(
            replace(
                _request(job, wanted=wanted, model_type="mmoe", traffic_records_per_s=level),
                max_workers=16,
            ),
            1.0,
        )
    problem = book.problem(2.0, capacity_workers=32, step_s=60.0, horizon_steps=1)
    assert problem is not None
    book.record(milp_allocate(problem), now_s=3.0)
    cold = _request("new", wanted=0, at_s=4.0, model_type="mmoe", traffic_records_per_s=8_000.0)
    assert book.accept(cold, 4.0) is None
    # Least similar first: a (4), then b (12): 0.5 * 12 + 0.5 * 4 = 8.
    assert book.warm_started["new"] == pytest.approx(8.0)
    assert book.requests["new"].wanted_workers == 8
    assert "warm start" in book.requests["new"].explanation


def test_restore_keeps_only_declared_jobs():
    book = RequestBook(DECLARED, default_max_workers=10)
    book.restore([_request("ads"), _request("gone")], {})
    assert set(book.requests) == {"ads"}
    with pytest.raises(ConfigError):
        RequestBook({}, default_max_workers=1)


def test_the_newest_request_delivered_again_is_no_change():
    book = RequestBook(DECLARED, default_max_workers=10)
    first = _request(at_s=100.0)
    assert book.accept(first, 100.0) is None
    problem = book.problem(100.0, capacity_workers=10, step_s=60.0, horizon_steps=1)
    assert problem is not None
    book.record(milp_allocate(problem), now_s=150.0)
    assert book.accept(first, 160.0) is None  # redelivered: not refused as stale
    assert book.requests["ads"] is first


def test_each_reported_step_time_reaches_the_throttle_once():
    book = RequestBook(DECLARED, default_max_workers=10)
    assert book.fresh_step_times() == {}
    assert book.accept(_request(step_time_ms=50.0), 100.0) is None
    assert book.accept(_request("batch", step_time_ms=9.0), 100.0) is None  # not guarantee
    assert book.fresh_step_times() == {"ads": 50.0}
    assert book.fresh_step_times() == {}  # the same request: not observed again
    assert book.accept(_request(at_s=101.0, step_time_ms=70.0), 101.0) is None
    assert book.fresh_step_times() == {"ads": 70.0}


def test_a_max_workers_beyond_the_pool_is_capped_at_the_pool():
    book = RequestBook(DECLARED, default_max_workers=10)
    assert book.accept(replace(_request(), max_workers=10_000_000), 100.0) is None
    problem = book.problem(100.0, capacity_workers=12, step_s=60.0, horizon_steps=1)
    assert problem is not None
    [job] = problem.jobs
    assert job.max_workers == 12
