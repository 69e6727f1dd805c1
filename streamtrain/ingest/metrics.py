"""A worker's counters and the pure functions that turn two snapshots into rates and samples.

Owned here: :class:`WorkerMetrics` (thread-safe monotonic totals: records consumed,
records trained, dead letters, commits, lockstep and disturbed rounds),
:class:`MetricsSnapshot` (one consistent reading, with per-partition progress and the
local queue length), and the pure :func:`rates`, :func:`lockstep_capacity`,
:func:`disturbed_s` and :func:`throughput_sample` (the ``ThroughputSample`` protobuf the
control plane fits its throughput model on). Rates come from differencing totals over
the window between two snapshots, as faust's monitor does: never from instantaneous
per-batch timings.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from streamtrain.ingest.tracker import PartitionProgress
from streamtrain.partition_key import PartitionKey
from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.units import s_to_ms

__all__ = [
    "MetricsSnapshot",
    "WorkerMetrics",
    "disturbed_s",
    "lockstep_busy_fraction",
    "lockstep_capacity",
    "rates",
    "throughput_sample",
]

_DISTURBANCES_KEPT = 16  # the newest disturbed rounds' starts a snapshot carries
_SYNCS_KEPT = 64  # the newest lockstep rounds' synchronization times a snapshot carries


@dataclass(frozen=True, slots=True)
class MetricsSnapshot:
    """Totals since the worker started, read at ``at_s`` (``time.monotonic``)."""

    at_s: float
    records_consumed: int = 0
    records_trained: int = 0
    dead_letters: int = 0
    dead_letter_failures: int = 0
    commits: int = 0
    commit_failures: int = 0
    busy_s: float = 0.0  # time spent in training steps
    steps: int = 0  # training steps taken (busy_s / steps: the mean step time)
    # Lockstep engines (one model, every participant steps every round): the full batch,
    # the committed rounds that trained records, their records and forward-backward
    # time, and (rounds after it, seconds) each recent round's rest: synchronization and
    # waiting for peers
    lockstep_batch_records: int = 0
    lockstep_rounds: int = 0
    lockstep_records: int = 0
    lockstep_compute_s: float = 0.0
    lockstep_syncs: tuple[tuple[int, float], ...] = ()
    disturbed_rounds: int = 0  # rounds that did not commit or changed the participants
    # (disturbed_rounds after it, time.monotonic() it began) for the newest of them
    disturbances: tuple[tuple[int, float], ...] = ()
    stale_acks: int = 0
    queue_records: int = 0
    in_flight_records: int = 0
    partitions: Mapping[PartitionKey, PartitionProgress] = field(default_factory=dict)


class WorkerMetrics:
    """Monotonic totals updated from the fetch thread, the trainer and delivery callbacks.

    ``progress`` and ``gauges`` are read at snapshot time (the tracker's per-partition
    progress, the local queue length), so they never go stale.
    """

    def __init__(
        self,
        progress: Callable[[], Mapping[PartitionKey, PartitionProgress]] | None = None,
        gauges: Callable[[], Mapping[str, int]] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._progress = progress
        self._gauges = gauges
        self.records_consumed = 0
        self.records_trained = 0
        self.dead_letters = 0
        self.dead_letter_failures = 0
        self.commits = 0
        self.commit_failures = 0
        self.busy_s = 0.0
        self.steps = 0
        self.lockstep_batch_records = 0
        self.lockstep_rounds = 0
        self.lockstep_records = 0
        self.lockstep_compute_s = 0.0
        self._syncs: deque[tuple[int, float]] = deque(maxlen=_SYNCS_KEPT)
        self.disturbed_rounds = 0
        self._disturbances: deque[tuple[int, float]] = deque(maxlen=_DISTURBANCES_KEPT)

    def bind(
        self,
        progress: Callable[[], Mapping[PartitionKey, PartitionProgress]],
        gauges: Callable[[], Mapping[str, int]],
    ) -> None:
        """Attach the live sources of per-partition progress and gauges."""
        self._progress = progress
        self._gauges = gauges

    def add(
        self,
        *,
        consumed: int = 0,
        trained: int = 0,
        dead_letters: int = 0,
        dead_letter_failures: int = 0,
        commits: int = 0,
        commit_failures: int = 0,
        busy_s: float = 0.0,
        steps: int = 0,
    ) -> None:
        with self._lock:
            self.busy_s += busy_s
            self.steps += steps
            self.records_consumed += consumed
            self.records_trained += trained
            self.dead_letters += dead_letters
            self.dead_letter_failures += dead_letter_failures
            self.commits += commits
            self.commit_failures += commit_failures

    def lockstep(self, batch_records: int) -> None:
        """The trainer steps in lockstep with its peers, ``batch_records`` at most a round:
        its busy fraction is :func:`lockstep_busy_fraction`."""
        with self._lock:
            self.lockstep_batch_records = max(batch_records, 0)

    def lockstep_round(self, round_s: float, compute_s: float, records: int) -> None:
        """A committed lockstep round that trained ``records`` of this worker in
        ``round_s``, ``compute_s`` of it in its forward and backward pass."""
        with self._lock:
            self.lockstep_rounds += 1
            self.lockstep_records += records
            self.lockstep_compute_s += compute_s
            self._syncs.append((self.lockstep_rounds, max(round_s - compute_s, 0.0)))

    def disturbed(self, started_s: float) -> None:
        """A round that began at ``started_s`` (``time.monotonic()``) did not commit or
        had other participants than the round before: the samples around it measure a
        peer's failure, arrival or departure, not the pool (see :func:`throughput_sample`)."""
        with self._lock:
            self.disturbed_rounds += 1
            self._disturbances.append((self.disturbed_rounds, started_s))

    def snapshot(self) -> MetricsSnapshot:
        gauges = dict(self._gauges()) if self._gauges is not None else {}
        partitions = dict(self._progress()) if self._progress is not None else {}
        with self._lock:
            return MetricsSnapshot(
                at_s=time.monotonic(),
                records_consumed=self.records_consumed,
                records_trained=self.records_trained,
                dead_letters=self.dead_letters,
                dead_letter_failures=self.dead_letter_failures,
                commits=self.commits,
                commit_failures=self.commit_failures,
                busy_s=self.busy_s,
                steps=self.steps,
                lockstep_batch_records=self.lockstep_batch_records,
                lockstep_rounds=self.lockstep_rounds,
                lockstep_records=self.lockstep_records,
                lockstep_compute_s=self.lockstep_compute_s,
                lockstep_syncs=tuple(self._syncs),
                disturbed_rounds=self.disturbed_rounds,
                disturbances=tuple(self._disturbances),
                stale_acks=gauges.get("stale_acks", 0),
                queue_records=gauges.get("queue_records", 0),
                in_flight_records=gauges.get("in_flight_records", 0),
                partitions=partitions,
            )


