"""KALE Table 2 in shape: no, basic and advanced shuffling under a skewed producer.

Owned here: :func:`run_policy`, one scripted run on a Kafka cluster the caller gives
(the benchmark uses the embedded broker): a fresh topic of ``partitions`` partitions,
``workers`` worker processes (:mod:`streamtrain.experiments.shuffle_harness`) that each own a
contiguous block of partitions (static assignment, as a round-robin dispatcher would
give), train at ``train_records_per_s`` each and commit offsets only up to the lowest
record not acknowledged locally or remotely; a producer that sends
``produce_records_per_s`` for ``produce_s`` seconds with ``hot_share`` of the traffic on
the ``hot_partitions``; and a sampler that reads the group's committed offsets every
``sample_interval_s`` and reports per-partition lag (records produced minus committed) until
every partition drained or ``drain_timeout_s`` passed. Returned per policy: the lag
series, forwarded bytes and records, the workers' CPU time, and the time until all
partitions drained. Rendering (table, plot) is the caller's.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from confluent_kafka import Consumer, Producer, TopicPartition

from streamtrain.config import KafkaSettings
from streamtrain.errors import ConfigError, StreamtrainError
from streamtrain.kafka import create_topic
from streamtrain.shuffle.policy import ShufflePolicy

__all__ = ["ExperimentConfig", "PolicyResult", "run_policy"]


@dataclass(frozen=True, slots=True)
class ExperimentConfig:
    workers: int = 4
    partitions: int = 16
    hot_partitions: tuple[int, ...] = (0, 1, 5)
    hot_share: float = 0.7
    produce_records_per_s: int = 4_000
    produce_s: float = 30.0
    train_records_per_s: int = 1_200
    record_bytes: int = 200
    drain_timeout_s: float = 90.0
    sample_interval_s: float = 0.5
    commit_interval_s: float = 0.2
    queue_capacity_records: int = 600
    low_watermark_records: int = 150
    high_watermark_records: int = 450
    batch_records: int = 100
    credit_window_records: int = 1_000
    ack_timeout_ms: int = 10_000

    def __post_init__(self) -> None:
        if self.partitions % self.workers:
            raise ConfigError("partitions must be a multiple of workers (static blocks)")
        if not 0 < self.hot_share < 1 or not self.hot_partitions:
            raise ConfigError("hot_share must be in (0, 1) with at least one hot partition")

    def weights(self) -> np.ndarray:
        """Each partition's share of the produced records."""
        hot = np.isin(np.arange(self.partitions), self.hot_partitions)
        weights = np.where(hot, self.hot_share / hot.sum(), (1 - self.hot_share) / (~hot).sum())
        return np.asarray(weights / weights.sum(), dtype=np.float64)


@dataclass(frozen=True, slots=True)
class PolicyResult:
    policy: ShufflePolicy
    times_s: np.ndarray
    lag_records: np.ndarray  # [sample, partition]
    produced_records: np.ndarray  # per partition
    forwarded_bytes: int
    forwarded_records: int
    cpu_s: float
    drained_after_s: float | None  # since the producer started; None: not within the timeout
    produce_s: float
    per_worker: dict[str, dict[str, float]] = field(default_factory=dict)


def _spec(
    config: ExperimentConfig,
    policy: ShufflePolicy,
    kafka: KafkaSettings,
    job: str,
    worker: int,
    out_dir: Path,
) -> Path:
    block = config.partitions // config.workers
    spec = {
        "settings": {
            "job": job,
            "worker_id": f"w{worker}",
            "policy": policy.value,
            "queue_capacity_records": config.queue_capacity_records,
            "low_watermark_records": config.low_watermark_records,
            "high_watermark_records": config.high_watermark_records,
            "overflow_capacity_records": 4 * config.queue_capacity_records,
            "batch_records": config.batch_records,
            "credit_window_records": config.credit_window_records,
            "ack_timeout_ms": config.ack_timeout_ms,
            "state_rebroadcast_ms": 250,
        },
        "membership": {
            "kind": "kafka",
            "bootstrap": kafka.bootstrap,
            "heartbeat_interval_ms": 500,
            "heartbeat_timeout_ms": 5_000,
        },
        "source": {
            "kind": "kafka",
            "bootstrap": kafka.bootstrap,
            "topic": job,
            "partitions": list(range(worker * block, (worker + 1) * block)),
            "group": job,
            "commit_interval_s": config.commit_interval_s,
        },
        "trainer": {"records_per_s": config.train_records_per_s, "batch_records": 100},
        "out_dir": str(out_dir),
        "status_interval_s": 0.5,
        "run_s": config.produce_s + config.drain_timeout_s + 120,
    }
    path = out_dir / f"w{worker}.spec.json"
    path.write_text(json.dumps(spec))
    return path


