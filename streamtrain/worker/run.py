"""The worker process's loop: a training app driven by an ingest consumer, metrics published.

Owned here: :class:`WorkerRun` (how long to run and where to publish),
:class:`WorkerSummary` (what the worker did; its JSON is the last line of
``streamtrain worker``) and :func:`run_worker`, the loop behind ``streamtrain worker``:
take a batch, run the app's step, acknowledge, until stopped, idle (an
:class:`~streamtrain.ingest.idle.IdleClock`), or a record budget is spent; publish
throughput samples and serve Prometheus metrics meanwhile. The summary reports the
worker's memory against its local queue (:mod:`streamtrain.ingest.memory`). With
shuffle settings the consumer's records pass through a shuffle node
(:mod:`streamtrain.worker.shuffle_queue`).
With ``settings.assignment`` ``shards`` the records come from leased offset-range shards
(:class:`~streamtrain.ingest.shard_consumer.ShardConsumer`); told to stop, such a worker
hands back the shards it has not started and finishes the ones it reads (up to
``WorkerRun.drain_timeout_s``) before it closes. Before taking any data the app's
optional ``warm_start()`` runs (a new worker loads the job's latest checkpoint) and the
worker announces itself (:mod:`streamtrain.worker.lifecycle`: STARTING, READY, DRAINING,
LEFT) when ``WorkerRun.states_topic`` is set. Closing commits everything acknowledged.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamtrain.config import AssignmentMode, KafkaSettings
from streamtrain.errors import ConfigError
from streamtrain.ingest.consumer import IngestConsumer
from streamtrain.ingest.idle import IdleClock
from streamtrain.ingest.localqueue import LocalQueue
from streamtrain.ingest.memory import memory_report, rss_bytes
from streamtrain.ingest.metrics import WorkerMetrics
from streamtrain.ingest.reporting import (
    GroupSize,
    PoolSizeFile,
    ThroughputReporter,
    serve_metrics,
)
from streamtrain.ingest.settings import IngestSettings
from streamtrain.ingest.shard_consumer import ShardConsumer
from streamtrain.ingest.tracker import PartitionKey
from streamtrain.shuffle.kafka_membership import KafkaMembership
from streamtrain.shuffle.membership import Membership
from streamtrain.shuffle.node import ShuffleNode
from streamtrain.shuffle.settings import ShuffleSettings
from streamtrain.worker.app import TrainingApp, warm_start
from streamtrain.worker.lifecycle import Lifecycle
from streamtrain.worker.shuffle_queue import ShuffleQueue, shuffled_consumer

__all__ = ["WorkerRun", "WorkerSummary", "run_worker", "shuffle_totals"]

log = logging.getLogger(__name__)

_PROGRESS_LOG_S = 10.0


@dataclass(frozen=True, slots=True)
class WorkerRun:
    """How long a worker runs and where it reports.

    It stops after ``max_records`` trained records, after ``idle_exit_s`` without a
    record (counted from the first partition assignment), or when ``stop`` is set
    (``None``: no limit). ``throughput_topic=None`` publishes no samples;
    ``metrics_port=None`` serves no HTTP.
    """

    max_records: int | None = None
    idle_exit_s: float | None = None
    throughput_topic: str | None = "streamtrain.throughput"
    sample_interval_s: float = 5.0
    pool_size: int | None = None
    pool_size_file: Path | None = None
    metrics_host: str = "127.0.0.1"
    metrics_port: int | None = None
    drain_timeout_s: float = 10.0
    states_topic: str | None = None
    admission_timeout_s: float | None = None  # wait for ADMITTED after READY (executors)

    def __post_init__(self) -> None:
        if self.max_records is not None and self.max_records < 1:
            raise ConfigError(f"max_records must be at least 1, got {self.max_records}")
        if self.idle_exit_s is not None and self.idle_exit_s <= 0:
            raise ConfigError(f"idle_exit_s must be positive, got {self.idle_exit_s}")
        if self.sample_interval_s <= 0:
            raise ConfigError(f"sample_interval_s must be positive, got {self.sample_interval_s}")
        if self.metrics_port is not None and not 0 <= self.metrics_port < 65536:
            raise ConfigError(f"metrics_port must be in 0..65535, got {self.metrics_port}")


@dataclass(frozen=True, slots=True)
class WorkerSummary:
    """What a worker did, for the CLI's last line and for tests."""

    worker_id: str
    steps: int
    records_consumed: int
    records_trained: int
    dead_letters: int
    elapsed_s: float
    committed: Mapping[PartitionKey, int] = field(default_factory=dict)
    shuffle: Mapping[str, int] | None = None
    memory: Mapping[str, float | bool] | None = None

    def to_json(self) -> dict[str, Any]:
        summary: dict[str, Any] = {
            "worker_id": self.worker_id,
            "steps": self.steps,
            "records_consumed": self.records_consumed,
            "records_trained": self.records_trained,
            "dead_letters": self.dead_letters,
            "elapsed_s": round(self.elapsed_s, 3),
            "records_per_s": round(self.records_trained / self.elapsed_s, 1)
            if self.elapsed_s > 0
            else 0.0,
            "committed": [
                {"topic": t, "partition": p, "offset": o}
                for (t, p), o in sorted(self.committed.items())
            ],
        }
        if self.shuffle is not None:
            summary["shuffle"] = dict(self.shuffle)
        if self.memory is not None:
            summary["memory"] = dict(self.memory)
        return summary


