"""Publishing a worker's metrics: throughput samples to Kafka, and Prometheus ``/metrics``.

Owned here:

* :class:`ThroughputReporter`, a thread that every ``interval_s`` turns two metric
  snapshots into a ``ThroughputSample`` protobuf (key: the worker id) on the throughput
  topic the control plane fits its (workers, records/s) model on, and a last one on
  stop. The pool size comes from a callable (the executor may tell it: a fixed count,
  or :class:`PoolSizeFile`, the file the local pool keeps; otherwise
  :class:`GroupSize`, the group's member count from ``DescribeGroups``, 0 when unknown).
* :class:`WorkerCollector`, a Prometheus collector built at scrape time from a
  snapshot, and :func:`serve_metrics` (HTTP on 127.0.0.1 by default).

Series: ``streamtrain_worker_records_consumed_total``,
``streamtrain_worker_records_trained_total``, ``streamtrain_worker_dead_letters_total``,
``streamtrain_worker_dead_letter_failures_total``, ``streamtrain_worker_commits_total``,
``streamtrain_worker_commit_failures_total``, ``streamtrain_worker_stale_acks_total``,
``streamtrain_worker_local_queue_records``, ``streamtrain_worker_in_flight_records``,
and per ``{topic,partition}`` ``streamtrain_worker_partition_position`` and
``streamtrain_worker_partition_committed``; the shuffle's totals (0 without the
shuffle): ``streamtrain_worker_shuffle_records_forwarded_total`` (own records a peer
trained), ``streamtrain_worker_shuffle_records_received_total`` (a peer's records
trained here), ``streamtrain_worker_shuffle_batches_timed_out_total``,
``streamtrain_worker_shuffle_batches_rejected_total`` and the gauge
``streamtrain_worker_shuffle_peers``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException, Producer
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from streamtrain.config import KafkaSettings
from streamtrain.errors import ConfigError
from streamtrain.ingest.metrics import MetricsSnapshot, WorkerMetrics, throughput_sample
from streamtrain.kafka import broker_answers
from streamtrain.units import now_ms
from streamtrain.wire import encode

__all__ = ["GroupSize", "PoolSizeFile", "ThroughputReporter", "WorkerCollector", "serve_metrics"]

log = logging.getLogger(__name__)


class GroupSize:
    """Members of consumer group ``group`` (0 when the broker does not say), via DescribeGroups."""

    def __init__(self, kafka: KafkaSettings, group: str, timeout_s: float = 5.0) -> None:
        self.kafka = kafka
        self.group = group
        self.timeout_s = timeout_s
        self._admin: Any = None

    def __call__(self) -> int:
        from confluent_kafka.admin import AdminClient

        if self._admin is None:
            self._admin = AdminClient(self.kafka.confluent_config())
        if not broker_answers(self.kafka, self.timeout_s):
            return 0  # no admin request into an outage (streamtrain.kafka.broker_answers)
        try:
            futures = self._admin.describe_consumer_groups(
                [self.group], request_timeout=self.timeout_s
            )
            description = futures[self.group].result(timeout=self.timeout_s)
        except (KafkaException, TimeoutError) as exc:
            self._admin = None  # dropped while the broker is away (streamtrain.lag.offsets)
            log.debug("describing group %r failed: %s", self.group, exc)
            return 0
        return len(description.members)


class PoolSizeFile:
    """The pool size an executor keeps in a file (``LocalProcessPool(size_path=...)``);
    0 when the file is missing or unreadable."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self) -> int:
        try:
            return max(0, int(self.path.read_text().strip()))
        except (OSError, ValueError) as exc:
            log.debug("cannot read the pool size from %s: %s", self.path, exc)
            return 0