def _status(out_dir: Path, worker: int) -> dict[str, Any] | None:
    try:
        loaded = json.loads((out_dir / f"w{worker}.status.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return loaded if isinstance(loaded, dict) else None


def _worker_totals(status: dict[str, Any]) -> dict[str, float]:
    forwarding = status.get("forwarding") or {}
    return {
        "trained_records": float(status.get("trained_records", 0)),
        "bytes_sent": float(forwarding.get("bytes_sent", 0)),
        "records_sent": float(forwarding.get("records_sent", 0)),
        "records_received": float(forwarding.get("records_received", 0)),
        "cpu_s": float(status.get("cpu_s", 0.0)),
    }


def _produce(
    kafka: KafkaSettings, topic: str, config: ExperimentConfig, counts: np.ndarray
) -> None:
    producer = Producer(kafka.confluent_config(**{"linger.ms": 5}))
    rng = np.random.default_rng(1)
    weights = config.weights()
    payload = b"x" * config.record_bytes
    tick_s = 0.01
    started = time.monotonic()
    ticks = 0
    while (now := time.monotonic()) - started < config.produce_s:
        ticks += 1
        due = int(config.produce_records_per_s * tick_s * ticks) - int(counts.sum())
        for partition in rng.choice(config.partitions, size=max(due, 0), p=weights):
            while True:
                try:
                    producer.produce(topic, payload, partition=int(partition))
                    break
                except BufferError:
                    producer.poll(0.01)
            counts[partition] += 1
        producer.poll(0)
        time.sleep(max(started + ticks * tick_s - now, 0))
    if producer.flush(30) != 0:
        raise StreamtrainError(f"the experiment's producer could not deliver to {topic!r}")


def run_policy(
    kafka: KafkaSettings, policy: ShufflePolicy, config: ExperimentConfig, out_dir: Path
) -> PolicyResult:
    """One scripted run (see the module docstring); worker files go to ``out_dir``."""
    job = f"table2-{policy.value}-{uuid.uuid4().hex[:6]}"
    out_dir.mkdir(parents=True, exist_ok=True)
    create_topic(kafka, job, config.partitions)
    procs: list[subprocess.Popen[bytes]] = []
    logs = []
    try:
        for worker in range(config.workers):
            log = (out_dir / f"w{worker}.log").open("wb")
            logs.append(log)
            spec = _spec(config, policy, kafka, job, worker, out_dir)
            procs.append(
                subprocess.Popen(  # noqa: S603 - our own interpreter and module
                    [sys.executable, "-m", "streamtrain.experiments.shuffle_harness", str(spec)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
        _wait_started(config, policy, out_dir, procs)
        return _measure(kafka, job, policy, config, out_dir, procs)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        for log in logs:
            log.close()


def _wait_started(
    config: ExperimentConfig,
    policy: ShufflePolicy,
    out_dir: Path,
    procs: list[subprocess.Popen[bytes]],
) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if any(proc.poll() is not None for proc in procs):
            raise StreamtrainError(f"a worker exited early; see the logs in {out_dir}")
        statuses = [_status(out_dir, w) for w in range(config.workers)]
        if all(s is not None for s in statuses):
            events = [int(s["forwarding"]["events_received"]) for s in statuses if s]
            if policy is ShufflePolicy.NONE or min(events) >= config.workers - 1:
                return
        time.sleep(0.2)
    raise StreamtrainError(f"the workers did not all start within 60 s; see {out_dir}")


def _measure(
    kafka: KafkaSettings,
    job: str,
    policy: ShufflePolicy,
    config: ExperimentConfig,
    out_dir: Path,
    procs: list[subprocess.Popen[bytes]],
) -> PolicyResult:
    counts = np.zeros(config.partitions, dtype=np.int64)
    producer = threading.Thread(target=_produce, args=(kafka, job, config, counts), daemon=True)
    watcher = Consumer(kafka.confluent_config(**{"group.id": job, "enable.auto.commit": False}))
    partitions = [TopicPartition(job, p) for p in range(config.partitions)]
    times: list[float] = []
    lags: list[np.ndarray] = []
    drained_after: float | None = None
    started = time.monotonic()
    producer.start()
    try:
        while time.monotonic() - started < config.produce_s + config.drain_timeout_s:
            time.sleep(config.sample_interval_s)
            if any(proc.poll() is not None for proc in procs):
                raise StreamtrainError(f"a worker exited during the run; see {out_dir}")
            committed = watcher.committed(partitions, timeout=10)
            offsets = np.array([max(tp.offset, 0) for tp in committed], dtype=np.int64)
            elapsed = time.monotonic() - started
            times.append(elapsed)
            lags.append(np.maximum(counts - offsets, 0))
            if not producer.is_alive() and not lags[-1].any():
                drained_after = elapsed
                break
    finally:
        producer.join(timeout=config.produce_s + 60)
        watcher.close()
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    for proc in procs:
        proc.wait(timeout=30)
    per_worker = {f"w{w}": _worker_totals(_status(out_dir, w) or {}) for w in range(config.workers)}
    forwarded_bytes = int(sum(t["bytes_sent"] for t in per_worker.values()))
    forwarded_records = int(sum(t["records_sent"] for t in per_worker.values()))
    cpu_s = sum(t["cpu_s"] for t in per_worker.values())
    return PolicyResult(
        policy=policy,
        times_s=np.asarray(times),
        lag_records=np.asarray(lags),
        produced_records=counts.copy(),
        forwarded_bytes=forwarded_bytes,
        forwarded_records=forwarded_records,
        cpu_s=cpu_s,
        drained_after_s=drained_after,
        produce_s=config.produce_s,
        per_worker=per_worker,
    )
