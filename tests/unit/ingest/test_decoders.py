"""Decoders: columns out, bad records reported (never raised) with a reason."""

import json

import numpy as np
import pytest

from streamtrain.errors import ConfigError
from streamtrain.ingest.decoders import (
    BatchFunctionDecoder,
    Field,
    FunctionDecoder,
    JsonDecoder,
    ProtobufDecoder,
    RawDecoder,
    StructDecoder,
)
from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.records import RecordColumns


def records(values):
    n = len(values)
    return RecordColumns.from_values("t", [0] * n, list(range(n)), [0] * n, values)


def test_raw_fixed_width_is_a_view_of_the_payloads():
    decoded = RawDecoder().decode(records([b"abc", b"def"]))
    assert decoded.ok
    assert decoded.columns["payload"].tolist() == [list(b"abc"), list(b"def")]
    assert not decoded.columns["payload"].flags.owndata


def test_raw_ragged_is_padded_with_lengths():
    decoded = RawDecoder().decode(records([b"a", b"", b"xyz"]))
    assert decoded.columns["payload"].tolist() == [[97, 0, 0], [0, 0, 0], [120, 121, 122]]
    assert decoded.columns["length"].tolist() == [1, 0, 3]


def test_raw_with_width_fails_other_lengths():
    decoded = RawDecoder(width=2).decode(records([b"ab", b"abc", b"cd"]))
    assert decoded.failed.tolist() == [1]
    assert "3 bytes, expected 2" in decoded.errors[0]
    assert decoded.columns["payload"].tolist() == [list(b"ab"), list(b"cd")]
    assert RawDecoder(width=2).fields == (Field("payload", np.uint8, (2,)),)


def test_fixed_sizes_are_checked_per_record_not_by_the_total():
    """Records of 1 and 3 bytes total 2 x 2: the length range, not the sum, decides."""
    decoded = RawDecoder(width=2).decode(records([b"a", b"abc", b"cd"]))
    assert decoded.failed.tolist() == [0, 1]
    assert decoded.columns["payload"].tolist() == [list(b"cd")]
    decoded = StructDecoder(np.dtype([("v", "<u2")])).decode(records([b"a", b"abc"]))
    assert decoded.failed.tolist() == [0, 1]


LAYOUT = np.dtype([("id", "<i8"), ("x", "<f4", (2,)), ("_pad", "V4")])


def test_struct_decodes_every_named_field():
    table = np.zeros(3, dtype=LAYOUT)
    table["id"] = [7, 8, 9]
    table["x"] = [[1, 2], [3, 4], [5, 6]]
    data = table.tobytes()
    values = [data[i * 20 : (i + 1) * 20] for i in range(3)]
    decoded = StructDecoder(LAYOUT).decode(records(values))
    assert decoded.ok
    assert sorted(decoded.columns) == ["id", "x"]
    assert decoded.columns["id"].tolist() == [7, 8, 9]
    assert decoded.columns["x"].tolist() == [[1, 2], [3, 4], [5, 6]]
    assert StructDecoder(LAYOUT).fields == (Field("id", "<i8"), Field("x", "<f4", (2,)))


def test_struct_fails_records_of_the_wrong_size():
    table = np.zeros(2, dtype=LAYOUT)
    table["id"] = [1, 2]
    good = table.tobytes()
    decoded = StructDecoder(LAYOUT).decode(records([good[:20], b"short", good[20:]]))
    assert decoded.failed.tolist() == [1]
    assert decoded.columns["id"].tolist() == [1, 2]


def test_struct_needs_named_fields():
    with pytest.raises(ConfigError):
        StructDecoder(np.int32)


