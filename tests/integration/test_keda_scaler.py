"""`streamtrain keda serve` against a running control app with a planner on the embedded
broker: a gRPC client built from the same proto calls all four methods and gets the
planned count back as KEDA's HPA computes it; bad metadata is INVALID_ARGUMENT; the plan
survives the control app's kill -9 (until it is stale: test_keda_embedded.py) and a
restart of the scaler (it lives in Kafka)."""

import os
import signal
import time
import urllib.request

import grpc
import pytest
from confluent_kafka import Consumer, TopicPartition

from streamtrain.broker import free_port
from streamtrain.kafka import create_topic
from streamtrain.keda.contract import hpa_desired_replicas, metric_name
from streamtrain.proto import control_plane_pb2 as cp
from streamtrain.proto import externalscaler_pb2 as es
from streamtrain.proto.externalscaler_pb2_grpc import ExternalScalerStub
from streamtrain.wire import decode
from tests.integration.http_kafka import read_topic
from tests.integration.keda_process import ScalerProcess
from tests.integration.lag_process import FAST_SESSION_S, start_lag_app, stop_process
from tests.integration.test_scale_loop import JOB, Traffic
from tests.integration.waiting import wait_for


@pytest.fixture
def names():
    suffix = time.monotonic_ns()
    return {
        k: f"{k}-{suffix}"
        for k in ("events", "group", "samples", "commands", "alerts", "reports", "app")
    }


def ref(**metadata):
    return es.ScaledObjectRef(name="workers", namespace="default", scalerMetadata=metadata)


def scaler_args(names, *extra):
    return ("--commands-topic", names["commands"], "--samples-topic", names["samples"], *extra)


def newest_command(settings, topic):
    commands = [decode(cp.ScaleCommand, v) for v in read_topic(settings, topic, 3.0)]
    return commands[-1] if commands else None


def hpa_lands_on(stub, job, current_replicas):
    """What KEDA's HPA does with this scaler: spec from GetMetricSpec, value from GetMetrics."""
    (spec,) = stub.GetMetricSpec(ref(job=job, scalerAddress="x"), timeout=10).metricSpecs
    request = es.GetMetricsRequest(scaledObjectRef=ref(job=job), metricName=spec.metricName)
    (value,) = stub.GetMetrics(request, timeout=10).metricValues
    assert value.metricName == spec.metricName == metric_name(job)
    return hpa_desired_replicas(value.metricValueFloat, spec.targetSizeFloat, current_replicas)


def invalid_argument(call, *args):
    with pytest.raises(grpc.RpcError) as info:
        result = call(*args, timeout=10)
        if hasattr(result, "__next__"):
            next(result)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, info.value
    return info.value.details()


