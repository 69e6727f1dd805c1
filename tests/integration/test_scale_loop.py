"""The scaling loop end to end on the embedded broker: a lagging group and throughput
samples -> `streamtrain lag run --plan-job` emits a ScaleCommand -> the command consumer
applies it to a LocalProcessPool of real child processes, once, however often delivered."""

import json
import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from streamtrain.executors import ApplierSettings, CommandApplier, LocalProcessPool, Outcome
from streamtrain.executors.consumer import CommandConsumer, ConsumerSettings
from streamtrain.kafka import create_topic
from streamtrain.ports import free_port
from streamtrain.proto import control_plane_pb2 as cp
from streamtrain.wire import decode, encode
from tests.integration.cli_process import SCRIPT
from tests.integration.http_kafka import get_json, read_topic
from tests.integration.lag_process import FAST_SESSION_S, start_lag_app, stop_process

JOB = "demo"
FAST_GROUP = (("session.timeout.ms", "6000"), ("heartbeat.interval.ms", "500"))


class Traffic(threading.Thread):
    """Records into the topic (nobody consumes them: lag grows) and one worker's samples."""

    def __init__(self, settings, topic, samples_topic):
        super().__init__(daemon=True)
        self.producer = Producer(settings.confluent_config(**{"batch.num.messages": 1}))
        self.topic, self.samples_topic = topic, samples_topic
        self.workers = 1
        self.stop = threading.Event()

    def run(self):
        tick = 0
        while not self.stop.wait(0.05):
            self.producer.produce(self.topic, value=b"r")
            tick += 1
            if tick % 20 == 0:  # every second: each worker reports 5 samples/s trained
                now_ms = int(time.time() * 1000)
                for index in range(self.workers):
                    sample = cp.ThroughputSample(
                        job=JOB,
                        worker_id=f"worker-{index}",
                        workers=self.workers,
                        records_per_s_trained=5.0,
                        window_s=1.0,
                        observed_at_ms=now_ms,
                    )
                    self.producer.produce(self.samples_topic, value=encode(sample))
            self.producer.poll(0)
        self.producer.flush(10)


@pytest.fixture
def names():
    suffix = time.monotonic_ns()
    return {
        k: f"{k}-{suffix}"
        for k in ("events", "group", "samples", "commands", "alerts", "reports", "app")
    }


def test_planner_command_is_applied_once_to_a_local_pool(broker, names, tmp_path):
    settings = broker.kafka_settings()
    for key in ("events", "samples", "commands", "alerts", "reports"):
        create_topic(settings, names[key], 1, exist_ok=True)
    committer = Consumer(settings.confluent_config(**{"group.id": names["group"]}))
    committer.commit(offsets=[TopicPartition(names["events"], 0, 0)], asynchronous=False)
    committer.close()
    traffic = Traffic(settings, names["events"], names["samples"])
    traffic.start()
    port = free_port()
    app, log = start_lag_app(
        broker.bootstrap,
        names["group"],
        port,
        tmp_path / "app.log",
        "--app-id",
        names["app"],
        "--reports-topic",
        names["reports"],
        "--alerts-topic",
        names["alerts"],
        "--plan-job",
        JOB,
        "--policy",
        "streamtrain",
        "--policy-setting",
        "decision_interval_s=1",
        "--samples-topic",
        names["samples"],
        "--commands-topic",
        names["commands"],
        "--plan-step-s",
        "1",
        "--sample-bucket-s",
        "1",
        "--action-pause-s",
        "5",
        "--max-workers",
        "4",
        session_timeout_s=FAST_SESSION_S,
    )
    pool = LocalProcessPool([sys.executable, "-c", "import time; time.sleep(300)"], grace_s=2)
    applier = CommandApplier(pool, ApplierSettings(job=JOB, max_attempts=1))
    consumer = CommandConsumer(
        settings,
        applier,
        ConsumerSettings(
            job=JOB,
            commands_topic=names["commands"],
            alerts_topic=names["alerts"],
            consumer_config=FAST_GROUP,
        ),
    )
    try:
        pool.scale_to(1)
        consumer.start()
        applied = None
        deadline = time.monotonic() + 150
        while applied is None and time.monotonic() < deadline:
            assert app.poll() is None, (tmp_path / "app.log").read_text()
            for handled in consumer.poll(1.0):
                if handled.result is not None and handled.result.outcome is Outcome.APPLIED:
                    applied = handled.result
        assert applied is not None, (
            "no command applied in 150 s:\n" + (tmp_path / "app.log").read_text()[-3000:]
        )
        target = applied.target_workers
        assert target is not None and 1 < target <= 4
        assert (applied.workers_before, applied.workers_after) == (1, target)
        assert pool.current_workers() == target
        assert len({w.pid for w in pool.workers()}) == target

        # The command on the topic says what the planner saw and why.
        raw = read_topic(settings, names["commands"], 5.0)
        commands = [decode(cp.ScaleCommand, value) for value in raw]
        first = next(c for c in commands if c.command_id == applied.command_id)
        assert (first.job, first.current_workers, first.target_workers) == (JOB, 1, target)
        assert first.reason in (cp.ScaleCommand.PROACTIVE, cp.ScaleCommand.FALLBACK)
        assert "prior" in first.explanation

        # Delivered again: recognized, not applied twice.
        producer = Producer(settings.confluent_config())
        producer.produce(names["commands"], key=JOB.encode(), value=raw[commands.index(first)])
        assert producer.flush(10) == 0
        duplicate = None
        deadline = time.monotonic() + 30
        while duplicate is None and time.monotonic() < deadline:
            for handled in consumer.poll(1.0):
                if handled.result and handled.result.command_id == first.command_id:
                    duplicate = handled.result
        assert duplicate is not None and duplicate.outcome is Outcome.DUPLICATE
        assert pool.current_workers() == target

        # The workers now report the new pool size: the planner's action settles.
        traffic.workers = target
        deadline = time.monotonic() + 30
        status: dict[str, object] = {}
        while time.monotonic() < deadline:
            status = get_json(port, "/planner")[1] or {}
            if status.get("current_workers") == target and status.get("pending_command") is None:
                break
            time.sleep(0.5)
        assert status["current_workers"] == target and status["pending_command"] is None
        assert status["throughput_source"] == "prior"

        # At most 4 workers give 5·4·0.8² = 12.8 records/s of the 20 arriving.
        alerts = [decode(cp.Alert, v) for v in read_topic(settings, names["alerts"], 5.0)]
        assert any(a.kind == cp.Alert.CANNOT_KEEP_UP and not a.resolved for a in alerts)
    finally:
        consumer.close()
        pool.close()
        traffic.stop.set()
        traffic.join(timeout=15)
        code = stop_process(app, log)
    assert code == 0


