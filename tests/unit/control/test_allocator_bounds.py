"""What another process may ask the allocator is bounded before use: counts clamped to
the pool's capacity, requests from the future and non-finite numbers refused, stored
requests bounded on restore, undecodable ones counted by kind (no Faust, no broker)."""

import logging
import math

import pytest

from streamtrain.cluster.book import Request
from streamtrain.config import KafkaSettings
from streamtrain.control.allocator_service import (
    AllocatorService,
    AllocatorSettings,
    request_to_json,
)
from streamtrain.control.request_bounds import RequestLimits, bound_request
from streamtrain.errors import ConfigError
from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.wire import encode

NOW_S = 1_800_000_000.0
NOW_MS = int(NOW_S * 1000)
LIMITS = RequestLimits(capacity_workers=64, horizon_steps=5, max_clock_skew_s=60)


def service(**extra):
    return AllocatorService(
        AllocatorSettings(
            kafka=KafkaSettings(bootstrap="127.0.0.1:9092"),
            capacity_workers=64,
            guarantee_jobs=("ads",),
            opportunistic_jobs=("batch",),
            **extra,
        )
    )


def request(job="batch", wanted=4, at_ms=NOW_MS, rid="r1", **extra):
    return pb.ScaleRequest(
        request_id=rid,
        job=job,
        wanted_workers=wanted,
        current_workers=1,
        min_workers=1,
        created_at_ms=at_ms,
        **extra,
    )


def plain(**extra):
    fields = {
        "request_id": "r",
        "job": "batch",
        "job_class": None,
        "current_workers": 1,
        "wanted_workers": 4,
        "created_at_s": NOW_S,
    }
    return Request(**(fields | extra))


def test_an_uncapped_max_workers_is_clamped_to_the_capacity_before_the_solver():
    """max_workers = 10^7 made the MILP raise MemoryError at every decision."""
    svc = service()
    accepted = svc.take(encode(request(max_workers=10_000_000, wanted=10_000_000)), NOW_S)
    assert accepted is not None
    assert (accepted.max_workers, accepted.wanted_workers) == (64, 64)
    assert svc.clamped == 1
    decided = svc.decide(NOW_S + 1)
    assert decided.decision.feasible
    assert all(g.granted_workers <= 64 for g in decided.decision.grants)


def test_counts_and_the_plan_are_clamped_and_cut_to_the_horizon():
    bounded = bound_request(
        plain(current_workers=10**6, min_workers=10**5, plan=(3, 10**9, *range(100))),
        LIMITS,
        NOW_S,
    )
    got = bounded.request
    assert got is not None and bounded.refusal is None
    assert (got.current_workers, got.min_workers) == (64, 64)
    assert got.plan == (3, 64, 0, 1, 2)
    assert any("horizon" in note for note in bounded.clamped)


@pytest.mark.parametrize(
    "extra,reason",
    [
        ({"created_at_s": NOW_S + 30 * 86_400}, "in the future"),
        ({"remaining_work": math.nan}, "remaining_work is nan"),
        ({"remaining_work": -5.0}, "negative remaining_work"),
        ({"deadline_at_s": math.inf}, "deadline_at_ms is inf"),
        ({"rate_per_worker": math.inf}, "records_per_s_per_worker is inf"),
        ({"job": "x" * 100_000}, "(100,000 characters) is longer than 249"),
    ],
)
def test_unusable_requests_are_refused_with_a_reason(extra, reason):
    bounded = bound_request(plain(**extra), LIMITS, NOW_S)
    assert bounded.request is None
    assert bounded.refusal is not None
    assert reason in bounded.refusal and len(bounded.refusal) < 1000


def test_a_request_from_the_future_does_not_make_later_ones_stale(caplog):
    """One request dated 30 days ahead made every later request of its job 'stale'."""
    svc = service()
    caplog.set_level(logging.WARNING)
    assert svc.take(encode(request("ads", 2, NOW_MS + 30 * 86_400_000, "r0")), NOW_S) is None
    assert "in the future" in caplog.text
    assert svc.take(encode(request("ads", 40, NOW_MS + 1_000, "r1")), NOW_S) is not None
    assert svc.book.requests["ads"].wanted_workers == 40
    refusals = svc.decide(NOW_S + 2).decision.refusals
    assert [r.request_id for r in refusals] == ["r0"]


def test_within_the_clock_skew_a_request_is_accepted():
    svc = service(max_clock_skew_s=60)
    assert svc.take(encode(request("ads", 2, NOW_MS + 30_000)), NOW_S) is not None


def test_stored_requests_are_bounded_when_the_tables_are_restored():
    """The request was persisted, so the MILP blow-up repeated after every restart."""
    svc = service()
    absurd = plain(request_id="big", max_workers=10**7, wanted_workers=10**7)
    future = plain(request_id="late", job="ads", created_at_s=NOW_S + 30 * 86_400)
    svc.restore(
        {"batch": request_to_json(absurd), "ads": request_to_json(future), "x": "{not json"},
        {},
        now_s=NOW_S,
    )
    assert set(svc.book.requests) == {"batch"}
    assert svc.book.requests["batch"].max_workers == 64


def test_an_unknown_job_class_or_a_null_value_is_one_undecodable_request(caplog):
    svc = service()
    caplog.set_level(logging.DEBUG, logger="streamtrain")
    newer = encode(request(job_class=9))
    for value in (newer, newer, None, b"\xff\xff"):
        assert svc.take(value, NOW_S) is None
    assert dict(svc.failures.by_kind) == {"unknown_enum": 2, "no_value": 1, "unparsable": 1}
    assert svc.undecodable == 4
    assert sum(r.levelno >= logging.WARNING for r in caplog.records) == 3  # once per kind


def test_bad_limits():
    with pytest.raises(ConfigError):
        RequestLimits(capacity_workers=0, horizon_steps=5)
    with pytest.raises(ConfigError):
        RequestLimits(capacity_workers=4, horizon_steps=5, max_clock_skew_s=-1)
