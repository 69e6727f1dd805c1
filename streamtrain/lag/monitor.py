"""The lag monitor's tick, independent of Faust: fetch, compute, decide what to alert.

Owned here: :class:`LagMonitor`, the state one control app keeps between ticks (HWM history,
Burrow-style status windows, SLO states, the latest result per group, open alerts on
its own health), and :class:`Tick`, what one tick produced. The Faust app
(:mod:`streamtrain.control.app`) and benchmarks drive it; it never publishes anything
itself, so it runs the same against any transport.

One tick: :meth:`OffsetsReader.snapshot` (awaited, never blocking the loop), then the
pure compute (:func:`~streamtrain.lag.metrics.compute_topics_lag` per group) in a worker
thread, then alerts on *changes* only:

* ``PARTITION_STATUS``: a group's or partition's Burrow-style status changed;
* ``SLO``: a group's max lag seconds crossed an SLO threshold (with hysteresis);
* ``CONTROL_APP``: the monitor's own trouble: the broker did not answer (raised once,
  resolved when a tick succeeds again), a watched topic does not exist (never created
  or deleted while watched), a group with no committed offsets and no topics to watch.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from streamtrain.errors import KafkaError, StreamtrainError
from streamtrain.lag.history import HwmHistory
from streamtrain.lag.metrics import compute_topics_lag
from streamtrain.lag.offsets import OffsetsReader, OffsetsSnapshot, read_record_timestamps
from streamtrain.lag.results import GroupLag, RecordKey
from streamtrain.lag.slo import SloSettings, SloState, SloTracker, SloTransition
from streamtrain.lag.status import Status, StatusChange, StatusSettings, StatusTracker
from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.units import s_to_ms
from streamtrain.wire import SCHEMA_VERSION

__all__ = [
    "GroupPoint",
    "HwmPoint",
    "LagMonitor",
    "MonitorSettings",
    "Tick",
    "history_step",
    "one_shot_lag",
]

log = logging.getLogger(__name__)

_SEVERITY = {
    Status.OK: pb.Alert.INFO,
    Status.UNKNOWN: pb.Alert.WARNING,
    Status.WARN: pb.Alert.WARNING,
    Status.STALL: pb.Alert.CRITICAL,
    Status.STOP: pb.Alert.CRITICAL,
    Status.REWIND: pb.Alert.CRITICAL,
}
_SLO_SEVERITY = {
    SloState.OK: pb.Alert.INFO,
    SloState.WARNING: pb.Alert.WARNING,
    SloState.VIOLATION: pb.Alert.CRITICAL,
}


@dataclass(frozen=True, slots=True)
class MonitorSettings:
    """How the monitor ticks; the defaults are the issue's (5 s ticks, 20 min SLO)."""

    tick_s: float = 5.0
    history_step_s: float = 60.0  # how often HWMs and group summaries are persisted
    history_max_age_s: float = 3600.0
    cps_window_s: float = 60.0
    timestamp_timeout_s: float = 5.0
    status: StatusSettings = field(default_factory=StatusSettings)
    slo: SloSettings = field(default_factory=SloSettings)


def history_step(at_s: float, step_s: float) -> int:
    """The index of the ``step_s`` history step that ``at_s`` falls in."""
    return math.floor(at_s / step_s)


@dataclass(frozen=True, slots=True)
class HwmPoint:
    """One persisted HWM snapshot of a topic (``-1``: unknown partition)."""

    topic: str
    at_s: float
    hwms: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class GroupPoint:
    """One persisted per-step summary of a group (None: unknown)."""

    group: str
    at_s: float
    total_lag_records: int
    max_lag_s: float | None
    p99_lag_s: float | None
    records_per_s: float | None
    status: str


@dataclass(frozen=True, slots=True)
class Tick:
    """What one tick produced. ``error`` is set (and ``results`` empty) when it failed."""

    observed_at_s: float
    results: Mapping[str, GroupLag]
    alerts: tuple[pb.Alert, ...]
    fetch_ms: float
    compute_ms: float
    missing_topics: tuple[str, ...] = ()
    hwm_points: tuple[HwmPoint, ...] = ()
    group_points: tuple[GroupPoint, ...] = ()
    error: str | None = None


