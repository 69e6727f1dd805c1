"""`streamtrain worker --engine torchft --assignment shards` on the embedded broker: the
shard coordinator (`lag run --shards-job`), `streamtrain lighthouse` and real workers
training one model. Every record id is checked."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from streamtrain import wire
from streamtrain.broker import free_port
from streamtrain.config import KafkaSettings
from streamtrain.elastic.lighthouse import LighthouseProcess, LighthouseSettings
from streamtrain.kafka import create_topic
from streamtrain.proto import data_plane_pb2 as dp
from tests.integration.lag_process import start_lag_app, stop_process

REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 180.0

# A distributed app over raw records whose value is their id: a small MLP on features
# of the id. A record whose value is not an integer makes the step fail (a bad batch).
# Each committed step appends the ids it trained to the worker's own file, before the
# records are acknowledged. ELASTIC_HIDDEN changes the model (a mismatched worker). With
# ELASTIC_HANG_ONCE_DIR a worker's first process hangs in its warm start (it never says
# READY); the process that replaces it in its slot starts normally.
ONE_MODEL_APP = textwrap.dedent(
    """
    import os
    import time

    import numpy as np
    import torch

    from streamtrain.elastic.app import TrainingParts
    from streamtrain.ingest.decoders import RawDecoder


    def ids_of(batch):
        records = batch.records
        return [int(records.value(i)) for i in range(len(records))]  # ValueError if bad


    def make():
        torch.manual_seed(0)
        torch.set_num_threads(1)
        hidden = int(os.environ.get("ELASTIC_HIDDEN", "16"))
        model = torch.nn.Sequential(
            torch.nn.Linear(4, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 1)
        )
        path = os.path.join(os.environ["ELASTIC_TRAINED_DIR"], os.environ["STREAMTRAIN_WORKER_ID"])
        log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        delay_s = float(os.environ.get("ELASTIC_STEP_DELAY_S", "0"))

        def forward_backward(model, batch):
            ids = np.asarray(ids_of(batch), dtype=np.float32)
            x = torch.from_numpy(np.sin(ids[:, None] * np.arange(1, 5, dtype=np.float32)))
            y = torch.from_numpy((np.cos(ids) > 0).astype(np.float32))
            loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x)[:, 0], y)
            loss.backward()
            time.sleep(delay_s)
            return float(loss.detach())

        app = TrainingParts(
            RawDecoder(), model, torch.optim.SGD(model.parameters(), lr=0.1), forward_backward
        )

        def committed(batch, step):
            os.write(log, "".join(f"{i} {step}\\n" for i in ids_of(batch)).encode())

        def warm_start(worker_id):
            marks = os.environ.get("ELASTIC_HANG_ONCE_DIR")
            if marks and worker_id in os.environ.get("ELASTIC_HANG_WORKERS", "").split(","):
                mark = os.path.join(marks, worker_id)
                if not os.path.exists(mark):
                    open(mark, "w").close()
                    time.sleep(3600)

        app.committed = committed
        app.warm_start = warm_start
        return app
    """
)


class Job:
    def __init__(self, bootstrap: str, tmp_path: Path) -> None:
        self.bootstrap = bootstrap
        self.kafka = KafkaSettings(bootstrap)
        self.name = f"elastic-{uuid.uuid4().hex[:8]}"
        self.topic = f"{self.name}-data"
        self.dir = tmp_path
        self.trained_dir = tmp_path / "trained"
        self.trained_dir.mkdir()
        (tmp_path / "one_model_app.py").write_text(ONE_MODEL_APP)
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.logs: list[object] = []
        self.produced: list[bytes] = []
        self.partitions = 4
        self.port = free_port()
        create_topic(self.kafka, self.topic, self.partitions)
        self.lighthouse = LighthouseProcess(
            LighthouseSettings(port=0, min_replicas=1), log_path=tmp_path / "lighthouse.log"
        )
        self.lighthouse.start()
        self.start_control()

    def start_control(self) -> None:
        """The shard coordinator (`lag run --shards-job`); again after a kill, on the same
        app id and data directory: it restores the shard book from its changelog."""
        self.control, self.control_log = start_lag_app(
            self.bootstrap, self.name, self.port,
            self.dir / f"control-{time.monotonic_ns()}.log",
            "--topic", self.topic, "--shards-job", self.name,
            "--shard-records", "50", "--shard-max-wait-s", "0.5",
            "--app-id", f"{self.name}-control", "--data-dir", str(self.dir / "control-data"),
            "--reports-topic", f"{self.name}.reports", "--alerts-topic", f"{self.name}.alerts",
        )  # fmt: skip

    def worker_argv(self, *extra: str) -> list[str]:
        """A worker's command line (its id from --worker-id or STREAMTRAIN_WORKER_ID)."""
        assert self.lighthouse.address is not None
        return [
            sys.executable, "-m", "streamtrain.commands.worker",
            "--bootstrap", self.bootstrap, "--topic", self.topic, "--group", self.name,
            "--assignment", "shards",
            "--entry", "one_model_app:make", "--app-dir", str(self.dir),
            "--batch-records", "20", "--throughput-topic", "",
            "--states-topic", f"{self.name}.worker-states",
            "--engine", "torchft", "--lighthouse", self.lighthouse.address,
            "--step-wait-s", "0.1", *extra,
        ]  # fmt: skip

    def worker_env(self, **env: str) -> dict[str, str]:
        return {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "ELASTIC_TRAINED_DIR": str(self.trained_dir),
            **env,
        }

    def produce(self, values: list[bytes]) -> None:
        producer = Producer(self.kafka.confluent_config())
        for i, value in enumerate(values, start=len(self.produced)):
            producer.produce(self.topic, value, partition=i % self.partitions)
        producer.flush(30)
        self.produced.extend(values)

    def start_worker(self, worker_id: str, *extra: str, **env: str) -> None:
        log = (self.dir / f"{worker_id}.out").open("w")
        self.logs.append(log)
        self.workers[worker_id] = subprocess.Popen(
            self.worker_argv("--worker-id", worker_id, *extra),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.worker_env(STREAMTRAIN_WORKER_ID=worker_id, **env),
        )

    def trained(self) -> dict[int, set[int]]:
        """{id: {steps that trained it}}"""
        found: dict[int, set[int]] = {}
        for path in self.trained_dir.iterdir():
            for line in path.read_text().splitlines():
                parts = line.split()
                if len(parts) == 2:
                    found.setdefault(int(parts[0]), set()).add(int(parts[1]))
        return found

    def committed_total(self) -> int:
        consumer = Consumer(self.kafka.confluent_config(**{"group.id": self.name}))
        try:
            found = consumer.committed(
                [TopicPartition(self.topic, p) for p in range(self.partitions)], timeout=10
            )
        finally:
            consumer.close()
        return sum(max(tp.offset, 0) for tp in found)

    def wait_all(self, ids: set[int], timeout_s: float = DEADLINE_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if ids <= set(self.trained()) and self.committed_total() >= len(self.produced):
                return
            if self.control.poll() is not None:
                raise AssertionError("the control app exited")
            time.sleep(0.5)
        missing = sorted(ids - set(self.trained()))
        raise AssertionError(
            f"{len(missing)} ids never trained (first {missing[:10]}); "
            f"committed {self.committed_total()} of {len(self.produced)}"
        )

    def states(self) -> list[tuple[str, str]]:
        consumer = Consumer(self.kafka.confluent_config(**{"group.id": f"{self.name}-reader"}))
        consumer.assign([TopicPartition(f"{self.name}.worker-states", 0, 0)])
        events = []
        try:
            for message in consumer.consume(1000, 5.0):
                if message.error() is None:
                    event = wire.decode(dp.WorkerStateEvent, message.value() or b"")
                    events.append((event.worker_id, dp.WorkerStateEvent.State.Name(event.state)))
        finally:
            consumer.close()
        return events

    def output(self, worker_id: str) -> str:
        return (self.dir / f"{worker_id}.out").read_text(errors="replace")

    def stop_all(self) -> None:
        for process in self.workers.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.workers.values():
            try:
                process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        stop_process(self.control, self.control_log)
        self.lighthouse.stop()
        for log in self.logs:
            log.close()  # type: ignore[attr-defined]


@pytest.fixture
def job(broker, tmp_path):
    running = Job(broker.bootstrap, tmp_path)
    yield running
    running.stop_all()


def ids(first: int, count: int) -> list[bytes]:
    return [str(i).encode() for i in range(first, first + count)]


def test_kill_9_of_a_worker_loses_no_record_and_commits_nothing_untrained(job):
    job.produce(ids(0, 1500))
    for worker_id in ("w1", "w2", "w3"):
        job.start_worker(worker_id, ELASTIC_STEP_DELAY_S="0.05")
    deadline = time.monotonic() + DEADLINE_S
    while len(job.trained()) < 300:
        assert time.monotonic() < deadline, "training did not start"
        time.sleep(0.2)
    job.workers["w3"].kill()  # kill -9 mid-run, holding shards and maybe mid-step
    job.produce(ids(1500, 500))
    job.wait_all(set(range(2000)))
    assert job.committed_total() == 2000
    # one model: every worker's steps are the job's steps, none committed twice apart
    trained = job.trained()
    assert max(max(steps) for steps in trained.values()) > 10
    for worker_id in ("w1", "w2"):
        assert job.workers[worker_id].poll() is None, job.output(worker_id)


def test_a_worker_says_ready_only_after_it_holds_the_weights_and_a_mismatched_one_never(job):
    job.produce(ids(0, 400))
    job.start_worker("w1", ELASTIC_STEP_DELAY_S="0.05")
    deadline = time.monotonic() + DEADLINE_S
    while len(job.trained()) < 50:
        assert time.monotonic() < deadline, "training did not start"
        time.sleep(0.2)
    job.start_worker("odd", ELASTIC_HIDDEN="24")
    assert job.workers["odd"].wait(timeout=120) == 1
    assert "not this worker's model" in job.output("odd")
    job.start_worker("w2")
    deadline = time.monotonic() + DEADLINE_S
    while ("w2", "READY") not in (states := job.states()):
        assert time.monotonic() < deadline, f"w2 never said READY: {states}"
        assert job.workers["w2"].poll() is None, job.output("w2")
    job.produce(ids(400, 400))
    job.wait_all(set(range(800)))
    assert ("odd", "READY") not in states and ("odd", "STARTING") in states
    w2_steps = [
        int(line.split()[1]) for line in (job.trained_dir / "w2").read_text().split("\n") if line
    ]
    assert w2_steps and min(w2_steps) > 5  # it took the job's step (and weights) on joining
    assert not any(path.name == "odd" and path.read_text() for path in job.trained_dir.iterdir())


def test_a_malformed_batch_is_dead_lettered_and_the_rest_trained(job):
    values = ids(0, 300)
    values[123] = b"not-a-number"
    job.produce(values)
    job.start_worker("w1")
    job.start_worker("w2")
    good = set(range(300)) - {123}
    job.wait_all(good)
    consumer = Consumer(job.kafka.confluent_config(**{"group.id": f"{job.name}-dlq"}))
    consumer.assign([TopicPartition(f"{job.topic}.dlq", 0, 0)])
    try:
        letters = [m for m in consumer.consume(1000, 10.0) if m.error() is None]
    finally:
        consumer.close()
    assert b"not-a-number" in {m.value() for m in letters}
    assert [m.value() for m in letters] == [b"not-a-number"]  # alone: the rest trained
    reason = dict(letters[0].headers() or [])["streamtrain.error"]
    assert isinstance(reason, bytes) and b"training step failed" in reason
