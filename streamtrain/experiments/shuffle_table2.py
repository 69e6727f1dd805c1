"""KALE Table 2 with real training: no, basic and advanced shuffling under a skewed producer.

Owned here: :func:`run_policy`, one scripted run on a Kafka cluster the caller gives
(the benchmark uses the embedded broker): worker processes
(:mod:`streamtrain.experiments.shuffle_harness`) that each own a contiguous block of
partitions and take one real Adam step of the MMoE CTR model per batch
(:mod:`streamtrain.experiments.mmoe_trainer`, started from the same model trained
before the run, :func:`pretrain`), a producer that sends most records to a few hot
partitions, and a sampler of per-partition lag until every partition drained. It
returns a :class:`PolicyResult` per policy (with the workers' click AUC on held-out
samples of the traffic of the moment, :mod:`streamtrain.experiments.table2_metrics`);
rendering is the caller's.
"""

from __future__ import annotations

import json
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
from streamtrain.experiments.mmoe_trainer import drift_phase_at
from streamtrain.experiments.table2_metrics import AucSummary, auc_summary, lag_seconds
from streamtrain.ingest.example import CTR_RECORD, SyntheticCtr, split_records
from streamtrain.kafka import create_topic
from streamtrain.process import stop_children
from streamtrain.proto.data_plane_pb2 import BatchAck, WorkerStateEvent
from streamtrain.shuffle import codec
from streamtrain.shuffle.policy import ShufflePolicy
from streamtrain.units import now_ms

__all__ = ["ExperimentConfig", "PolicyResult", "WireBytes", "pretrain", "run_policy"]

_ZMTP_FRAME_BYTES = 2  # a short ZMTP frame's flags and size bytes


@dataclass(frozen=True, slots=True)
class ExperimentConfig:
    workers: int = 4
    partitions: int = 16
    hot_partitions: tuple[int, ...] = (0, 1, 5)
    hot_share: float = 0.7
    produce_records_per_s: int = 2_000
    produce_s: float = 30.0
    train_records_per_s: int = 800
    drift_turns: float = 0.25  # how far the hidden labelling model turns while producing
    pretrain_records: int = 40_000  # the model every worker starts from (phase 0)
    eval_records: int = 2_000
    eval_interval_s: float = 1.0
    drain_timeout_s: float = 90.0
    sample_interval_s: float = 0.5
    commit_interval_s: float = 0.2
    queue_capacity_records: int = 600
    low_watermark_records: int = 150
    high_watermark_records: int = 450
    batch_records: int = 100
    credit_window_records: int = 1_000
    ack_timeout_ms: int = 10_000
    seed: int = 0

    def __post_init__(self) -> None:
        if self.partitions % self.workers:
            raise ConfigError("partitions must be a multiple of workers (static blocks)")
        if not 0 < self.hot_share < 1 or not self.hot_partitions:
            raise ConfigError("hot_share must be in (0, 1) with at least one hot partition")

    @property
    def record_bytes(self) -> int:
        return int(CTR_RECORD.itemsize)

    def weights(self) -> np.ndarray:
        """Each partition's share of the produced records."""
        hot = np.isin(np.arange(self.partitions), self.hot_partitions)
        weights = np.where(hot, self.hot_share / hot.sum(), (1 - self.hot_share) / (~hot).sum())
        return np.asarray(weights / weights.sum(), dtype=np.float64)


@dataclass(frozen=True, slots=True)
class WireBytes:
    """Bytes on the wire in a run, by kind: the workers' Kafka consumers as librdkafka
    counts them, the shuffle's forwarded batch frames as it counts them (first sends
    apart from frames sent again after a receiver refused them or timed out), and its
    answers and state events, estimated from their counts times their encoded size (the
    shuffle does not count control bytes)."""

    kafka_rx: int  # fetch responses and the other broker answers the workers' consumers got
    kafka_tx: int  # the consumers' requests: fetches, offset commits, heartbeats
    forwarded: int  # the shuffle's batch frames sent the first time
    answers: int  # RECEIVED and ACKED answers (estimated)
    state_events: int  # receiver-state broadcasts (estimated)
    resent: int = 0  # batch frames sent again after a receiver refused or timed out

    @property
    def total(self) -> int:
        kafka, shuffle = self.kafka_rx + self.kafka_tx, self.forwarded + self.resent
        return kafka + shuffle + self.answers + self.state_events