def _read_lines(stream, lines):
    for line in stream:
        lines.append(line)


def test_scale_apply_cli_applies_a_command_once(broker, names, tmp_path):
    settings = broker.kafka_settings()
    create_topic(settings, names["commands"], 1, exist_ok=True)
    create_topic(settings, names["alerts"], 1, exist_ok=True)
    record = tmp_path / "scaled.txt"
    process = subprocess.Popen(
        [
            SCRIPT,
            "scale",
            "apply",
            "--bootstrap",
            broker.bootstrap,
            "--commands-topic",
            names["commands"],
            "--alerts-topic",
            names["alerts"],
            "--job",
            JOB,
            "--executor",
            "command",
            "--scale-command",
            f'{sys.executable} -c \'import sys; open(sys.argv[1], "a").write(sys.argv[2] + "\\n"); '
            f"print(sys.argv[2])' {record} {{target}}",
            "--kafka-config",
            "session.timeout.ms=6000",
            "--kafka-config",
            "heartbeat.interval.ms=500",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=_read_lines, args=(process.stdout, lines), daemon=True)
    reader.start()
    try:
        command = cp.ScaleCommand(
            command_id="cli-1",
            job=JOB,
            current_workers=1,
            target_workers=3,
            reason=cp.ScaleCommand.MANUAL,
            created_at_ms=int(time.time() * 1000),
        )
        other = cp.ScaleCommand(
            command_id="x", job="other", target_workers=9, created_at_ms=command.created_at_ms
        )
        producer = Producer(settings.confluent_config())
        for message in (command, other, command):
            producer.produce(names["commands"], key=message.job.encode(), value=encode(message))
        producer.produce(names["commands"], key=JOB.encode(), value=b"\xff not a command")
        assert producer.flush(10) == 0
        deadline = time.monotonic() + 60
        while len(lines) < 2 and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.2)
        results = [json.loads(line) for line in lines]
        assert [(r["command_id"], r["outcome"]) for r in results] == [
            ("cli-1", "applied"),
            ("cli-1", "duplicate"),
        ]
        assert results[0]["workers_after"] == 3
        assert record.read_text() == "3\n"
        # The undecodable message became an alert, not a silent drop.
        deadline = time.monotonic() + 30
        alerts: list[cp.Alert] = []
        while not alerts and time.monotonic() < deadline:
            alerts = [decode(cp.Alert, v) for v in read_topic(settings, names["alerts"], 2.0)]
        assert any("undecodable" in a.message for a in alerts)
    finally:
        stop_process(process)
        reader.join(timeout=5)
        if process.stdout is not None:
            process.stdout.close()
    assert process.returncode == 130