def shuffle_totals(node: ShuffleNode) -> dict[str, int]:
    """What a worker's shuffle did, for its summary and progress lines (records)."""
    stats = node.stats()
    return {
        "peers": len(node.forwarding.known_peers()),
        "records_forwarded": stats.forwarding.records_acked,
        "records_received": stats.unit.remote_records_in,
        "batches_timed_out": stats.forwarding.batches_timed_out,
        "batches_rejected": stats.forwarding.batches_rejected,
        "state_transitions": stats.unit.state_transitions,
    }


def run_worker(
    kafka: KafkaSettings,
    settings: IngestSettings,
    app: TrainingApp,
    run: WorkerRun | None = None,
    *,
    stop: threading.Event | None = None,
    on_started: Callable[[IngestConsumer | ShardConsumer], None] | None = None,
    on_metrics_url: Callable[[str], None] | None = None,
    shuffle: ShuffleSettings | None = None,
    membership: Membership | None = None,
) -> WorkerSummary:
    """Train ``app`` on ``settings.topics`` until a limit of ``run`` is reached.

    With ``shuffle``, records pass through a :class:`~streamtrain.shuffle.node.ShuffleNode`
    (peers found through ``membership``, by default the job's ``<job>.members`` topic
    with the heartbeat of ``shuffle``): an overloaded worker forwards what overflows its
    queue to idle peers, and trains what they forward to it. ``on_started`` gets the
    running consumer; ``on_metrics_url`` the Prometheus URL.
    """
    run = run or WorkerRun()
    metrics = WorkerMetrics()
    queue: ShuffleQueue | None = None
    consumer: IngestConsumer | ShardConsumer
    shards = settings.assignment is AssignmentMode.SHARDS
    if shards and shuffle is not None:
        raise ConfigError(
            "--shuffle works with --assignment group or cooperative; with shards, free "
            "workers pulling shards already balance hot partitions"
        )
    if shards:
        consumer = ShardConsumer(kafka, settings, app.decoder, metrics=metrics)
    elif shuffle is None:
        consumer = IngestConsumer(kafka, settings, app.decoder, metrics=metrics)
    else:
        if membership is None:
            membership = KafkaMembership(
                kafka,
                shuffle.job,
                heartbeat_interval_ms=shuffle.heartbeat_interval_ms,
                heartbeat_timeout_ms=shuffle.heartbeat_timeout_ms,
            )
        consumer, queue = shuffled_consumer(
            kafka, settings, app.decoder, shuffle, membership, metrics=metrics
        )
    node = None if queue is None else queue.node
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        close = getattr(app, "close", None)
        if callable(close):
            stack.callback(close)
        lifecycle = stack.enter_context(Lifecycle(kafka, settings, run.states_topic))
        warm_start(app, settings.worker_id)
        lifecycle.ready(run.admission_timeout_s)
        if node is not None:
            me = stack.enter_context(node).me
            log.info("shuffle (%s) at %s", node.unit.settings.policy.value, me.data_endpoint)
        baseline = _RssBaseline(rss_bytes())
        stack.enter_context(consumer)
        totals = None if node is None else (lambda: shuffle_totals(node))
        _publish(stack, kafka, settings, run, metrics, on_metrics_url, totals)
        if on_started is not None:
            on_started(consumer)
        steps = _train(
            consumer, app, settings.batch_records, run, metrics, queue, stop, started, baseline
        )
        lifecycle.draining()
        if isinstance(consumer, ShardConsumer) and stop is not None and stop.is_set():
            steps += _drain(consumer, app, settings.batch_records, run, metrics)
        if node is not None:
            node.stop_receiving()  # peers re-route what they would send while we close
    snapshot = metrics.snapshot()
    return WorkerSummary(
        worker_id=settings.worker_id,
        steps=steps,
        records_consumed=snapshot.records_consumed,
        records_trained=snapshot.records_trained,
        dead_letters=snapshot.dead_letters,
        elapsed_s=time.monotonic() - started,
        committed=dict(consumer.last_committed),
        shuffle=None if node is None else shuffle_totals(node),
        memory=memory_report(baseline.rss_bytes, _queue_peak_bytes(consumer)),
    )


