"""`lag run` wires the sample limits (clock skew, pool size, rates) to its options and variables."""

import pytest
from click.testing import CliRunner

from streamtrain.cli import main
from streamtrain.errors import ConfigError


@pytest.fixture
def captured(monkeypatch):
    """The LagAppSettings `lag run` builds (no broker: the probe and the app are stubbed
    at the CLI's edge; what is checked is only what the options become)."""
    seen = []

    def create_app(settings):
        seen.append(settings)
        raise ConfigError("stop here")

    monkeypatch.setattr("streamtrain.kafka.probe", lambda *args, **kwargs: None)
    monkeypatch.setattr("streamtrain.control.app.create_app", create_app)
    return seen


ARGS = ["lag", "run", "--bootstrap", "127.0.0.1:1", "--group", "g", "--plan-job", "j"]


def test_the_sample_limits_come_from_the_flags(captured):
    result = CliRunner().invoke(
        main,
        [
            *ARGS,
            "--sample-max-clock-skew-s",
            "5",
            "--sample-max-pool-workers",
            "64",
            "--sample-max-records-per-s",
            "1000",
            "--plan-time-scale",
            "10",
        ],
    )
    assert "stop here" in result.output
    limits = captured[0].planner.samples
    # on the planner's clock: 10 x faster, so 5 wall seconds are 50 model seconds
    assert (limits.max_clock_skew_s, limits.max_pool_workers) == (50.0, 64)
    assert limits.max_records_per_s == pytest.approx(100.0)


def test_the_sample_limits_come_from_the_environment(captured):
    env = {
        "STREAMTRAIN_PLAN_SAMPLE_MAX_CLOCK_SKEW_S": "7",
        "STREAMTRAIN_PLAN_SAMPLE_MAX_POOL_WORKERS": "12",
        "STREAMTRAIN_PLAN_SAMPLE_MAX_RECORDS_PER_S": "500",
    }
    CliRunner().invoke(main, ARGS, env=env)
    limits = captured[0].planner.samples
    assert (limits.max_clock_skew_s, limits.max_pool_workers) == (7.0, 12)
    assert limits.max_records_per_s == 500.0
