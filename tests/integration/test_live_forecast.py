"""`streamtrain lag run --plan-job J --forecaster fedformer`: the live planner forecasts
with the transformer, refits it in a worker process while the lag tick keeps ticking,
and a restart reloads the fitted model instead of refitting it."""

import json
import time
import uuid

import numpy as np
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from streamtrain.broker import free_port
from streamtrain.forecast.trace import synth_trace
from streamtrain.kafka import create_topic
from streamtrain.proto import control_plane_pb2 as pb
from tests.integration.http_kafka import get_json, read_topic
from tests.integration.lag_process import start_lag_app, stop_process

STEP_S = 300  # 5-minute arrival steps
SCALE = 120.0  # the planner's clock runs 120x the wall clock: a model hour is 30 wall s


def _wait_for(predicate, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    pytest.fail(f"timed out after {timeout_s} s waiting for {what}")


def _forecast(port):
    return (get_json(port, "/planner")[1] or {}).get("forecast") or {}


def _seed(path):
    """Eight days of a KALE-shaped trace at 5-minute steps, ending now."""
    rates = synth_trace(8, seed=3, step_s=STEP_S).records_per_s / 1000
    path.write_text(
        json.dumps(
            {
                "step_s": STEP_S,
                "end_at_ms": int(time.time() * 1000),
                "records_per_s": [round(float(v), 3) for v in rates],
            }
        )
    )


def test_the_planner_forecasts_with_the_transformer_refits_and_reloads(broker, tmp_path):
    settings = broker.kafka_settings()
    topic, group, job = (f"{name}-{uuid.uuid4().hex[:8]}" for name in ("events", "g", "job"))
    create_topic(settings, topic, 2)
    producer = Producer(settings.confluent_config())
    for i in range(20):
        producer.produce(topic, value=b"r", partition=i % 2)
    assert producer.flush(10) == 0
    committer = Consumer(settings.confluent_config(**{"group.id": group}))
    committer.commit(offsets=[TopicPartition(topic, p, 5) for p in range(2)], asynchronous=False)
    committer.close()
    seed = tmp_path / "seed.json"
    _seed(seed)
    data_dir = tmp_path / "state"
    reports_topic = f"reports-{job}"
    planner = [
        "--plan-job",
        job,
        "--forecaster",
        "fedformer",
        # the fit, refit and reload mechanics are tested, not the forecast's quality: a
        # short training keeps each fit a few seconds
        "--forecaster-option",
        "train_steps=100",
        "--plan-step-s",
        str(STEP_S),
        "--plan-history",
        str(seed),
        "--plan-time-scale",
        str(SCALE),
        "--forecaster-fit-timeout",
        "10h",  # model time: 5 wall minutes (a late fit is an alert, not wanted here)
        "--prior-rate",
        "50",
        "--initial-workers",
        "2",
        "--data-dir",
        str(data_dir),
        "--reports-topic",
        reports_topic,
        "--app-id",
        f"app-{job}",
        "--samples-topic",
        f"samples-{job}",
        "--commands-topic",
        f"commands-{job}",
    ]
    port = free_port()
    process, log = start_lag_app(
        broker.bootstrap, group, port, tmp_path / "first.log", *planner, "--refit-every", "1h"
    )
    try:
        first = _wait_for(
            lambda: (f := _forecast(port)).get("live") == "fedformer" and f, 240, "the first fit"
        )
        assert first["model"] == "fedformer" and first["refits"] == 1
        assert not first["loaded_from_disk"]
        assert len(first["records_per_s"]) > 0 and all(v >= 0 for v in first["records_per_s"])
        # a model hour later (30 wall s) the schedule refits it, in the worker process
        refit = _wait_for(
            lambda: (f := _forecast(port)).get("refits", 0) >= 2 and f, 240, "the scheduled refit"
        )
        assert refit["live"] == "fedformer" and refit["fitted_at_ms"] > first["fitted_at_ms"]
        assert refit["low_records_per_s"] and refit["high_records_per_s"]
        low, high = np.array(refit["low_records_per_s"]), np.array(refit["high_records_per_s"])
        assert np.all(low <= high) and np.any(low < high)
    finally:
        assert stop_process(process, log) == 0
    # The lag tick (every second) kept ticking while the transformer was fitted twice.
    stamps = sorted(
        pb.LagReport.FromString(v).observed_at_ms for v in read_topic(settings, reports_topic)
    )
    gaps_s = np.diff(stamps) / 1000
    assert len(stamps) > 20 and gaps_s.max() < 5.0, f"the longest gap between ticks: {gaps_s.max()}"
    alerts = [pb.Alert.FromString(v) for v in read_topic(settings, "streamtrain.lag.alerts")]
    assert not [a for a in alerts if a.kind == pb.Alert.FORECASTER and job in a.alert_id]

    # A restart reloads the saved model: live at once, without a new fit.
    process, log = start_lag_app(
        broker.bootstrap, group, port, tmp_path / "second.log", *planner, "--refit-every", "1d"
    )
    try:
        again = _wait_for(
            lambda: (f := _forecast(port)).get("live") == "fedformer" and f, 120, "the reload"
        )
        assert again["loaded_from_disk"] and again["refits"] == 0 and not again["fitting"]
        assert again["fitted_at_ms"] == refit["fitted_at_ms"]
    finally:
        assert stop_process(process, log) == 0
