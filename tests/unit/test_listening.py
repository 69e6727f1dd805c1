"""Servers without authentication listen beyond loopback only when the user says the
network is trusted (the embedded broker, the control apps' pages), and Faust's own
/table and /router pages are off unless asked for. Nothing here listens: the refusals
come before any socket."""

import pytest
from click.testing import CliRunner

from streamtrain.broker import EmbeddedBroker
from streamtrain.cli import main
from streamtrain.config import EmbeddedBrokerSettings, KafkaSettings
from streamtrain.control.faust_app import new_faust_app
from streamtrain.control.service import LagAppSettings
from streamtrain.errors import ConfigError

WIDE = "0.0.0.0"  # noqa: S104 - the address whose refusal is under test


def test_the_embedded_broker_refuses_a_host_beyond_loopback():
    broker = EmbeddedBroker(EmbeddedBrokerSettings(host=WIDE), binary="/nonexistent/tansu")
    with pytest.raises(ConfigError, match="--trusted-network"):
        broker.start()


def test_the_broker_command_refuses_it_too():
    result = CliRunner().invoke(main, ["broker", "--host", WIDE])
    assert result.exit_code != 0
    assert "beyond loopback" in result.output and "--trusted-network" in result.output


def test_lag_run_refuses_a_web_host_beyond_loopback_before_connecting():
    args = ["lag", "run", "--group", "g", "--web-host", "10.1.2.3", "--bootstrap", "127.0.0.1:1"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code != 0 and "--trusted-network" in result.output


def test_the_control_apps_settings_refuse_it_unless_trusted():
    kafka = KafkaSettings("127.0.0.1:9092")
    with pytest.raises(ConfigError, match="the control app's pages"):
        LagAppSettings(kafka=kafka, web_host=WIDE)
    assert LagAppSettings(kafka=kafka, web_host=WIDE, trusted_network=True).trusted_network


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.5"])
def test_loopback_needs_no_flag(host):
    from streamtrain.ports import check_trusted_bind

    check_trusted_bind(host, trusted_network=False, what="x", flag="--host")


@pytest.mark.parametrize("pages", [False, True])
def test_fausts_table_and_router_pages_only_when_asked_for(tmp_path, pages):
    app = new_faust_app(
        "st-test",
        KafkaSettings("127.0.0.1:9092"),
        data_dir=tmp_path,
        web_host="127.0.0.1",
        web_port=6066,
        request_timeout_s=1.0,
        faust_pages=pages,
    )
    assert app.conf.web_tables_enabled is pages and app.conf.web_router_enabled is pages
    mounted = {prefix for prefix, _ in app.web.blueprints._enabled}
    assert ({"/table", "/router"} <= mounted) is pages


def test_the_control_app_takes_its_group_session_from_the_command_line(tmp_path, monkeypatch):
    """`lag run --session-timeout-s` reaches the Faust app (default 10 s)."""
    from click.testing import CliRunner

    from streamtrain.cli import main

    seen = {}

    def create_app(settings):
        seen["session_timeout_s"] = settings.session_timeout_s
        raise ConfigError("stop here")

    monkeypatch.setattr("streamtrain.control.app.create_app", create_app)
    monkeypatch.setattr("streamtrain.kafka.probe", lambda settings, timeout_s: None)
    from streamtrain.ports import free_port

    port = str(free_port())
    args = ["lag", "run", "--group", "g", "--bootstrap", "127.0.0.1:9", "--web-port", port]
    for extra, want in (([], 10.0), (["--session-timeout-s", "6"], 6.0)):
        result = CliRunner().invoke(main, [*args, *extra])
        assert "stop here" in result.output, result.output
        assert seen["session_timeout_s"] == want
    app = new_faust_app(
        "st-test",
        KafkaSettings("127.0.0.1:9092"),
        data_dir=tmp_path,
        web_host="127.0.0.1",
        web_port=6066,
        request_timeout_s=1.0,
        session_timeout_s=6.0,
    )
    assert app.conf.broker_session_timeout == 6.0
