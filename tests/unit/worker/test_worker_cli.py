"""`streamtrain worker` surface: every flag has its env var; bad input fails before Kafka."""

import subprocess
import sys

import click
from click.testing import CliRunner

from streamtrain.commands.worker import worker

WILDCARD = "0.0.0.0"  # noqa: S104 - a value under test, nothing binds it


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


def test_shuffle_settings_follow_the_queue_and_batch_sizes():
    from streamtrain.commands.worker import shuffle_settings

    def opts(**overrides):
        return {
            "shuffle": "advanced",
            "shuffle_host": "127.0.0.1",
            "shuffle_advertise_host": None,
            "shuffle_low_watermark_records": None,
            "shuffle_high_watermark_records": None,
            "shuffle_ack_timeout_ms": 3_000,
            "shuffle_heartbeat_interval_ms": 500,
            "shuffle_heartbeat_timeout_ms": 2_000,
            "shuffle_curve": False,
            "bootstrap": "x:1",
        } | overrides

    given = opts()
    settings = shuffle_settings("job", "w1", 50, 400, given)
    assert settings is not None
    assert (settings.job, settings.worker_id, settings.policy.value) == ("job", "w1", "advanced")
    assert (settings.low_watermark_records, settings.high_watermark_records) == (80, 320)
    assert (settings.queue_capacity_records, settings.credit_window_records) == (400, 320)
    assert settings.ack_timeout_ms == 3_000 and settings.curve is None
    assert (settings.heartbeat_interval_ms, settings.heartbeat_timeout_ms) == (500, 2_000)
    assert given == {"bootstrap": "x:1"}  # the shuffle options are consumed, the rest left
    assert shuffle_settings("job", "w1", 50, 400, opts(shuffle="none")) is None
    curved = shuffle_settings("job", "w1", 50, 400, opts(shuffle_curve=True))
    assert curved is not None and curved.curve is not None
    lan = shuffle_settings("job", "w1", 50, 400, opts(shuffle_host="10.1.2.3", shuffle_curve=None))
    assert lan is not None and lan.curve is not None  # beyond loopback: CURVE by default
    announced = shuffle_settings(
        "job",
        "w1",
        50,
        400,
        opts(shuffle_host=WILDCARD, shuffle_advertise_host="w1.example", shuffle_curve=None),
    )
    assert announced is not None and announced.announced_host == "w1.example"
    big_batches = shuffle_settings("job", "w1", 512, 512, opts())
    assert big_batches is not None
    assert big_batches.credit_window_records == 512  # a whole batch always fits the credit


def test_bad_shuffle_watermarks_fail_before_any_broker_starts():
    result = CliRunner().invoke(
        worker,
        [
            *("--topic", "t", "--group", "g", "--shuffle", "advanced"),
            *("--queue-records", "100", "--shuffle-high-watermark-records", "9999"),
        ],
    )
    assert result.exit_code == 2
    # the queue holds at least one batch (1,024 by default)
    assert "high watermark 9999 exceeds the queue capacity 1024 records" in result.output
    assert "embedded" not in result.output


def test_bad_heartbeat_pair_fails_before_any_broker_starts():
    result = CliRunner().invoke(
        worker,
        [
            *("--topic", "t", "--group", "g", "--shuffle", "advanced"),
            *("--shuffle-heartbeat-interval-ms", "5000", "--shuffle-heartbeat-timeout-ms", "5000"),
        ],
    )
    assert result.exit_code == 2
    assert "heartbeat interval < heartbeat timeout" in result.output
    assert "embedded" not in result.output


def test_the_column_builder_choices_are_ingests():
    from streamtrain.ingest.settings import COLUMN_BUILDERS

    (param,) = [p for p in worker.params if p.name == "column_builder"]
    assert isinstance(param.type, click.Choice)
    assert tuple(param.type.choices) == COLUMN_BUILDERS
    assert param.envvar == "STREAMTRAIN_INGEST_BUILDER"


def test_the_command_line_loads_neither_ingest_nor_zeromq():
    code = (
        "import sys, streamtrain.cli; "
        "loaded = [m for m in ('zmq', 'confluent_kafka', 'streamtrain.ingest', "
        "'streamtrain.worker') if m in sys.modules]; "
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_wildcard_shuffle_host_needs_an_address_to_announce():
    """A fixed-port bind on ``*`` announced ``tcp://*:5555``, which
    made every peer's shuffle thread fail to connect."""
    result = CliRunner().invoke(
        worker,
        ["--topic", "t", "--group", "g", "--shuffle", "advanced", "--shuffle-host", WILDCARD],
    )
    assert result.exit_code == 2
    assert "--shuffle-advertise-host" in result.output
    assert "embedded" not in result.output


def test_no_curve_beyond_loopback_is_refused():
    """The shuffle must authenticate whenever it listens beyond
    loopback."""
    result = CliRunner().invoke(
        worker,
        [
            *("--topic", "t", "--group", "g", "--shuffle", "advanced"),
            *("--shuffle-host", "10.1.2.3", "--no-shuffle-curve"),
        ],
    )
    assert result.exit_code == 2
    assert "must authenticate" in result.output


def test_the_default_batch_is_the_benchmarks_best_and_help_says_so():
    """The worker's default batch is the fastest size benchmarks/ingest.py
    measured (docs/benchmarks.md), and --help says where it comes from."""
    option = next(p for p in worker.params if p.name == "batch_records")
    assert option.default == 1_024
    help_text = CliRunner().invoke(worker, ["--help"], terminal_width=200).output
    assert "benchmarks/ingest.py" in help_text