class LagMonitor:
    """Keeps a lag monitor's state across ticks (see the module docstring).

    Driven by one caller at a time: ticks must not overlap.

    Lag seconds for a committed offset older than the HWM history (right after a start,
    or for a group stuck longer than the history) come from the timestamp of the record
    at that offset: read after the tick that found it missing, cached per offset, used
    from the next tick on (until then that partition's lag seconds is unknown, never
    guessed). History for restarts: every ``history_step_s`` the tick hands out the
    topics' HWMs (:attr:`Tick.hwm_points`) and each group's summary
    (:attr:`Tick.group_points`), at most once per step (:func:`history_step`); the app
    keeps them in changelogged tables and gives them back to :meth:`restore`.
    """

    def __init__(self, reader: OffsetsReader, settings: MonitorSettings | None = None) -> None:
        self.reader = reader
        self.settings = settings or MonitorSettings()
        self.history = HwmHistory(max_age_s=self.settings.history_max_age_s)
        self.status = StatusTracker(self.settings.status)
        self.slo = SloTracker(self.settings.slo)
        self.latest: dict[str, GroupLag] = {}  # replaced whole each tick: safe to read
        self.last_error: str | None = None
        self.last_tick: Tick | None = None
        self._timestamps: dict[RecordKey, float] = {}
        self._open_conditions: dict[str, pb.Alert] = {}  # CONTROL_APP alerts not resolved
        self._last_persisted_step = -1

    # -- restart ---------------------------------------------------------------------

    def restore(self, points: Iterable[HwmPoint]) -> int:
        """Replay persisted HWM snapshots (any order) into the history; returns how many."""
        oldest_at_s = time.time() - self.settings.history_max_age_s
        kept = sorted((p for p in points if p.at_s >= oldest_at_s), key=lambda p: p.at_s)
        for point in kept:
            hwms = {i: v for i, v in enumerate(point.hwms) if v >= 0}
            if hwms:
                self.history.record(point.topic, point.at_s, hwms)
        return len(kept)

    # -- one tick --------------------------------------------------------------------

    async def tick(self) -> Tick:
        """Fetch, compute, alert; never raises a Kafka error (it becomes an alert)."""
        started = time.perf_counter()
        try:
            snapshot = await self.reader.snapshot()
        except KafkaError as exc:
            return self._failed(str(exc), s_to_ms(time.perf_counter() - started))
        fetch_ms = s_to_ms(time.perf_counter() - started)
        tick = await asyncio.to_thread(self._compute, snapshot, fetch_ms)
        needed = [
            key
            for lag in tick.results.values()
            for key in lag.timestamps_needed
            if key not in self._timestamps
        ]
        if needed:  # used from the next tick on
            await self._read_timestamps(needed)
        log.debug(
            "tick: %d groups, fetch %.1f ms, compute %.1f ms",
            len(tick.results),
            tick.fetch_ms,
            tick.compute_ms,
        )
        self.last_tick = tick
        return tick

    async def _read_timestamps(self, needed: list[RecordKey]) -> None:
        positions = {(t, p): offset for t, p, offset in needed}
        try:
            found = await asyncio.to_thread(
                read_record_timestamps,
                self.reader.settings,
                positions,
                timeout_s=self.settings.timestamp_timeout_s,
            )
        except StreamtrainError as exc:
            log.warning("could not read record timestamps for lag seconds: %s", exc)
            return
        for (topic, partition), stamp in found.items():
            self._timestamps[(topic, partition, positions[(topic, partition)])] = stamp

    def _compute(self, snapshot: OffsetsSnapshot, fetch_ms: float) -> Tick:
        started = time.perf_counter()
        now_s = snapshot.observed_at_s
        for topic, count in snapshot.partition_counts.items():
            hwms = snapshot.high_watermarks
            self.history.record(
                topic, now_s, {p: hwms[(topic, p)] for p in range(count) if (topic, p) in hwms}
            )
        results: dict[str, GroupLag] = {}
        alerts: list[pb.Alert] = []
        for group in snapshot.group_topics:
            lag = compute_topics_lag(
                group,
                snapshot.topic_offsets(group),
                self.history,
                now_s,
                status_tracker=self.status,
                record_timestamps_s=self._timestamps,
                cps_window_s=self.settings.cps_window_s,
            )
            results[group] = lag
            alerts.extend(_status_alert(change, lag, now_s) for change in lag.status_changes)
            alerts.extend(_slo_alert(t) for t in self.slo.update_group(lag))
        self._forget_timestamps(results)
        alerts.extend(self._conditions(snapshot, now_s))
        compute_ms = s_to_ms(time.perf_counter() - started)
        self.latest = results
        self.last_error = None
        hwm_points, group_points = self._history_points(snapshot, results, now_s)
        return Tick(
            observed_at_s=now_s,
            results=results,
            alerts=tuple(alerts),
            fetch_ms=fetch_ms,
            compute_ms=compute_ms,
            missing_topics=snapshot.missing_topics,
            hwm_points=hwm_points,
            group_points=group_points,
        )

    def _forget_timestamps(self, results: Mapping[str, GroupLag]) -> None:
        """Drop cached timestamps of offsets no group waits at any more."""
        if not self._timestamps:
            return
        waiting: set[tuple[str, int, int | None]] = {
            (topic, partition, committed)
            for lag in results.values()
            for topic, partition, committed, *_ in lag.rows()
        }
        self._timestamps = {
            (t, p, o): stamp
            for (t, p, o), stamp in self._timestamps.items()
            if (t, p, o) in waiting or (t, p, None) in waiting  # no commit: waits at the LWM
        }

    def _history_points(
        self, snapshot: OffsetsSnapshot, results: Mapping[str, GroupLag], now_s: float
    ) -> tuple[tuple[HwmPoint, ...], tuple[GroupPoint, ...]]:
        step = history_step(now_s, self.settings.history_step_s)
        if step <= self._last_persisted_step:
            return (), ()
        self._last_persisted_step = step
        hwms = snapshot.high_watermarks
        topic_points = tuple(
            HwmPoint(topic, now_s, tuple(hwms.get((topic, p), -1) for p in range(count)))
            for topic, count in sorted(snapshot.partition_counts.items())
        )
        group_points = tuple(
            GroupPoint(
                group,
                now_s,
                lag.total_lag_records,
                lag.max_lag_s,
                lag.p99_lag_s,
                lag.records_per_s,
                lag.status.name,
            )
            for group, lag in sorted(results.items())
        )
        return topic_points, group_points

    # -- the monitor's own conditions ---------------------------------------------------

    def _failed(self, error: str, fetch_ms: float) -> Tick:
        now_s = time.time()
        self.last_error = error
        alerts = self._open("broker", error, now_s, pb.Alert.CRITICAL, state="UNREACHABLE")
        tick = Tick(now_s, {}, tuple(alerts), fetch_ms, 0.0, error=error)
        self.last_tick = tick
        return tick

    def _conditions(self, snapshot: OffsetsSnapshot, now_s: float) -> list[pb.Alert]:
        alerts = self._resolve("broker", "the broker answers again", now_s)
        wanted: dict[str, str] = {}
        for topic in snapshot.missing_topics:
            wanted[f"topic:{topic}"] = (
                f"watched topic {topic!r} does not exist (never created, or deleted)"
            )
        for group, topics in snapshot.group_topics.items():
            if not topics:
                wanted[f"group:{group}"] = (
                    f"group {group!r} has no committed offsets and no topics were given: "
                    "nothing to watch (unknown group?)"
                )
        for key, message in wanted.items():
            kind, _, name = key.partition(":")
            alerts.extend(
                self._open(key, message, now_s, pb.Alert.WARNING, state="MISSING", **{kind: name})
            )
        for key in [k for k in self._open_conditions if k != "broker" and k not in wanted]:
            alerts.extend(self._resolve(key, "present again", now_s))
        return alerts

    def _open(
        self,
        key: str,
        message: str,
        now_s: float,
        severity: pb.Alert.Severity,
        *,
        state: str,
        topic: str = "",
        group: str = "",
    ) -> list[pb.Alert]:
        if key in self._open_conditions:
            return []
        alert = _alert(
            pb.Alert.CONTROL_APP, severity, now_s, message, state=state, topic=topic, group=group
        )
        alert.previous_state = "OK"
        self._open_conditions[key] = alert
        return [alert]

    def _resolve(self, key: str, message: str, now_s: float) -> list[pb.Alert]:
        opened = self._open_conditions.pop(key, None)
        if opened is None:
            return []
        alert = _alert(
            pb.Alert.CONTROL_APP,
            pb.Alert.INFO,
            now_s,
            f"resolved: {opened.message}: {message}",
            state="OK",
            topic=opened.topic,
            group=opened.group,
        )
        alert.previous_state = opened.state
        alert.resolved = True
        return [alert]