@dataclass(frozen=True, slots=True)
class PolicyResult:
    """One policy's run: the lag series, the bytes on the wire (:class:`WireBytes`), the
    workers' CPU utilization (CPU seconds from the producer's start to the end of the
    measurement, less the seconds spent on AUC evaluations, over that wall time), the
    drain time, and each worker's click AUC."""

    policy: ShufflePolicy
    times_s: np.ndarray
    lag_records: np.ndarray  # [sample, partition]
    lag_s: np.ndarray  # [sample, partition]: how long the oldest uncommitted record waited
    produced_records: np.ndarray  # per partition
    forwarded_records: int
    wire: WireBytes
    cpu_s: float  # workers' CPU seconds over the window, less AUC evaluations
    window_s: float  # wall seconds from the producer's start to the end of the measurement
    drained_after_s: float | None  # since the producer started; None: not within the timeout
    produce_s: float
    auc: AucSummary
    auc_series: dict[str, list[dict[str, float]]]  # per worker: at_s (since start), auc
    per_worker: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def forwarded_bytes(self) -> int:
        return self.wire.forwarded

    @property
    def cpu_pct(self) -> float:
        """Mean worker CPU utilization over the window, percent of one core."""
        workers = max(len(self.per_worker), 1)
        return 100 * self.cpu_s / (workers * self.window_s) if self.window_s > 0 else 0.0


def pretrain(config: ExperimentConfig, path: Path) -> Path:
    """Train the MMoE every worker starts from on ``pretrain_records`` records of the
    undrifted traffic (phase 0) and save its ``state_dict`` to ``path``."""
    import torch

    from streamtrain.ingest.mmoe import MmoeCtrApp, ctr_loss

    app = MmoeCtrApp(seed=config.seed)
    table = SyntheticCtr(seed=config.seed).sample(config.pretrain_records, seed=99)
    for start in range(0, len(table), config.batch_records):
        part = table[start : start + config.batch_records]
        sparse, dense, click, conversion = (
            torch.from_numpy(np.array(part[name], order="C"))
            for name in ("sparse", "dense", "click", "conversion")
        )
        app.optimizer.zero_grad(set_to_none=True)
        torch.autograd.backward(ctr_loss(app.model(sparse, dense), click, conversion))
        app.optimizer.step()
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(app.model.state_dict(), path)
    return path


