"""Protobuf schemas: generated code is current, every message is versioned, wire rules hold."""

import subprocess
import sys
from pathlib import Path

import pytest

from streamtrain import wire
from streamtrain.errors import SchemaError
from streamtrain.proto import control_plane_pb2, data_plane_pb2

ROOT = Path(__file__).resolve().parents[2]
PROTO_DIR = ROOT / "streamtrain" / "proto"
PROTOS = sorted(PROTO_DIR.glob("*.proto"))
MODULES = [data_plane_pb2, control_plane_pb2]


def test_there_are_protos():
    assert {p.name for p in PROTOS} == {
        "data_plane.proto",
        "control_plane.proto",
        "externalscaler.proto",  # KEDA's contract: see tests/unit/keda/test_proto.py
    }


def test_generated_code_is_current(tmp_path):
    rel = [str(p.relative_to(ROOT)) for p in PROTOS]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{ROOT}",
            f"--python_out={tmp_path}",
            f"--pyi_out={tmp_path}",
            *rel,
        ],
        check=True,
        capture_output=True,
    )
    for proto in PROTOS:
        for suffix in ("_pb2.py", "_pb2.pyi"):
            name = proto.stem + suffix
            fresh = (tmp_path / "streamtrain" / "proto" / name).read_bytes()
            checked_in = (PROTO_DIR / name).read_bytes()
            assert fresh == checked_in, f"{name} is stale: run `make proto` and commit"


def _top_level_messages():
    for module in MODULES:
        for name, descriptor in module.DESCRIPTOR.message_types_by_name.items():
            if name != "PartitionLag":  # nested in LagReport, which is versioned
                yield getattr(module, name), descriptor


@pytest.mark.parametrize(
    "cls,descriptor",
    [pytest.param(cls, d, id=d.full_name) for cls, d in _top_level_messages()],
)
def test_every_message_has_schema_version_as_field_one(cls, descriptor):
    field = descriptor.fields_by_name.get("schema_version")
    assert field is not None, descriptor.full_name
    assert field.number == 1


def test_the_messages_the_design_names_exist():
    names = {d.name for _, d in _top_level_messages()}
    assert {
        "RecordBatch",
        "BatchAck",
        "CreditGrant",
        "WorkerStateEvent",
        "Member",
        "LagReport",
        "Alert",
        "Forecast",
        "ThroughputSample",
        "ScaleCommand",
    } <= names


def test_record_batch_is_columnar_and_round_trips():
    payloads = [b"a", b"", b"ccc"]
    batch = data_plane_pb2.RecordBatch(
        job="j",
        batch_id="w1-7",
        origin_worker="w1",
        topic="t",
        partitions=[0, 0, 3],
        offsets=[10, 11, 5],
        timestamps_ms=[1, 2, 3],
        payload_lengths=[len(p) for p in payloads],
        payloads=b"".join(payloads),
        forwarded=True,
    )
    data = wire.encode(batch)
    back = wire.decode(data_plane_pb2.RecordBatch, data)
    assert back.schema_version == wire.SCHEMA_VERSION
    assert list(back.offsets) == [10, 11, 5]
    assert back.payloads == b"accc"
    assert back.forwarded


def test_decode_rejects_garbage_with_schema_error():
    with pytest.raises(SchemaError, match=r"not a valid streamtrain\.v1\.BatchAck"):
        wire.decode(data_plane_pb2.BatchAck, b"\xff\xff\xff\xff")


def test_decode_rejects_newer_schema_version():
    newer = control_plane_pb2.ScaleCommand(schema_version=wire.SCHEMA_VERSION + 1, job="j")
    with pytest.raises(SchemaError, match="newer"):
        wire.decode(control_plane_pb2.ScaleCommand, newer.SerializeToString())


def test_unknown_fields_from_a_newer_writer_are_tolerated():
    # A v1 reader must read a message that has extra fields it does not know.
    newer_writer = control_plane_pb2.Alert(schema_version=1, message="hi").SerializeToString()
    extra_field = b"\xa8\x06\x01"  # field 101, varint 1
    alert = wire.decode(control_plane_pb2.Alert, newer_writer + extra_field)
    assert alert.message == "hi"


def test_optional_lag_fields_distinguish_unknown_from_zero():
    lag = control_plane_pb2.PartitionLag(topic="t", partition=0, lag_records=0)
    assert lag.HasField("lag_records")
    assert not lag.HasField("high_watermark")
