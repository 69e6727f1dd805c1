"""KEDA with plain workers on the embedded broker, and a dead control app's stale plan.

Real processes: two `streamtrain worker`s without any pool-size flag (on the embedded
broker their samples say workers=0: Tansu describes their group with no members), the
control app with a planner (`lag run --plan-job J`), and `keda serve --job J`. A gRPC
client built from KEDA's proto gets the plan within 60 s; the control app is killed
with kill -9 and, once `--max-plan-age-s` has passed without a heartbeat, the scaler
answers UNAVAILABLE (so KEDA's fallback applies), says so in its log and reports
`streamtrain_keda_ready` 0; the control app restarted, it plans and is served again."""

import os
import signal
import subprocess
import time
import urllib.request

import grpc
import pytest
from confluent_kafka import Producer

from streamtrain.broker import free_port
from streamtrain.kafka import create_topic
from streamtrain.keda.contract import metric_name
from streamtrain.proto import control_plane_pb2 as cp
from streamtrain.proto import externalscaler_pb2 as es
from streamtrain.proto.externalscaler_pb2_grpc import ExternalScalerStub
from streamtrain.wire import decode
from tests.integration.cli_process import SCRIPT
from tests.integration.http_kafka import read_topic
from tests.integration.keda_process import ScalerProcess
from tests.integration.lag_process import FAST_SESSION_S, start_lag_app, stop_process
from tests.integration.waiting import wait_for

MAX_PLAN_AGE_S = 10.0


@pytest.fixture
def names():
    suffix = time.monotonic_ns()
    keys = ("events", "samples", "commands", "heartbeats", "alerts", "reports", "app", "job")
    return {k: f"{k}-{suffix}" for k in keys}


def ref(job):
    return es.ScaledObjectRef(name="workers", namespace="default", scalerMetadata={"job": job})


def get_metrics(stub, job):
    """(gRPC code, value or details) of one GetMetrics call."""
    request = es.GetMetricsRequest(scaledObjectRef=ref(job), metricName=metric_name(job))
    try:
        (value,) = stub.GetMetrics(request, timeout=5).metricValues
    except grpc.RpcError as exc:
        return exc.code(), exc.details()
    return grpc.StatusCode.OK, value.metricValue


def scrape(scaler):
    with urllib.request.urlopen(scaler.metrics_url, timeout=5) as response:  # noqa: S310
        return response.read().decode()