def test_keda_gets_the_planned_count_from_the_running_planner(broker, names, tmp_path):
    settings = broker.kafka_settings()
    for key in ("events", "samples", "commands", "alerts", "reports"):
        create_topic(settings, names[key], 1, exist_ok=True)
    committer = Consumer(settings.confluent_config(**{"group.id": names["group"]}))
    committer.commit(offsets=[TopicPartition(names["events"], 0, 0)], asynchronous=False)
    committer.close()

    # The scaler first, serving only JOB: nothing is published yet, so KEDA gets
    # UNAVAILABLE, and an open push stream waits for the first plan.
    scaler = ScalerProcess(broker.bootstrap, *scaler_args(names, "--job", JOB))
    channel = grpc.insecure_channel(scaler.address)
    stub = ExternalScalerStub(channel)
    traffic = Traffic(settings, names["events"], names["samples"])
    app = log = None
    try:
        wait_for(lambda: _code(stub.IsActive, ref(job=JOB)) == grpc.StatusCode.UNAVAILABLE, 30)
        stream = stub.StreamIsActive(ref(job=JOB), timeout=180)
        traffic.start()
        app, log = start_lag_app(
            broker.bootstrap,
            names["group"],
            free_port(),
            tmp_path / "app.log",
            *("--app-id", names["app"], "--reports-topic", names["reports"]),
            *("--alerts-topic", names["alerts"], "--plan-job", JOB, "--policy", "streamtrain"),
            *("--policy-setting", "decision_interval_s=1", "--samples-topic", names["samples"]),
            *("--commands-topic", names["commands"], "--plan-step-s", "1"),
            *("--sample-bucket-s", "1", "--action-pause-s", "5", "--max-workers", "4"),
            session_timeout_s=FAST_SESSION_S,
        )
        # The workers report 1: the push stream says active (the plan went from nothing
        # to 1 worker), then the planner commands more workers for the lag.
        assert next(stream).result is True
        stream.cancel()
        deadline = time.monotonic() + 150
        command = None
        while command is None and time.monotonic() < deadline:
            assert app.poll() is None, (tmp_path / "app.log").read_text()[-3000:]
            command = newest_command(settings, names["commands"])
        assert command is not None, "no command in 150 s: " + (tmp_path / "app.log").read_text()
        target = command.target_workers
        assert 1 < target <= 4
        wait_for(lambda: hpa_lands_on(stub, JOB, 1) == target, 30, "the HPA to land on the plan")
        assert stub.IsActive(ref(job=JOB), timeout=10).result is True
        # the HPA is already at the plan: it stays there
        assert hpa_lands_on(stub, JOB, target) == target

        # Bad metadata: a clear INVALID_ARGUMENT from every method, and no crash.
        for call, arg in (
            (stub.IsActive, ref()),
            (stub.GetMetricSpec, ref(name="x")),
            (stub.GetMetrics, es.GetMetricsRequest(scaledObjectRef=ref())),
            (stub.StreamIsActive, ref()),
        ):
            assert "scalerMetadata needs 'job'" in invalid_argument(call, arg)
        details = invalid_argument(stub.GetMetricSpec, ref(job="no-such-job"))
        assert "'no-such-job' is not served by this scaler" in details
        details = invalid_argument(
            stub.GetMetrics, es.GetMetricsRequest(scaledObjectRef=ref(job=JOB), metricName="cpu")
        )
        assert "has one metric" in details
        assert scaler.process.poll() is None

        # The control app dies (kill -9): the plan is in Kafka, the scaler keeps serving it,
        # and a scaler started now reads it back.
        os.kill(app.pid, signal.SIGKILL)
        app.wait(timeout=10)
        traffic.stop.set()
        final = newest_command(settings, names["commands"]).target_workers
        assert hpa_lands_on(stub, JOB, 1) == final
        with urllib.request.urlopen(scaler.metrics_url, timeout=5) as response:  # noqa: S310
            metrics = response.read().decode()
        series = f'source="command",streamtrain_job="{JOB}"'
        assert f"streamtrain_keda_planned_workers{{{series}}} {final}.0" in metrics
        channel.close()
        assert scaler.stop() == 130, scaler.log()

        scaler = ScalerProcess(broker.bootstrap, *scaler_args(names))  # every job
        channel = grpc.insecure_channel(scaler.address)
        stub = ExternalScalerStub(channel)
        wait_for(lambda: _code(stub.IsActive, ref(job=JOB)) == grpc.StatusCode.OK, 30)
        assert hpa_lands_on(stub, JOB, 1) == final
        # a job no topic names (yet): it may start later, so UNAVAILABLE (KEDA retries),
        # naming the jobs that are known; its metric spec depends on the name alone
        assert _code(stub.IsActive, ref(job="no-such-job")) == grpc.StatusCode.UNAVAILABLE
        spec = stub.GetMetricSpec(ref(job="no-such-job"), timeout=10).metricSpecs[0]
        assert spec.metricName == metric_name("no-such-job")
    finally:
        channel.close()
        scaler.stop()
        traffic.stop.set()
        if traffic.is_alive():
            traffic.join(timeout=15)
        if app is not None:
            stop_process(app, log)


def _code(call, arg):
    try:
        call(arg, timeout=5)
    except grpc.RpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK
