"""The control app (`streamtrain lag run`) under faults: a broker that is really gone
for longer than every timeout of the app and several instances of the app.

Real pieces: `lag run` processes (Faust), the embedded broker (durable, killed with
SIGKILL and restarted on the same port, for the outage).
"""

import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition

from streamtrain.broker import EmbeddedBroker, free_port
from streamtrain.config import EmbeddedBrokerSettings
from streamtrain.kafka import create_topic
from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.wire import encode
from tests.integration.http_kafka import get_json, read_topic
from tests.integration.lag_process import FAST_SESSION_S, start_lag_app, stop_process
from tests.integration.waiting import wait_for_slow as wait_for

# Longer than every timeout the app has on the broker: its producer's request timeout
# (the tick, 1 s here) and its group session (6 s here, 10 s by default).
OUTAGE_S = 20.0
ALERTS_TOPIC = "streamtrain.lag.alerts"


def _commit(settings, group, topic, partitions):
    committer = Consumer(settings.confluent_config(**{"group.id": group}))
    committer.commit(
        offsets=[TopicPartition(topic, p, 0) for p in range(partitions)], asynchronous=False
    )
    committer.close()


def test_an_alert_raised_while_the_broker_is_gone_is_delivered_after(tmp_path):
    """The app counted a send done once Faust *enqueued* it; with the
    broker process gone (not paused: SIGSTOP keeps TCP open and hid this) aiokafka fails
    the batch after its request timeout and the alert was lost. A send leaves the
    outbox only once its delivery future is confirmed: the CRITICAL alert the app
    raises during an outage longer than its timeouts reaches the alerts topic after the
    broker is back.

    Before the fix (``publish`` not awaiting the delivery future, the rest as now) this
    failed with: "timed out after 60 s waiting for the outage's alert: the CRITICAL
    alert raised while the broker was gone never reached 'streamtrain.lag.alerts'"; the
    app's log showed aiokafka failing it (``_on_published error for message topic
    streamtrain.lag.alerts error NodeNotReadyError``). (The first before-fix run, before
    the librdkafka abort was fixed, failed earlier: the app died during the outage.)"""
    with EmbeddedBroker(EmbeddedBrokerSettings(durable=True)) as broker:
        settings = broker.kafka_settings()
        create_topic(settings, "events", 1)
        _commit(settings, "trainer", "events", 1)
        port = free_port()
        process, log = start_lag_app(
            broker.bootstrap,
            "trainer",
            port,
            tmp_path / "app.log",
            session_timeout_s=FAST_SESSION_S,
        )
        try:
            wait_for(lambda: get_json(port, "/health")[0] == 200, 120, "the app's first tick")
            before = {
                pb.Alert.FromString(v).alert_id for v in read_topic(settings, ALERTS_TOPIC, 3.0)
            }
            broker.kill()
            gone_at = time.monotonic()
            wait_for(lambda: get_json(port, "/health")[0] == 503, 30, "the app to notice")
            time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - gone_at)))
            assert process.poll() is None
            broker.restart()
            wait_for(lambda: get_json(port, "/health")[0] == 200, 120, "the app to recover")

            def raised_during_the_outage():
                alerts = [pb.Alert.FromString(v) for v in read_topic(settings, ALERTS_TOPIC, 3.0)]
                return [
                    a
                    for a in alerts
                    if a.alert_id not in before
                    and a.kind == pb.Alert.CONTROL_APP
                    and a.severity == pb.Alert.CRITICAL
                    and not a.resolved
                ]

            def lost():
                return (
                    "the CRITICAL alert raised while the broker was gone never reached "
                    f"{ALERTS_TOPIC!r} (a send counted done once enqueued, then failed by "
                    "the producer, is lost)"
                )

            assert wait_for(raised_during_the_outage, 60, "the outage's alert", lost)
            assert process.poll() is None
        finally:
            assert stop_process(process, log) == 0


def _planner(port):
    return get_json(port, "/planner")[1] or {}


def test_with_two_app_instances_the_leader_plans_with_every_sample(broker, tmp_path):
    """Every instance took the samples of its partitions but only the
    leader drained them, so the follower's list grew without bound and the leader
    missed samples. A follower forwards them to the leader: the leader accepts every
    sample of a 4-partition samples topic and nothing waits at the follower.

    Before the fix (every instance taking its partitions' samples itself, the ``/planner``
    counts as now) this failed with: "timed out after 90 s waiting for the leader to
    accept every sample: the leader accepted 20 of 40 samples; 20 wait at the follower,
    which forwarded 0"."""
    settings = broker.kafka_settings()
    suffix = uuid.uuid4().hex[:8]
    samples_topic, job, group = f"samples-{suffix}", f"job-{suffix}", f"trainer-{suffix}"
    create_topic(settings, samples_topic, 4)
    create_topic(settings, f"events-{suffix}", 1)
    _commit(settings, group, f"events-{suffix}", 1)
    shared = [
        *("--app-id", f"control-{suffix}", "--plan-job", job),
        *("--samples-topic", samples_topic, "--commands-topic", f"commands-{suffix}"),
        *("--reports-topic", f"reports-{suffix}", "--alerts-topic", f"alerts-{suffix}"),
    ]
    ports = [free_port(), free_port()]
    apps = [
        start_lag_app(
            broker.bootstrap,
            group,
            port,
            tmp_path / f"app-{i}.log",
            *shared,
            session_timeout_s=FAST_SESSION_S,
        )
        for i, port in enumerate(ports)
    ]
    try:

        def one_leader():
            bodies = [_planner(port) for port in ports]
            leaders = [b for b in bodies if b.get("leader")]
            followers = [b for b in bodies if b and not b.get("leader")]
            if len(leaders) == 1 and len(followers) == 1 and "job" in leaders[0]:
                return ports[bodies.index(leaders[0])]
            return None

        leader_port = wait_for(one_leader, 180, "two instances, one of them the leader")
        follower_port = next(p for p in ports if p != leader_port)
        producer = Producer(settings.confluent_config())
        now_ms = int(time.time() * 1000)
        count = 40
        for i in range(count):
            sample = pb.ThroughputSample(
                job=job,
                worker_id=f"w{i % 4}",
                workers=4,
                records_per_s_trained=100.0,
                records_per_s_consumed=100.0,
                window_s=1.0,
                observed_at_ms=now_ms + i,
            )
            producer.produce(samples_topic, value=encode(sample), partition=i % 4)
        assert producer.flush(10) == 0

        def missed():
            leader, follower = _planner(leader_port), _planner(follower_port)
            return (
                f"the leader accepted {leader.get('samples', {}).get('accepted')} of {count} "
                f"samples; {follower.get('pending_samples')} wait at the follower, which "
                f"forwarded {follower.get('forwarded_samples')}"
            )

        wait_for(
            lambda: _planner(leader_port).get("samples", {}).get("accepted", 0) >= count,
            90,
            "the leader to accept every sample",
            missed,
        )
        leader, follower = _planner(leader_port), _planner(follower_port)
        assert leader["samples"]["accepted"] == count
        assert follower["pending_samples"] == 0
        assert follower["forwarded_samples"] > 0  # it held some of the partitions
    finally:
        codes = [stop_process(process, log) for process, log in apps]
    assert codes == [0, 0]