def start_worker(broker, names, log_path):
    log = open(log_path, "w")  # noqa: SIM115 - closed by stop_process
    process = subprocess.Popen(
        [
            SCRIPT,
            "worker",
            *("--bootstrap", broker.bootstrap, "--topic", names["events"]),
            *("--group", names["job"], "--throughput-topic", names["samples"]),
            *("--sample-interval-s", "1", "--connect-timeout-s", "5"),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return process, log


def control_app(broker, names, tmp_path, log_name):
    return start_lag_app(
        broker.bootstrap,
        names["job"],
        free_port(),
        tmp_path / log_name,
        *("--topic", names["events"], "--app-id", names["app"]),
        *("--reports-topic", names["reports"], "--alerts-topic", names["alerts"]),
        *("--plan-job", names["job"], "--samples-topic", names["samples"]),
        *("--commands-topic", names["commands"], "--heartbeats-topic", names["heartbeats"]),
        *("--heartbeat-interval-s", "1", "--plan-step-s", "1", "--sample-bucket-s", "1"),
        # a fixed allocation of 3: the planner commands 2 -> 3 once it knows there are 2
        *("--policy", "adequate", "--policy-setting", "workers=3", "--max-workers", "4"),
        *("--data-dir", str(tmp_path / "lag-state")),
        session_timeout_s=FAST_SESSION_S,
    )


def worker_ids(settings, topic):
    return {decode(cp.ThroughputSample, v).worker_id for v in read_topic(settings, topic, 3.0)}


def test_plain_workers_plan_and_a_dead_control_apps_plan_goes_stale(broker, names, tmp_path):
    settings = broker.kafka_settings()
    for key in ("events", "samples", "commands", "heartbeats", "alerts", "reports"):
        create_topic(settings, names[key], 1, exist_ok=True)
    producer = Producer(settings.confluent_config())
    for index in range(200):
        producer.produce(names["events"], value=b"%d" % index)
    assert producer.flush(10) == 0
    job = names["job"]
    workers, app, log, scaler, channel = [], None, None, None, None
    try:
        workers = [start_worker(broker, names, tmp_path / f"worker{i}.log") for i in range(2)]
        # both workers run (their samples are on the topic) before the clock starts
        wait_for(
            lambda: len(worker_ids(settings, names["samples"])) == 2,
            180,
            "both workers' samples",
            interval_s=1.0,
        )
        app, log = control_app(broker, names, tmp_path, "app.log")
        scaler = ScalerProcess(
            broker.bootstrap,
            *("--job", job, "--commands-topic", names["commands"]),
            *("--samples-topic", names["samples"], "--heartbeats-topic", names["heartbeats"]),
            *("--max-plan-age-s", str(MAX_PLAN_AGE_S)),
        )
        channel = grpc.insecure_channel(scaler.address)
        stub = ExternalScalerStub(channel)

        # 1. Within 60 s KEDA gets the plan: the planner counted the 2 plain workers and
        # commanded 3.
        wait_for(
            lambda: get_metrics(stub, job) == (grpc.StatusCode.OK, 3),
            60,
            "the planned 3 workers from GetMetrics",
            interval_s=0.5,
        )
        metrics = scrape(scaler)
        assert "streamtrain_keda_ready 1.0" in metrics
        assert f'streamtrain_keda_reported_workers{{streamtrain_job="{job}"}} 2.0' in metrics
        commands = [decode(cp.ScaleCommand, v) for v in read_topic(settings, names["commands"], 3)]
        assert [(c.current_workers, c.target_workers) for c in commands] == [(2, 3)]

        # 2. The control app dies: its plan is served until --max-plan-age-s has passed
        # without a heartbeat, then refused.
        os.kill(app.pid, signal.SIGKILL)
        app.wait(timeout=10)
        killed_at = time.monotonic()
        log.close()
        wait_for(
            lambda: get_metrics(stub, job)[0] == grpc.StatusCode.UNAVAILABLE,
            MAX_PLAN_AGE_S + 30,
            "UNAVAILABLE for a stale plan",
            interval_s=0.5,
        )
        assert time.monotonic() - killed_at >= MAX_PLAN_AGE_S - 2  # not before its age
        code, details = get_metrics(stub, job)
        assert code == grpc.StatusCode.UNAVAILABLE and "is stale" in details
        wait_for(lambda: "streamtrain_keda_ready 0.0" in scrape(scaler), 10, "ready 0")
        assert f'streamtrain_keda_plan_stale{{streamtrain_job="{job}"}} 1.0' in scrape(scaler)
        wait_for(lambda: "KEDA gets UNAVAILABLE for job" in scaler.log(), 10, "the log line")

        # 3. Restarted, the control app plans (and is heard) again.
        app, log = control_app(broker, names, tmp_path, "app-restarted.log")
        wait_for(
            lambda: get_metrics(stub, job)[0] == grpc.StatusCode.OK,
            90,
            "the plan served again",
            interval_s=0.5,
        )
        wait_for(lambda: "streamtrain_keda_ready 1.0" in scrape(scaler), 10, "ready 1 again")
        wait_for(lambda: "is heard again" in scaler.log(), 10, "the recovery in the log")
        assert scaler.process.poll() is None
    finally:
        if channel is not None:
            channel.close()
        if scaler is not None:
            scaler.stop()
        if app is not None:
            stop_process(app, log)
        for process, worker_log in workers:
            stop_process(process, worker_log)