def disturbed_s(previous: MetricsSnapshot, current: MetricsSnapshot) -> float | None:
    """How long before ``current`` the first disturbed round counted in the window began
    (s), or ``None`` when the window counted none. Rounds run one after another, so only
    the window's first round can have begun before the window; when more disturbed rounds
    were counted than are kept, the window's start stands in for the lost ones."""
    if current.disturbed_rounds <= previous.disturbed_rounds:
        return None
    starts = [s for count, s in current.disturbances if count > previous.disturbed_rounds]
    kept = len(starts)
    if kept < current.disturbed_rounds - previous.disturbed_rounds:
        starts.append(previous.at_s)
    return max(0.0, current.at_s - min(starts))


def lockstep_capacity(previous: MetricsSnapshot, current: MetricsSnapshot) -> float | None:
    """What a lockstep worker trains per second when every round has a full batch
    (records/s), from the window's committed rounds: a round takes its forward and backward
    pass (the window's seconds per record times the full batch) plus the synchronization
    (the lower quartile of the window's rest of a round: quorum and all-reduces; the
    higher ones also wait for peers, which wait for data when the pool has less than it
    can train). ``None`` without a round that trained records in the window. The compute
    is taken as linear in the batch: a fixed cost per pass makes small batches read a
    lower capacity (the planner then plans more workers, not fewer). With more than
    ``_SYNCS_KEPT`` rounds in the window, the quartile is of the newest."""
    records = current.lockstep_records - previous.lockstep_records
    compute_s = current.lockstep_compute_s - previous.lockstep_compute_s
    syncs = sorted(s for n, s in current.lockstep_syncs if n > previous.lockstep_rounds)
    full = current.lockstep_batch_records
    if records <= 0 or not syncs or full <= 0:
        return None
    sync_s = syncs[(len(syncs) - 1) // 4]
    round_s = max(compute_s, 0.0) / records * full + sync_s
    return full / round_s if round_s > 0 else None


def lockstep_busy_fraction(
    previous: MetricsSnapshot, current: MetricsSnapshot, trained_per_s: float
) -> float:
    """The share of the window a lockstep worker would have needed to train what it
    trained at :func:`lockstep_capacity`, so that its trained rate divided by it is that
    capacity; 0 (it says nothing about its capacity) without a round that trained."""
    capacity = lockstep_capacity(previous, current)
    if capacity is None:
        return 0.0
    return min(max(trained_per_s / capacity, 0.0), 1.0)


def rates(previous: MetricsSnapshot, current: MetricsSnapshot) -> tuple[float, float]:
    """``(records/s consumed, records/s trained)`` over the window between two snapshots."""
    window_s = current.at_s - previous.at_s
    if window_s <= 0:
        return 0.0, 0.0
    consumed = max(current.records_consumed - previous.records_consumed, 0) / window_s
    trained = max(current.records_trained - previous.records_trained, 0) / window_s
    return consumed, trained


def throughput_sample(
    previous: MetricsSnapshot,
    current: MetricsSnapshot,
    *,
    job: str,
    worker_id: str,
    workers: int,
    observed_at_ms: int,
    parameter_servers: int = 0,
) -> pb.ThroughputSample:
    """The ``ThroughputSample`` for the window ``previous → current``.

    ``workers`` is the pool size the worker saw (0: unknown). ``busy_fraction`` is set
    when the trainer reports the time its steps take (``busy_s``), and always for a
    lockstep worker, whose steps include waiting for peers that wait for data (their
    time is the pool's traffic, not its capacity): there it is
    :func:`lockstep_busy_fraction`. ``step_time_ms`` is set when the trainer also counts
    its steps (``steps``: the mean step of the window), ``disturbed_s`` when a round in
    the window was disturbed (:func:`disturbed_s`). Positions are the next offset to
    read per partition (partitions with nothing read yet are left out).
    """
    consumed, trained = rates(previous, current)
    window_s = current.at_s - previous.at_s
    sample = pb.ThroughputSample(
        job=job,
        worker_id=worker_id,
        workers=max(workers, 0),
        parameter_servers=parameter_servers,
        records_per_s_consumed=consumed,
        records_per_s_trained=trained,
        window_s=max(current.at_s - previous.at_s, 0.0),
        observed_at_ms=observed_at_ms,
    )
    if current.lockstep_batch_records > 0:
        sample.busy_fraction = lockstep_busy_fraction(previous, current, trained)
    elif window_s > 0 and current.busy_s > 0:
        busy = (current.busy_s - previous.busy_s) / window_s
        sample.busy_fraction = min(max(busy, 0.0), 1.0)
    steps = current.steps - previous.steps
    if steps > 0 and current.busy_s > previous.busy_s:
        sample.step_time_ms = s_to_ms(current.busy_s - previous.busy_s) / steps
    disturbance_s = disturbed_s(previous, current)
    if disturbance_s is not None:
        sample.disturbed_s = disturbance_s
    for (topic, partition), progress in sorted(current.partitions.items()):
        if progress.consumed is not None:
            sample.positions.add(topic=topic, partition=partition, offset=progress.consumed)
    return sample
