"""KEDA's externalscaler.proto: its gRPC stubs are current, and the contract is KEDA's."""

import subprocess
import sys
from pathlib import Path

from streamtrain.proto import externalscaler_pb2 as es

ROOT = Path(__file__).resolve().parents[3]
PROTO = ROOT / "streamtrain" / "proto" / "externalscaler.proto"


def test_generated_code_and_grpc_stubs_are_current(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{ROOT}",
            f"--python_out={tmp_path}",
            f"--pyi_out={tmp_path}",
            f"--grpc_python_out={tmp_path}",
            str(PROTO.relative_to(ROOT)),
        ],
        check=True,
        capture_output=True,
    )
    for name in ("externalscaler_pb2.py", "externalscaler_pb2.pyi", "externalscaler_pb2_grpc.py"):
        fresh = (tmp_path / "streamtrain" / "proto" / name).read_bytes()
        checked_in = (PROTO.parent / name).read_bytes()
        assert fresh == checked_in, f"{name} is stale: run `make proto` and commit"


def test_the_service_and_fields_are_the_ones_keda_calls():
    service = es.DESCRIPTOR.services_by_name["ExternalScaler"]
    assert service.full_name == "externalscaler.ExternalScaler"
    methods = {m.name: m for m in service.methods}
    assert set(methods) == {"IsActive", "StreamIsActive", "GetMetricSpec", "GetMetrics"}
    assert methods["StreamIsActive"].server_streaming
    assert not methods["IsActive"].server_streaming
    numbers = {
        (message, field.name): field.number
        for message in ("ScaledObjectRef", "MetricSpec", "GetMetricsRequest", "MetricValue")
        for field in es.DESCRIPTOR.message_types_by_name[message].fields
    }
    assert numbers == {
        ("ScaledObjectRef", "name"): 1,
        ("ScaledObjectRef", "namespace"): 2,
        ("ScaledObjectRef", "scalerMetadata"): 3,
        ("MetricSpec", "metricName"): 1,
        ("MetricSpec", "targetSize"): 2,
        ("MetricSpec", "targetSizeFloat"): 3,
        ("GetMetricsRequest", "scaledObjectRef"): 1,
        ("GetMetricsRequest", "metricName"): 2,
        ("MetricValue", "metricName"): 1,
        ("MetricValue", "metricValue"): 2,
        ("MetricValue", "metricValueFloat"): 3,
    }
