"""`streamtrain lighthouse` and `streamtrain worker --engine` refuse bad settings with a
clear usage error, before anything listens or connects."""

from click.testing import CliRunner

from streamtrain.cli import main

WILDCARD = "0.0.0.0"  # noqa: S104 - what the command must refuse


def test_the_lighthouse_refuses_a_non_loopback_bind_without_trust():
    result = CliRunner().invoke(main, ["lighthouse", "--host", WILDCARD])
    assert result.exit_code == 2
    assert "authenticates nobody" in result.output and "--trusted-network" in result.output


def test_a_torchft_worker_without_a_lighthouse_is_a_usage_error():
    result = CliRunner().invoke(
        main, ["worker", "--topic", "t", "--group", "g", "--engine", "torchft"]
    )
    assert result.exit_code == 2
    assert "needs --lighthouse" in result.output


def test_a_torchft_worker_refuses_the_shuffle():
    result = CliRunner().invoke(
        main,
        ["worker", "--topic", "t", "--group", "g", "--engine", "torchft",
         "--lighthouse", "127.0.0.1:1", "--shuffle", "advanced", "--bootstrap", "127.0.0.1:1"],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "with --engine torchft every worker trains one model" in result.output