class _RssBaseline:
    """The RSS the memory bound counts growth from: the RSS when the consumer started,
    plus what the app's first training step alone added (an optimizer's state, autograd
    buffers: one-time allocations of the model, not of the queue; ≈30 MiB for the demo's
    MMoE). Records queued meanwhile still count: only the step's own growth is added."""

    def __init__(self, rss_bytes: int) -> None:
        self.rss_bytes = rss_bytes
        self.first_step_seen = False

    def first_step(self, growth_bytes: int) -> None:
        self.first_step_seen = True
        self.rss_bytes += max(0, growth_bytes)


def _queue_peak_bytes(consumer: IngestConsumer | ShardConsumer) -> int | None:
    """The local queue's peak bytes (``None`` for a queue that does not count them)."""
    queue = getattr(consumer, "queue", None)
    return queue.peak_bytes if isinstance(queue, LocalQueue) else None


def _publish(
    stack: contextlib.ExitStack,
    kafka: KafkaSettings,
    settings: IngestSettings,
    run: WorkerRun,
    metrics: WorkerMetrics,
    on_metrics_url: Callable[[str], None] | None,
    shuffle: Callable[[], Mapping[str, int]] | None = None,
) -> None:
    """Start the throughput samples and the Prometheus endpoint ``run`` asks for."""
    if run.throughput_topic:
        pool: Callable[[], int]
        if run.pool_size is not None:
            pool = lambda: run.pool_size or 0  # noqa: E731
        elif run.pool_size_file is not None:
            pool = PoolSizeFile(run.pool_size_file)
        else:
            pool = GroupSize(kafka, settings.group)
        stack.enter_context(
            ThroughputReporter(
                kafka,
                run.throughput_topic,
                metrics,
                job=settings.group,
                worker_id=settings.worker_id,
                interval_s=run.sample_interval_s,
                pool_size=pool,
            )
        )
    if run.metrics_port is not None:
        server, _ = serve_metrics(
            metrics, settings.worker_id, run.metrics_port, run.metrics_host, shuffle
        )
        stack.callback(server.server_close)
        stack.callback(server.shutdown)
        url = f"http://{run.metrics_host}:{server.server_port}/metrics"
        log.info("worker metrics at %s", url)
        if on_metrics_url is not None:
            on_metrics_url(url)


def _drain(
    consumer: ShardConsumer,
    app: TrainingApp,
    batch_records: int,
    run: WorkerRun,
    metrics: WorkerMetrics,
) -> int:
    """A leaving shard worker: hand back what it has not started, finish the rest."""
    consumer.leave()
    deadline = time.monotonic() + run.drain_timeout_s
    steps = 0
    while not consumer.drained and time.monotonic() < deadline:
        batch = consumer.next_batch(batch_records, timeout_s=0.2)
        if batch is None:
            continue
        step_started = time.monotonic()
        app.step(batch)
        metrics.add(busy_s=time.monotonic() - step_started, steps=1)
        batch.ack()
        steps += 1
    if not consumer.drained:
        log.warning(
            "leaving after %.0f s with shards unfinished: they are handed back", run.drain_timeout_s
        )
    return steps


def _train(
    consumer: IngestConsumer | ShardConsumer,
    app: TrainingApp,
    batch_records: int,
    run: WorkerRun,
    metrics: WorkerMetrics,
    queue: ShuffleQueue | None,
    stop: threading.Event | None,
    started: float,
    baseline: _RssBaseline | None = None,
) -> int:
    """The training loop: batch, step, acknowledge, until a limit; returns the steps."""

    def settled() -> bool:  # records waiting in the shuffle or at a peer: not idle
        return queue is None or queue.settled

    last_log = time.monotonic()
    steps = trained = 0
    idle = IdleClock(run.idle_exit_s)
    while stop is None or not stop.is_set():
        limit = batch_records
        if run.max_records is not None:
            limit = min(limit, run.max_records - trained)
            if limit <= 0:
                break
        batch = consumer.next_batch(limit, timeout_s=0.5)
        now = time.monotonic()
        if batch is None:
            if idle.expired(assigned=consumer.assigned_event.is_set(), settled=settled):
                log.info("no record for %.1f s: stopping", run.idle_exit_s)
                break
            continue
        idle.busy()
        step_started = time.monotonic()
        first = baseline is not None and not baseline.first_step_seen
        rss_before = rss_bytes() if first else 0
        app.step(batch)
        metrics.add(busy_s=time.monotonic() - step_started, steps=1)
        if first and baseline is not None:
            baseline.first_step(rss_bytes() - rss_before)
        batch.ack()
        steps += 1
        trained += len(batch)
        if now - last_log >= _PROGRESS_LOG_S:
            last_log = now
            log.info(
                "trained %d records in %d steps (%.0f records/s); last loss %s%s",
                trained,
                steps,
                trained / max(now - started, 1e-9),
                getattr(app, "last_loss", "n/a"),
                "" if queue is None else f"; shuffle {shuffle_totals(queue.node)}",
            )
    return steps
