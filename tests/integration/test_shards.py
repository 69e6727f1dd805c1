"""--assignment shards with real processes: the control app (`lag run --shards-job`) and
`streamtrain worker` subprocesses on the embedded broker. Every record id is checked."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from streamtrain import wire
from streamtrain.broker import free_port
from streamtrain.config import KafkaSettings
from streamtrain.executors.shard_release import ShardRelease
from streamtrain.kafka import create_topic
from streamtrain.proto import control_plane_pb2 as pb
from tests.integration.lag_process import start_lag_app, stop_process

REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 120.0

# Raw records whose value is their id; each step appends "id partition offset" lines
# to the worker's own file before the batch is acknowledged, then sleeps (a slow device,
# not a busy CPU).
RECORDING_APP = textwrap.dedent(
    """
    import os
    import time

    from streamtrain.ingest.decoders import RawDecoder


    class Recording:
        decoder = RawDecoder()

        def __init__(self):
            name = os.environ["STREAMTRAIN_WORKER_ID"]
            path = os.path.join(os.environ["SHARDS_TRAINED_DIR"], name + ".log")
            self.log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            self.delay_s = float(os.environ.get("SHARDS_STEP_DELAY_S", "0"))
            self.warm = False

        def warm_start(self, worker_id):
            self.warm = True

        def step(self, batch):
            assert self.warm, "warm_start runs before any data"
            records = batch.records
            ids = [records.value(i).decode() for i in range(len(records))]
            rows = zip(ids, records.partitions.tolist(), records.offsets.tolist())
            os.write(self.log, "".join(f"{i} {p} {o}\\n" for i, p, o in rows).encode())
            time.sleep(self.delay_s)


    def make():
        return Recording()
    """
)


@pytest.fixture
def job(broker, tmp_path):
    """A topic of ``partitions`` partitions, the recording app, and helpers."""
    return Job(broker.bootstrap, tmp_path)


class Job:
    def __init__(self, bootstrap, tmp_path):
        self.bootstrap = bootstrap
        self.kafka = KafkaSettings(bootstrap)
        self.name = f"shards-{uuid.uuid4().hex[:8]}"
        self.topic = f"{self.name}-data"
        self.dir = tmp_path
        self.trained_dir = tmp_path / "trained"
        self.trained_dir.mkdir()
        (tmp_path / "shards_recording_app.py").write_text(RECORDING_APP)
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.logs = []
        self.produced = 0
        self.control: Any = None
        self.control_log: Any = None
        self.port = free_port()

    def create(self, partitions):
        self.partitions = partitions
        create_topic(self.kafka, self.topic, partitions)

    def produce(self, count):
        producer = Producer(self.kafka.confluent_config())
        for i in range(self.produced, self.produced + count):
            producer.produce(self.topic, str(i).encode(), partition=i % self.partitions)
        producer.flush(30)
        self.produced += count

    def start_control(self, *extra):
        self.control, self.control_log = start_lag_app(
            self.bootstrap,
            self.name,
            self.port,
            self.dir / f"control-{int(time.time() * 1000)}.log",
            "--topic",
            self.topic,
            "--shards-job",
            self.name,
            "--shard-records",
            "100",
            "--shard-max-wait-s",
            "0.5",
            "--app-id",
            f"{self.name}-control",
            "--data-dir",
            str(self.dir / "control-data"),
            "--reports-topic",
            f"{self.name}.reports",
            "--alerts-topic",
            f"{self.name}.alerts",
            *extra,
        )

    def stop_control(self, sig=signal.SIGTERM):
        if sig == signal.SIGKILL:
            self.control.kill()
            self.control.wait(10)
            self.control_log.close()
        else:
            stop_process(self.control, self.control_log)

    def start_worker(self, worker_id, delay_s=0.02):
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "STREAMTRAIN_WORKER_ID": worker_id,
            "SHARDS_TRAINED_DIR": str(self.trained_dir),
            "SHARDS_STEP_DELAY_S": str(delay_s),
        }
        log = open(self.dir / f"{worker_id}.out", "w")  # noqa: SIM115 - closed in stop_all
        self.logs.append(log)
        self.workers[worker_id] = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamtrain.commands.worker",
                "--bootstrap",
                self.bootstrap,
                "--topic",
                self.topic,
                "--group",
                self.name,
                "--worker-id",
                worker_id,
                "--assignment",
                "shards",
                "--entry",
                "shards_recording_app:make",
                "--app-dir",
                str(self.dir),
                "--batch-records",
                "20",
                "--throughput-topic",
                "",
                "--states-topic",
                f"{self.name}.worker-states",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )

    def trained(self):
        """{worker id: [(id, partition, offset), ...]}"""
        rows = {}
        for path in self.trained_dir.glob("*.log"):
            rows[path.stem] = [
                tuple(int(x) for x in line.split())
                for line in path.read_text().splitlines()
                if len(line.split()) == 3
            ]
        return rows

    def trained_ids(self):
        return {row[0] for rows in self.trained().values() for row in rows}

    def committed(self):
        consumer = Consumer(self.kafka.confluent_config(**{"group.id": self.name}))
        try:
            found = consumer.committed(
                [TopicPartition(self.topic, p) for p in range(self.partitions)], timeout=10
            )
        finally:
            consumer.close()
        return {tp.partition: tp.offset for tp in found}

    def wait_all_trained_and_committed(self, timeout_s=DEADLINE_S):
        deadline = time.monotonic() + timeout_s
        want = self.produced
        while time.monotonic() < deadline:
            if (
                len(self.trained_ids()) >= want
                and sum(max(o, 0) for o in self.committed().values()) >= want
            ):
                return True
            self.check_alive()
            time.sleep(0.5)
        return False

    def check_alive(self):
        if self.control is not None and self.control.poll() is not None:
            raise AssertionError(f"the control app exited: {self.control.returncode}")

    def send_update(self, update):
        producer = Producer(self.kafka.confluent_config())
        producer.produce(f"{self.name}.shards", key=b"intruder", value=update)
        producer.flush(10)

    def shards_page(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/shards", timeout=5) as r:
            return json.loads(r.read())

    def stop_all(self):
        for process in self.workers.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.workers.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        if self.control is not None and self.control.poll() is None:
            self.stop_control()
        for log in self.logs:
            log.close()


@contextlib.contextmanager
def running(job):
    try:
        yield job
    finally:
        job.stop_all()


def wait_for(predicate, timeout_s=DEADLINE_S, what="condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def committed_within_trained(job):
    """No partition's committed offset passes an offset no worker trained."""
    trained: dict[int, set[int]] = {}
    for rows in job.trained().values():
        for _, p, o in rows:
            trained.setdefault(p, set()).add(o)
    for p, position in job.committed().items():
        if position > 0:
            missing = set(range(position)) - trained.get(p, set())
            assert not missing, f"partition {p} committed to {position} past untrained {missing}"


