"""`streamtrain lag run` as a real process: HTTP API, reports, broker outage, restart."""

import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from streamtrain.broker import EmbeddedBroker, free_port
from streamtrain.kafka import create_topic
from streamtrain.proto import control_plane_pb2 as pb
from tests.integration.http_kafka import get_json, read_topic
from tests.integration.lag_process import FAST_SESSION_S, start_lag_app, stop_process
from tests.integration.waiting import wait_for_slow as wait_for

TOPIC, GROUP = "events", "trainer"


def _wait_for_json(port, path, ready, timeout_s, what):
    """The JSON body of ``path`` once ``ready(body)`` holds (one GET per attempt)."""

    def attempt():
        body = get_json(port, path)[1] or {}
        return body if ready(body) else None

    return wait_for(attempt, timeout_s, what)


@pytest.fixture
def own_broker() -> Iterator[EmbeddedBroker]:
    """A broker of this test's own: it is paused with SIGSTOP, which others must not see."""
    with EmbeddedBroker() as embedded:
        yield embedded


# The planner rides along (1-s arrival steps) so that its history is restored too.
PLANNER = ("--plan-job", "lag-app-job", "--plan-step-s", "1")


def test_app_serves_publishes_survives_an_outage_and_restores_history(own_broker, tmp_path):
    settings = own_broker.kafka_settings()
    create_topic(settings, TOPIC, 4)
    producer = Producer(settings.confluent_config(**{"batch.num.messages": 1}))
    for i in range(40):
        producer.produce(TOPIC, value=b"r", partition=i % 4)
    assert producer.flush(10) == 0
    committer = Consumer(settings.confluent_config(**{"group.id": GROUP}))
    committer.commit(offsets=[TopicPartition(TOPIC, p, p) for p in range(4)], asynchronous=False)
    committer.close()
    port = free_port()
    process, log = start_lag_app(
        own_broker.bootstrap,
        GROUP,
        port,
        tmp_path / f"app-{time.monotonic_ns()}.log",
        *PLANNER,
        session_timeout_s=FAST_SESSION_S,
    )
    try:
        body = wait_for(
            lambda: (get_json(port, f"/groups/{GROUP}/lag")[1] or {}).get("partitions"),
            90,
            "the app's first report",
        )
        assert [(p["partition"], p["lag_records"]) for p in body] == [(p, 10 - p) for p in range(4)]
        status, metrics = None, ""
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            status, metrics = response.status, response.read().decode()
        assert status == 200
        assert f'streamtrain_lag_records{{group="{GROUP}",partition="3",topic="{TOPIC}"}} 7.0' in (
            metrics
        )
        reports = [
            pb.LagReport.FromString(v) for v in read_topic(settings, "streamtrain.lag.reports")
        ]
        assert reports and all(r.group == GROUP for r in reports)
        assert reports[-1].total_lag_records == sum(10 - p for p in range(4))

        # The broker goes away (paused) for some seconds: the app says so and carries on.
        os.kill(own_broker.pid, signal.SIGSTOP)
        try:
            wait_for(lambda: get_json(port, "/health")[0] == 503, 30, "the app to notice")
            assert process.poll() is None
        finally:
            os.kill(own_broker.pid, signal.SIGCONT)
        wait_for(lambda: get_json(port, "/health")[0] == 200, 60, "the app to recover")
        alerts = [pb.Alert.FromString(v) for v in read_topic(settings, "streamtrain.lag.alerts")]
        control = [a for a in alerts if a.kind == pb.Alert.CONTROL_APP]
        assert any(not a.resolved and a.severity == pb.Alert.CRITICAL for a in control)
        wait_for(
            lambda: any(
                a.kind == pb.Alert.CONTROL_APP and a.resolved
                for a in map(pb.Alert.FromString, read_topic(settings, "streamtrain.lag.alerts"))
            ),
            30,
            "the resolved alert",
        )
        history_before = len(get_json(port, f"/groups/{GROUP}/lag")[1]["history"])
        assert history_before >= 2
        arrival_steps = _wait_for_json(
            port,
            "/planner",
            lambda body: body.get("history_steps", 0) >= 3,
            30,
            "the planner's arrival steps",
        )["history_steps"]
    finally:
        code = stop_process(process, log)
    assert code == 0

    # A restarted app recovers its history tables from their changelogs.
    process, log = start_lag_app(
        own_broker.bootstrap,
        GROUP,
        port,
        tmp_path / f"app-{time.monotonic_ns()}.log",
        *PLANNER,
        session_timeout_s=FAST_SESSION_S,
    )
    try:
        health = _wait_for_json(
            port, "/health", lambda body: body.get("restored"), 90, "the restarted app"
        )
        assert health["restored"]
        body = _wait_for_json(
            port, f"/groups/{GROUP}/lag", lambda body: "history" in body, 30, "a report"
        )
        assert len(body["history"]) >= history_before
        # CPS needs two HWM snapshots: restored history gives it on the first tick.
        assert all(p["records_per_s"] is not None for p in body["partitions"])
        # The planner starts from the arrival steps the first run persisted.
        planner = _wait_for_json(
            port,
            "/planner",
            lambda body: body.get("restored_steps"),
            30,
            "the planner's restored arrival steps",
        )
        assert planner["restored_steps"] >= arrival_steps - 1  # the last may be unsent
        assert planner["history_steps"] >= planner["restored_steps"]
    finally:
        assert stop_process(process, log) == 0
