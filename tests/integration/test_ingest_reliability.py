"""Reliability of ingest: a worker killed with SIGKILL mid-stream loses nothing, and a
broker that is unreachable for a few seconds is waited out with a clear log line."""

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from streamtrain.broker import free_port, resolve_tansu_binary
from streamtrain.config import KafkaSettings
from streamtrain.errors import BrokerUnreachableError
from streamtrain.ingest import IngestConsumer, IngestSettings, RawDecoder
from streamtrain.ingest.example import SyntheticCtr, split_records
from streamtrain.kafka import create_topic, probe

DEADLINE_S = 60.0
REPO = Path(__file__).resolve().parents[2]

# The worker's training app for the kill test: the built-in MMoE step, then one line per
# record ("id partition offset") appended to a log before the worker acknowledges.
RECORDING_APP = textwrap.dedent(
    """
    import os
    import time

    from streamtrain.ingest.mmoe import MmoeCtrApp


    class RecordingApp(MmoeCtrApp):
        def __init__(self):
            super().__init__()
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
            self.log = os.open(os.environ["INGEST_TRAINED_LOG"], flags, 0o644)
            self.delay_s = float(os.environ.get("INGEST_STEP_DELAY_S", "0"))

        def step(self, batch):
            loss = super().step(batch)
            time.sleep(self.delay_s)
            rows = zip(
                batch.columns["id"].tolist(),
                batch.records.partitions.tolist(),
                batch.records.offsets.tolist(),
            )
            os.write(self.log, "".join(f"{i} {p} {o}\\n" for i, p, o in rows).encode())
            return loss


    def make():
        return RecordingApp()
    """
)


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def trained_lines(path: Path) -> list[tuple[int, int, int]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3:
            rows.append((int(parts[0]), int(parts[1]), int(parts[2])))
    return rows


def committed(settings, group, topic, partitions):
    consumer = Consumer(settings.confluent_config(**{"group.id": group}))
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=10)
    finally:
        consumer.close()
    return {tp.partition: max(tp.offset, 0) for tp in found}


