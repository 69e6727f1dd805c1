"""Settings objects: validation and the client configs they render."""

import dataclasses
import logging

import pytest

from streamtrain.config import EmbeddedBrokerSettings, KafkaSettings, parse_bootstrap
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