def _spec(
    config: ExperimentConfig,
    policy: ShufflePolicy,
    kafka: KafkaSettings,
    job: str,
    worker: int,
    out_dir: Path,
    init_state: Path | None,
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
        "trainer": {
            "records_per_s": config.train_records_per_s,
            "batch_records": config.batch_records,
            "model": "mmoe",
            "init_state": None if init_state is None else str(init_state),
            "seed": config.seed,
            "eval": {
                "clock_file": str(out_dir / "clock.json"),
                "records": config.eval_records,
                "interval_s": config.eval_interval_s,
            },
        },
        "out_dir": str(out_dir),
        "status_interval_s": 0.5,
        "run_s": config.produce_s + config.drain_timeout_s + 180,
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


_FORWARDING_TOTALS = (
    *("bytes_sent", "bytes_resent", "records_sent", "records_resent", "batches_resent"),
    *("records_received", "batches_received", "events_sent", "batches_sent"),
    *("batches_rejected", "batches_timed_out"),
)
_WORKER_TOTALS = ("trained_records", "cpu_s", "eval_cpu_s", "step_cpu_s")


def _worker_totals(status: dict[str, Any]) -> dict[str, float]:
    forwarding = status.get("forwarding") or {}
    totals = {k: float(forwarding.get(k, 0)) for k in _FORWARDING_TOTALS}
    totals.update({k: float(status.get(k, 0)) for k in _WORKER_TOTALS})
    totals.update({k: float(status.get(k, 0)) for k in ("kafka_rx_bytes", "kafka_tx_bytes")})
    return totals


def _answer_bytes(job: str) -> int:
    """One RECEIVED or ACKED answer on the wire: its frames, as the receiver encodes them."""
    ack = codec.encode_ack(
        job=job,
        batch_id="1a2b3c4d-1000",
        receiver="w0",
        status=BatchAck.ACKED,
        reason="",
        at_ms=now_ms(),
    )
    return len(codec.KIND_ACK) + len(ack) + 2 * _ZMTP_FRAME_BYTES


def _event_bytes(job: str) -> int:
    event = codec.encode_state(
        job=job,
        worker_id="w0",
        state=WorkerStateEvent.RECEIVING,
        sequence=1000,
        queue_records=100,
        at_ms=now_ms(),
    )
    return len(codec.KIND_STATE) + len(event) + 2 * _ZMTP_FRAME_BYTES


class _Production:
    """The producer's progress: cumulative counts per partition, and their history."""

    def __init__(self, partitions: int) -> None:
        self.counts = np.zeros(partitions, dtype=np.int64)
        self.history_s: list[float] = []
        self.history_counts: list[np.ndarray] = []

    def record(self, at_s: float) -> None:
        self.history_counts.append(self.counts.copy())
        self.history_s.append(at_s)  # appended second: a reader never sees a time alone

    def snapshot(self) -> tuple[np.ndarray, np.ndarray]:
        n = len(self.history_s)
        if n == 0:
            return np.zeros(0), np.zeros((0, self.counts.size), dtype=np.int64)
        return np.asarray(self.history_s[:n]), np.stack(self.history_counts[:n])


def _produce(
    kafka: KafkaSettings,
    topic: str,
    config: ExperimentConfig,
    production: _Production,
    clock: dict[str, float],
) -> None:
    producer = Producer(kafka.confluent_config(**{"linger.ms": 5}))
    rng = np.random.default_rng(1)
    source = SyntheticCtr(seed=config.seed)
    weights = config.weights()
    pending: list[bytes] = []
    chunk = max(config.produce_records_per_s // 4, 1)  # a quarter second of one phase
    tick_s = 0.01
    started = time.monotonic()
    ticks = 0
    next_id = 0
    counts = production.counts
    while (now := time.monotonic()) - started < config.produce_s:
        ticks += 1
        due = int(config.produce_records_per_s * tick_s * ticks) - int(counts.sum())
        for partition in rng.choice(config.partitions, size=max(due, 0), p=weights):
            if not pending:
                table = source.sample(
                    chunk, first_id=next_id, phase=drift_phase_at(time.time(), clock)
                )
                next_id += chunk
                pending = split_records(table)[::-1]
            payload = pending.pop()
            while True:
                try:
                    producer.produce(topic, payload, partition=int(partition))
                    break
                except BufferError:
                    producer.poll(0.01)
            counts[partition] += 1
        production.record(time.monotonic())
        producer.poll(0)
        time.sleep(max(started + ticks * tick_s - now, 0))
    if producer.flush(30) != 0:
        raise StreamtrainError(f"the experiment's producer could not deliver to {topic!r}")


def run_policy(
    kafka: KafkaSettings,
    policy: ShufflePolicy,
    config: ExperimentConfig,
    out_dir: Path,
    *,
    init_state: Path | None = None,
) -> PolicyResult:
    """One scripted run; worker files go to ``out_dir``; ``init_state``: the
    :func:`pretrain` file the workers start from (none: untrained).

    A fresh topic of ``partitions`` partitions; ``workers`` worker processes with a
    static assignment (as a round-robin dispatcher would give), each training at most
    ``train_records_per_s`` (a batch takes at least its share of a second, as a slower
    accelerator would), committing offsets only up to the lowest record not
    acknowledged locally or remotely; a producer that sends ``produce_records_per_s``
    CTR records for ``produce_s`` seconds with ``hot_share`` of them on the
    ``hot_partitions``, labelled by a hidden model that turns ``drift_turns`` over the
    run (so a model trained late is stale); and a sampler that reads the group's
    committed offsets every ``sample_interval_s`` and reports per-partition lag (records
    produced minus committed, and seconds the oldest uncommitted record has waited)
    until every partition drained or ``drain_timeout_s`` passed.
    """
    job = f"table2-{policy.value}-{uuid.uuid4().hex[:6]}"
    out_dir.mkdir(parents=True, exist_ok=True)
    create_topic(kafka, job, config.partitions)
    procs: list[subprocess.Popen[bytes]] = []
    logs = []
    try:
        for worker in range(config.workers):
            log = (out_dir / f"w{worker}.log").open("wb")
            logs.append(log)
            spec = _spec(config, policy, kafka, job, worker, out_dir, init_state)
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
        stop_children([(p, f"shuffle worker {w}") for w, p in enumerate(procs)], 30.0)
        for log in logs:
            log.close()


def _wait_started(
    config: ExperimentConfig,
    policy: ShufflePolicy,
    out_dir: Path,
    procs: list[subprocess.Popen[bytes]],
) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if any(proc.poll() is not None for proc in procs):
            raise StreamtrainError(f"a worker exited early; see the logs in {out_dir}")
        statuses = [_status(out_dir, w) for w in range(config.workers)]
        if all(s is not None and s.get("trainer_ready") for s in statuses):
            events = [int(s["forwarding"]["events_received"]) for s in statuses if s]
            if policy is ShufflePolicy.NONE or min(events) >= config.workers - 1:
                return
        time.sleep(0.2)
    raise StreamtrainError(f"the workers did not all start within 90 s; see {out_dir}")


def _evaluations(out_dir: Path, worker: int) -> list[dict[str, float]]:
    path = out_dir / f"w{worker}.auc.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _measure(
    kafka: KafkaSettings,
    job: str,
    policy: ShufflePolicy,
    config: ExperimentConfig,
    out_dir: Path,
    procs: list[subprocess.Popen[bytes]],
) -> PolicyResult:
    production = _Production(config.partitions)
    before = {f"w{w}": _worker_totals(_status(out_dir, w) or {}) for w in range(config.workers)}
    clock = {
        "start_at_s": time.time(),
        "produce_s": config.produce_s,
        "drift_turns": config.drift_turns,
    }
    (out_dir / "clock.json").write_text(json.dumps(clock))
    producer = threading.Thread(
        target=_produce, args=(kafka, job, config, production, clock), daemon=True
    )
    watcher = Consumer(kafka.confluent_config(**{"group.id": job, "enable.auto.commit": False}))
    partitions = [TopicPartition(job, p) for p in range(config.partitions)]
    times: list[float] = []
    lags: list[np.ndarray] = []
    lag_s: list[np.ndarray] = []
    drained_after: float | None = None
    started = time.monotonic()
    producer.start()
    try:
        while time.monotonic() - started < config.produce_s + config.drain_timeout_s:
            time.sleep(config.sample_interval_s)
            if any(proc.poll() is not None for proc in procs):
                raise StreamtrainError(f"a worker exited during the run; see {out_dir}")
            history_s, history_counts = production.snapshot()
            committed = watcher.committed(partitions, timeout=10)
            offsets = np.array([max(tp.offset, 0) for tp in committed], dtype=np.int64)
            now = time.monotonic()
            produced = history_counts[-1] if len(history_s) else np.zeros_like(offsets)
            times.append(now - started)
            lags.append(np.maximum(produced - offsets, 0))
            lag_s.append(lag_seconds(history_s, history_counts, offsets, now))
            if not producer.is_alive() and not lags[-1].any():
                drained_after = now - started
                break
    finally:
        producer.join(timeout=config.produce_s + 60)
        watcher.close()
    window_s = time.monotonic() - started
    stop_children([(p, f"shuffle worker {w}") for w, p in enumerate(procs)], 60.0)
    after = {f"w{w}": _worker_totals(_status(out_dir, w) or {}) for w in range(config.workers)}
    per_worker = {w: {k: after[w][k] - before[w].get(k, 0.0) for k in after[w]} for w in after}
    received = sum(t["batches_received"] for t in per_worker.values())
    events = sum(t["events_sent"] for t in per_worker.values())
    wire = WireBytes(
        kafka_rx=int(sum(t["kafka_rx_bytes"] for t in per_worker.values())),
        kafka_tx=int(sum(t["kafka_tx_bytes"] for t in per_worker.values())),
        forwarded=int(sum(t["bytes_sent"] - t["bytes_resent"] for t in per_worker.values())),
        resent=int(sum(t["bytes_resent"] for t in per_worker.values())),
        answers=int(2 * received * _answer_bytes(job)),
        state_events=int(events * (config.workers - 1) * _event_bytes(job)),
    )
    evaluations = {f"w{w}": _evaluations(out_dir, w) for w in range(config.workers)}
    start_wall = clock["start_at_s"]
    summary = auc_summary(
        evaluations, started_at_s=start_wall, stopped_at_s=start_wall + config.produce_s
    )
    return PolicyResult(
        policy=policy,
        times_s=np.asarray(times),
        lag_records=np.asarray(lags),
        lag_s=np.asarray(lag_s),
        produced_records=production.counts.copy(),
        forwarded_records=int(sum(t["records_sent"] for t in per_worker.values())),
        wire=wire,
        cpu_s=sum(t["cpu_s"] - t["eval_cpu_s"] for t in per_worker.values()),
        window_s=window_s,
        drained_after_s=drained_after,
        produce_s=config.produce_s,
        auc=summary,
        auc_series={
            w: [{"at_s": x["at_s"] - start_wall, "auc": x["auc"]} for x in lines]
            for w, lines in evaluations.items()
        },
        per_worker=per_worker,
    )
