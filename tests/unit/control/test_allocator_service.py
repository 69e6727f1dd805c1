"""The allocator's service without Faust: wire requests in, commands and a decision
with reasons out; refusals logged and published; the tables' values round-trip."""

import logging

from streamtrain.config import KafkaSettings
from streamtrain.control.allocator_service import (
    AllocatorService,
    AllocatorSettings,
    request_from_json,
    request_from_proto,
    request_to_json,
)
from streamtrain.control.cluster_status import decision_json, format_decision
from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.wire import encode


def _service(capacity=5):
    return AllocatorService(
        AllocatorSettings(
            kafka=KafkaSettings(bootstrap="127.0.0.1:9092"),
            capacity_workers=capacity,
            guarantee_jobs=("ads",),
            opportunistic_jobs=("batch",),
            serving_jobs=("search",),
        )
    )


def _request(job, wanted, at_ms, cls=pb.ScaleRequest.JOB_CLASS_UNSPECIFIED, **extra):
    return pb.ScaleRequest(
        request_id=f"{job}-{at_ms}",
        job=job,
        job_class=cls,
        current_workers=1,
        wanted_workers=wanted,
        min_workers=1,
        max_workers=8,
        created_at_ms=at_ms,
        reason=pb.ScaleCommand.PROACTIVE,
        **extra,
    )


def test_commands_respect_the_capacity_and_the_guarantee_job_wins():
    service = _service(capacity=5)
    assert service.take(encode(_request("ads", 4, 1_000)), 1.0) is not None
    assert service.take(encode(_request("batch", 4, 1_000)), 1.0) is not None
    decided = service.decide(2.0)
    targets = {c.job: c.target_workers for c in decided.commands}
    assert targets == {"ads": 4}  # batch keeps the 1 it has: 4 + 1 = 5
    granted = {g.job: g.granted_workers for g in decided.decision.grants}
    assert granted == {"ads": 4, "batch": 1}
    assert sum(granted.values()) <= 5
    ads = next(g for g in decided.decision.grants if g.job == "ads")
    assert ads.command_id == decided.commands[0].command_id
    assert "guarantee: wanted 4, granted 4" in ads.reason
    assert decided.commands[0].explanation.startswith("cluster allocator: guarantee")
    assert decided.grants and decided.grants[0][0] == "ads"
    assert not service.due(3.0)


def test_bad_input_is_refused_with_a_logged_reason(caplog):
    service = _service()
    caplog.set_level(logging.WARNING)
    assert service.take(encode(_request("nobody", 2, 1_000)), 1.0) is None
    assert service.take(encode(_request("ads", -2, 1_000)), 1.0) is None
    assert service.take(b"\xff\x00 not a request", 1.0) is None
    assert service.take(encode(_request("ads", 3, 5_000)), 5.0) is not None
    service.decide(6.0)
    assert service.take(encode(_request("ads", 6, 4_000)), 7.0) is None  # before the decision
    text = caplog.text
    assert "unknown job 'nobody'" in text
    assert "negative worker count -2" in text
    assert "undecodable scale request" in text
    assert "stale: created at 4.000" in text
    assert (service.refused, service.undecodable, service.accepted) == (3, 1, 1)
    decided = service.decide(8.0)  # refusals go out with the next decision
    reasons = [r.reason for r in decided.decision.refusals]
    assert len(reasons) == 1 and reasons[0].startswith("stale")


def test_serving_min_scale_comes_before_opportunistic_jobs():
    service = _service(capacity=6)
    service.take(encode(_request("search", 4, 1_000, cls=pb.ScaleRequest.SERVING)), 1.0)
    service.take(encode(_request("batch", 6, 1_000, remaining_work=1e6)), 1.0)
    decided = service.decide(2.0)
    granted = {g.job: g.granted_workers for g in decided.decision.grants}
    assert granted["search"] == 4 and granted["batch"] == 2


def test_the_decision_json_and_text_name_every_job_and_refusal():
    service = _service()
    service.take(encode(_request("ads", 2, 1_000)), 1.0)
    service.take(encode(_request("ghost", 2, 1_000)), 1.0)
    decision = service.decide(2.0).decision
    body = decision_json(decision)
    assert body["capacity_workers"] == 5 and body["granted_workers"] == 2
    assert body["jobs"][0]["class"] == "guarantee"
    assert body["refusals"][0]["job"] == "ghost"
    text = format_decision(decision)
    assert "ads" in text and "refused ghost-1000 for 'ghost'" in text
    assert service.status_json()["decision"]["decision_id"] == decision.decision_id


def test_a_request_survives_the_table_round_trip():
    request = request_from_proto(
        _request("batch", 3, 2_500, remaining_work=10.0, step_time_ms=12.5, model_type="mmoe")
    )
    again = request_from_json(request_to_json(request))
    assert again == request
    assert again.created_at_s == 2.5 and again.remaining_work == 10.0
