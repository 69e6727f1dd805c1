"""The job ``benchmarks/chaos.py`` runs: its load, its restartable children, their argv.

Owned here: :class:`Load` (the producer thread: unique int64 ids at a rate, half on
partition 0, the delivered ones kept), :class:`Child` (a worker or the control app as a
process that can be killed -9 and started again, with its log), :func:`worker_argv`
(a ``streamtrain worker`` on the shuffle or on leased shards; the victim of the network
partition binds :data:`VICTIM_HOST` and announces :data:`RELAY_HOST`) and
:func:`control_argv` (``streamtrain lag run`` with the planner, and the shard
coordinator with ``--assignment shards``).
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from confluent_kafka import Producer

from streamtrain.config import KafkaSettings
from streamtrain.process import die_with_parent_preexec, stop_child

__all__ = ["RELAY_HOST", "REPO", "VICTIM_HOST", "Child", "Load", "control_argv", "worker_argv"]

REPO = Path(__file__).resolve().parents[1]
RELAY_HOST = "127.0.0.3"
VICTIM_HOST = "127.0.0.2"


class Load(threading.Thread):
    """Unique int64 ids at ``rate`` records/s, half on partition 0; keeps the delivered."""

    def __init__(
        self, kafka: KafkaSettings, topic: str, partitions: int, rate: float, linger_ms: int
    ) -> None:
        super().__init__(name="chaos-load", daemon=True)
        # every produced batch is an object on the durable broker's S3 storage, and every
        # fetch lists all objects of its partition: few large batches keep the fetch cheap
        config = {"linger.ms": linger_ms, "batch.num.messages": 100_000}
        self.producer = Producer(kafka.confluent_config(**config))
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.stop = threading.Event()
        self.delivered: list[int] = []
        self.failed = 0
        self.produced = 0

    def _done(self, error: Any, message: Any) -> None:
        if error is None:
            self.delivered.append(int.from_bytes(message.value(), "little"))
        else:
            self.failed += 1

    def run(self) -> None:
        started = time.monotonic()
        while not self.stop.is_set():
            due = int((time.monotonic() - started) * self.rate)
            for i in range(self.produced, due):
                partition = 0 if i % 2 == 0 else 1 + (i // 2) % (self.partitions - 1)
                try:
                    self.producer.produce(
                        self.topic,
                        i.to_bytes(8, "little"),
                        partition=partition,
                        on_delivery=self._done,
                    )
                except BufferError:
                    break  # the broker is away and the queue full: the rest comes later
                self.produced = i + 1
            self.producer.poll(0)
            self.stop.wait(0.02)
        self.producer.flush(120)


class Child:
    """One restartable child process (a worker or the control app) with its log."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], logs: Path) -> None:
        self.name = name
        self.argv = argv
        self.env = env
        self.logs = logs
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self._log = (self.logs / f"{self.name}.log").open("ab")
        self.process = subprocess.Popen(
            self.argv,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent_preexec(),
        )
        self.starts += 1

    def exited(self) -> int | None:
        """The exit code when the process ended by itself since its start, else None."""
        return None if self.process is None else self.process.poll()

    def kill(self) -> None:
        """kill -9 (the fault), and reap it."""
        if self.process is not None:
            stop_child(self.process, self.name, 10, signal.SIGKILL)

    def close(self) -> None:
        """Close the log (the process is stopped first, with the others)."""
        if self._log is not None:
            self._log.close()


def worker_argv(
    topic: str, job: str, index: int, args: argparse.Namespace, victim: bool
) -> list[str]:
    workers = args.workers
    argv = [sys.executable, "-m", "streamtrain.commands.worker", "--topic", topic]
    argv += ["--group", job, "--worker-id", f"w{index}"]
    argv += ["--entry", "benchmarks.scaling_app:make", "--app-dir", str(REPO)]
    if args.assignment == "shards":
        return [*argv, "--assignment", "shards", "--batch-records", "50"]
    argv += ["--partition", str(index), "--partition", str(index + workers)]
    # a small queue so that the hot worker overflows (the shuffle's defaults otherwise)
    argv += ["--batch-records", "50", "--queue-records", "500"]
    argv += ["--session-timeout-ms", "6000", "--heartbeat-interval-ms", "500"]
    argv += ["--shuffle", "advanced"]
    # each heartbeat is an object on S3 that every members reader lists at each fetch
    argv += ["--shuffle-heartbeat-interval-ms", str(args.heartbeat_ms)]
    argv += ["--shuffle-heartbeat-timeout-ms", str(5 * args.heartbeat_ms)]
    if victim:
        argv += ["--shuffle-host", VICTIM_HOST, "--shuffle-advertise-host", RELAY_HOST]
    return argv


def control_argv(
    job: str, topic: str, port: int, data_dir: Path, args: argparse.Namespace
) -> list[str]:
    argv = [sys.executable, "-m", "streamtrain", "lag", "run", "--group", job, "--topic", topic]
    argv += ["--app-id", f"{job}-control", "--web-port", str(port), "--tick-s", "1"]
    argv += ["--data-dir", str(data_dir), "--plan-job", job]
    argv += ["--reports-topic", f"{job}.reports", "--alerts-topic", f"{job}.alerts"]
    if args.assignment == "shards":
        argv += ["--shards-job", job, "--shard-lease-s", str(args.lease_s)]
    return argv
