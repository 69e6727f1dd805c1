"""The CLI surface: help, env vars behind flags, clear usage errors."""

import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from streamtrain.cli import main

SUBCOMMANDS = {
    "broker",
    "topics",
    "worker",
    "lag",
    "forecast",
    "trace",
    "scale",
    "simulate",
    "demo",
    "keda",
    "cluster",
    "lighthouse",
}


def _walk(command, path=()):
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _walk(sub, (*path, name))


def test_help_lists_every_subcommand():
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    listed = {line.split()[0] for line in result.output.split("Commands:")[1].splitlines() if line}
    assert listed == SUBCOMMANDS


def test_python_dash_m_matches_the_script():
    script = Path(sys.executable).parent / "streamtrain"
    outputs = [
        subprocess.run([*argv, "--help"], capture_output=True, text=True, check=True).stdout
        for argv in ([sys.executable, "-m", "streamtrain"], [str(script)])
    ]
    assert outputs[0] == outputs[1]
    assert outputs[0].startswith("Usage: streamtrain ")


@pytest.mark.parametrize("path", [p for p, _ in _walk(main)], ids=lambda p: " ".join(p) or "root")
def test_every_help_shows_the_env_var_behind_each_flag(path):
    command = dict(_walk(main))[path]
    result = CliRunner().invoke(main, [*path, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    help_text = " ".join(result.output.split())
    for param in command.params:
        if isinstance(param, click.Option) and param.name not in {"help", "version"}:
            assert param.envvar, f"{' '.join(path)} {param.opts[0]} has no STREAMTRAIN_* variable"
            assert f"env var: {param.envvar}" in help_text, param.name


def test_kafka_commands_take_bootstrap_with_its_env_var():
    result = CliRunner().invoke(main, ["topics", "list", "--help"], terminal_width=200)
    assert "--bootstrap" in result.output
    assert "STREAMTRAIN_BOOTSTRAP" in result.output
    for flag in ("--security-protocol", "--sasl-mechanism", "--ssl-ca-location", "--kafka-config"):
        assert flag in result.output


@pytest.mark.parametrize(
    "args,needle",
    [
        (["topics", "list", "--bootstrap", "no-port"], "not HOST:PORT"),
        (["topics", "list", "--bootstrap", "h:1", "--kafka-config", "novalue"], "KEY=VALUE"),
        (
            ["topics", "list", "--bootstrap", "h:1", "--security-protocol", "SASL_SSL"],
            "needs a SASL mechanism",
        ),
    ],
)
def test_bad_input_is_a_clear_usage_error(args, needle):
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert needle in result.output
    assert "Traceback" not in result.output


def test_bootstrap_comes_from_the_environment():
    result = CliRunner().invoke(
        main, ["topics", "list"], env={"STREAMTRAIN_BOOTSTRAP": "not-an-address"}
    )
    assert result.exit_code == 2
    assert "not-an-address" in result.output


def test_an_option_group_adds_its_options_in_order_and_takes_back_only_them():
    from streamtrain.commands.common import OptionGroup, option

    group = OptionGroup(
        option("--first-x", env="TEST_FIRST_X", default="1"),
        option("--second-y", "renamed", env="TEST_SECOND_Y", default="2"),
    )
    assert group.names == ("first_x", "renamed")
    seen = {}

    @click.command()
    @group
    @click.option("--other", default="o")
    def command(**opts):
        seen["taken"] = group.take(opts)
        seen["left"] = opts

    result = CliRunner().invoke(command, ["--second-y", "z"])
    assert result.exit_code == 0, result.output
    assert seen == {"taken": {"first_x": "1", "renamed": "z"}, "left": {"other": "o"}}
    assert [p.name for p in command.params][:2] == ["first_x", "renamed"]


def test_the_kafka_options_are_the_connection_fields_of_the_settings():
    from streamtrain.config import KAFKA_CONNECTION_FIELDS

    lag = main.commands["lag"]
    assert isinstance(lag, click.Group)
    lag_run = lag.commands["run"]
    flags = {p.name: p for p in lag_run.params}
    for field in KAFKA_CONNECTION_FIELDS:
        assert flags[field].envvar == f"STREAMTRAIN_{field.upper()}"


def test_a_web_port_in_use_is_refused_before_anything_starts():
    import socket

    from streamtrain.commands.common import check_web_port
    from streamtrain.errors import ConfigError

    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        with pytest.raises(ConfigError, match="choose another --web-port"):
            check_web_port("127.0.0.1", port)
    check_web_port("127.0.0.1", port)  # closed: free again
