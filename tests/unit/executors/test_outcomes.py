"""CommandConsumer publishes a ScaleOutcome per applied command (no broker: a fake
producer stands in for librdkafka's)."""

from streamtrain.config import KafkaSettings
from streamtrain.executors import CommandApplier
from streamtrain.executors.consumer import CommandConsumer, ConsumerSettings
from streamtrain.proto import control_plane_pb2 as cp
from streamtrain.wire import decode, encode


class Pool:
    name = "fake"
    last_prep_s = 2.5

    def __init__(self):
        self.workers = 2

    def current_workers(self):
        return self.workers

    def scale_to(self, target, command):
        self.workers = target
        return target


class Producer:
    def __init__(self):
        self.sent = []

    def produce(self, topic, key, value):
        self.sent.append((topic, key, value))

    def poll(self, timeout):
        return 0


def test_an_applied_command_publishes_its_outcome_with_the_preparation():
    consumer = CommandConsumer(
        KafkaSettings("localhost:9092"),
        CommandApplier(Pool()),
        ConsumerSettings(
            job="j", alerts_topic=None, outcomes_topic="j.outcomes", assignment="shards"
        ),
        clock=lambda: 1000.0,
    )
    consumer._producer = Producer()
    command = cp.ScaleCommand(command_id="c1", job="j", target_workers=4, created_at_ms=999_000)
    consumer.handle(encode(command))
    consumer.handle(encode(command))  # a duplicate: no second outcome
    down = cp.ScaleCommand(command_id="c2", job="j", target_workers=1, created_at_ms=999_000)
    consumer.handle(encode(down))
    sent = consumer._producer.sent
    assert [(t, k) for t, k, _ in sent] == [("j.outcomes", b"j"), ("j.outcomes", b"j")]
    up, shrink = (decode(cp.ScaleOutcome, v) for _, _, v in sent)
    assert (up.command_id, up.outcome, up.assignment) == ("c1", "applied", "shards")
    assert (up.workers_before, up.workers_after, up.prep_s) == (2, 4, 2.5)
    assert (shrink.workers_before, shrink.workers_after, shrink.prep_s) == (4, 1, 0.0)
