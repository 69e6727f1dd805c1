"""A scripted worker process for the shuffle's integration tests and its experiment.

Owned here: ``python -m streamtrain.experiments.shuffle_harness SPEC.json``, one worker that runs a
:class:`~streamtrain.shuffle.node.ShuffleNode` between a record source and a simulated
trainer, as the JSON spec says:

* ``settings``: :class:`~streamtrain.shuffle.settings.ShuffleSettings` fields (``curve``
  as ``{"public": Z85, "secret": Z85}``);
* ``membership``: ``{"kind": "kafka", "bootstrap", "heartbeat_interval_ms",
  "heartbeat_timeout_ms"}`` or ``{"kind": "static", "peers": [PeerInfo fields]}``;
* ``source``: ``{"kind": "synthetic", "topic", "partition", "records", "record_bytes",
  "chunk_records"}`` (offsets 0..records-1), ``{"kind": "kafka", "bootstrap", "topic",
  "partitions", "group", "commit_interval_s"}`` (:meth:`_Worker.run_kafka`) or
  ``{"kind": "none"}``;
* ``trainer``: ``{"records_per_s", "batch_records", "torch", "model"}`` or ``null``
  (:meth:`_Worker.run_trainer`);
* ``out_dir``: where ``<worker>.trained`` and ``<worker>.status.json`` go
  (:meth:`_Worker.write_status`).

SIGTERM stops it cleanly (tombstone, LEFT, final status). It writes files only; it
prints nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from streamtrain.config import KafkaSettings
from streamtrain.ingest.tracker import OffsetTracker
from streamtrain.records import RecordColumns, contiguous_runs
from streamtrain.shuffle.kafka_membership import KafkaMembership
from streamtrain.shuffle.membership import MemberDirectory, Membership, PeerInfo, StaticMembership
from streamtrain.shuffle.node import ShuffleNode
from streamtrain.shuffle.settings import CurveKeys, ShuffleSettings
from streamtrain.units import now_ms

if TYPE_CHECKING:
    from streamtrain.experiments.mmoe_trainer import MmoeTrainer

__all__ = ["main", "settings_from_spec"]


def settings_from_spec(spec: dict[str, Any]) -> ShuffleSettings:
    fields = dict(spec)
    curve = fields.pop("curve", None)
    keys = None
    if curve is not None:
        keys = CurveKeys(curve["public"].encode("ascii"), curve["secret"].encode("ascii"))
    return ShuffleSettings(**fields, curve=keys)


def _membership(spec: dict[str, Any], job: str) -> Membership:
    if spec["kind"] == "kafka":
        return KafkaMembership(
            KafkaSettings(bootstrap=spec["bootstrap"]),
            job,
            heartbeat_interval_ms=int(spec.get("heartbeat_interval_ms", 500)),
            heartbeat_timeout_ms=int(spec.get("heartbeat_timeout_ms", 3_000)),
        )
    peers = [
        PeerInfo(
            worker_id=p["worker_id"],
            data_endpoint=p["data_endpoint"],
            event_endpoint=p["event_endpoint"],
            incarnation=int(p.get("incarnation", 1)),
            curve_public_key=(
                p["curve_public_key"].encode("ascii") if p.get("curve_public_key") else None
            ),
        )
        for p in spec.get("peers", [])
    ]
    return StaticMembership(MemberDirectory(peers))


class _Worker:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.settings = settings_from_spec(spec["settings"])
        self.out_dir = Path(spec["out_dir"])
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.tracker = OffsetTracker()
        self.node = ShuffleNode(
            self.settings, self.tracker, _membership(spec["membership"], self.settings.job)
        )
        self.stop = threading.Event()
        self.source_done = False
        self.records_read = 0
        self.trained_records = 0
        self.commits: dict[int, int] = {}
        self.started_at = time.time()
        self.kafka_bytes = {"rx_bytes": 0, "tx_bytes": 0}
        self.mmoe: MmoeTrainer | None = None
        self.trainer_ready = spec.get("trainer") is None  # set once the trainer can train

    # source ------------------------------------------------------------------------------

    def _put_all(self, columns: RecordColumns) -> bool:
        for partition, first, last in contiguous_runs(columns.partitions, columns.offsets):
            self.tracker.handed_out(columns.topic, partition, first, last)
        remaining: RecordColumns | None = columns
        while remaining is not None:
            if self.stop.is_set():
                return False
            remaining = self.node.put(remaining, timeout_s=0.2)
        return True

    def run_synthetic(self, source: dict[str, Any]) -> None:
        topic, partition = source["topic"], int(source["partition"])
        total, size = int(source["records"]), int(source.get("record_bytes", 200))
        chunk = int(source.get("chunk_records", 500))
        self.tracker.assign(topic, partition, -1)
        for start in range(0, total, chunk):
            n = min(chunk, total - start)
            offsets = np.arange(start, start + n, dtype=np.int64)
            payloads = b"".join(int(o).to_bytes(8, "big") * (size // 8) for o in offsets)
            bounds = np.arange(n + 1, dtype=np.int64) * (size // 8 * 8)
            columns = RecordColumns(
                topic,
                np.full(n, partition, dtype=np.int32),
                offsets,
                np.full(n, now_ms(), dtype=np.int64),
                payloads,
                bounds,
            )
            if not self._put_all(columns):
                return
            self.records_read += n
        self.source_done = True

    def run_kafka(self, source: dict[str, Any]) -> None:
        """Read the assigned partitions from the group's committed offsets and commit
        what ingest's real :class:`~streamtrain.ingest.tracker.OffsetTracker` says is
        committable, as a worker does: up to the lowest record not acknowledged locally
        or remotely (records are handed out before they enter the shuffle, acknowledged
        when trained here or ACKed by a peer). Also reports the bytes the consumer
        exchanged with the brokers (librdkafka's statistics)."""
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        kafka = KafkaSettings(bootstrap=source["bootstrap"])
        topic, partitions = source["topic"], [int(p) for p in source["partitions"]]
        consumer = Consumer(
            kafka.confluent_config(
                **{
                    "group.id": source["group"],
                    "enable.auto.commit": False,
                    "statistics.interval.ms": 500,
                    "stats_cb": self._on_kafka_stats,
                }
            )
        )
        committed = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=30)
        starts = []
        for tp in committed:
            self.tracker.assign(topic, tp.partition, tp.offset)
            offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            starts.append(TopicPartition(topic, tp.partition, offset))
        consumer.assign(starts)
        next_commit = time.monotonic()
        commit_interval_s = float(source.get("commit_interval_s", 0.5))
        try:
            while not self.stop.is_set():
                messages = consumer.consume(num_messages=500, timeout=0.1)
                good = [m for m in messages if m.error() is None]
                if good:
                    columns = RecordColumns.from_values(
                        topic,
                        [cast(int, m.partition()) for m in good],
                        [cast(int, m.offset()) for m in good],
                        [m.timestamp()[1] for m in good],
                        [m.value() or b"" for m in good],
                    )
                    self.records_read += len(good)
                    if not self._put_all(columns):
                        break
                if time.monotonic() >= next_commit:
                    self._commit(consumer)
                    next_commit = time.monotonic() + commit_interval_s
            self._commit(consumer)
        finally:
            consumer.close()

    def _on_kafka_stats(self, raw: str) -> None:
        stats = json.loads(raw)
        for key in self.kafka_bytes:
            self.kafka_bytes[key] = max(self.kafka_bytes[key], int(stats.get(key, 0)))

    def _commit(self, consumer: Any) -> None:
        """Commit what the tracker says is committable (as a worker's committer does)."""
        from confluent_kafka import KafkaException, TopicPartition

        positions = self.tracker.committable()
        if not positions:
            return
        offsets = [TopicPartition(t, p, o) for (t, p), o in positions.items()]
        with contextlib.suppress(KafkaException):  # the broker is away: commit next time
            consumer.commit(offsets=offsets, asynchronous=False)
            self.tracker.mark_committed(positions)
            for (_, partition), offset in positions.items():
                self.commits[partition] = offset

    # trainer -----------------------------------------------------------------------------

    def run_trainer(self, trainer: dict[str, Any]) -> None:
        """Train what the node hands out. ``records_per_s`` (0: as fast as it can;
        otherwise each batch takes at least its share of a second, as a slower
        accelerator would), ``batch_records``, ``torch`` (a real SGD step on the payload
        bytes per batch), ``"model": "mmoe"`` (a real MMoE step on CTR records and AUC
        evaluations: :class:`~streamtrain.experiments.mmoe_trainer.MmoeTrainer`, its
        fields beside these). ``<worker>.trained`` gets one ``partition first last``
        line per contiguous run, flushed before the batch is acknowledged."""
        rate = float(trainer.get("records_per_s", 0))
        batch_records = int(trainer.get("batch_records", 500))
        step: Callable[[RecordColumns], object] | None = None
        if trainer.get("model") == "mmoe":
            from streamtrain.experiments.mmoe_trainer import MmoeTrainer  # torch: only here

            self.mmoe = MmoeTrainer(trainer, self.out_dir / f"{self.settings.worker_id}.auc.jsonl")
            self.mmoe.warm_up()
            step = self.mmoe.step
        elif trainer.get("torch"):
            step = _torch_step()
        self.trainer_ready = True
        with (self.out_dir / f"{self.settings.worker_id}.trained").open("a") as log:
            while not self.stop.is_set():
                if self.mmoe is not None:
                    self.mmoe.maybe_evaluate()
                batch = self.node.take(batch_records, timeout_s=0.1)
                if batch is None:
                    continue
                started = time.monotonic()
                if step is not None:
                    step(batch.columns)
                runs = contiguous_runs(batch.columns.partitions, batch.columns.offsets)
                log.write("".join(f"{p} {first} {last}\n" for p, first, last in runs))
                log.flush()
                if rate > 0:
                    left = len(batch) / rate - (time.monotonic() - started)
                    if left > 0:
                        self.stop.wait(left)
                self.node.ack(batch)
                self.trained_records += len(batch)
        if self.mmoe is not None:
            self.mmoe.maybe_evaluate(force=True)  # the model as it ends
            self.mmoe.close()

    # status ------------------------------------------------------------------------------

    def write_status(self) -> None:
        """``<worker>.status.json``, rewritten atomically every ``status_interval_s``:
        ``trainer_ready`` once the trainer can take batches, ``positions`` (the
        tracker's next commit position per ``topic:partition``), ``committed`` (what was
        committed to Kafka), ``kafka_rx_bytes`` and ``kafka_tx_bytes``."""
        stats = self.node.stats()
        status = {
            "worker_id": self.settings.worker_id,
            "pid": os.getpid(),
            "time": time.time(),
            "started_at": self.started_at,
            "cpu_s": time.process_time(),
            "source_done": self.source_done,
            "records_read": self.records_read,
            "trained_records": self.trained_records,
            "trainer_ready": self.trainer_ready,
            "eval_cpu_s": 0.0 if self.mmoe is None else self.mmoe.eval_cpu_s,
            "step_cpu_s": 0.0 if self.mmoe is None else self.mmoe.step_cpu_s,
            "kafka_rx_bytes": self.kafka_bytes["rx_bytes"],
            "kafka_tx_bytes": self.kafka_bytes["tx_bytes"],
            "unit": dataclasses.asdict(stats.unit),
            "forwarding": dataclasses.asdict(stats.forwarding),
            "positions": {
                f"{topic}:{partition}": _position(self.tracker, (topic, partition))
                for topic, partition in sorted(self.tracker.assigned())
            },
            "committed": {str(p): offset for p, offset in self.commits.items()},
            "failure": None
            if self.node.forwarding.failure is None
            else str(self.node.forwarding.failure),
        }
        target = self.out_dir / f"{self.settings.worker_id}.status.json"
        temporary = target.with_suffix(".tmp")
        temporary.write_text(json.dumps(status))
        temporary.replace(target)


