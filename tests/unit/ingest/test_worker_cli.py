"""`streamtrain worker` surface: every flag has its env var; bad input fails before Kafka."""

import click
from click.testing import CliRunner

from streamtrain.commands.worker import worker


def test_help_shows_the_env_var_behind_each_flag():
    result = CliRunner().invoke(worker, ["--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    help_text = " ".join(result.output.split())
    for param in worker.params:
        if isinstance(param, click.Option) and param.name != "help":
            assert isinstance(param.envvar, str), param.name
            assert param.envvar.startswith("STREAMTRAIN_"), param.name
            assert f"env var: {param.envvar}" in help_text, param.name
    for flag in ("--topic", "--group", "--bootstrap", "--entry", "--partition"):
        assert flag in help_text


def test_topic_and_group_are_required():
    result = CliRunner().invoke(worker, ["--group", "g"])
    assert result.exit_code == 2
    assert "--topic" in result.output


def test_bad_entry_point_is_a_usage_error_before_any_broker_starts():
    result = CliRunner().invoke(
        worker, ["--topic", "t", "--group", "g", "--entry", "nope"], catch_exceptions=False
    )
    assert result.exit_code == 2
    assert "entry point 'nope' is not module:function" in result.output
    assert "embedded" not in result.output


def test_topic_and_group_come_from_the_environment():
    result = CliRunner().invoke(
        worker,
        ["--entry", "streamtrain_no_such_module_xyz:make"],
        env={"STREAMTRAIN_WORKER_TOPIC": "t", "STREAMTRAIN_WORKER_GROUP": "g"},
    )
    assert result.exit_code == 2
    assert "cannot import" in result.output
