"""Engine and lighthouse settings refuse what cannot work, before anything starts; a
worker's reachability check names the lighthouse it could not reach."""

import socket
import time
from pathlib import Path

import pytest

from streamtrain.elastic.lighthouse import LighthouseSettings, wait_reachable
from streamtrain.elastic.settings import ElasticSettings, EngineKind, lighthouse_url
from streamtrain.errors import ConfigError, LighthouseUnreachableError
from streamtrain.ports import free_port

WILDCARD = "0.0.0.0"  # noqa: S104 - what the settings must refuse


@pytest.mark.parametrize(
    ("address", "url"),
    [("127.0.0.1:29510", "http://127.0.0.1:29510"), ("http://h:1/", "http://h:1")],
)
def test_lighthouse_addresses_become_urls(address, url):
    assert lighthouse_url(address) == url


@pytest.mark.parametrize("address", ["", "host", "host:", "host:0", "host:70000", ":5"])
def test_bad_lighthouse_addresses_are_refused(address):
    with pytest.raises(ConfigError, match="not HOST:PORT"):
        lighthouse_url(address)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"engine": EngineKind.TORCHFT}, "needs --lighthouse"),
        ({"engine": EngineKind.TORCHELASTIC}, "needs --checkpoint-dir"),
        (
            {"engine": EngineKind.TORCHFT, "lighthouse": "h:1", "host": WILDCARD},
            "--trusted-network",
        ),
        ({"step_wait_s": 0}, "step wait must be positive"),
        ({"engine": "bogus"}, "bogus"),
        ({"replica_id": ""}, "replica id"),
    ],
)
def test_engine_settings_refuse_what_cannot_work(kwargs, needle):
    with pytest.raises((ConfigError, ValueError), match=needle):
        ElasticSettings(**kwargs)


def test_engine_settings_accept_a_trusted_network_and_normalise_the_lighthouse():
    settings = ElasticSettings(
        engine=EngineKind.TORCHFT,
        lighthouse="10.0.0.5:29510",
        host="10.0.0.7",
        trusted_network=True,
    )
    assert settings.engine is EngineKind.TORCHFT
    assert settings.lighthouse == "http://10.0.0.5:29510"
    assert ElasticSettings(engine=EngineKind.TORCHELASTIC, checkpoint_dir=Path("c")).checkpoint_dir


def test_the_lighthouse_refuses_to_listen_beyond_loopback_unless_trusted():
    with pytest.raises(ConfigError, match="authenticates nobody"):
        LighthouseSettings(host=WILDCARD)
    assert LighthouseSettings(host=WILDCARD, trusted_network=True).bind == "0.0.0.0:29510"
    assert LighthouseSettings(host="::1", port=5).bind == "[::1]:5"
    with pytest.raises(ConfigError):
        LighthouseSettings(min_replicas=0)


def test_an_unreachable_lighthouse_is_named_with_the_wait():
    port = free_port()
    started = time.monotonic()
    with pytest.raises(LighthouseUnreachableError) as caught:
        wait_reachable(f"127.0.0.1:{port}", 0.5)
    assert time.monotonic() - started < 5
    assert f"http://127.0.0.1:{port}" in caught.value.message
    assert "0.5 s" in caught.value.message and caught.value.retriable


def test_a_listening_lighthouse_is_reachable():
    with socket.create_server(("127.0.0.1", 0)) as server:
        wait_reachable(f"127.0.0.1:{server.getsockname()[1]}", 2.0)