def test_json_with_fields_types_columns_and_fails_bad_records():
    fields = [Field("id", np.int64), Field("x", np.float32, (2,))]
    values = [
        json.dumps({"id": 1, "x": [0.5, 1.5]}).encode(),
        b"{not json",
        json.dumps({"id": 2}).encode(),  # missing x
        json.dumps({"id": 3, "x": [1.0]}).encode(),  # wrong shape
        json.dumps({"id": "four", "x": [1, 2]}).encode(),  # wrong type
        json.dumps([1, 2]).encode(),  # not an object
        json.dumps({"id": 5, "x": [2, 3], "extra": True}).encode(),
    ]
    decoded = JsonDecoder(fields).decode(records(values))
    assert decoded.failed.tolist() == [1, 2, 3, 4, 5]
    assert len(decoded.errors) == 5
    assert "json" in decoded.errors[0]
    assert decoded.columns["id"].tolist() == [1, 5]
    assert decoded.columns["x"].dtype == np.float32
    assert decoded.columns["x"].tolist() == [[0.5, 1.5], [2.0, 3.0]]


def test_json_without_fields_gives_objects():
    decoded = JsonDecoder().decode(records([b'{"a": 1}', b"[2]"]))
    assert decoded.columns["value"].tolist() == [{"a": 1}, [2]]


def test_protobuf_default_fields_are_the_scalars():
    sample = pb.ThroughputSample(job="j", worker_id="w", workers=3, records_per_s_trained=2.5)
    decoder = ProtobufDecoder(pb.ThroughputSample)
    assert decoder.fields is not None
    names = [f.name for f in decoder.fields]
    assert "positions" not in names
    assert {"job", "workers", "records_per_s_trained"} <= set(names)
    decoded = decoder.decode(records([sample.SerializeToString(), b"\x0a\x05ab"]))
    assert decoded.failed.tolist() == [1]
    assert "not a valid streamtrain.v1.ThroughputSample" in decoded.errors[0]
    assert decoded.columns["workers"].tolist() == [3]
    assert decoded.columns["job"].tolist() == ["j"]


def test_protobuf_repeated_fields_need_a_shape():
    forecast = pb.Forecast(job="j", records_per_s=[1.0, 2.0, 3.0])
    short = pb.Forecast(job="k", records_per_s=[1.0])
    decoder = ProtobufDecoder(pb.Forecast, [Field("records_per_s", np.float64, (3,))])
    decoded = decoder.decode(records([forecast.SerializeToString(), short.SerializeToString()]))
    assert decoded.failed.tolist() == [1]
    assert decoded.columns["records_per_s"].tolist() == [[1.0, 2.0, 3.0]]
    with pytest.raises(ConfigError):
        ProtobufDecoder(pb.Forecast, [Field("nope", np.int32)])


def test_function_decoder_isolates_exceptions():
    def parse(payload: bytes):
        if payload == b"boom":
            raise RuntimeError("cannot parse")
        return {"n": len(payload)}

    decoded = FunctionDecoder(parse, [Field("n", np.int32)]).decode(records([b"ab", b"boom", b"c"]))
    assert decoded.failed.tolist() == [1]
    assert "RuntimeError: cannot parse" in decoded.errors[0]
    assert decoded.columns["n"].tolist() == [2, 1]


def test_batch_function_decoder_fast_path_and_isolation():
    def vectorized(chunk: RecordColumns):
        lengths = chunk.payload_lengths()
        if (lengths == 0).any():
            raise ValueError("empty record")
        return {"length": lengths}

    decoder = BatchFunctionDecoder(vectorized)
    assert decoder.decode(records([b"a", b"bb"])).columns["length"].tolist() == [1, 2]
    decoded = decoder.decode(records([b"a", b"", b"ccc"]))
    assert decoded.failed.tolist() == [1]
    assert decoded.columns["length"].tolist() == [1, 3]


def test_batch_function_decoder_checks_row_counts():
    one_row = BatchFunctionDecoder(lambda chunk: {"x": np.zeros(1)})
    decoded = one_row.decode(records([b"a", b"b"]))  # wrong for the batch, right per record
    assert decoded.ok
    assert decoded.columns["x"].shape == (2,)
    two_rows = BatchFunctionDecoder(lambda chunk: {"x": np.zeros(2)})
    decoded = two_rows.decode(records([b"a", b"b", b"c"]))  # wrong both ways
    assert decoded.failed.tolist() == [0, 1, 2]
    assert "has (2,) rows for 1 records" in decoded.errors[0]
