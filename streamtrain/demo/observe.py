"""What the demo watches: the control plane's topics, the workers' files, one timeline.

Owned here:

* :class:`TrainedIds` tails the workers' ``trained/*.ids`` files (int64 ids, appended
  before each acknowledgement) into a bitmap: unique ids, total trained, duplicates,
  and which produced ids no worker trained (the demo's no-loss check); ids in files
  ending ``.forwarded.ids`` were trained by a worker a peer's shuffle forwarded them to.
* :class:`StatsTail` tails the workers' ``stats/*.jsonl`` (online AUC evaluations).
* :class:`Timeline`: the series the dashboard draws and the summary is computed from
  (thread-safe; every time is wall seconds since the epoch).
* :class:`TopicFeeds`: a thread reading the lag reports, alerts and scale commands
  topics from their beginning (assigned partitions, no consumer group) into the
  timeline; an undecodable message is counted and logged, never fatal.
* :func:`planner_status`: the control app's ``/planner`` status page (``None`` until it
  answers), and :func:`planner_forecast`, the planner's newest forecast in it;
  :func:`shard_status`: its ``/shards`` page (the shard coordinator's view), and
  :func:`stall_lines`, what a drain that timed out left, read from it.
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition
from numpy.typing import NDArray

from streamtrain.config import KafkaSettings
from streamtrain.demo.traffic import TrafficGenerator
from streamtrain.errors import SchemaError, StreamtrainError
from streamtrain.executors import ApplyResult
from streamtrain.kafka import describe_topics
from streamtrain.proto import control_plane_pb2 as cp
from streamtrain.shards.view import describe_line
from streamtrain.units import ms_to_s, s_to_ms
from streamtrain.wire import decode

__all__ = [
    "FORWARDED_IDS_SUFFIX",
    "StatsTail",
    "Timeline",
    "TopicFeeds",
    "TrainedIds",
    "planner_forecast",
    "planner_status",
    "shard_status",
    "stall_lines",
    "throughput_belief",
]

log = logging.getLogger(__name__)

_ID_BYTES = 8
FORWARDED_IDS_SUFFIX = ".forwarded.ids"


class _Tail:
    """The bytes files matching ``pattern`` in ``directory`` gained since they were
    last consumed; a reader consumes only the complete records it used."""

    def __init__(self, directory: Path, pattern: str) -> None:
        self.directory, self.pattern = directory, pattern
        self._offsets: dict[Path, int] = {}

    def new_bytes(self) -> Iterator[tuple[Path, bytes]]:
        for path in sorted(self.directory.glob(self.pattern)):
            try:
                with path.open("rb") as handle:
                    handle.seek(self._offsets.get(path, 0))
                    data = handle.read()
            except OSError as exc:
                log.warning("cannot read %s: %s", path, exc)
                continue
            if data:
                yield path, data

    def consume(self, path: Path, size: int) -> None:
        self._offsets[path] = self._offsets.get(path, 0) + size


class TrainedIds:
    """See the module docstring. ``refresh`` reads what the files gained since."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.seen: NDArray[np.bool_] = np.zeros(0, dtype=bool)
        self.total = 0
        self.forwarded = 0  # trained by a worker that got them from a peer's shuffle
        self._tail = _Tail(directory, "*.ids")

    def refresh(self) -> None:
        for path, data in self._tail.new_bytes():
            usable = len(data) - len(data) % _ID_BYTES  # a write may be half done
            if not usable:
                continue
            self._tail.consume(path, usable)
            ids = np.frombuffer(data[:usable], dtype="<i8")
            ids = ids[ids >= 0]
            if ids.size and int(ids.max()) >= self.seen.size:
                grown = np.zeros(max(int(ids.max()) + 1, 2 * self.seen.size), dtype=bool)
                grown[: self.seen.size] = self.seen
                self.seen = grown
            self.seen[ids] = True
            self.total += int(ids.size)
            if path.name.endswith(FORWARDED_IDS_SUFFIX):
                self.forwarded += int(ids.size)

    @property
    def unique(self) -> int:
        return int(self.seen.sum())

    @property
    def duplicates(self) -> int:
        return self.total - self.unique

    def covered(self, produced: int) -> int:
        """How many of the ids ``0 .. produced - 1`` some worker trained."""
        return int(self.seen[:produced].sum())

    def missing(self, produced: int, limit: int = 20) -> list[int]:
        """Up to ``limit`` ids below ``produced`` that no worker trained."""
        seen = np.zeros(produced, dtype=bool)
        head = self.seen[:produced]
        seen[: head.size] = head
        return [int(i) for i in np.flatnonzero(~seen)[:limit]]


