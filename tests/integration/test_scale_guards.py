"""Applying commands safely: a bad command never crash-loops ``scale apply``, worker
counts are bounded and the local pool never spawns in a loop, and a webhook's URL (which
may hold a token) stays out of alert text.

Real pieces: the embedded broker, a real HTTP endpoint on 127.0.0.1, the real
CommandConsumer with its commits, real worker subprocesses.
"""

import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from streamtrain.errors import ExecutorError
from streamtrain.executors import (
    ApplierSettings,
    CommandApplier,
    LocalProcessPool,
    Outcome,
    WebhookExecutor,
)
from streamtrain.executors.consumer import CommandConsumer, ConsumerSettings, Handled
from streamtrain.kafka import create_topic
from streamtrain.proto import control_plane_pb2 as cp
from streamtrain.wire import decode, encode
from tests.integration.http_kafka import read_topic

JOB = "guarded"
TOKEN = "s3cr3t-t0ken"


class Endpoint:
    """An HTTP endpoint that records every POST and answers 200, or ``status`` once set."""

    def __init__(self):
        self.posts: list[dict[str, str]] = []
        self.status = 200
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                endpoint.posts.append(dict(self.headers))
                self.send_response(endpoint.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks/{TOKEN}?key={TOKEN}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


@pytest.fixture
def endpoint():
    made = Endpoint()
    yield made
    made.close()


def _command(command_id, target=3, **fields):
    return cp.ScaleCommand(
        command_id=command_id,
        job=JOB,
        target_workers=target,
        created_at_ms=fields.pop("created_at_ms", int(time.time() * 1000)),
        **fields,
    )


def _consumer_settings(topic, alerts, suffix):
    return ConsumerSettings(
        job=JOB,
        commands_topic=topic,
        alerts_topic=alerts,
        group_id=f"apply-{suffix}",
        consumer_config=(("session.timeout.ms", "6000"), ("heartbeat.interval.ms", "500")),
    )


def _consume_all(consumer, expected, timeout_s=60):
    handled: list[Handled] = []
    deadline = time.monotonic() + timeout_s
    while len(handled) < expected and time.monotonic() < deadline:
        handled += consumer.poll(0.5)
    return handled


def _committed(settings, group, topic):
    reader = Consumer(settings.confluent_config(**{"group.id": group}))
    try:
        return reader.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
    finally:
        reader.close()


def test_a_bad_command_id_ends_failed_and_committed_and_the_next_one_applies(broker, endpoint):
    """A command_id with CR/LF or outside Latin-1 made header encoding
    raise inside the webhook executor; the applier re-raised and CommandConsumer.poll
    raised before committing, so every restart re-read the same command. Each ends
    as a FAILED outcome with an alert, its offset is committed, and the good command
    after it is applied; a restarted consumer re-reads none of them."""
    settings = broker.kafka_settings()
    suffix = uuid.uuid4().hex[:8]
    topic, alerts = f"commands-{suffix}", f"alerts-{suffix}"
    create_topic(settings, topic, 1)
    create_topic(settings, alerts, 1)
    producer = Producer(settings.confluent_config())
    bad = [_command("evil\r\nX-Injected: 1"), _command("caf\u00e9-\u20ac")]
    for command in [*bad, _command("good")]:
        producer.produce(topic, key=JOB.encode(), value=encode(command))
    assert producer.flush(10) == 0
    consumer_settings = _consumer_settings(topic, alerts, suffix)
    applier = CommandApplier(WebhookExecutor(endpoint.url()), ApplierSettings(job=JOB))
    with CommandConsumer(settings, applier, consumer_settings) as consumer:
        handled = _consume_all(consumer, 3)
    outcomes = [(h.result.command_id, h.result.outcome) for h in handled if h.result]
    assert outcomes == [
        ("evil\r\nX-Injected: 1", Outcome.FAILED),
        ("caf\u00e9-\u20ac", Outcome.FAILED),
        ("good", Outcome.APPLIED),
    ]
    assert [p["Idempotency-Key"] for p in endpoint.posts] == ["good"]
    assert _committed(settings, consumer_settings.group, topic) == 3
    messages = [decode(cp.Alert, v).message for v in read_topic(settings, alerts)]
    assert len([m for m in messages if "failed" in m]) == 2

    # A restart reads nothing again: the bad commands are behind the committed offset.
    applier = CommandApplier(WebhookExecutor(endpoint.url()), ApplierSettings(job=JOB))
    with CommandConsumer(settings, applier, consumer_settings) as consumer:
        assert [h for _ in range(6) for h in consumer.poll(0.5)] == []


def test_a_failing_webhook_keeps_its_token_out_of_the_alert(broker, endpoint):
    """The webhook URL may hold a token; an apply that fails puts the
    executor's error in an alert, which must not carry the URL's path or query."""
    settings = broker.kafka_settings()
    suffix = uuid.uuid4().hex[:8]
    topic, alerts = f"commands-{suffix}", f"alerts-{suffix}"
    create_topic(settings, topic, 1)
    create_topic(settings, alerts, 1)
    endpoint.status = 403
    producer = Producer(settings.confluent_config())
    producer.produce(topic, key=JOB.encode(), value=encode(_command("denied")))
    assert producer.flush(10) == 0
    consumer_settings = _consumer_settings(topic, alerts, suffix)
    applier = CommandApplier(WebhookExecutor(endpoint.url()), ApplierSettings(job=JOB))
    with CommandConsumer(settings, applier, consumer_settings) as consumer:
        handled = _consume_all(consumer, 1)
    assert handled[0].result is not None and handled[0].result.outcome is Outcome.FAILED
    messages = [decode(cp.Alert, v).message for v in read_topic(settings, alerts)]
    assert any("HTTP 403" in m for m in messages)
    assert not any(TOKEN in m for m in messages), messages


SLEEPER = [sys.executable, "-c", "import time; time.sleep(300)"]
CRASHER = [sys.executable, "-c", "raise SystemExit(3)"]


def test_the_pool_refuses_a_count_above_its_bound_before_starting_anything():
    """scale_to(4e9) is refused before any process starts, not spawned in a loop."""
    with LocalProcessPool(SLEEPER, max_workers=3, grace_s=2) as pool:
        with pytest.raises(ExecutorError, match=r"0\.\.3") as info:
            pool.scale_to(4_000_000_000)
        assert not info.value.retriable
        assert pool.workers() == ()
        assert pool.scale_to(3) == 3


def test_a_crash_looping_worker_is_replaced_with_backoff_not_in_a_loop():
    """With replace_dead, a worker that dies at once must not be
    restarted on every reap, forever. The second quick death in a row starts a backoff
    that doubles; an explicit scale refills the slot at once."""
    pool = LocalProcessPool(
        CRASHER,
        replace_dead=True,
        min_uptime_s=30.0,
        restart_backoff_s=3600.0,
        max_restart_backoff_s=3600.0,
    )
    with pool:
        pool.scale_to(1)
        starts = 1
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            exits = pool.reap()
            starts += sum(1 for e in exits if e.replaced_by_pid is not None)
            if exits and exits[-1].replaced_by_pid is None:
                break
            time.sleep(0.1)
        assert starts == 2  # the first death is replaced at once, the second waits
        for _ in range(20):
            assert [e for e in pool.reap() if e.replaced_by_pid is not None] == []
            time.sleep(0.05)
        assert pool.workers() == ()
        assert pool.scale_to(1) == 1  # an explicit scale does not wait for the backoff
