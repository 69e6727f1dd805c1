"""The live planner: lag readings and throughput samples in, ScaleCommands and alerts out.

No Faust, no Kafka: the control app feeds it and publishes what it returns. Configured
by a :class:`~streamtrain.scale.planner_settings.PlannerSettings`, it owns:

* **Arrivals** (:class:`~streamtrain.scale.arrivals.ArrivalSteps`): the monitored
  group's CPS per ``step_s`` step from each lag tick; the app persists complete steps
  and hands them back after a restart (:meth:`Planner.restore_arrivals`), so the
  forecast keeps the days it has seen.
* **The worker count** (:meth:`Planner.current_workers`) and **the throughput model**
  (:mod:`streamtrain.scale.samples`, refitted by :meth:`Planner.refit`).
* **Decisions**: every ``policy.decision_interval_s`` an :class:`Observation` goes to
  the policy (:meth:`Planner.observation`); a :class:`Decision` whose target differs
  from the current count becomes a ``ScaleCommand``, *pending* for the policy until
  done (:meth:`Planner._settle_pending`).
* **Cannot keep up** (:class:`~streamtrain.scale.keep_up.KeepUpWatch`): one
  ``CANNOT_KEEP_UP`` alert when the model's best within ``[min_workers, max_workers]``
  does not exceed the recent arrival rate, a resolved one when it can again.

All times are seconds. The planner thinks on the model clock of its
:class:`~streamtrain.scale.timescale.TimeScale` (the wall clock unless a demo compresses
time): inputs arrive on the wall clock and are converted on the way in; commands and
alerts carry wall-clock times. A :class:`~streamtrain.scale.timescale.SeedHistory`
starts the arrival history with the days before the planner ran; until its end (the
clock's origin) the planner only listens.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from streamtrain.errors import StreamtrainError
from streamtrain.forecast.live import LiveForecaster, Submit
from streamtrain.proto import control_plane_pb2 as cp
from streamtrain.roster import WorkerRoster
from streamtrain.scale.arrivals import ArrivalSteps
from streamtrain.scale.keep_up import KeepUpWatch
from streamtrain.scale.models import ThroughputModel
from streamtrain.scale.planner_forecast import forecast_feed, forecast_status
from streamtrain.scale.planner_settings import PlannerSettings, build_policy
from streamtrain.scale.policies import FORECASTING_POLICIES, ForecastFeed
from streamtrain.scale.policy import Decision, Observation, PendingAction, Policy, Resumable
from streamtrain.scale.samples import SampleBook, ThroughputEstimate, materially_different
from streamtrain.units import MS_PER_S

__all__ = [
    "LagReading",
    "Planner",
    "PlannerOutput",
]

log = logging.getLogger(__name__)

_NOTE_CHARS = 500  # a heartbeat's note is a hint, not a report


@dataclass(frozen=True, slots=True)
class LagReading:
    """One lag tick of the monitored group, as the planner needs it."""

    at_s: float
    records_per_s: float | None  # arrivals (CPS); None until the monitor knows it
    max_lag_s: float | None
    backlog_records: float
    produced_records: float | None = None  # the HWMs' sum over produced_partitions
    produced_partitions: int = 0


@dataclass(frozen=True, slots=True)
class PlannerOutput:
    """What one :meth:`Planner.tick` produced (commands and alerts to publish)."""

    command: cp.ScaleCommand | None = None
    alerts: tuple[cp.Alert, ...] = ()
    decision: Decision | None = None
    note: str = ""


@dataclass(slots=True)
class _Pending:
    command_id: str
    action: PendingAction


class Planner:
    """The live planner (module docstring). One caller at a time (the app's timer and agent run on
    one event loop)."""

    def __init__(self, settings: PlannerSettings, fit_submit: Submit | None = None) -> None:
        self.settings = settings
        self.samples = SampleBook(settings.job, settings.samples)
        self.roster = WorkerRoster(settings.workers)  # on the wall clock
        self._now_s: float | None = None  # the newest "now" given (model clock)
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
        self._last_prep_s: float | None = None  # two-phase scale-ups: command to admitted
        self._last_drain_s: float | None = None  # two-phase scale-downs: command to gone
        self._refitted_at_s = -math.inf
        self._decided_at_s = -math.inf
        self._handover_until_s = -math.inf  # samples before it saw a change of the pool
        self.keep_up = KeepUpWatch(
            job=settings.job,
            group=settings.group,
            min_workers=settings.min_workers,
            max_workers=settings.max_workers,
            recent_window_s=settings.recent_window_s,
            clock=settings.time_scale,
        )
        self._feed: ForecastFeed | None = None
        self._live: LiveForecaster | None = None
        if settings.policy in FORECASTING_POLICIES:
            self._feed, self._live = forecast_feed(settings, fit_submit)
        self.clock = settings.time_scale
        if settings.history is not None and settings.history.records_per_s:
            last_step = math.floor(self.clock.origin_s / settings.step_s) - 1
            self.arrivals.seed(settings.history.records_per_s, last_step)

    # -- inputs ------------------------------------------------------------------------

    def add_sample(self, sample: cp.ThroughputSample, now_s: float) -> str | None:
        """Keep one worker's sample; returns why it was not used, if it was not."""
        model_now_s = self.clock.model_s(now_s)
        self._saw(model_now_s)
        model_sample = self.clock.model_sample(sample)
        observed_s = model_sample.observed_at_ms / MS_PER_S
        disturbed = model_sample.HasField("disturbed_s")
        measures_pool = not disturbed and not self._in_handover(observed_s)
        problem = self.samples.add(model_sample, model_now_s, measures_pool=measures_pool)
        if problem is None:
            self.roster.heard(sample.worker_id, sample.observed_at_ms / MS_PER_S, sample.workers)
            if disturbed:
                self._disturbed(model_sample, observed_s)
        return problem

    def _disturbed(self, sample: cp.ThroughputSample, observed_s: float) -> None:
        """A worker's round did not commit or changed the participants (a peer died,
        joined or left; :func:`~streamtrain.ingest.metrics.disturbed_s`): every sample
        observed since that round began, and one sample bucket after this one, measured
        the change. The kept ones are dropped and the throughput model is refitted at
        the next tick. Without this, a killed worker's peers, waiting out the
        collective's timeout and then stepping one fewer, put four workers at half the
        rate of three, and the planner moved between four and eight workers all day."""
        # a longer disturbance reaches no kept sample (they are closed after retention)
        since_s = observed_s - min(sample.disturbed_s, self.settings.samples.retention_s)
        dropped = self.samples.discard_since(since_s)
        self._hand_over_until(observed_s)
        if dropped:
            self._refitted_at_s = -math.inf
        log.info(
            "%s reported a disturbed round %.0f s before its sample: %d kept sample(s) "
            "dropped, samples until %.0f s do not measure the pool",
            sample.worker_id,
            sample.disturbed_s,
            dropped,
            self._handover_until_s,
        )

    def _hand_over_until(self, at_s: float) -> None:
        """Samples observed until a bucket after ``at_s`` measure a change of the pool."""
        bucket_s = self.settings.samples.bucket_s
        self._handover_until_s = max(self._handover_until_s, at_s + bucket_s)

    def _in_handover(self, observed_s: float) -> bool:
        """Whether a sample observed at ``observed_s`` (model clock) saw the pool change:
        from an action's command until one sample bucket after it settled, or until one
        bucket after a worker reported a disturbed round (:meth:`_disturbed`). Its
        workers stepped through a quorum change, a drain or a rebalance, so it measures
        that, not what the pool trains (one such window once put three workers at a third
        of their speed, and the planner asked for eight)."""
        pending = self._pending
        if pending is not None and observed_s >= pending.action.started_at_s:
            return True
        return observed_s < self._handover_until_s

    def _saw(self, model_now_s: float) -> None:
        if self._now_s is None or model_now_s > self._now_s:
            self._now_s = model_now_s

    def observe_lag(self, reading: LagReading) -> None:
        """The group's newest lag tick; one already seen (same time) is ignored."""
        clock = self.clock
        if not clock.identity:
            rate, lag_s = reading.records_per_s, reading.max_lag_s
            reading = replace(
                reading,
                at_s=clock.model_s(reading.at_s),
                records_per_s=None if rate is None else clock.model_rate(rate),
                max_lag_s=None if lag_s is None else clock.model_duration(lag_s),
            )
        if self.lag is not None and reading.at_s <= self.lag.at_s:
            return
        self.lag = reading
        r = reading
        self.arrivals.add(r.at_s, r.records_per_s, r.produced_records, r.produced_partitions)

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

    def current_workers(self, now_s: float | None = None) -> int | None:
        """The worker count at ``now_s`` (model clock; default: the newest time given).

        The newest of the workers' own count (:class:`~streamtrain.roster.WorkerRoster`:
        the distinct worker ids whose samples arrived within ``workers.expiry_s``, or the
        pool size they state with ``--pool-size``) and the count an executor reported
        after applying a command (:meth:`on_applied`); ``initial_workers`` until either
        exists. The broker's group description is not asked (the embedded broker reports
        0 members).
        """
        now_s = self._now_s if now_s is None else now_s
        known = [self._applied] if self._applied is not None else []
        heard_at_s = self.roster.newest_at_s
        counted = None if now_s is None else self.roster.count(self.clock.wall_s(now_s))
        if counted is not None and heard_at_s is not None:
            known.append((self.clock.model_s(heard_at_s), counted))
        if known:
            return max(known, key=lambda item: item[0])[1]
        return self.settings.initial_workers

    def refit(self, now_s: float) -> None:
        """Re-estimate F; rebuild the policy if the estimate moved.

        Due every ``refit_interval_s``. The policy is rebuilt
        (:func:`~streamtrain.scale.planner_settings.build_policy`, sharing one forecast
        feed, so the forecaster keeps its history; a
        :class:`~streamtrain.scale.policy.Resumable` policy takes over the old one's
        running state) when the estimate changed materially:
        its source, its worker counts, or a point by more than ``refit_tolerance``.
        Model-based policies wait until an estimate exists (a sample, or a configured
        prior rate).
        """
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
        policy = build_policy(s, estimate, self._feed)
        if self.policy is not None and isinstance(policy, Resumable):
            policy.resume_from(self.policy)
        self.policy = policy
        self.model = estimate.model(s.samples.model_kind) if estimate else None
        self.estimate = estimate
        what = estimate.explanation if estimate else "no throughput model"
        log.info("planner for %s: policy %s built on %s", s.job, s.policy, what)

    def _settle_pending(self, now_s: float, current: int) -> None:
        """End the pending action once the samples report its target (or after
        ``command_timeout_s``). The time it took (at least ``min_action_pause_s``: when
        the reported count moves before the new workers consume, as with a pool that
        reports its slots, the measured pause is too short) is the pause given to the
        next decisions. With ``two_phase_actions`` a scale-up's time is the new workers'
        preparation (``last_prep_s`` in the status) and a scale-down's the leavers' drain
        (``last_drain_s``; it also includes the samples' reporting of the new count),
        during which the others train: both leave the pause as it was. Counted as a
        pause, a drain (14 wall seconds in a demo where the workers that stayed paused
        about one) leaves no scale-down that drains its own pause within the policy's
        ``down_catchup_s``, and the pool never shrinks again."""
        pending = self._pending
        if pending is None:
            return
        action = pending.action
        if current == action.target_workers:
            measured = max(0.0, now_s - action.started_at_s)
            grew = action.target_workers > action.from_workers
            if self.settings.two_phase_actions and grew:
                self._last_prep_s = measured  # the others trained meanwhile: no pause
            elif self.settings.two_phase_actions:
                self._last_drain_s = measured  # the others trained meanwhile: no pause
            else:
                self._last_pause_s = max(self.settings.min_action_pause_s, measured)
            log.info("scale command %s took effect after %.1f s", pending.command_id, measured)
            self._pending = None
            self._hand_over_until(now_s)
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
            self._hand_over_until(now_s)

    def observation(self, now_s: float, current: int) -> Observation | None:
        """What the policy sees now, or None without a lag reading.

        The lag floor (``lag_floor_s``: the lag a job shows while it keeps up; with
        shards, records waiting to be cut, granted and committed) is subtracted from the
        lag, and that many seconds of arrivals from the backlog, so the policy's
        thresholds apply to the lag a worker count can change.
        """
        lag = self.lag
        if lag is None:
            return None
        rate = lag.records_per_s or 0.0
        max_lag_s = lag.max_lag_s
        if max_lag_s is None or not math.isfinite(max_lag_s):
            max_lag_s = lag.backlog_records / rate if rate > 0 else 0.0
        # what the job shows while it keeps up (records on their way to a commit) is
        # not a backlog to plan away: the policy sees the lag and backlog above it
        floor_s = self.settings.lag_floor_s
        max_lag_s -= floor_s
        backlog_records = lag.backlog_records - rate * floor_s
        measured = dict(self.samples_estimate_points())
        per_worker = measured.get(current, 0.0) / current if current else 0.0
        return Observation(
            now_s=now_s,
            current_workers=current,
            step_s=self.settings.step_s,
            history_start_s=self.arrivals.history_start_s,
            arrivals_records_per_s=self.arrivals.array(),
            max_lag_s=max(0.0, max_lag_s),
            backlog_records=max(0.0, backlog_records),
            throughput_per_worker_records_per_s=per_worker or None,
            pending=self._pending.action if self._pending else None,
            last_pause_s=self._last_pause_s,
            last_prep_s=self._last_prep_s,
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
        self._saw(now_s)
        self.arrivals.close(now_s)
        if self.policy is None or now_s - self._refitted_at_s >= s.refit_interval_s:
            self.refit(now_s)
        current = self.current_workers(now_s)
        if current is None:
            return self._note("waiting for the worker count (no samples yet)")
        if self.policy is None:
            return self._note(self.last_note)
        self._settle_pending(now_s, current)
        obs = self.observation(now_s, current)
        if obs is None:
            return self._note("waiting for the first lag reading")
        source = self.estimate.source if self.estimate else "?"
        alert = self.keep_up.check(self.model, obs, source)
        alerts = (*((alert,) if alert is not None else ()), *self._forecaster_alerts())
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

    def heartbeat(self, now_s: float | None = None) -> cp.PlannerHeartbeat:
        """What the planner plans now, for its heartbeat: the pending command's target,
        else the count it holds (none while it waits for a policy or a count)."""
        now_s = self.clock.model_s(time.time() if now_s is None else now_s)
        current = self.current_workers(now_s)
        beat = cp.PlannerHeartbeat(
            job=self.settings.job,
            sent_at_ms=int(self.clock.wall_s(now_s) * MS_PER_S),
            last_command_id=self.last_command.command_id if self.last_command else "",
            note=self.last_note[:_NOTE_CHARS],
        )
        if current is not None:
            beat.current_workers = current
        if self._pending is not None:
            beat.planned_workers = self._pending.action.target_workers
        elif current is not None and self.policy is not None:
            beat.planned_workers = current
        return beat

    def _forecaster_alerts(self) -> tuple[cp.Alert, ...]:
        if self._live is None:
            return ()
        now_ms = int(time.time() * MS_PER_S)
        return tuple(
            cp.Alert(
                alert_id=f"{self.settings.job}-forecaster-{uuid.uuid4().hex}",
                kind=cp.Alert.FORECASTER,
                severity=cp.Alert.INFO if resolved else cp.Alert.WARNING,
                group=self.settings.group,
                state="OK" if resolved else "FALLBACK",
                message=message,
                raised_at_ms=now_ms,
                resolved=resolved,
            )
            for message, resolved in self._live.take_alerts()
        )

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
            reason=decision.proto_reason,
            plan=list(decision.plan),
            plan_step_s=decision.plan_step_s,
            created_at_ms=int(self.clock.wall_s(now_s) * MS_PER_S),
            explanation=f"{decision.explanation} [F: {source}]",
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
            "workers_heard": len(self.roster),  # ids within the expiry (streamtrain.roster)
            "throughput_source": estimate.source if estimate else None,
            "throughput": estimate.explanation if estimate else None,
            "measured": [list(p) for p in estimate.measured] if estimate else [],
            "history_steps": len(self.arrivals),
            "restored_steps": self.restored_steps,
            "pending_command": pending.command_id if pending else None,
            "last_pause_s": self._last_pause_s,
            "last_prep_s": self._last_prep_s,
            "last_drain_s": self._last_drain_s,
            "commands_sent": self.commands_sent,
            "cannot_keep_up": self.keep_up.behind,
            "samples": {
                "kept": len(self.samples),
                "accepted": self.samples.accepted,
                "rejected": self.samples.rejected,
                "late": self.samples.late,
                "handover": self.samples.handover,  # observed while the pool changed size
                "skewed": self.samples.skewed,  # from the future: beyond the allowed clock skew
            },
            "note": self.last_note,
            "time_scale": self.clock.factor,
            "forecast": forecast_status(self.settings, self._feed, self._live),
        }