def start_worker(bootstrap, topic, group, app_dir, log_path, *extra, delay_s=0.0):
    command = [
        sys.executable,
        "-m",
        "streamtrain.commands.worker",
        "--topic",
        topic,
        "--group",
        group,
        "--bootstrap",
        bootstrap,
        "--entry",
        "ingest_recording_app:make",
        "--app-dir",
        str(app_dir),
        "--batch-records",
        "50",
        "--queue-records",
        "400",
        "--commit-interval-s",
        "0.2",
        "--session-timeout-ms",
        "6000",
        "--heartbeat-interval-ms",
        "500",
        "--throughput-topic",
        "",
        *extra,
    ]
    env = {
        **os.environ,
        "INGEST_TRAINED_LOG": str(log_path),
        "INGEST_STEP_DELAY_S": str(delay_s),
        "PYTHONPATH": str(REPO),
    }
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def test_sigkill_mid_stream_loses_no_record_and_duplicates_only_the_unacknowledged(
    broker, tmp_path
):
    settings = broker.kafka_settings()
    topic, group = unique("ingest-kill"), unique("job")
    partitions, total = 4, 3000
    create_topic(settings, topic, partitions)
    producer = Producer(settings.confluent_config(**{"linger.ms": 5}))
    for i, value in enumerate(split_records(SyntheticCtr(seed=2).sample(total))):
        producer.produce(topic, value, partition=i % partitions)  # offset = i // partitions
    assert producer.flush(30) == 0
    (tmp_path / "ingest_recording_app.py").write_text(RECORDING_APP)
    log_a, log_b = tmp_path / "a.log", tmp_path / "b.log"

    first = start_worker(broker.bootstrap, topic, group, tmp_path, log_a, delay_s=0.1)
    try:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            assert first.poll() is None, first.stderr.read() if first.stderr else ""
            assert time.monotonic() < deadline, "worker A did not get going"
            if len(trained_lines(log_a)) >= 600 and sum(
                committed(settings, group, topic, range(partitions)).values()
            ):
                break
            time.sleep(0.1)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(10)
        for stream in (first.stdout, first.stderr):
            if stream is not None:
                stream.close()
    trained_a = trained_lines(log_a)
    assert len(trained_a) < total, "worker A finished before it was killed"
    at_kill = committed(settings, group, topic, range(partitions))

    second = start_worker(broker.bootstrap, topic, group, tmp_path, log_b, "--idle-exit-s", "3")
    try:
        out, err = second.communicate(timeout=DEADLINE_S)
    finally:
        if second.poll() is None:
            second.kill()
            second.communicate(timeout=10)
    assert second.returncode == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    trained_b = trained_lines(log_b)
    assert summary["records_trained"] == len(trained_b)

    ids_a = {i for i, _, _ in trained_a}
    ids_b = {i for i, _, _ in trained_b}
    assert ids_a | ids_b == set(range(total))  # every record trained at least once
    for p in range(partitions):
        offsets_b = sorted(o for _, q, o in trained_b if q == p)
        assert offsets_b == list(range(at_kill[p], total // partitions))  # resumed at the commit
    duplicates = ids_a & ids_b
    unacknowledged = {i for i, p, o in trained_a if o >= at_kill[p]}
    assert duplicates <= unacknowledged  # only what A trained but had not committed
    assert len(duplicates) <= 400 + 50  # at most A's local queue plus one batch
    assert committed(settings, group, topic, range(partitions)) == {
        p: total // partitions for p in range(partitions)
    }


class TcpProxy:
    """A loopback TCP forwarder that can be cut (connections reset, port refused) and restored."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._connections: list[socket.socket] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.restore()

    def restore(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        thread = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        thread.start()
        self._threads.append(thread)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # the listener was closed: cut()
            thread = threading.Thread(target=self._serve, args=(client,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
        except OSError:
            client.close()  # the broker is not listening (yet): refuse like it would
            return
        upstream.settimeout(None)
        with self._lock:
            self._connections += [client, upstream]
        back = threading.Thread(target=self._pump, args=(upstream, client), daemon=True)
        back.start()
        self._pump(client, upstream)
        back.join(10)
        client.close()
        upstream.close()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Refuse new connections and reset the open ones."""
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
            self._listener.close()
            self._listener = None
        with self._lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.cut()
        for thread in self._threads:
            thread.join(5)


@pytest.fixture
def proxied_broker():
    """A Tansu broker that advertises a proxy's port, so every client goes through it."""
    port = free_port()
    proxy = TcpProxy(port)
    command = [
        resolve_tansu_binary(),
        "broker",
        "--listener-url",
        f"tcp://127.0.0.1:{port}",
        "--advertised-listener-url",
        f"tcp://127.0.0.1:{proxy.port}",
        "--storage-engine",
        "memory://tansu/",
        "--cluster-id",
        "streamtrain-outage",
    ]
    env = {key: os.environ[key] for key in ("PATH", "HOME") if key in os.environ}
    with tempfile.TemporaryFile() as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=env)
        try:
            settings = KafkaSettings(bootstrap=f"127.0.0.1:{proxy.port}")
            deadline = time.monotonic() + 15
            while True:
                try:
                    probe(settings, timeout_s=1)
                    break
                except BrokerUnreachableError:
                    assert process.poll() is None and time.monotonic() < deadline
                    time.sleep(0.1)
            yield settings, proxy
        finally:
            proxy.close()
            process.terminate()
            try:
                process.wait(1)  # Tansu may ignore SIGTERM
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)


def test_broker_unreachable_for_seconds_is_retried_and_nothing_is_lost(proxied_broker, caplog):
    settings, proxy = proxied_broker
    topic, group = unique("ingest-outage"), unique("group")
    create_topic(settings, topic, 2)

    def produce(first, count):
        producer = Producer(settings.confluent_config(**{"linger.ms": 5}))
        for i in range(first, first + count):
            producer.produce(topic, str(i).encode(), partition=i % 2)
        assert producer.flush(30) == 0

    produce(0, 300)
    ingest = IngestSettings(
        group=group,
        topics=(topic,),
        partitions=(0, 1),
        batch_records=50,
        commit_interval_s=0.2,
        reconnect_backoff_max_ms=1000,
    )
    seen: list[int] = []

    def read_until(consumer, count):
        deadline = time.monotonic() + DEADLINE_S
        while len(set(seen)) < count:
            assert time.monotonic() < deadline, f"read {len(set(seen))} of {count}"
            batch = consumer.next_batch(timeout_s=0.2)
            if batch is not None:
                seen.extend(int(v) for v in batch.records.values())
                batch.ack()

    caplog.set_level(logging.WARNING, logger="streamtrain.ingest.consumer")
    with IngestConsumer(settings, ingest, RawDecoder()) as consumer:
        read_until(consumer, 300)
        proxy.cut()
        outage_until = time.monotonic() + 4
        while time.monotonic() < outage_until:  # the trainer keeps asking meanwhile
            assert consumer.next_batch(timeout_s=0.2) is None
        proxy.restore()
        produce(300, 300)
        read_until(consumer, 600)
    assert set(seen) == set(range(600))
    messages = [r.getMessage() for r in caplog.records]
    assert any("Kafka unreachable at" in m and "retrying with backoff" in m for m in messages)
    assert any("Kafka reachable again" in m for m in messages)
    assert sum(consumer.last_committed.values()) == 600