def _position(tracker: OffsetTracker, key: tuple[str, int]) -> int | None:
    """Where ``key``'s next commit would go: the committable position, or the last one
    committed when nothing new is (``None``: nothing acknowledged yet)."""
    committable = tracker.committable().get(key)
    if committable is not None:
        return committable
    progress = tracker.progress().get(key)
    return None if progress is None else progress.committed


def _torch_step() -> Callable[[RecordColumns], object]:
    import torch

    torch.set_num_threads(1)
    model = torch.nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step(columns: RecordColumns) -> None:
        raw = np.frombuffer(columns.payloads, dtype=np.uint8)
        usable = raw[: raw.size // 8 * 8].reshape(-1, 8).astype(np.float32) / 255.0
        features = torch.from_numpy(usable[: len(columns)])
        loss = model(features).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return step


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    spec = json.loads(Path(args[0]).read_text())
    worker = _Worker(spec)
    signal.signal(signal.SIGTERM, lambda *_: worker.stop.set())
    signal.signal(signal.SIGINT, lambda *_: worker.stop.set())
    deadline = time.monotonic() + float(spec.get("run_s", 600))
    threads: list[threading.Thread] = []
    worker.node.start()
    try:
        source = spec.get("source", {"kind": "none"})
        if source["kind"] == "synthetic":
            threads.append(threading.Thread(target=worker.run_synthetic, args=(source,)))
        elif source["kind"] == "kafka":
            threads.append(threading.Thread(target=worker.run_kafka, args=(source,)))
        if spec.get("trainer") is not None:
            threads.append(threading.Thread(target=worker.run_trainer, args=(spec["trainer"],)))
        for thread in threads:
            thread.start()
        interval = float(spec.get("status_interval_s", 0.2))
        while not worker.stop.is_set() and time.monotonic() < deadline:
            worker.write_status()
            worker.stop.wait(interval)
    finally:
        worker.stop.set()
        for thread in threads:
            thread.join(timeout=10)
        worker.node.stop()
        worker.write_status()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
