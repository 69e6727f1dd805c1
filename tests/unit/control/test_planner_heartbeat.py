"""The planner agent: a heartbeat every interval (the plan, changed or not), and
undecodable samples counted by kind (no Faust)."""

import logging

from streamtrain.control.planner_agent import PlannerAgent
from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.scale.planner import Planner
from streamtrain.scale.planner_settings import PlannerSettings
from streamtrain.wire import encode

T0 = 1_700_000_000.0


def agent(interval_s=15.0):
    settings = PlannerSettings(job="demo", group="trainer", policy="hpa", step_s=1)
    return PlannerAgent(Planner(settings), heartbeat_interval_s=interval_s)


def test_a_heartbeat_is_due_every_interval():
    a = agent(15.0)
    sent = [t for t in range(0, 61, 5) if a.heartbeat(T0 + t) is not None]
    assert sent == [0, 15, 30, 45, 60]
    beat = a.planner.heartbeat(T0)
    assert beat.job == "demo"


def test_undecodable_samples_are_counted_by_kind_and_logged_once(caplog):
    a = agent()
    newer = pb.ThroughputSample(job="demo", worker_id="w0", observed_at_ms=1)
    good = encode(newer)
    caplog.set_level(logging.DEBUG, logger="streamtrain")
    for value in (None, None, b"\xff\xff", b"\xff\xff", b"\xff\xff", good):
        a.take(value)
    assert dict(a.undecodable.by_kind) == {"no_value": 2, "unparsable": 3}
    assert a.bad_samples == 5 and len(a.new_samples) == 1
    assert sum(r.levelno >= logging.WARNING for r in caplog.records) == 2
    assert a.counts()["undecodable_samples"] == {"no_value": 2, "unparsable": 3}
