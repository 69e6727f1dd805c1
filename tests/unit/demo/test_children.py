"""The demo's child processes: names, connection environment, the workers' command line."""

import sys
from pathlib import Path

import pytest

from streamtrain.config import KafkaSettings
from streamtrain.demo.children import DemoNames, kafka_env, streamtrain_command
from streamtrain.demo.trainer import DemoWorkerConfig
from streamtrain.demo.worker_args import (
    FAST_GROUP_CONFIG,
    WORKER_NICENESS,
    pool_size_path,
    worker_argv,
    worker_env,
)
from streamtrain.errors import ConfigError


def test_names_derive_from_the_run_id():
    names = DemoNames.for_run("abcd1234")
    assert names.topic == "streamtrain.demo.abcd1234.ctr"
    assert names.job == "streamtrain-demo-abcd1234"
    assert names.control("alerts") == "streamtrain.demo.abcd1234.alerts"
    assert DemoNames.for_run("abcd1234", "my.topic").topic == "my.topic"
    assert streamtrain_command("x") == [sys.executable, "-m", "streamtrain", "x"]


def test_kafka_env_passes_the_connection_but_no_empty_fields():
    env = kafka_env(
        KafkaSettings(
            bootstrap="broker:9093",
            security_protocol="SASL_SSL",
            sasl_mechanism="PLAIN",
            sasl_username="u",
            sasl_password="p",
            extra={"client.rack": "a"},
        )
    )
    assert env == {
        "STREAMTRAIN_BOOTSTRAP": "broker:9093",
        "STREAMTRAIN_SECURITY_PROTOCOL": "SASL_SSL",
        "STREAMTRAIN_SASL_MECHANISM": "PLAIN",
        "STREAMTRAIN_SASL_USERNAME": "u",
        "STREAMTRAIN_SASL_PASSWORD": "p",
        "STREAMTRAIN_KAFKA_CONFIG": "client.rack=a",
    }
    with pytest.raises(ConfigError, match="spaces"):
        kafka_env(KafkaSettings(bootstrap="broker:9093", extra={"client.id": "a b"}))


def test_worker_argv_and_env_are_unchanged():
    run = Path("/tmp/run")
    argv = worker_argv(
        DemoNames.for_run("abcd1234"), run_dir=run, shuffle="advanced", queue_records=1024
    )
    # below the traffic, broker and control app that share the machine
    assert argv[:6] == ["nice", "-n", "10", sys.executable, "-m", "streamtrain"]
    assert argv[6:] == [
        *("worker", "--topic", "streamtrain.demo.abcd1234.ctr"),
        *("--group", "streamtrain-demo-abcd1234"),
        *("--entry", "streamtrain.demo.trainer:demo_app"),
        *("--batch-records", "128", "--queue-records", "1024", "--shuffle", "advanced"),
        *("--assignment", "group"),
        *("--states-topic", "streamtrain-demo-abcd1234.worker-states"),
        *("--admission-timeout-s", "60", "--drain-timeout-s", "5"),
        *("--shuffle-heartbeat-interval-ms", "500", "--shuffle-heartbeat-timeout-ms", "3000"),
        *("--pool-size-file", "/tmp/run/pool-size"),
        *("--throughput-topic", "streamtrain.demo.abcd1234.throughput"),
        *("--sample-interval-s", "1", "--session-timeout-ms", "6000"),
        *("--heartbeat-interval-ms", "500"),
        *("--engine", "none"),
    ]
    assert pool_size_path(run) == run / "pool-size"
    assert dict(FAST_GROUP_CONFIG) == {"session.timeout.ms": "6000", "heartbeat.interval.ms": "500"}
    config = DemoWorkerConfig(run_dir=run, start_at_s=1.5, duration_s=600.0)
    env = worker_env(KafkaSettings(bootstrap="localhost:9092"), config)
    assert env["STREAMTRAIN_BOOTSTRAP"] == "localhost:9092"
    assert DemoWorkerConfig.from_env(env) == config


def test_one_model_workers_get_the_engine_and_the_lighthouse():
    names = DemoNames.for_run("abcd1234")
    argv = worker_argv(
        names,
        run_dir=Path("/tmp/run"),
        shuffle="none",
        queue_records=1024,
        assignment="shards",
        engine="torchft",
        lighthouse="http://127.0.0.1:29510",
    )
    assert argv[argv.index("--batch-records") + 1] == "256"  # a round's sync amortized
    tail = argv[argv.index("--engine") :]
    assert tail == [
        *("--engine", "torchft", "--lighthouse", "http://127.0.0.1:29510"),
        *("--step-wait-s", "0.2"),
    ]
    with pytest.raises(ConfigError, match="lighthouse"):
        worker_argv(
            names, run_dir=Path("/tmp/run"), shuffle="none", queue_records=1024, engine="torchft"
        )
    config = DemoWorkerConfig(run_dir=Path("/tmp/run"), start_at_s=1.5, duration_s=600.0)
    env = worker_env(KafkaSettings(bootstrap="localhost:9092"), config)
    assert env["STREAMTRAIN_DEMO_ENGINE"] == "torchft" and config.one_model
    assert env["RUST_LOG"] == "warn"  # torchft's manager logs every step at INFO
    assert not DemoWorkerConfig.from_env({**env, "STREAMTRAIN_DEMO_ENGINE": "none"}).one_model
    with pytest.raises(ConfigError, match="engine"):
        DemoWorkerConfig.from_env({**env, "STREAMTRAIN_DEMO_ENGINE": "horovod"})


def test_the_workers_niceness_is_a_setting_with_the_clis_default():
    from streamtrain.commands.demo import demo
    from streamtrain.demo.settings import DemoSettings

    argv = worker_argv(
        DemoNames.for_run("abcd1234"),
        run_dir=Path("/tmp/run"),
        shuffle="none",
        queue_records=1024,
        niceness=0,
    )
    assert argv[:3] == ["nice", "-n", "0"]
    assert DemoSettings().worker_niceness == WORKER_NICENESS
    (option,) = [p for p in demo.params if p.name == "worker_niceness"]
    assert option.default == WORKER_NICENESS
    for wrong in (-1, 20):
        with pytest.raises(ConfigError, match="niceness"):
            DemoSettings(worker_niceness=wrong)
