"""The gRPC service over a real loopback socket (grpc.aio), fed from a plan book directly:
the four methods, the codes for bad metadata and missing plans, and the push stream."""

import asyncio

import grpc
import pytest

from streamtrain.keda.contract import hpa_desired_replicas, metric_name
from streamtrain.keda.plans import PlanBook
from streamtrain.keda.service import ScalerService
from streamtrain.proto import control_plane_pb2 as cp
from streamtrain.proto import externalscaler_pb2 as es
from streamtrain.proto.externalscaler_pb2_grpc import (
    ExternalScalerStub,
    add_ExternalScalerServicer_to_server,
)


def command(job, target, command_id="c1"):
    return cp.ScaleCommand(job=job, command_id=command_id, target_workers=target, created_at_ms=1)


def ref(**metadata):
    return es.ScaledObjectRef(name="so", namespace="ns", scalerMetadata=metadata)


class Harness:
    def __init__(self, book, ready=True):
        self.book = book
        self.ready = ready
        self.service = ScalerService(book, lambda: self.ready, lambda: "still reading (1 to go)")

    async def __aenter__(self):
        self.server = grpc.aio.server()
        add_ExternalScalerServicer_to_server(self.service, self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        return ExternalScalerStub(self.channel)

    async def __aexit__(self, *exc):
        await self.channel.close()
        await self.server.stop(None)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_the_four_methods_answer_the_plan():
    book = PlanBook()
    book.add_command(command("ctr", 7))
    book.add_sample(cp.ThroughputSample(job="ctr", workers=3, observed_at_ms=5))

    async def scenario(harness):
        async with harness as stub:
            active = await stub.IsActive(ref(job="ctr"))
            spec = await stub.GetMetricSpec(ref(job="ctr", scalerAddress="x:1"))
            (metric,) = spec.metricSpecs
            values = await stub.GetMetrics(
                es.GetMetricsRequest(scaledObjectRef=ref(job="ctr"), metricName=metric.metricName)
            )
            stream = stub.StreamIsActive(ref(job="ctr"))
            first = await stream.read()
            stream.cancel()
            return active, metric, values, first

    harness = Harness(book)
    active, metric, values, first = run(scenario(harness))
    assert active.result is True and first.result is True
    assert metric.metricName == metric_name("ctr")
    assert (metric.targetSize, metric.targetSizeFloat) == (1, 1.0)
    (value,) = values.metricValues
    assert value.metricName == metric.metricName and value.metricValue == 7
    # as KEDA's HPA computes it from the spec and the value, at 3 replicas: 7
    assert hpa_desired_replicas(value.metricValueFloat, metric.targetSizeFloat, 3) == 7
    assert harness.service.requests[("GetMetrics", "OK")] == 1


@pytest.mark.parametrize(
    "metadata,message",
    [
        ({}, "scalerMetadata needs 'job'"),
        ({"job": "a", "jobFromEnv": "b"}, "names two jobs"),
        ({"job": "x" * 100_000}, "(100,000 characters) is longer than 249"),
    ],
)
def test_bad_metadata_is_invalid_argument_with_a_clear_message(metadata, message):
    book = PlanBook()
    book.add_command(command("ctr", 2))

    async def scenario():
        codes = []
        async with Harness(book) as stub:
            for call in (
                stub.IsActive(ref(**metadata)),
                stub.GetMetricSpec(ref(**metadata)),
                stub.GetMetrics(es.GetMetricsRequest(scaledObjectRef=ref(**metadata))),
            ):
                with pytest.raises(grpc.aio.AioRpcError) as info:
                    await call
                codes.append((info.value.code(), info.value.details()))
            stream = stub.StreamIsActive(ref(**metadata))
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stream.read()
            codes.append((info.value.code(), info.value.details()))
            # the server is still there and answers a good request
            assert (await stub.IsActive(ref(job="ctr"))).result is True
        return codes

    for code, details in run(scenario()):
        assert code == grpc.StatusCode.INVALID_ARGUMENT
        assert message in details
        assert len(details) < 1000  # a name is quoted to 200 characters, never whole


def test_job_from_env_names_the_job():
    """KEDA resolves ``jobFromEnv`` from the scale target's environment and passes the
    value on under that key."""
    book = PlanBook()
    book.add_command(command("ctr", 5))

    async def scenario():
        async with Harness(book) as stub:
            request = es.GetMetricsRequest(scaledObjectRef=ref(jobFromEnv="ctr"))
            return await stub.GetMetrics(request)

    assert run(scenario()).metricValues[0].metricValue == 5


def test_a_job_not_seen_yet_gets_its_metric_spec_and_unavailable_metrics():
    """Without --job, a job whose planner has not published yet: GetMetricSpec depends
    on the name alone (KEDA builds its HPA now, without a back-off), GetMetrics is
    UNAVAILABLE (KEDA retries, or applies its fallback) until the plan appears."""
    book = PlanBook()
    book.add_command(command("ctr", 2))

    async def scenario():
        async with Harness(book) as stub:
            spec = await stub.GetMetricSpec(ref(job="later"))
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.GetMetrics(es.GetMetricsRequest(scaledObjectRef=ref(job="later")))
            book.add_command(command("later", 3))
            values = await stub.GetMetrics(es.GetMetricsRequest(scaledObjectRef=ref(job="later")))
            return spec, info.value, values

    spec, error, values = run(scenario())
    assert spec.metricSpecs[0].metricName == metric_name("later")
    assert error.code() == grpc.StatusCode.UNAVAILABLE
    assert "no plan for job 'later' yet" in error.details() and "'ctr'" in error.details()
    assert values.metricValues[0].metricValue == 3


def test_a_metric_the_job_does_not_have_is_invalid_argument():
    book = PlanBook()
    book.add_command(command("ctr", 2))

    async def scenario():
        async with Harness(book) as stub:
            request = es.GetMetricsRequest(scaledObjectRef=ref(job="ctr"), metricName="cpu")
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.GetMetrics(request)
            return info.value

    error = run(scenario())
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "has one metric" in error.details() and "'cpu'" in error.details()


def test_unavailable_until_caught_up_and_for_a_job_without_a_count():
    book = PlanBook(["ctr", "idle"])
    book.add_command(command("ctr", 2))

    async def scenario(harness):
        async with harness as stub:
            with pytest.raises(grpc.aio.AioRpcError) as not_ready:
                await stub.GetMetrics(es.GetMetricsRequest(scaledObjectRef=ref(job="ctr")))
            with pytest.raises(grpc.aio.AioRpcError) as undeclared:
                await stub.IsActive(ref(job="other"))
            harness.ready = True
            with pytest.raises(grpc.aio.AioRpcError) as no_count:
                await stub.IsActive(ref(job="idle"))
            spec = await stub.GetMetricSpec(ref(job="idle"))  # needs no count
            return not_ready.value, undeclared.value, no_count.value, spec

    not_ready, undeclared, no_count, spec = run(scenario(Harness(book, ready=False)))
    assert not_ready.code() == grpc.StatusCode.UNAVAILABLE
    assert "still reading" in not_ready.details()
    assert undeclared.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert no_count.code() == grpc.StatusCode.UNAVAILABLE
    assert "no plan for job 'idle' yet" in no_count.details()
    assert spec.metricSpecs[0].metricName == metric_name("idle")


def test_the_stream_pushes_true_when_the_plan_goes_from_zero_to_some_workers():
    book = PlanBook()
    book.add_command(command("ctr", 0, "c0"))

    async def scenario(harness):
        async with harness as stub:
            stream = stub.StreamIsActive(ref(job="ctr"))
            first = await stream.read()
            # a change that keeps the job inactive pushes nothing; going to 3 pushes true
            book.add_command(command("ctr", 0, "c1"))
            harness.service.notify({"ctr"})
            book.add_command(command("ctr", 3, "c2"))
            harness.service.notify({"ctr"})
            second = await stream.read()
            book.add_command(command("ctr", 4, "c3"))  # still active: nothing to push
            harness.service.notify({"ctr"})
            book.add_command(command("ctr", 0, "c4"))
            harness.service.notify({"ctr"})
            third = await stream.read()
            open_streams = harness.service.open_streams
            stream.cancel()
            await asyncio.sleep(0.2)
            return first, second, third, open_streams, harness.service.open_streams

    first, second, third, open_before, open_after = run(scenario(Harness(book)))
    assert (first.result, second.result, third.result) == (False, True, False)
    assert (open_before, open_after) == (1, 0)


def test_the_stream_waits_for_the_feed_and_then_pushes_the_first_known_state():
    book = PlanBook()

    async def scenario(harness):
        async with harness as stub:
            stream = stub.StreamIsActive(ref(job="ctr"))
            reading = asyncio.ensure_future(stream.read())
            await asyncio.sleep(0.3)
            assert not reading.done()  # nothing known yet: nothing pushed
            book.add_command(command("ctr", 2))
            harness.ready = True
            harness.service.notify({"ctr"})
            first = await reading
            stream.cancel()
            return first

    assert run(scenario(Harness(book, ready=False))).result is True