def test_kill_9_a_worker_holding_shards_requeues_them_and_every_id_is_trained(job):
    job.create(4)
    with running(job):
        job.start_control()
        for name in ("w0", "w1", "w2"):
            job.start_worker(name, delay_s=0.05)
        job.produce(3_000)
        wait_for(lambda: len(job.trained().get("w1", [])) > 50, what="w1 to train")
        job.workers["w1"].kill()  # SIGKILL: holds shards, sends no more heartbeats
        job.workers["w1"].wait(10)
        # bad input while it runs: garbage, another job, an unknown shard, out of range
        job.send_update(b"\x00not a protobuf")
        job.send_update(wire.encode(pb.ShardUpdate(job="other", worker_id="x")))
        bogus = pb.ShardUpdate(
            job=job.name,
            worker_id="intruder",
            done=[
                pb.ShardUpdate.Range(
                    topic=job.topic, partition=0, start_offset=5, end_offset=7, epoch=1
                ),
                pb.ShardUpdate.Range(
                    topic=job.topic, partition=1, start_offset=0, end_offset=10**9, epoch=1
                ),
                pb.ShardUpdate.Range(topic="nope", partition=0, start_offset=0, end_offset=1),
            ],
        )
        job.send_update(wire.encode(bogus))
        job.produce(1_000)
        assert job.wait_all_trained_and_committed(), (
            f"trained {len(job.trained_ids())} of {job.produced}, committed {job.committed()}"
        )
        assert job.trained_ids() == set(range(job.produced))
        committed_within_trained(job)
        assert sum(job.committed().values()) == job.produced
        page = job.shards_page()
        assert page["refused"].get("MALFORMED", 0) >= 2
        assert sum(page["refused"].values()) >= 4
        assert page["lagging"] == []  # every partition done up to its end
    log = next(job.dir.glob("control-*.log")).read_text()
    assert "sent no heartbeat" in log  # w1's shards were requeued
    assert "ignoring" in log


def test_the_executor_hands_a_killed_workers_shards_back_before_the_lease_ends(job):
    """ShardRelease (what the demo's pool calls when a worker dies): with a lease far
    longer than the test may run, only the hand-back can requeue w1's shards."""
    job.create(4)
    with running(job):
        job.start_control("--shard-lease-s", "3600", "--faust-log-level", "info")
        for name in ("w0", "w1"):
            job.start_worker(name, delay_s=0.05)
        job.produce(2_000)
        wait_for(lambda: len(job.trained().get("w1", [])) > 50, what="w1 to train")
        job.workers["w1"].kill()
        job.workers["w1"].wait(10)
        release = ShardRelease(job.kafka, job.name)
        try:
            assert release.worker_gone("w1")
        finally:
            release.close()
        job.produce(500)
        assert job.wait_all_trained_and_committed(), (
            f"trained {len(job.trained_ids())} of {job.produced}, committed {job.committed()}"
        )
        assert job.trained_ids() == set(range(job.produced))
        committed_within_trained(job)
    log = next(job.dir.glob("control-*.log")).read_text()
    assert "worker w1 left" in log and "sent no heartbeat" not in log