def _alert(
    kind: pb.Alert.Kind,
    severity: pb.Alert.Severity,
    at_s: float,
    message: str,
    *,
    state: str,
    group: str = "",
    topic: str = "",
) -> pb.Alert:
    return pb.Alert(
        schema_version=SCHEMA_VERSION,
        alert_id=uuid.uuid4().hex,
        kind=kind,
        severity=severity,
        group=group,
        topic=topic,
        state=state,
        message=message,
        raised_at_ms=round(s_to_ms(at_s)),
    )


def _status_alert(change: StatusChange, lag: GroupLag, at_s: float) -> pb.Alert:
    where = lag.group if change.topic is None else f"{lag.group} on {change.topic}"
    if change.partition is not None:
        where += f"[{change.partition}]"
    previous = change.previous.name if change.previous is not None else "NEW"
    alert = _alert(
        pb.Alert.PARTITION_STATUS,
        _SEVERITY[change.current],
        at_s,
        f"{where}: {previous} -> {change.current.name}",
        state=change.current.name,
        group=change.group,
        topic=change.topic or "",
    )
    if change.partition is not None:
        alert.partition = change.partition
    alert.previous_state = previous
    alert.resolved = change.current is Status.OK
    return alert


def _slo_alert(transition: SloTransition) -> pb.Alert:
    group, topic, partition = transition.key
    alert = _alert(
        pb.Alert.SLO,
        _SLO_SEVERITY[transition.current],
        transition.at_s,
        f"{group}: lag {transition.lag_s:.0f} s, SLO {transition.previous.name} -> "
        f"{transition.current.name}",
        state=transition.current.name,
        group=group,
        topic=topic or "",
    )
    if partition is not None:
        alert.partition = partition
    alert.previous_state = transition.previous.name
    alert.resolved = transition.current is SloState.OK
    return alert


def one_shot_lag(
    reader: OffsetsReader, group: str, *, timestamp_timeout_s: float = 5.0
) -> tuple[GroupLag, OffsetsSnapshot]:
    """One group's lag from a single snapshot (``streamtrain lag status``). Blocking.

    With no history, lag seconds come from the timestamps of the records at the
    committed offsets (read in one pass) and CPS is unknown.
    """
    snapshot = reader.snapshot_sync()
    history = HwmHistory()
    now_s = snapshot.observed_at_s
    hwms = snapshot.high_watermarks
    for topic, count in snapshot.partition_counts.items():
        history.record(
            topic, now_s, {p: hwms[(topic, p)] for p in range(count) if (topic, p) in hwms}
        )
    columns = snapshot.topic_offsets(group)
    lag = compute_topics_lag(group, columns, history, now_s)
    if lag.timestamps_needed:
        positions = {(t, p): offset for t, p, offset in lag.timestamps_needed}
        found = read_record_timestamps(reader.settings, positions, timeout_s=timestamp_timeout_s)
        stamps = {(t, p, positions[(t, p)]): stamp for (t, p), stamp in found.items()}
        lag = compute_topics_lag(group, columns, history, now_s, record_timestamps_s=stamps)
    return lag, snapshot
