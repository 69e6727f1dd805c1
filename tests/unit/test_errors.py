"""The error tree: one root, retriable flags, messages that name what failed."""

import pytest

from streamtrain import errors


def test_every_public_error_derives_from_the_root():
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, errors.StreamtrainError), name


def test_retriable_defaults_and_override():
    assert errors.ConfigError("bad").retriable is False
    assert errors.BrokerUnreachableError("h:1", 2.0).retriable is True
    assert errors.KafkaError("x", retriable=True).retriable is True
    assert errors.KafkaError("x").retriable is False


def test_unreachable_names_the_address_and_timeout():
    err = errors.BrokerUnreachableError("10.0.0.9:9093", 2.5)
    assert "10.0.0.9:9093" in err.message
    assert "2.5 s" in err.message


def test_port_in_use_names_the_port():
    err = errors.PortInUseError("127.0.0.1", 9092)
    assert "9092" in str(err)
    assert isinstance(err, errors.EmbeddedBrokerError)


def test_tree_in_docstring_lists_every_error():
    doc = errors.__doc__ or ""
    for name in errors.__all__:
        assert name in doc, f"{name} missing from the tree drawn in errors.py"


def test_errors_are_raisable_and_catchable_by_root():
    with pytest.raises(errors.StreamtrainError):
        raise errors.SchemaError("bad frame")
