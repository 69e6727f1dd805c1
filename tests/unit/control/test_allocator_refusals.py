"""The allocator's answers to what a planner in another process may send: an uncapped
max_workers is clamped to the pool's capacity before the solver sees it, and a request
dated in the future is refused (it made every later request of its job "stale")."""

import time

from streamtrain.config import KafkaSettings
from streamtrain.control.allocator_service import AllocatorService, AllocatorSettings
from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.wire import encode


def service():
    return AllocatorService(
        AllocatorSettings(
            kafka=KafkaSettings(bootstrap="127.0.0.1:1"),
            capacity_workers=64,
            guarantee_jobs=("ads",),
            opportunistic_jobs=("batch",),
        )
    )


def request(job, wanted, at_ms, rid, max_workers=0):
    return encode(
        pb.ScaleRequest(
            request_id=rid,
            job=job,
            wanted_workers=wanted,
            max_workers=max_workers,
            created_at_ms=at_ms,
        )
    )


def test_an_uncapped_max_workers_is_clamped_to_the_pool_before_any_decision():
    """max_workers = 10^7 made each decision raise MemoryError (10^6: 28 s, 2.7 GB),
    again after every restart: the request was persisted."""
    svc = service()
    now_s = time.time()
    svc.take(request("batch", 10_000_000, int(now_s * 1000), "r1", 10_000_000), now_s)
    kept = svc.book.requests["batch"]
    assert (kept.max_workers, kept.wanted_workers) == (64, 64)


def test_a_request_from_the_future_is_refused_and_later_ones_are_not_stale():
    svc = service()
    now_s = time.time()
    month_ms = 30 * 86_400_000
    assert svc.take(request("ads", 2, int(now_s * 1000) + month_ms, "r0"), now_s) is None
    assert "in the future" in svc.refusals[-1].reason
    accepted = svc.take(request("ads", 40, int(now_s * 1000) + 1_000, "r1"), now_s)
    assert accepted is not None and accepted.wanted_workers == 40
