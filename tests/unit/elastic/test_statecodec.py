"""The pickle-free model state: what a joiner heals from and a checkpoint holds."""

import struct

import pytest
import torch

from streamtrain.elastic.statecodec import MAGIC, check_same_model, decode, encode
from streamtrain.errors import ModelMismatchError, SchemaError


def adam_state():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randn(5, 4)).sum().backward()
    optimizer.step()
    return model, optimizer


def test_a_model_and_its_optimizer_round_trip_exactly():
    model, optimizer = adam_state()
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "app": {"seen": 3, "lr": 0.5, "name": "x", "flag": True, "none": None},
        "torchft": {"step": 7, "batches_committed": 14},
    }
    back = decode(encode(state))
    assert back["app"] == state["app"] and back["torchft"] == state["torchft"]
    for key, value in state["model"].items():
        assert torch.equal(back["model"][key], value) and back["model"][key].dtype == value.dtype
    fresh = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    fresh_optimizer = torch.optim.Adam(fresh.parameters(), lr=1e-3)
    fresh.load_state_dict(back["model"])
    fresh_optimizer.load_state_dict(back["optimizer"])  # integer keys and tuples survive
    assert fresh_optimizer.state_dict()["param_groups"][0]["betas"] == (0.9, 0.999)
    assert torch.equal(
        fresh_optimizer.state_dict()["state"][0]["exp_avg"],
        optimizer.state_dict()["state"][0]["exp_avg"],
    )


@pytest.mark.parametrize(
    "value",
    [
        float("nan"),
        float("inf"),
        -0.0,
        1e-310,
        2**62,
        torch.tensor(3.5),
        torch.zeros(0, 3),
        torch.arange(6, dtype=torch.int16).reshape(2, 3),
        torch.tensor([True, False]),
        torch.ones(3, dtype=torch.bfloat16),
    ],
)
def test_edge_values_round_trip(value):
    back = decode(encode({"v": value}))["v"]
    if isinstance(value, torch.Tensor):
        assert back.dtype == value.dtype and back.shape == value.shape
        assert torch.equal(back, value)
    elif value != value:
        assert back != back
    else:
        assert back == value and str(back) == str(value)


def test_what_it_cannot_encode_is_refused():
    with pytest.raises(TypeError):
        encode({"f": lambda: 0})
    with pytest.raises(TypeError):
        encode({"c": torch.ones(2, dtype=torch.complex64)})


def _forged(header: bytes, payload: bytes = b"") -> bytes:
    return MAGIC + struct.pack("<Q", len(header)) + header + payload


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x80\x04pickle",
        MAGIC + struct.pack("<Q", 1 << 40),
        _forged(b"not json"),
        _forged(b"[]"),
        _forged(b'{"tree": {"x": 0}, "tensors": []}'),
        _forged(
            b'{"tree": {"x": 0}, "tensors": [{"dtype": "float32", "shape": [4],'
            b' "offset": 0, "nbytes": 16}]}',
            b"\0" * 8,
        ),
        _forged(
            b'{"tree": {"x": 0}, "tensors": [{"dtype": "object", "shape": [1],'
            b' "offset": 0, "nbytes": 8}]}',
            b"\0" * 8,
        ),
        _forged(
            b'{"tree": {"x": 0}, "tensors": [{"dtype": "float32", "shape": [3],'
            b' "offset": 0, "nbytes": 8}]}',
            b"\0" * 8,
        ),
        _forged(b'{"tree": {"q": 1}, "tensors": []}'),
        _forged(b'{"tree": {"d": [[{"l": []}, {"i": 1}]]}, "tensors": []}'),
        _forged(b'{"tree": {"f": "nope"}, "tensors": []}'),
        _forged(b'{"tree": ' + b'{"l": [' * 60 + b'{"i": 1}' + b"]}" * 60 + b', "tensors": []}'),
    ],
    ids=lambda d: repr(d[:24]),
)
def test_malformed_bytes_are_a_schema_error_never_a_crash(data):
    with pytest.raises(SchemaError):
        decode(data)


def test_a_size_limit_refuses_before_parsing():
    with pytest.raises(SchemaError, match="limit"):
        decode(encode({"w": torch.zeros(100)}), max_bytes=100)


def test_the_same_model_passes_another_is_named_key_by_key():
    model, _ = adam_state()
    check_same_model(model.state_dict(), decode(encode(model.state_dict())), source="a peer")
    wider = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU(), torch.nn.Linear(5, 1))
    with pytest.raises(
        ModelMismatchError, match=r"0\.weight: float32\[5, 4\] here float32\[3, 4\]"
    ):
        check_same_model(model.state_dict(), wider.state_dict(), source="a peer")
    other = {"encoder.weight": torch.zeros(1)}
    with pytest.raises(ModelMismatchError, match=r"missing keys 0\.bias.*unexpected keys encoder"):
        check_same_model(model.state_dict(), other, source="the checkpoint of step 3")
    with pytest.raises(ModelMismatchError, match="no model state_dict"):
        check_same_model(model.state_dict(), None, source="a peer")
    halved = {k: v.half() for k, v in model.state_dict().items()}
    with pytest.raises(ModelMismatchError, match="float16"):
        check_same_model(model.state_dict(), halved, source="a peer")
