"""The demo's traffic: a KALE-shaped day, time-compressed, skewed across partitions.

Owned here:

* :func:`last_day` (pure): the demo's day, the last day of a trace with gaps as 0.
* :class:`TrafficPlan` (pure): one day of a trace (by default the last day of the
  synthetic KALE-shaped week) replayed in ``duration_s`` wall seconds, scaled so its
  peak is ``peak_records_per_s``, spread over ``partitions`` with hot/cold shares that
  drift (the simulator's :func:`~streamtrain.sim.workload.partition_shares`). It answers
  how many records each partition should have received by a given elapsed time, so a
  paced producer never drifts from the plan however late it wakes up.
* :class:`TrafficGenerator`: a thread that produces :data:`~streamtrain.ingest.example.CTR_RECORD`
  samples (unique, increasing ids; labels from the hidden model, drifting over the day
  so stale training hurts) to a topic following the plan from ``start_at_s`` (wall
  clock), and counts what the broker acknowledged, per partition, so the demo can check
  that no record was lost. :meth:`~TrafficGenerator.burst` adds records at once (the
  dashboard's lag-spike button). It keeps how far it fell behind the plan
  (:attr:`~TrafficGenerator.max_behind_s`): on a machine shared with the workers, a
  starved generator delays the day's traffic, which the planner reads as a drop and the
  catch-up as a burst. So does a broker that acknowledges late, though the generator
  handed its records over on time (:attr:`~TrafficGenerator.max_unacked_s`).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass

import numpy as np
from confluent_kafka import KafkaException, Producer
from numpy.typing import NDArray

from streamtrain.config import KafkaSettings
from streamtrain.errors import ConfigError
from streamtrain.forecast.trace import Trace, synth_trace
from streamtrain.ingest.example import SyntheticCtr, split_records
from streamtrain.sim.workload import SkewSettings, partition_shares
from streamtrain.units import DAY_S

__all__ = ["TrafficGenerator", "TrafficPlan", "drift_phase", "last_day"]

log = logging.getLogger(__name__)


def drift_phase(elapsed_s: float, duration_s: float, turns: float) -> float:
    """How far the hidden model has turned ``elapsed_s`` into a day of ``duration_s``
    (``turns`` over the whole day): the generator labels records with it, and the demo's
    workers score their models on it, so both must compute it the same way."""
    return turns * min(max(elapsed_s, 0.0), duration_s) / duration_s


def last_day(trace: Trace) -> NDArray[np.float64]:
    """The last day of ``trace`` (what the demo replays), gaps as no traffic."""
    steps = max(1, round(DAY_S / trace.step_s))
    return np.nan_to_num(trace.records_per_s[-steps:], nan=0.0)


@dataclass(frozen=True, slots=True, eq=False)
class TrafficPlan:
    """Cumulative records per partition over a compressed day (see the module docstring).

    ``cumulative[k, p]`` is how many records partition ``p`` has received after ``k``
    trace steps; between steps the count is interpolated linearly.
    """

    duration_s: float
    step_wall_s: float
    cumulative: NDArray[np.float64]  # (steps + 1) x partitions
    records_per_s: NDArray[np.float64]  # the scaled, compressed rate per step (wall s)

    @classmethod
    def from_trace(
        cls,
        trace: Trace | None = None,
        *,
        duration_s: float = 600.0,
        peak_records_per_s: float = 2_000.0,
        partitions: int = 16,
        skew_sigma: float = 0.8,
        seed: int = 0,
    ) -> TrafficPlan:
        """The last day of ``trace`` (default: synthetic KALE-shaped week, ``seed``)."""
        if duration_s <= 0 or not math.isfinite(duration_s):
            raise ConfigError(f"the demo duration must be positive, got {duration_s} s")
        if peak_records_per_s <= 0:
            raise ConfigError(f"the peak rate must be positive, got {peak_records_per_s}")
        trace = trace or synth_trace(7, seed=seed)
        day = last_day(trace)
        if day.size == 0 or float(day.max()) <= 0:
            raise ConfigError("the trace's last day has no traffic")
        rates = day / float(day.max()) * peak_records_per_s
        step_wall_s = duration_s / day.size
        shares = partition_shares(
            day.size,
            int(trace.step_s),
            SkewSettings(partitions=partitions, sigma=skew_sigma, seed=seed),
        )
        cumulative = np.zeros((day.size + 1, partitions))
        np.cumsum(rates[:, None] * shares * step_wall_s, axis=0, out=cumulative[1:])
        return cls(duration_s, step_wall_s, cumulative, rates)

    @property
    def partitions(self) -> int:
        return int(self.cumulative.shape[1])

    @property
    def total_records(self) -> int:
        return int(np.floor(self.cumulative[-1]).sum())

    def due(self, elapsed_s: float) -> NDArray[np.int64]:
        """Records each partition should have received ``elapsed_s`` into the run."""
        position = min(max(elapsed_s, 0.0), self.duration_s) / self.step_wall_s
        k = min(int(position), self.cumulative.shape[0] - 2)
        fraction = position - k
        row = self.cumulative[k] + fraction * (self.cumulative[k + 1] - self.cumulative[k])
        due: NDArray[np.int64] = np.floor(row).astype(np.int64)
        return due

    def rate_at(self, elapsed_s: float) -> float:
        """The planned total rate (records per wall second) at ``elapsed_s``."""
        k = min(int(max(elapsed_s, 0.0) / self.step_wall_s), self.records_per_s.size - 1)
        return float(self.records_per_s[k])


class TrafficGenerator(threading.Thread):
    """Produces the plan's records to ``topic`` until the plan ends or :meth:`stop`.

    ``acknowledged[p]`` counts the records of partition ``p`` the broker confirmed;
    ``failed`` those it did not (logged). Ids are ``0 .. produced_ids - 1``.
    ``max_behind_s``: the most planned traffic, in wall seconds at the plan's rate then,
    that was due and not yet handed to the producer when the generator woke up.
    ``max_unacked_s``: the same for traffic that was due and not yet acknowledged by the
    broker (at least ``max_behind_s``; about one tick when the broker keeps up).

    ``tick_s``: the records due in a tick go out as one batch per partition, and the
    embedded broker's cost per ListOffsets and per fetch grows with the batches a
    partition holds (docs/benchmarks.md, "Embedded broker"): at 50 ms ticks a demo day
    left about 12,000 batches in each partition and the broker using more than a core by
    the afternoon. 200 ms (29 simulated seconds at the default speed) makes a quarter as
    many.
    """

    def __init__(
        self,
        settings: KafkaSettings,
        topic: str,
        plan: TrafficPlan,
        *,
        seed: int = 0,
        tick_s: float = 0.2,  # one batch per partition a tick (class docstring)
        drift_turns: float = 0.5,  # how far the hidden model turns over the day
        start_at_s: float | None = None,  # wall time the day begins; None: when started
    ) -> None:
        super().__init__(name=f"traffic-{topic}", daemon=True)
        if tick_s <= 0:
            raise ConfigError(f"the tick must be positive, got {tick_s} s")
        self.settings, self.topic, self.plan = settings, topic, plan
        self.tick_s, self.drift_turns = tick_s, drift_turns
        self.acknowledged = np.zeros(plan.partitions, dtype=np.int64)
        self.failed = 0
        self.max_behind_s = 0.0
        self.max_unacked_s = 0.0
        self._extra_sent = 0  # burst records handed to the producer
        self.source = SyntheticCtr(seed=seed)
        self.next_id = 0
        self.start_at_s = start_at_s
        self._extra = np.zeros(plan.partitions, dtype=np.int64)
        self._extra_lock = threading.Lock()
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()

    def burst(self, records: int, partitions: int = 4) -> None:
        """Produce ``records`` more records at once, spread over the first ``partitions``."""
        if records < 1 or not 1 <= partitions <= self.plan.partitions:
            raise ConfigError(
                f"a burst needs records >= 1 and 1..{self.plan.partitions} partitions"
            )
        share = np.full(partitions, records // partitions, dtype=np.int64)
        share[: records % partitions] += 1
        with self._extra_lock:
            self._extra[:partitions] += share

    @property
    def produced_ids(self) -> int:
        """Ids handed to the producer so far (0 .. produced_ids - 1)."""
        return self.next_id

    def _on_delivery(self, error: object, message: object) -> None:
        if error is not None:
            self.failed += 1
            log.error("a demo record was not delivered: %s", error)
            return
        self.acknowledged[message.partition()] += 1  # type: ignore[attr-defined]

    def run(self) -> None:
        producer = Producer(self.settings.confluent_config(**{"linger.ms": 5}))
        sent = np.zeros(self.plan.partitions, dtype=np.int64)
        if self.start_at_s is not None and self._halt.wait(max(0.0, self.start_at_s - time.time())):
            return
        self.start_at_s = time.time()
        started = time.monotonic()
        try:
            while not self._halt.is_set():
                elapsed = time.monotonic() - started
                with self._extra_lock:
                    extra, self._extra[:] = self._extra.copy(), 0
                due = self.plan.due(elapsed)
                producer.poll(0)  # count the acknowledgements that came in since the last tick
                acked = int(self.acknowledged.sum()) + self.failed - self._extra_sent
                self._note_behind(elapsed, int((due - sent).sum()), int(due.sum()) - acked)
                missing = due - sent + extra
                total = int(missing.sum())
                if total > 0:
                    phase = drift_phase(elapsed, self.plan.duration_s, self.drift_turns)
                    table = self.source.sample(total, first_id=self.next_id, phase=phase)
                    values = split_records(table)
                    partitions = np.repeat(np.arange(self.plan.partitions), missing)
                    for value, partition in zip(values, partitions.tolist(), strict=True):
                        self._produce(producer, value, partition)
                    self.next_id += total
                    self._extra_sent += int(extra.sum())
                    sent += missing - extra
                producer.poll(0)
                if elapsed >= self.plan.duration_s:
                    break
                self._halt.wait(self.tick_s)
        finally:
            remaining = producer.flush(30)
            if remaining:
                log.error("%d demo records were still undelivered after 30 s", remaining)
                self.failed += remaining

    def _note_behind(self, elapsed_s: float, behind_records: int, unacked_records: int) -> None:
        rate = self.plan.rate_at(elapsed_s)
        if rate > 0:
            self.max_behind_s = max(self.max_behind_s, behind_records / rate)
            self.max_unacked_s = max(self.max_unacked_s, unacked_records / rate)

    def _produce(self, producer: Producer, value: bytes, partition: int) -> None:
        while True:
            try:
                producer.produce(
                    self.topic, value=value, partition=partition, on_delivery=self._on_delivery
                )
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.1)
                continue
            except KafkaException:
                self.failed += 1
                log.exception("could not produce a demo record")
            return