def test_24_workers_on_16_partitions_all_train(job):
    job.create(16)
    with running(job):
        job.start_control()
        for i in range(24):
            job.start_worker(f"w{i:02d}", delay_s=0.2)
        wait_for(
            lambda: sum(1 for p in job.workers.values() if p.poll() is None) == 24,
            what="24 workers",
        )
        time.sleep(5)  # let them start (24 Python processes on 2 cores)
        for _ in range(20):
            job.produce(1_200)
            time.sleep(0.5)
        assert job.wait_all_trained_and_committed()
        trained = job.trained()
        idle = sorted(f"w{i:02d}" for i in range(24) if not trained.get(f"w{i:02d}"))
        assert not idle, f"workers that trained nothing: {idle}"
        assert job.trained_ids() == set(range(job.produced))


def test_control_app_restart_loses_no_shard_and_hands_none_out_twice(job):
    job.create(4)
    with running(job):
        job.start_control()
        for name in ("w0", "w1"):
            job.start_worker(name, delay_s=0.05)
        job.produce(2_000)
        wait_for(lambda: len(job.trained_ids()) > 300, what="training to start")
        job.stop_control(signal.SIGKILL)
        job.produce(1_000)
        job.start_control()
        job.produce(1_000)
        assert job.wait_all_trained_and_committed(), (
            f"trained {len(job.trained_ids())} of {job.produced}, committed {job.committed()}"
        )
        assert job.trained_ids() == set(range(job.produced))
        committed_within_trained(job)
        # no worker died and no lease expired: a record trained by both workers would
        # mean one shard was out to two workers at once
        by_worker = {w: {row[0] for row in rows} for w, rows in job.trained().items()}
        both = by_worker.get("w0", set()) & by_worker.get("w1", set())
        assert not both, f"{len(both)} records trained by both workers, e.g. {sorted(both)[:5]}"


def changelog_value_sizes(job):
    """The sizes of every value the control app wrote to its shard table's changelog."""
    consumer = Consumer(
        job.kafka.confluent_config(
            **{"group.id": f"{job.name}-reader", "enable.auto.commit": False}
        )
    )
    topic = f"{job.name}-control-shards-changelog"
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, low)])
        sizes, read, deadline = [], 0, time.monotonic() + 60
        while time.monotonic() < deadline and read < high - low:
            messages = consumer.consume(10_000, 0.5)
            read += len(messages)
            sizes += [len(v) for m in messages if m.error() is None and (v := m.value())]
    finally:
        consumer.close()
    return sizes


def test_a_backlog_keeps_the_shard_table_small(job):
    """30,000 records waiting in 10-record shards: cut all at once, one partition's table
    value would hold 1,500 shards (~50 KB, and 1 MB, the broker's message limit, at
    ~30,000 shards); cut as the queue drains, it holds a few. Training on meanwhile
    commits nothing untrained."""
    job.create(2)
    job.produce(30_000)
    with running(job):
        job.start_control("--shard-records", "10")
        for name in ("w0", "w1"):
            job.start_worker(name, delay_s=0.0)
        wait_for(lambda: len(job.trained_ids()) > 2_000, what="the backlog to be trained")
        sizes = changelog_value_sizes(job)
        assert sizes, "the shard table wrote nothing"
        assert max(sizes) <= 4_096, f"largest shard table value {max(sizes)} bytes"
        job.check_alive()
        committed_within_trained(job)


def test_a_topic_created_after_the_control_app_started_is_found_and_trained(job):
    """Discovery is retried until the job's topic exists (it is listed again every
    --shard-discover-interval-s; partitions added to a topic are found the same way, which
    the embedded broker cannot show: it does not support CreatePartitions)."""
    job.partitions = 2
    with running(job):
        job.start_control("--shard-discover-interval-s", "1")
        time.sleep(5.0)  # a few ticks find nothing
        job.create(2)
        job.start_worker("w0", delay_s=0.0)
        job.produce(400)
        assert job.wait_all_trained_and_committed(), (
            f"trained {len(job.trained_ids())} of {job.produced}, committed {job.committed()}"
        )
        assert job.trained_ids() == set(range(job.produced))
        assert job.committed() == {0: 200, 1: 200}


def test_a_worker_stalled_past_its_lease_loses_nothing(job):
    """SIGSTOP a worker holding shards for three leases: its shards go to the other
    worker; on SIGCONT it is told to let go, and its stale records count for nothing."""
    job.create(4)
    with running(job):
        job.start_control("--shard-lease-s", "2")
        for name in ("w0", "w1"):
            job.start_worker(name, delay_s=0.05)
        job.produce(3_000)
        wait_for(lambda: len(job.trained().get("w1", [])) > 100, what="w1 to train")
        job.workers["w1"].send_signal(signal.SIGSTOP)
        try:
            time.sleep(6.0)
            job.produce(1_000)
        finally:
            job.workers["w1"].send_signal(signal.SIGCONT)
        job.produce(1_000)
        assert job.wait_all_trained_and_committed(), (
            f"trained {len(job.trained_ids())} of {job.produced}, committed {job.committed()}"
        )
        assert job.trained_ids() == set(range(job.produced))
        committed_within_trained(job)
    log = next(job.dir.glob("control-*.log")).read_text()
    assert "sent no heartbeat" in log
