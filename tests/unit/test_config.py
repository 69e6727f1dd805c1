"""Settings objects: validation and the client configs they render."""

import dataclasses
import logging
from typing import Any

import pytest

from streamtrain.config import (
    KAFKA_CONNECTION_FIELDS,
    EmbeddedBrokerSettings,
    KafkaSettings,
    comma_list,
    key_values,
    parse_bootstrap,
)
from streamtrain.errors import ConfigError


def test_parse_bootstrap_accepts_lists_and_ipv6():
    assert parse_bootstrap("a:1, b.example:9092,[::1]:9093") == (
        ("a", 1),
        ("b.example", 9092),
        ("[::1]", 9093),
    )


@pytest.mark.parametrize("bad", ["", "localhost", "host:", ":9092", "h:0", "h:70000", "h:x"])
def test_parse_bootstrap_rejects_garbage(bad):
    with pytest.raises(ConfigError):
        parse_bootstrap(bad)


def test_plaintext_config_has_no_secrets_and_routes_logs():
    conf = KafkaSettings(bootstrap="127.0.0.1:9092").confluent_config()
    assert conf["bootstrap.servers"] == "127.0.0.1:9092"
    assert conf["security.protocol"] == "PLAINTEXT"
    assert not any(key.startswith(("sasl.", "ssl.")) for key in conf)
    assert isinstance(conf["logger"], logging.Logger)


def test_sasl_ssl_passes_through_and_extra_and_overrides_win():
    settings = KafkaSettings(
        bootstrap="k:9093",
        security_protocol="sasl_ssl",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="u",
        sasl_password="s3cret-pw",
        ssl_ca_location="/ca.pem",
        extra={"client.id": "x", "socket.timeout.ms": "1"},
    )
    conf = settings.confluent_config(**{"socket.timeout.ms": 5})
    assert conf["security.protocol"] == "SASL_SSL"
    assert conf["sasl.mechanism"] == "SCRAM-SHA-512"
    assert conf["sasl.username"] == "u"
    assert conf["sasl.password"] == "s3cret-pw"
    assert conf["ssl.ca.location"] == "/ca.pem"
    assert conf["client.id"] == "x"
    assert conf["socket.timeout.ms"] == 5
    assert "s3cret-pw" not in repr(settings)


def test_aiokafka_config_for_sasl_plaintext():
    conf = KafkaSettings(
        bootstrap="k:9092",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="plain",
        sasl_username="u",
        sasl_password="p",
    ).aiokafka_config()
    assert conf == {
        "bootstrap_servers": "k:9092",
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "u",
        "sasl_plain_password": "p",
    }


@pytest.mark.parametrize(
    "kwargs",
    [
        {"security_protocol": "TLS"},
        {"security_protocol": "SASL_SSL"},  # no mechanism
        {"sasl_mechanism": "PLAIN"},  # mechanism without a SASL protocol
        {"security_protocol": "SASL_SSL", "sasl_mechanism": "MD5"},
        {"bootstrap": "nohostport"},
    ],
)
def test_bad_kafka_settings_are_config_errors(kwargs):
    args = {"bootstrap": "k:9092", **kwargs}
    with pytest.raises(ConfigError):
        KafkaSettings(**args)


def test_settings_are_frozen():
    settings = KafkaSettings(bootstrap="k:9092")
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.bootstrap = "other:1"  # type: ignore[misc]


@pytest.mark.parametrize("kwargs", [{"port": -1}, {"port": 65536}, {"startup_timeout_s": 0}])
def test_bad_broker_settings(kwargs):
    with pytest.raises(ConfigError):
        EmbeddedBrokerSettings(**kwargs)


def test_a_comma_list_is_stripped_and_skips_empty_items():
    assert comma_list(" a, b,,c ,") == ("a", "b", "c")
    assert comma_list(" , ") == ()


def test_key_values_strip_both_sides_and_name_the_flag_on_a_bad_item():
    assert key_values("--x", [" a = 1 ", "b=", "a=2"]) == {"a": "2", "b": ""}
    for bad in ("novalue", "=1", " =1"):
        with pytest.raises(ConfigError, match=r"--x .* is not KEY=VALUE"):
            key_values("--x", [bad])


def test_every_connection_field_reaches_the_confluent_config_under_its_dotted_name():
    values: dict[str, Any] = {name: f"v-{name}" for name in KAFKA_CONNECTION_FIELDS}
    values["security_protocol"] = "SASL_SSL"
    values["sasl_mechanism"] = "PLAIN"
    settings = KafkaSettings(bootstrap="h:1", **values)
    assert settings.connection() == values
    conf = settings.confluent_config()
    assert {name: conf[name.replace("_", ".")] for name in KAFKA_CONNECTION_FIELDS} == values
    assert set(KAFKA_CONNECTION_FIELDS) == {f.name for f in dataclasses.fields(KafkaSettings)} - {
        "bootstrap",
        "extra",
    }