class ThroughputReporter:
    """Publishes a ``ThroughputSample`` every ``interval_s`` from a background thread."""

    def __init__(
        self,
        kafka: KafkaSettings,
        topic: str,
        metrics: WorkerMetrics,
        *,
        job: str,
        worker_id: str,
        interval_s: float = 5.0,
        pool_size: Callable[[], int] | None = None,
    ) -> None:
        if interval_s <= 0:
            raise ConfigError(f"the sample interval must be positive, got {interval_s}")
        self.kafka = kafka
        self.topic = topic
        self.metrics = metrics
        self.job = job
        self.worker_id = worker_id
        self.interval_s = interval_s
        self.pool_size = pool_size or (lambda: 0)
        self.published = 0
        self.failed = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._producer: Producer | None = None
        self._previous: MetricsSnapshot | None = None

    def start(self) -> ThroughputReporter:
        self._producer = Producer(
            self.kafka.confluent_config(
                **{"linger.ms": 50, "client.id": f"streamtrain-samples-{self.worker_id}"}
            )
        )
        self._previous = self.metrics.snapshot()
        self._thread = threading.Thread(
            target=self._run, name=f"streamtrain-samples-{self.worker_id}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
        if self._producer is not None:
            self.publish()
            left = self._producer.flush(timeout_s)
            if left:
                log.warning("%d throughput sample(s) not delivered before stop", left)
            self._producer = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.publish()

    def publish(self) -> None:
        """Send the sample for the window since the last one."""
        producer, previous = self._producer, self._previous
        if producer is None or previous is None:
            return
        current = self.metrics.snapshot()
        if current.at_s <= previous.at_s:
            return
        sample = throughput_sample(
            previous,
            current,
            job=self.job,
            worker_id=self.worker_id,
            workers=self.pool_size(),
            observed_at_ms=now_ms(),
        )
        self._previous = current
        try:
            producer.produce(
                self.topic,
                key=self.worker_id.encode(),
                value=encode(sample),
                on_delivery=self._delivered,
            )
        except (BufferError, KafkaException) as exc:
            self.failed += 1
            log.warning("throughput sample not queued: %s", exc)
        producer.poll(0)

    def _delivered(self, error: Any, _: Any) -> None:
        if error is None:
            self.published += 1
        else:
            self.failed += 1
            log.warning("throughput sample to %s not delivered: %s", self.topic, error)

    def __enter__(self) -> ThroughputReporter:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


_SHUFFLE_COUNTERS = (
    ("records_forwarded", "Own records a peer trained and acknowledged (shuffle)."),
    ("records_received", "Records of a peer trained here (shuffle)."),
    ("batches_timed_out", "Forwarded batches re-routed after an ACK timeout (shuffle)."),
    ("batches_rejected", "Forwarded batches a peer refused (shuffle)."),
)


class WorkerCollector(Collector):
    """The worker's Prometheus series, read from a fresh snapshot at each scrape.
    ``shuffle`` gives the shuffle's totals (``streamtrain.worker.run.shuffle_totals``)."""

    def __init__(
        self,
        metrics: WorkerMetrics,
        worker_id: str,
        shuffle: Callable[[], Mapping[str, int]] | None = None,
    ) -> None:
        self.metrics = metrics
        self.worker_id = worker_id
        self.shuffle = shuffle

    def describe(self) -> Iterator[Metric]:
        return iter(())

    def collect(self) -> Iterator[Metric]:
        snap = self.metrics.snapshot()
        worker = [self.worker_id]
        counters = (
            ("records_consumed", "Records read from Kafka.", snap.records_consumed),
            (
                "records_trained",
                "Records whose training step was acknowledged.",
                snap.records_trained,
            ),
            ("dead_letters", "Records sent to the dead-letter topic.", snap.dead_letters),
            (
                "dead_letter_failures",
                "Dead letters the broker did not confirm (each is retried; alert on growth).",
                snap.dead_letter_failures,
            ),
            ("commits", "Successful offset commits.", snap.commits),
            ("commit_failures", "Failed offset commits (retried).", snap.commit_failures),
            ("stale_acks", "Acknowledgements for records no longer tracked.", snap.stale_acks),
        )
        for name, text, value in counters:
            family = CounterMetricFamily(f"streamtrain_worker_{name}", text, labels=["worker"])
            family.add_metric(worker, value)
            yield family
        queue = GaugeMetricFamily(
            "streamtrain_worker_local_queue_records",
            "Records in the local queue.",
            labels=["worker"],
        )
        queue.add_metric(worker, snap.queue_records)
        in_flight = GaugeMetricFamily(
            "streamtrain_worker_in_flight_records",
            "Records handed out and not yet acknowledged.",
            labels=["worker"],
        )
        in_flight.add_metric(worker, snap.in_flight_records)
        yield from (queue, in_flight)
        labels = ["worker", "topic", "partition"]
        position = GaugeMetricFamily(
            "streamtrain_worker_partition_position",
            "Next offset this worker reads, per assigned partition.",
            labels=labels,
        )
        committed = GaugeMetricFamily(
            "streamtrain_worker_partition_committed",
            "Last committed offset, per assigned partition.",
            labels=labels,
        )
        for (topic, partition), progress in sorted(snap.partitions.items()):
            key = [self.worker_id, topic, str(partition)]
            if progress.consumed is not None:
                position.add_metric(key, progress.consumed)
            if progress.committed is not None:
                committed.add_metric(key, progress.committed)
        yield from (position, committed)
        yield from self._shuffle(worker)

    def _shuffle(self, worker: list[str]) -> Iterator[Metric]:
        totals = dict(self.shuffle()) if self.shuffle is not None else {}
        for name, text in _SHUFFLE_COUNTERS:
            family = CounterMetricFamily(
                f"streamtrain_worker_shuffle_{name}", text, labels=["worker"]
            )
            family.add_metric(worker, totals.get(name, 0))
            yield family
        peers = GaugeMetricFamily(
            "streamtrain_worker_shuffle_peers",
            "Shuffle peers this worker knows.",
            labels=["worker"],
        )
        peers.add_metric(worker, totals.get("peers", 0))
        yield peers


def serve_metrics(
    metrics: WorkerMetrics,
    worker_id: str,
    port: int,
    host: str = "127.0.0.1",
    shuffle: Callable[[], Mapping[str, int]] | None = None,
) -> tuple[Any, threading.Thread]:
    """Serve ``/metrics`` for this worker; returns the server (``shutdown()`` it) and thread."""
    registry = CollectorRegistry()
    registry.register(WorkerCollector(metrics, worker_id, shuffle))
    server, thread = start_http_server(port, addr=host, registry=registry)
    return server, thread
