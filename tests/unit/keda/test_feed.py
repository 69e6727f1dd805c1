"""The scaler's feed folds what it reads into the book; one message it cannot use (an
enum value this build does not know, a broken frame, a null value) is one undecodable
message, counted, never an exception that stops `keda serve` at every start."""

import time

from streamtrain import wire
from streamtrain.config import KafkaSettings
from streamtrain.keda.feed import FeedSettings, PlanFeed
from streamtrain.keda.plans import PlanBook
from streamtrain.proto import control_plane_pb2 as cp

TOPIC = "streamtrain.scale.commands"


class Message:
    """What librdkafka's consumer hands the feed, for one value."""

    def __init__(self, value, offset):
        self._value, self._offset = value, offset

    def error(self):
        return None

    def topic(self):
        return TOPIC

    def partition(self):
        return 0

    def offset(self):
        return self._offset

    def value(self):
        return self._value


def test_an_unknown_reason_is_one_undecodable_command_and_serving_goes_on():
    feed = PlanFeed(KafkaSettings(bootstrap="127.0.0.1:1"), PlanBook(), FeedSettings())
    now_ms = int(time.time() * 1000)
    newer = cp.ScaleCommand(command_id="c1", job="ctr", target_workers=3, created_at_ms=now_ms)
    # a reason a newer planner has and this build does not
    newer.reason = 7  # type: ignore[assignment]
    good = cp.ScaleCommand(
        command_id="c2",
        job="ctr",
        target_workers=5,
        reason=cp.ScaleCommand.PROACTIVE,
        created_at_ms=now_ms,
    )
    values = [wire.encode(newer), b"\xff\xff", None, wire.encode(good)]
    changed = feed.take([Message(value, offset) for offset, value in enumerate(values)])
    assert feed.undecodable[TOPIC] == 3
    assert changed == {"ctr"}
    plan = feed.book.planned("ctr")
    assert (plan.planned_workers, plan.command_id) == (5, "c2")
