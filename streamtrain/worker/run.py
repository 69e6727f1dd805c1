"""The worker process's loop: a training app driven by an ingest consumer, metrics published.

Owned here: :class:`WorkerRun` (how long to run and where to publish),
:class:`WorkerSummary` (what the worker did; its JSON is the last line of
``streamtrain worker``) and :func:`run_worker`, the loop behind ``streamtrain worker``:
take a batch, run the app's step, acknowledge, until stopped, idle (an
:class:`~streamtrain.ingest.idle.IdleClock`), or a record budget is spent; publish
throughput samples and serve Prometheus metrics meanwhile. The summary reports the
worker's memory against its local queue (:mod:`streamtrain.ingest.memory`).

Records come from an ingest consumer, through a shuffle node with shuffle settings
(:mod:`streamtrain.worker.shuffle_queue`), or from leased offset-range shards
(:class:`~streamtrain.ingest.shard_consumer.ShardConsumer`). Every step goes through an
engine (:mod:`streamtrain.worker.engines`): each worker its own model, or one model
for all (:func:`run_worker` says what that changes). Closing commits everything
acknowledged.
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
from streamtrain.elastic.app import DistributedApp
from streamtrain.elastic.engine import Engine
from streamtrain.elastic.settings import ElasticSettings, EngineKind
from streamtrain.elastic.trainer import ElasticTrainer
from streamtrain.errors import ConfigError
from streamtrain.ingest.consumer import IngestConsumer
from streamtrain.ingest.idle import IdleClock
from streamtrain.ingest.localqueue import LocalQueue
from streamtrain.ingest.memory import memory_report, rss_bytes
from streamtrain.ingest.metrics import WorkerMetrics
from streamtrain.ingest.reader import Batch
from streamtrain.ingest.reporting import (
    GroupSize,
    PoolSizeFile,
    ThroughputReporter,
    serve_metrics,
)
from streamtrain.ingest.settings import IngestSettings
from streamtrain.ingest.shard_consumer import ShardConsumer
from streamtrain.partition_key import PartitionKey
from streamtrain.shuffle.kafka_membership import KafkaMembership
from streamtrain.shuffle.membership import Membership
from streamtrain.shuffle.node import ShuffleNode
from streamtrain.shuffle.settings import ShuffleSettings
from streamtrain.worker.app import TrainingApp, warm_start
from streamtrain.worker.engines import worker_engine
from streamtrain.worker.lifecycle import Lifecycle
from streamtrain.worker.shuffle_queue import ShuffleQueue, shuffled_consumer

__all__ = ["WorkerRun", "WorkerSummary", "check_modes", "run_worker", "shuffle_totals"]

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
    engine: Mapping[str, Any] | None = None

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
        if self.engine is not None:
            summary["engine"] = dict(self.engine)
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
    app: TrainingApp | DistributedApp,
    run: WorkerRun | None = None,
    *,
    stop: threading.Event | None = None,
    on_started: Callable[[IngestConsumer | ShardConsumer], None] | None = None,
    on_metrics_url: Callable[[str], None] | None = None,
    shuffle: ShuffleSettings | None = None,
    membership: Membership | None = None,
    elastic: ElasticSettings | None = None,
) -> WorkerSummary:
    """Train ``app`` on ``settings.topics`` until a limit of ``run`` is reached.

    With ``shuffle``, records pass through a :class:`~streamtrain.shuffle.node.ShuffleNode`
    (peers found through ``membership``, by default the job's ``<job>.members`` topic
    with the heartbeat of ``shuffle``): an overloaded worker forwards what overflows its
    queue to idle peers, and trains what they forward to it. ``elastic`` names the
    engine (default ``none``: this worker's own model). ``on_started`` gets the running
    consumer; ``on_metrics_url`` the Prometheus URL.

    With ``settings.assignment`` ``shards``, told to stop, the worker hands back the
    shards it has not started and finishes the ones it reads (up to
    ``WorkerRun.drain_timeout_s``) before it closes. Before taking any data the app's
    optional ``warm_start()`` runs (a new worker loads the job's latest checkpoint) and
    the worker announces itself (:mod:`streamtrain.worker.lifecycle`: STARTING, READY,
    DRAINING, LEFT) when ``WorkerRun.states_topic`` is set. With ``torchft`` or
    ``torchelastic`` every worker trains one model, so a worker steps every round (with
    nothing when no batch came within ``ElasticSettings.step_wait_s``), a joiner holds
    the job's weights before it says READY (and keeps stepping, with no data, until it
    takes data), a batch is acknowledged only once its step committed and is durable,
    handed back (``nack``) when it did not commit, and dead-lettered when its step
    refused it (:class:`~streamtrain.elastic.trainer.ElasticTrainer`).
    """
    run = run or WorkerRun()
    elastic = elastic or ElasticSettings(replica_id=settings.worker_id)
    metrics = WorkerMetrics()
    queue: ShuffleQueue | None = None
    consumer: IngestConsumer | ShardConsumer
    shards = settings.assignment is AssignmentMode.SHARDS
    check_modes(settings.assignment, shuffle, elastic)
    engine = worker_engine(app, elastic, stop)
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
    trainer = ElasticTrainer(
        engine,
        source=consumer,
        dead_letter=_dead_letter_sink(consumer),
        metrics=metrics,
        batch_records=settings.batch_records,
    )
    trainer.observe(app)
    step_wait_s = elastic.step_wait_s if trainer.steps_every_round else 0.5
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        close = getattr(app, "close", None)
        if callable(close):
            stack.callback(close)
        lifecycle = stack.enter_context(Lifecycle(kafka, settings, run.states_topic))
        warm_start(app, settings.worker_id)
        engine.join()  # a joiner holds the job's current weights from here on
        stack.callback(_leave, trainer, engine)
        with trainer.idle_rounds():  # the others step on while this worker gets ready
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
        loop = _Loop(consumer, trainer, settings.batch_records, step_wait_s, run, metrics)
        steps = loop.train(queue, stop, started, baseline)
        lifecycle.draining()
        if isinstance(consumer, ShardConsumer) and stop is not None and stop.is_set():
            steps += loop.drain(consumer)
        _leave(trainer, engine)  # leave the quorum before the slower closing below
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
        engine=_engine_report(engine, trainer),
    )


def _dead_letter_sink(
    consumer: IngestConsumer | ShardConsumer,
) -> Callable[[Batch, str], None] | None:
    """Where a batch the step refused goes: the consumer's dead-letter topic (its offsets
    are acknowledged once the dead letter is delivered)."""
    dead_letters = consumer.dead_letters
    if dead_letters is None:
        return None
    return lambda batch, why: dead_letters.send(batch.records, [why] * len(batch))


def _leave(trainer: ElasticTrainer, engine: Engine) -> None:
    """Hand back what is not durable, then leave the engine (idempotent)."""
    trainer.close()
    engine.leave()


def _engine_report(engine: Engine, trainer: ElasticTrainer) -> dict[str, Any]:
    totals = trainer.totals
    return {
        "kind": engine.kind.value,
        "committed_step": engine.committed_step,
        "durable_step": engine.durable_step,
        "rounds": totals.rounds,
        "rounds_failed": totals.rounds_failed,
        "empty_rounds": totals.empty_rounds,
        "records_acked": totals.records_acked,
        "records_nacked": totals.records_nacked,
        "records_refused": totals.records_refused,
    }


def check_modes(
    assignment: AssignmentMode, shuffle: ShuffleSettings | None, elastic: ElasticSettings
) -> None:
    """Refuse the shuffle where it cannot work (ConfigError, before any I/O)."""
    if shuffle is None:
        return
    if assignment is AssignmentMode.SHARDS:
        raise ConfigError(
            "--shuffle works with --assignment group or cooperative; with shards, free "
            "workers pulling shards already balance hot partitions"
        )
    if elastic.engine is not EngineKind.NONE:
        raise ConfigError(
            "--shuffle trains a peer's records on this worker's model copy; with "
            f"--engine {elastic.engine.value} every worker trains one model: use "
            "--assignment shards"
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


class _Loop:
    """The training loop: batch (or nothing, on a collective engine), round, repeat."""

    def __init__(
        self,
        consumer: IngestConsumer | ShardConsumer,
        trainer: ElasticTrainer,
        batch_records: int,
        step_wait_s: float,
        run: WorkerRun,
        metrics: WorkerMetrics,
    ) -> None:
        self.consumer, self.trainer = consumer, trainer
        self.batch_records, self.step_wait_s = batch_records, step_wait_s
        self.run, self.metrics = run, metrics

    def _next(self, limit: int) -> Batch | None:
        """The next batch within the step wait; a collective engine steps without one."""
        batch = self.consumer.next_batch(limit, timeout_s=self.step_wait_s, ack_previous=False)
        if batch is None and self.trainer.steps_every_round:
            self.trainer.round(None)
        return batch

    def train(
        self,
        queue: ShuffleQueue | None,
        stop: threading.Event | None,
        started: float,
        baseline: _RssBaseline | None = None,
    ) -> int:
        """Until a limit: returns the steps that trained records of this worker."""

        def settled() -> bool:  # records waiting in the shuffle or at a peer: not idle
            return queue is None or queue.settled

        run, trainer = self.run, self.trainer
        last_log = time.monotonic()
        steps = trained = 0
        idle = IdleClock(run.idle_exit_s)
        while stop is None or not stop.is_set():
            limit = self.batch_records
            if run.max_records is not None:
                limit = min(limit, run.max_records - trained)
                if limit <= 0:
                    break
            batch = self._next(limit)
            now = time.monotonic()
            if batch is None:
                if idle.expired(assigned=self.consumer.assigned_event.is_set(), settled=settled):
                    log.info("no record for %.1f s: stopping", run.idle_exit_s)
                    break
                continue
            idle.busy()
            first = baseline is not None and not baseline.first_step_seen
            rss_before = rss_bytes() if first else 0
            outcome = trainer.round(batch)
            if first and baseline is not None:
                baseline.first_step(rss_bytes() - rss_before)
            steps += outcome.committed and outcome.records > 0
            trained += outcome.records
            if now - last_log >= _PROGRESS_LOG_S:
                last_log = now
                log.info(
                    "trained %d records in %d steps (%.0f records/s); step %d of the job, "
                    "%d worker(s); last loss %.4g%s",
                    trained,
                    steps,
                    trained / max(now - started, 1e-9),
                    outcome.step,
                    outcome.world_size,
                    outcome.loss,
                    "" if queue is None else f"; shuffle {shuffle_totals(queue.node)}",
                )
        return steps

    def drain(self, consumer: ShardConsumer) -> int:
        """A leaving shard worker: hand back what it has not started, finish the rest."""
        consumer.leave()
        deadline = time.monotonic() + self.run.drain_timeout_s
        steps = 0
        while not consumer.drained and time.monotonic() < deadline:
            batch = self._next(self.batch_records)
            if batch is not None:
                outcome = self.trainer.round(batch)
                steps += outcome.committed and outcome.records > 0
        if not consumer.drained:
            log.warning(
                "leaving after %.0f s with shards unfinished: they are handed back",
                self.run.drain_timeout_s,
            )
        return steps