class StatsTail:
    """Complete JSON lines appended to ``*.jsonl`` files in ``directory`` since the last call."""

    def __init__(self, directory: Path) -> None:
        self._tail = _Tail(directory, "*.jsonl")

    def read_new(self) -> list[dict[str, Any]]:
        lines: list[dict[str, Any]] = []
        for path, data in self._tail.new_bytes():
            complete = data[: data.rfind(b"\n") + 1]
            self._tail.consume(path, len(complete))
            for raw in complete.splitlines():
                try:
                    lines.append(json.loads(raw))
                except ValueError:
                    log.warning("skipping a malformed stats line in %s", path)
        return lines


@dataclass
class Timeline:
    """See the module docstring. Lists grow by one entry per event or tick."""

    partitions: int
    reports: list[dict[str, Any]] = field(default_factory=list)
    alerts: list[dict[str, Any]] = field(default_factory=list)
    commands: list[dict[str, Any]] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)
    workers: list[tuple[float, int]] = field(default_factory=list)
    planned: list[tuple[float, float]] = field(default_factory=list)
    forecast: dict[int, float] = field(default_factory=dict)  # step start (ms) -> records/s
    band: dict[int, tuple[float, float]] = field(default_factory=dict)  # -> (low, high)
    forecaster: dict[str, Any] = field(default_factory=dict)  # the model, what answers, MASE
    auc: list[tuple[float, float]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    progress: list[tuple[float, int, int]] = field(default_factory=list)  # t, produced, trained
    steps: list[tuple[float, int, int]] = field(default_factory=list)  # t, committed step, quorum
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _last_auc: dict[str, tuple[float, float]] = field(default_factory=dict, repr=False)

    def add_report(self, report: cp.LagReport) -> None:
        lag_s: list[float | None] = [None] * self.partitions
        for partition in report.partitions:
            if 0 <= partition.partition < self.partitions and partition.HasField("lag_s"):
                lag_s[partition.partition] = round(partition.lag_s, 3)
        entry = {
            "at_s": ms_to_s(report.observed_at_ms),
            "records_per_s": report.records_per_s if report.HasField("records_per_s") else None,
            "max_lag_s": report.max_lag_s if report.HasField("max_lag_s") else None,
            "lag_records": report.total_lag_records,
            "status": cp.PartitionStatus.Name(report.group_status),
            "partition_lag_s": lag_s,
        }
        with self.lock:
            self.reports.append(entry)

    def add_alert(self, alert: cp.Alert) -> None:
        entry = {
            "at_s": ms_to_s(alert.raised_at_ms),
            "kind": cp.Alert.Kind.Name(alert.kind),
            "severity": cp.Alert.Severity.Name(alert.severity),
            "state": alert.state,
            "resolved": alert.resolved,
            "message": alert.message,
        }
        with self.lock:
            self.alerts.append(entry)

    def add_command(self, command: cp.ScaleCommand) -> None:
        entry = {
            "at_s": ms_to_s(command.created_at_ms),
            "command_id": command.command_id,
            "current_workers": command.current_workers,
            "target_workers": command.target_workers,
            "reason": cp.ScaleCommand.Reason.Name(command.reason),
            "explanation": command.explanation,
        }
        with self.lock:
            self.commands.append(entry)

    def add_action(
        self,
        at_s: float,
        result: ApplyResult,
        *,
        assignment: str | None = None,
        prep_s: float | None = None,
    ) -> None:
        """What the demo's executor did with one ScaleCommand (``at_s``: when it began)."""
        entry = {
            "at_s": at_s,
            "command_id": result.command_id,
            "outcome": result.outcome.value,
            "workers_before": result.workers_before,
            "workers_after": result.workers_after,
            "error": result.error,
            "assignment": assignment,
            "prep_s": None if prep_s is None else round(prep_s, 2),
            "duration_s": round(result.duration_s, 2),
        }
        with self.lock:
            self.actions.append(entry)

    def add_progress(self, at_s: float, produced: int, trained: int) -> None:
        """Records produced and trained so far (the actions' costs are measured on it)."""
        with self.lock:
            self.progress.append((at_s, produced, trained))

    def add_event(self, at_s: float, message: str) -> None:
        log.info("%s", message)
        with self.lock:
            self.events.append({"at_s": at_s, "message": message})

    def add_workers(self, at_s: float, workers: int) -> None:
        with self.lock:
            if not self.workers or self.workers[-1][1] != workers:
                self.workers.append((at_s, workers))

    def add_planned(self, at_s: float, records_per_s: float) -> None:
        with self.lock:
            self.planned.append((at_s, records_per_s))

    def set_forecast(self, forecast: dict[str, Any] | None) -> None:
        """Keep the planner's newest forecast of each future step (older steps stay)."""
        if not forecast:
            return
        first_ms, step_ms = forecast["first_step_at_ms"], s_to_ms(forecast["step_s"])
        low, high = forecast.get("low_records_per_s"), forecast.get("high_records_per_s")
        with self.lock:
            for k, value in enumerate(forecast["records_per_s"][:60]):
                self.forecast[int(first_ms + k * step_ms)] = float(value)
            if low and high:
                for k, (lo, hi) in enumerate(zip(low[:60], high[:60], strict=False)):
                    self.band[int(first_ms + k * step_ms)] = (float(lo), float(hi))
            self.forecaster = {
                key: forecast.get(key)
                for key in ("model", "live", "recent_mase", "naive_recent_mase", "fitting")
            }

    def add_evaluations(self, lines: Iterable[dict[str, Any]]) -> None:
        """Per-worker AUC evaluations; the timeline keeps the mean over workers whose
        newest evaluation is at most 3 s old, once per evaluation batch (one model: one
        worker evaluates it), and the job's committed step and quorum size they carry."""
        newest = 0.0
        with self.lock:
            for line in lines:
                step, quorum = line.get("step"), line.get("quorum")
                if isinstance(step, int) and isinstance(quorum, int):
                    self.steps.append((float(line["at_s"]), step, quorum))
                auc = line.get("auc")
                if isinstance(auc, int | float) and np.isfinite(auc):
                    at_s = float(line["at_s"])
                    self._last_auc[str(line.get("worker_id"))] = (at_s, float(auc))
                    newest = max(newest, at_s)
            if newest:
                fresh = [a for t, a in self._last_auc.values() if t >= newest - 3.0]
                self.auc.append((newest, float(np.mean(fresh))))

    def to_json(self) -> dict[str, Any]:
        with self.lock:
            return {
                "partitions": self.partitions,
                "reports": list(self.reports),
                "alerts": list(self.alerts),
                "commands": list(self.commands),
                "actions": list(self.actions),
                "workers": [list(p) for p in self.workers],
                "planned": [list(p) for p in self.planned],
                "forecast": sorted([ms_to_s(k), v] for k, v in self.forecast.items()),
                "band": sorted([ms_to_s(k), lo, hi] for k, (lo, hi) in self.band.items()),
                "forecaster": dict(self.forecaster),
                "auc": [list(p) for p in self.auc],
                "events": list(self.events),
                "progress": [list(p) for p in self.progress],
                "steps": [list(p) for p in self.steps],
            }


class TopicFeeds(threading.Thread):
    """See the module docstring. ``stop()`` ends it; ``bad_messages`` counts the undecodable."""

    def __init__(
        self,
        settings: KafkaSettings,
        timeline: Timeline,
        *,
        reports_topic: str,
        alerts_topic: str,
        commands_topic: str,
        job: str,
    ) -> None:
        super().__init__(name="demo-topic-feeds", daemon=True)
        self.settings, self.timeline, self.job = settings, timeline, job
        self.handlers = {
            reports_topic: self._report,
            alerts_topic: self._alert,
            commands_topic: self._command,
        }
        self.bad_messages = 0
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()

    def _report(self, value: bytes) -> None:
        report = decode(cp.LagReport, value)
        if report.group == self.job:
            self.timeline.add_report(report)

    def _alert(self, value: bytes) -> None:
        self.timeline.add_alert(decode(cp.Alert, value))

    def _command(self, value: bytes) -> None:
        command = decode(cp.ScaleCommand, value)
        if command.job == self.job:
            self.timeline.add_command(command)

    def _new_partitions(self, assigned: set[str]) -> list[TopicPartition]:
        """Partitions of the watched topics that exist now and are not assigned yet."""
        try:
            found = {t.name: t.partitions for t in describe_topics(self.settings, timeout_s=2.0)}
        except StreamtrainError as exc:
            log.debug("demo observer: cannot list topics yet: %s", exc)
            return []
        return [
            TopicPartition(topic, p, OFFSET_BEGINNING)
            for topic in self.handlers
            if topic not in assigned and found.get(topic)
            for p in range(found[topic])
        ]

    def run(self) -> None:
        consumer = Consumer(
            self.settings.confluent_config(
                **{"group.id": f"{self.job}-demo-observer", "enable.auto.commit": False}
            )
        )
        try:
            assigned: set[str] = set()
            while not self._halt.is_set():
                if len(assigned) < len(self.handlers):  # topics appear as the apps start
                    new = self._new_partitions(assigned)
                    if new:
                        consumer.incremental_assign(new)
                        assigned |= {tp.topic for tp in new}
                if not assigned:
                    self._halt.wait(0.5)
                    continue
                for message in consumer.consume(500, timeout=0.5):
                    self._handle(message)
        finally:
            consumer.close()

    def _handle(self, message: Message) -> None:
        error = message.error()
        if error is not None:
            if error.code() != KafkaError._PARTITION_EOF:
                log.debug("demo observer: %s", error)
            return
        handler = self.handlers.get(message.topic() or "")
        value = message.value()
        if handler is None or value is None:
            return
        try:
            handler(value)
        except SchemaError as exc:
            self.bad_messages += 1
            log.warning("demo observer: undecodable message on %s: %s", message.topic(), exc)


def planner_status(port: int) -> dict[str, Any] | None:
    """The control app's planner status on ``port`` (on 127.0.0.1), or ``None`` while it
    does not answer yet."""
    return _control_page(port, "planner")


def shard_status(port: int) -> dict[str, Any] | None:
    """The control app's shard coordinator page on ``port`` (its ``lagging`` partitions:
    see :meth:`~streamtrain.control.shard_coordinator.ShardCoordinator.state_json`), or
    ``None`` when it does not answer."""
    return _control_page(port, "shards", timeout_s=5.0)


def stall_lines(
    trained: TrainedIds, produced: int, generator: TrafficGenerator, port: int
) -> list[str]:
    """What a drain that timed out left: how many produced ids no worker trained and, when
    the control app on ``port`` is a shard coordinator, each partition with records not
    done as it sees them, beside the records the broker acknowledged on it (a ``hwm``
    below them: it never learnt of the last ones)."""
    lines = [f"drain timed out: {produced - trained.covered(produced):,} records not trained yet"]
    status = shard_status(port)
    if status is None:
        return [*lines, "(no shard coordinator page answered)"]
    sent = generator.acknowledged
    for view in status.get("lagging", []):
        p = view.get("partition")
        acked = int(sent[p]) if isinstance(p, int) and 0 <= p < sent.size else "?"
        lines.append(f"shards {describe_line(view)}; produced {acked}")
    return lines


def _control_page(port: int, page: str, timeout_s: float = 1.0) -> dict[str, Any] | None:
    url = f"http://127.0.0.1:{port}/{page}"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            status: dict[str, Any] = json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        log.debug("%s status not available: %s", page, exc)
        return None
    return status if isinstance(status, dict) else None


def planner_forecast(port: int) -> dict[str, Any] | None:
    """The ``forecast`` of the planner status on ``port``, or ``None``."""
    status = planner_status(port)
    forecast: dict[str, Any] | None = None if status is None else status.get("forecast")
    return forecast


def throughput_belief(status: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the planner believes ``workers`` train (its f_sync fit on the workers' own
    throughput samples, or the prior before enough pool sizes were measured): source,
    description and the measured ``[workers, records/s]`` points (the planner's clock)."""
    if not status or "throughput_source" not in status:
        return None
    return {
        "source": status.get("throughput_source"),
        "model": status.get("throughput"),
        "measured": status.get("measured"),
    }
