"""The live planner: lag readings and throughput samples in, ScaleCommands and alerts out.

Owned here (no Faust, no Kafka: the lag app feeds it and publishes what it returns):

* **Arrivals** (:class:`ArrivalSteps`): the monitored group's CPS (the HWM growth rate,
  records/s) from each lag tick, averaged per ``step_s`` step; a step enters the history
  once a later step has begun (complete steps only, as :class:`Observation` promises).
  A step with no reading (the app was away) repeats the step before it; the history
  keeps the last ``max_history_steps``. The app persists each complete step and hands
  them back after a restart (:meth:`Planner.restore_arrivals`), so the forecast keeps
  the days it has seen.
* **The worker count**: the newest of the pool size the workers report in their
  samples and the count an executor reported after applying a command
  (:meth:`Planner.on_applied`); ``initial_workers`` until either exists.
* **The throughput model** (:mod:`streamtrain.scale.samples`): re-estimated every
  ``refit_interval_s``; the policy is rebuilt (sharing one forecast feed, so the
  forecaster keeps its history) when the estimate changed materially (its source, its
  worker counts, or a point by more than ``refit_tolerance``). Model-based policies
  wait until an estimate exists (a sample, or a configured prior rate).
* **Decisions**: every ``policy.decision_interval_s`` an :class:`Observation` goes to the
  policy; a :class:`Decision` whose target differs from the current count becomes a
  ``ScaleCommand`` (a new ``command_id``, the plan, the path, the explanation with the
  model's source). Until the samples report the target (or ``command_timeout_s``
  passes) the action is *pending* for the policy; the time it took (at least
  ``min_action_pause_s``: when the reported count moves before the new workers consume,
  as with a pool that reports its slots, the measured pause is too short) is the pause
  given to the next decisions.
* **Cannot keep up**: when the highest throughput the model allows within
  ``[min_workers, max_workers]`` does not exceed the recent arrival rate, one
  ``CANNOT_KEEP_UP`` alert (CRITICAL), and a resolved one when it can again.

All times are seconds. The planner thinks on the model clock of its
:class:`~streamtrain.scale.timescale.TimeScale` (the wall clock unless a demo compresses
time): inputs (lag readings, samples, ``now_s``) arrive on the wall clock and are
converted on the way in; commands and alerts carry wall-clock times. A
:class:`~streamtrain.scale.timescale.SeedHistory` starts the arrival history with the
days before the planner ran; until its end (the clock's origin) the planner only
listens.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamtrain.errors import ConfigError, StreamtrainError
from streamtrain.proto import control_plane_pb2 as cp
from streamtrain.scale.models import ThroughputModel
from streamtrain.scale.policies import (
    FORECASTING_POLICIES,
    POLICY_NAMES,
    ForecastFeed,
    default_forecaster_factory,
    make_policy,
)
from streamtrain.scale.policy import Decision, Observation, PendingAction, Policy, PolicyContext
from streamtrain.scale.samples import (
    SampleBook,
    SampleSettings,
    ThroughputEstimate,
    materially_different,
)
from streamtrain.scale.timescale import SeedHistory, TimeScale

__all__ = [
    "ArrivalSteps",
    "LagReading",
    "Planner",
    "PlannerOutput",
    "PlannerSettings",
    "check_policy",
    "parse_policy_settings",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannerSettings:
    """What the planner plans for, and how (see the module docstring)."""

    job: str
    group: str
    policy: str = "streamtrain"
    policy_settings: tuple[tuple[str, Any], ...] = ()
    step_s: int = 60
    min_workers: int = 1
    max_workers: int = 32
    initial_workers: int | None = None
    action_pause_s: float = 600.0
    min_action_pause_s: float = 0.0  # a floor under the measured pause
    scale_up_prep_s: float = 0.0
    refit_interval_s: float = 300.0
    refit_tolerance: float = 0.1
    command_timeout_s: float = 900.0
    max_history_steps: int = 7 * 24 * 60
    recent_window_s: float = 300.0
    samples: SampleSettings = field(default_factory=SampleSettings)
    time_scale: TimeScale = field(default_factory=TimeScale)
    history: SeedHistory | None = None

    def __post_init__(self) -> None:
        if self.history is not None and self.history.step_s != self.step_s:
            raise ConfigError(
                f"the seed history's step ({self.history.step_s} s) is not the planning "
                f"step ({self.step_s} s)"
            )
        if not self.job or not self.group:
            raise ConfigError("the planner needs a job and a consumer group")
        if self.policy not in POLICY_NAMES:
            raise ConfigError(
                f"unknown policy {self.policy!r}; use one of {', '.join(POLICY_NAMES)}"
            )
        if self.step_s < 1:
            raise ConfigError(f"the planning step must be at least 1 s, got {self.step_s}")
        if not 1 <= self.min_workers <= self.max_workers:
            raise ConfigError(
                f"need 1 <= min workers <= max workers, got {self.min_workers}, {self.max_workers}"
            )
        if self.initial_workers is not None and self.initial_workers < 0:
            raise ConfigError("the initial worker count cannot be negative")
        spans = (self.refit_interval_s, self.command_timeout_s, self.recent_window_s)
        if min(spans) <= 0 or self.refit_tolerance < 0 or self.max_history_steps < 1:
            raise ConfigError("intervals, timeouts and the history length must be positive")

    @property
    def settings_dict(self) -> dict[str, Any]:
        return dict(self.policy_settings)


@dataclass(frozen=True, slots=True)
class LagReading:
    """One lag tick of the monitored group, as the planner needs it."""

    at_s: float
    records_per_s: float | None  # arrivals (CPS); None until the monitor knows it
    max_lag_s: float | None
    backlog_records: float


@dataclass(frozen=True, slots=True)
class PlannerOutput:
    """What one :meth:`Planner.tick` produced (commands and alerts to publish)."""

    command: cp.ScaleCommand | None = None
    alerts: tuple[cp.Alert, ...] = ()
    decision: Decision | None = None
    note: str = ""


class ArrivalSteps:
    """Per-step mean arrival rates from lag readings (see the module docstring)."""

    def __init__(self, step_s: int, max_steps: int) -> None:
        self.step_s = step_s
        self._values: deque[float] = deque(maxlen=max_steps)
        self._last_step: int | None = None  # index of the newest complete step
        self._open: dict[int, list[float]] = {}
        self.late = 0

    def add(self, at_s: float, records_per_s: float) -> None:
        step = math.floor(at_s / self.step_s)
        if self._last_step is not None and step <= self._last_step:
            self.late += 1
            return
        if math.isfinite(records_per_s) and records_per_s >= 0:
            self._open.setdefault(step, []).append(records_per_s)

    def seed(self, values: tuple[float, ...], last_step: int) -> None:
        """Start an empty history with ``values``, the last of them for step ``last_step``."""
        if self._values or self._last_step is not None:
            raise ConfigError("only an empty arrival history can be seeded")
        self._values.extend(values)
        self._last_step = last_step if values else None

    def restore(self, steps: Mapping[int, float]) -> int:
        """Append persisted complete steps (step index -> mean rate) newer than the newest
        kept one, in order; a gap repeats the step before it, as :meth:`close` does.

        Readings of steps now restored are dropped. Returns how many steps were added.
        """
        added = 0
        for step in sorted(steps):
            rate = float(steps[step])
            if (self._last_step is not None and step <= self._last_step) or not (
                math.isfinite(rate) and rate >= 0
            ):
                continue
            if self._last_step is not None and self._values:
                gap = min(step - self._last_step - 1, self._values.maxlen or 0)
                self._values.extend([self._values[-1]] * gap)
            self._values.append(rate)
            self._last_step = step
            added += 1
        if self._last_step is not None:
            for stale in [s for s in self._open if s <= self._last_step]:
                del self._open[stale]
        return added

    def steps_after(self, step: int | None) -> list[tuple[int, float]]:
        """The kept complete steps after ``step`` (all for ``None``), oldest first."""
        if self._last_step is None:
            return []
        first = self._last_step - len(self._values) + 1
        start = first if step is None else max(first, step + 1)
        return [(s, self._values[s - first]) for s in range(start, self._last_step + 1)]

    @property
    def last_step(self) -> int | None:
        """The index of the newest complete step (``None``: none yet)."""
        return self._last_step

    def close(self, now_s: float) -> None:
        """Every step before the one ``now_s`` falls in is complete."""
        current = math.floor(now_s / self.step_s)
        for step in sorted(s for s in self._open if s < current):
            values = self._open.pop(step)
            if self._last_step is not None:
                filler = self._values[-1] if self._values else 0.0
                self._values.extend([filler] * (step - self._last_step - 1))
            self._values.append(sum(values) / len(values))
            self._last_step = step

    @property
    def history_start_s(self) -> float:
        if self._last_step is None:
            return 0.0
        return float((self._last_step - len(self._values) + 1) * self.step_s)

    def array(self) -> np.ndarray[Any, np.dtype[np.float64]]:
        values = np.array(self._values, dtype=np.float64)
        values.setflags(write=False)
        return values

    def __len__(self) -> int:
        return len(self._values)


@dataclass(slots=True)
class _Pending:
    command_id: str
    action: PendingAction


class Planner:
    """See the module docstring. One caller at a time (the app's timer and agent run on
    one event loop)."""

    def __init__(self, settings: PlannerSettings) -> None:
        self.settings = settings
        self.samples = SampleBook(settings.job, settings.samples)
        self.arrivals = ArrivalSteps(settings.step_s, settings.max_history_steps)
        self.estimate: ThroughputEstimate | None = None
        self.model: ThroughputModel | None = None
        self.policy: Policy | None = None
        self.lag: LagReading | None = None
        self.commands_sent = 0
        self.restored_steps = 0
        self.last_command: cp.ScaleCommand | None = None
        self.last_note = "no decision yet"
        self._applied: tuple[float, int] | None = None
        self._pending: _Pending | None = None
        self._last_pause_s: float | None = None
        self._refitted_at_s = -math.inf
        self._decided_at_s = -math.inf
        self._cannot_keep_up = False
        self._feed: ForecastFeed | None = None
        if settings.policy in FORECASTING_POLICIES:
            self._feed = ForecastFeed(default_forecaster_factory(settings.step_s))
        self.clock = settings.time_scale
        if settings.history is not None and settings.history.records_per_s:
            last_step = math.floor(self.clock.origin_s / settings.step_s) - 1
            self.arrivals.seed(settings.history.records_per_s, last_step)

    # -- inputs ------------------------------------------------------------------------

    def add_sample(self, sample: cp.ThroughputSample, now_s: float) -> str | None:
        """Keep one worker's sample; returns why it was not used, if it was not."""
        return self.samples.add(self.clock.model_sample(sample), self.clock.model_s(now_s))

    def observe_lag(self, reading: LagReading) -> None:
        """The group's newest lag tick; one already seen (same time) is ignored."""
        clock = self.clock
        if not clock.identity:
            reading = LagReading(
                at_s=clock.model_s(reading.at_s),
                records_per_s=None
                if reading.records_per_s is None
                else clock.model_rate(reading.records_per_s),
                max_lag_s=None
                if reading.max_lag_s is None
                else clock.model_duration(reading.max_lag_s),
                backlog_records=reading.backlog_records,
            )
        if self.lag is not None and reading.at_s <= self.lag.at_s:
            return
        self.lag = reading
        if reading.records_per_s is not None:
            self.arrivals.add(reading.at_s, reading.records_per_s)

    def restore_arrivals(self, steps: Mapping[int, float]) -> int:
        """Arrival steps a previous run of the app persisted (model-clock step index ->
        records/s); returns how many were added (see :meth:`ArrivalSteps.restore`)."""
        added = self.arrivals.restore(steps)
        self.restored_steps += added
        if added:
            log.info(
                "restored %d arrival steps of %s from the history table", added, self.settings.group
            )
        return added

    def on_applied(self, workers: int, at_s: float) -> None:
        """An executor reports the worker count after applying a command."""
        self._applied = (self.clock.model_s(at_s), workers)

    # -- state -------------------------------------------------------------------------

    def current_workers(self) -> int | None:
        known = [x for x in (self.samples.pool_size, self._applied) if x is not None]
        if known:
            return max(known, key=lambda item: item[0])[1]
        return self.settings.initial_workers

    def refit(self, now_s: float) -> None:
        """Re-estimate F; rebuild the policy if the estimate moved (module docstring)."""
        s = self.settings
        self._refitted_at_s = now_s
        estimate = self.samples.estimate(now_s, max_workers=s.max_workers)
        if self.policy is not None and not materially_different(
            self.estimate, estimate, s.refit_tolerance
        ):
            return
        needs_model = s.policy in FORECASTING_POLICIES
        if estimate is None and needs_model:
            self.last_note = "waiting for throughput samples to build a throughput model"
            return
        context = PolicyContext(
            min_workers=s.min_workers,
            max_workers=s.max_workers,
            step_s=s.step_s,
            throughput_observations=estimate.observations if estimate else (),
            model_kind=s.samples.model_kind,
            action_pause_s=s.action_pause_s,
            scale_up_prep_s=s.scale_up_prep_s,
        )
        extra: dict[str, Any] = {"feed": self._feed} if self._feed is not None else {}
        self.policy = make_policy(s.policy, context, **extra, **s.settings_dict)
        self.model = estimate.model(s.samples.model_kind) if estimate else None
        self.estimate = estimate
        what = estimate.explanation if estimate else "no throughput model"
        log.info("planner for %s: policy %s built on %s", s.job, s.policy, what)

    def _settle_pending(self, now_s: float, current: int) -> None:
        pending = self._pending
        if pending is None:
            return
        action = pending.action
        if current == action.target_workers:
            measured = max(0.0, now_s - action.started_at_s)
            self._last_pause_s = max(self.settings.min_action_pause_s, measured)
            log.info(
                "scale command %s took effect after %.1f s", pending.command_id, self._last_pause_s
            )
            self._pending = None
        elif now_s - action.started_at_s > self.settings.command_timeout_s:
            log.warning(
                "scale command %s to %d workers not reflected after %.0f s (still %d); "
                "planning on the reported count",
                pending.command_id,
                action.target_workers,
                self.settings.command_timeout_s,
                current,
            )
            self._pending = None

    def observation(self, now_s: float, current: int) -> Observation | None:
        lag = self.lag
        if lag is None:
            return None
        max_lag_s = lag.max_lag_s
        if max_lag_s is None or not math.isfinite(max_lag_s):
            rate = lag.records_per_s or 0.0
            max_lag_s = lag.backlog_records / rate if rate > 0 else 0.0
        measured = dict(self.samples_estimate_points())
        per_worker = measured.get(current, 0.0) / current if current else 0.0
        return Observation(
            now_s=now_s,
            current_workers=current,
            step_s=self.settings.step_s,
            history_start_s=self.arrivals.history_start_s,
            arrivals_records_per_s=self.arrivals.array(),
            max_lag_s=max(0.0, max_lag_s),
            backlog_records=max(0.0, lag.backlog_records),
            throughput_per_worker_records_per_s=per_worker or None,
            pending=self._pending.action if self._pending else None,
            last_pause_s=self._last_pause_s,
        )

    def samples_estimate_points(self) -> tuple[tuple[int, float], ...]:
        return self.estimate.measured if self.estimate else ()

    # -- the decision ------------------------------------------------------------------

    def tick(self, now_s: float | None = None) -> PlannerOutput:
        """Close arrival steps, refit when due, decide when due (module docstring)."""
        now_s = self.clock.model_s(time.time() if now_s is None else now_s)
        s = self.settings
        if s.history is not None and now_s < self.clock.origin_s:
            return self._note("waiting for the end of the seed history")
        self.arrivals.close(now_s)
        if self.policy is None or now_s - self._refitted_at_s >= s.refit_interval_s:
            self.refit(now_s)
        current = self.current_workers()
        if current is None:
            return self._note("waiting for the worker count (no samples yet)")
        if self.policy is None:
            return self._note(self.last_note)
        self._settle_pending(now_s, current)
        obs = self.observation(now_s, current)
        if obs is None:
            return self._note("waiting for the first lag reading")
        alerts = self._keep_up_alerts(obs)
        if now_s - self._decided_at_s < self.policy.decision_interval_s:
            return PlannerOutput(alerts=alerts, note="not due")
        self._decided_at_s = now_s
        try:
            decision = self.policy.decide(obs)
        except StreamtrainError as exc:
            log.warning("policy %s could not decide: %s", self.policy.name, exc)
            return PlannerOutput(alerts=alerts, note=f"policy failed: {exc}")
        if decision is None or decision.target_workers == current or self._pending:
            why = "holding" if decision is None else f"target {decision.target_workers}"
            note = f"{why} at {current} workers"
            return PlannerOutput(alerts=alerts, decision=decision, note=note)
        command = self._command(decision, current, now_s)
        self._pending = _Pending(
            command.command_id,
            PendingAction(
                from_workers=current,
                target_workers=decision.target_workers,
                started_at_s=now_s,
                ready_at_s=now_s + s.scale_up_prep_s + s.action_pause_s,
                pause_s=self._last_pause_s or s.action_pause_s,
            ),
        )
        self.commands_sent += 1
        self.last_command = command
        self.last_note = f"command {command.command_id}: {current} -> {command.target_workers}"
        log.info("planner for %s: %s (%s)", s.job, self.last_note, command.explanation)
        return PlannerOutput(command=command, alerts=alerts, decision=decision, note=self.last_note)

    def _note(self, note: str) -> PlannerOutput:
        self.last_note = note
        return PlannerOutput(note=note)

    def _command(self, decision: Decision, current: int, now_s: float) -> cp.ScaleCommand:
        source = self.estimate.explanation if self.estimate else "no throughput model"
        return cp.ScaleCommand(
            command_id=f"{self.settings.job}-{uuid.uuid4().hex}",
            job=self.settings.job,
            current_workers=current,
            target_workers=decision.target_workers,
            reason=decision.proto_reason,  # type: ignore[arg-type]
            plan=list(decision.plan),
            plan_step_s=decision.plan_step_s,
            created_at_ms=int(self.clock.wall_s(now_s) * 1000),
            explanation=f"{decision.explanation} [F: {source}]",
        )

    def _keep_up_alerts(self, obs: Observation) -> tuple[cp.Alert, ...]:
        model, s = self.model, self.settings
        if model is None or obs.observed_steps == 0:
            return ()
        counts = np.arange(s.min_workers, s.max_workers + 1, dtype=np.float64)
        capacity = model.samples_per_s(counts)
        best = int(counts[int(np.argmax(capacity))])
        ceiling = float(capacity.max())
        load = obs.recent_rate_records_per_s(s.recent_window_s)
        behind = ceiling <= load
        if behind == self._cannot_keep_up:
            return ()
        self._cannot_keep_up = behind
        load, ceiling = self.clock.wall_rate(load), self.clock.wall_rate(ceiling)  # for people
        if behind:
            message = (
                f"job {s.job} cannot keep up: {load:,.1f} records/s arrive, at most "
                f"{ceiling:,.1f} records/s at {best} workers within [{s.min_workers}, "
                f"{s.max_workers}] (F from {self.estimate.source if self.estimate else '?'})"
            )
            log.error("%s", message)
        else:
            message = f"job {s.job} can keep up again: {load:,.1f} <= {ceiling:,.1f} records/s"
            log.info("%s", message)
        return (
            cp.Alert(
                alert_id=uuid.uuid4().hex,
                kind=cp.Alert.CANNOT_KEEP_UP,
                severity=cp.Alert.CRITICAL if behind else cp.Alert.INFO,
                group=s.group,
                previous_state="ok" if behind else "cannot_keep_up",
                state="cannot_keep_up" if behind else "ok",
                message=message,
                raised_at_ms=int(self.clock.wall_s(obs.now_s) * 1000),
                resolved=not behind,
            ),
        )

    def status(self) -> dict[str, Any]:
        """A JSON-ready summary (the app's ``/planner`` page)."""
        estimate = self.estimate
        pending = self._pending
        return {
            "job": self.settings.job,
            "group": self.settings.group,
            "policy": self.settings.policy,
            "current_workers": self.current_workers(),
            "throughput_source": estimate.source if estimate else None,
            "throughput": estimate.explanation if estimate else None,
            "measured": [list(p) for p in estimate.measured] if estimate else [],
            "history_steps": len(self.arrivals),
            "restored_steps": self.restored_steps,
            "pending_command": pending.command_id if pending else None,
            "last_pause_s": self._last_pause_s,
            "commands_sent": self.commands_sent,
            "cannot_keep_up": self._cannot_keep_up,
            "samples": {
                "kept": len(self.samples),
                "accepted": self.samples.accepted,
                "rejected": self.samples.rejected,
                "late": self.samples.late,
            },
            "note": self.last_note,
            "time_scale": self.clock.factor,
            "forecast": self._forecast_json(),
        }

    def _forecast_json(self) -> dict[str, Any] | None:
        """The newest point forecast, on the wall clock (records per wall second)."""
        latest = self._feed.latest() if self._feed is not None else None
        if latest is None:
            return None
        observed_steps, point = latest
        step_s = self.settings.step_s
        first_s = self.arrivals.history_start_s + observed_steps * step_s
        return {
            "first_step_at_ms": int(self.clock.wall_s(first_s) * 1000),
            "step_s": step_s / self.clock.factor,
            "records_per_s": [round(self.clock.wall_rate(float(v)), 3) for v in point],
        }


def check_policy(settings: PlannerSettings) -> None:
    """Build the configured policy once on a prior, so bad policy settings fail at start
    (a :class:`ConfigError`) rather than at the first decision."""
    s = settings
    prior = SampleSettings(prior_single_worker_records_per_s=1.0, model_kind=s.samples.model_kind)
    estimate = SampleBook(s.job, prior).estimate(0.0, max_workers=s.max_workers)
    context = PolicyContext(
        min_workers=s.min_workers,
        max_workers=s.max_workers,
        step_s=s.step_s,
        throughput_observations=estimate.observations if estimate else (),
        model_kind=s.samples.model_kind,
    )
    make_policy(s.policy, context, **s.settings_dict)


def parse_policy_settings(items: Mapping[str, str]) -> tuple[tuple[str, Any], ...]:
    """``{"target": "5"}`` to typed values: ints, floats, booleans, else the string."""
    parsed: list[tuple[str, Any]] = []
    for key, text in items.items():
        value: Any = text
        lowered = text.strip().lower()
        if lowered in ("true", "false"):
            value = lowered == "true"
        else:
            for convert in (int, float):
                try:
                    value = convert(text)
                    break
                except ValueError:
                    continue
        parsed.append((key, value))
    return tuple(parsed)
