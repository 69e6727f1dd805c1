"""The planner inside the control app (``streamtrain lag run --plan-job``).

Owned here, the planner's side of the app (:mod:`streamtrain.scale.planner` decides;
this feeds it and publishes what it returns): the samples agent, the leader-only
timer that runs the planner and publishes its ``ScaleCommand`` messages, alerts and
``PlannerHeartbeat`` messages, the arrival history that survives a restart, the
forecaster's fit process (:func:`forecast_pool`) and the ``/planner`` page
(:func:`add_planner` says how each works). :class:`PlannerAgent` is the state they
share.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import multiprocessing
import os
import time
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from faust.exceptions import ConsumerNotStarted

from streamtrain.control.publish import publish
from streamtrain.control.request_route import command_sender
from streamtrain.control.service import LagService
from streamtrain.errors import SchemaError
from streamtrain.forecast.live import FitJob, Submit, fit_and_save
from streamtrain.lag.history_tables import HistoryTables, arrival_message
from streamtrain.lag.results import GroupLag
from streamtrain.process import die_with_parent_initializer, lower_priority
from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.scale.planner import LagReading, Planner
from streamtrain.wire import DecodeFailures, decode, encode

__all__ = [
    "COMMAND_OUTBOX_LIMIT",
    "SAMPLES_PENDING_LIMIT",
    "PlannerAgent",
    "add_planner",
    "forecast_pool",
    "leads_now",
    "stop_forecast_pool",
]

log = logging.getLogger(__name__)


def leads_now(app: Any) -> bool:
    """Whether this control app leads the planner now; ``False`` while its consumer is
    still starting (Faust raises until the consumer thread runs, and a page asked
    meanwhile must answer, not fail with a 500)."""
    try:
        return bool(app.is_leader())
    except ConsumerNotStarted:
        return False


COMMAND_OUTBOX_LIMIT = 100  # scale commands kept for re-sending
SAMPLES_PENDING_LIMIT = 10_000  # samples waiting for the planner's next tick
# A forecaster fit is background work: its process runs 10 nice levels below the app,
# so the ticks that measure lag, cut shards and plan are not delayed by it (``auto``'s
# first fit takes 40 CPU-s or more), and on a machine shared with training processes
# it does not take a core from them.
FIT_NICENESS = 10


def _start_fit_process(parent_pid: int) -> None:  # pragma: no cover - in the child
    """The fit process's initializer: it dies with the app, at :data:`FIT_NICENESS`."""
    die_with_parent_initializer(parent_pid)
    lower_priority(FIT_NICENESS, "the forecaster's fit process")


def forecast_pool() -> tuple[ProcessPoolExecutor, Submit]:
    """One spawned worker process for forecaster fits (started now, from this thread,
    so it dies with this process: PR_SET_PDEATHSIG; below the app's priority), and the
    submit function."""
    pool = ProcessPoolExecutor(
        max_workers=1,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_fit_process,
        initargs=(os.getpid(),),
    )
    pool.submit(int).result()  # start the process here, not in a planner thread

    def submit(job: FitJob) -> Future[float]:
        return pool.submit(fit_and_save, job)

    return pool, submit


def stop_forecast_pool(pool: ProcessPoolExecutor) -> None:
    """Stop the fit process now: a fit still running is of no use after shutdown (only
    a finished fit is ever named live), and waiting for it would hold the exit."""
    processes = list(getattr(pool, "_processes", {}).values())  # no public handle in 3.11
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()


class PlannerAgent:
    """The planner and what its agent, timer and page share (one per app)."""

    def __init__(self, planner: Planner, heartbeat_interval_s: float = 15.0) -> None:
        self.planner = planner
        self.heartbeat_interval_s = heartbeat_interval_s
        self.heartbeat_at_s: float | None = None  # the newest heartbeat sent (wall clock)
        self.heartbeats_failed = 0
        self.undecodable = DecodeFailures("throughput sample", log)
        self.status: dict[str, Any] = {}
        self.new_samples: collections.deque[pb.ThroughputSample] = collections.deque(
            maxlen=SAMPLES_PENDING_LIMIT
        )
        self.bad_samples = 0
        self.dropped_samples = 0  # pushed out of new_samples by newer ones
        self.forwarded_samples = 0  # sent on to the leader (not the leader here)
        self.command_outbox: collections.deque[pb.ScaleCommand] = collections.deque(
            maxlen=COMMAND_OUTBOX_LIMIT
        )
        self.arrivals_restored = False
        self.arrivals_persisted: int | None = None  # the newest arrival step written

    def take(self, value: bytes | None) -> None:
        """One message from the samples topic (an undecodable or null one, an unknown
        enum value included, is counted by kind and each kind logged once)."""
        try:
            sample = decode(pb.ThroughputSample, value)
        except SchemaError as exc:
            self.bad_samples += 1
            self.undecodable.add(exc, "the samples topic")
            return
        if len(self.new_samples) == self.new_samples.maxlen:
            self.dropped_samples += 1
        self.new_samples.append(sample)

    def drain_samples(self) -> list[pb.ThroughputSample]:
        """The samples taken since the last call (the planner's next batch)."""
        batch = list(self.new_samples)
        self.new_samples.clear()
        return batch

    def counts(self) -> dict[str, Any]:
        """What every instance shows on ``/planner``, leader or not."""
        return {
            "bad_samples": self.bad_samples,
            "pending_samples": len(self.new_samples),
            "dropped_samples": self.dropped_samples,
            "forwarded_samples": self.forwarded_samples,
            "undecodable_samples": dict(self.undecodable.by_kind),
            "heartbeats_failed": self.heartbeats_failed,
        }

    def plan(
        self, samples: list[pb.ThroughputSample], lag: GroupLag | None, now_s: float
    ) -> tuple[list[pb.ScaleCommand], list[pb.Alert]]:
        """One planner step (run in a thread): new samples, the group's lag, a decision.
        Returns the commands (with any unsent ones first) and alerts to publish."""
        planner = self.planner
        for sample in samples:
            problem = planner.add_sample(sample, now_s)
            if problem is not None:
                log.warning("throughput sample not used: %s", problem)
        if lag is not None:
            produced, partitions = lag.produced()
            planner.observe_lag(
                LagReading(
                    lag.observed_at_s,
                    lag.records_per_s,
                    lag.max_lag_s,
                    lag.total_lag_records,
                    produced_records=float(produced),
                    produced_partitions=partitions,
                )
            )
        output = planner.tick(now_s)
        self.status = planner.status() | {"bad_samples": self.bad_samples}
        # Only the newest command matters: an older one re-sent after it would undo it
        # (the applier refuses older commands too).
        unsent = [output.command] if output.command else list(self.command_outbox)[-1:]
        commands = unsent
        self.command_outbox.clear()
        return commands, list(output.alerts)

    def heartbeat(self, now_s: float) -> pb.PlannerHeartbeat | None:
        """The planner's heartbeat when one is due (every ``heartbeat_interval_s``)."""
        due = self.heartbeat_at_s is None or now_s - self.heartbeat_at_s >= (
            self.heartbeat_interval_s
        )
        if not due:
            return None
        self.heartbeat_at_s = now_s
        return self.planner.heartbeat(now_s)

    def restore_arrivals(self, history: HistoryTables) -> None:
        """Start the planner from the recovered arrival steps of its group."""
        self.planner.restore_arrivals(history.arrival_steps(self.planner.settings.group))
        self.arrivals_persisted = self.planner.arrivals.last_step
        self.arrivals_restored = True

    def arrivals_to_persist(self) -> list[tuple[int, str, str]]:
        """``(step, key, value)`` history-topic messages of the complete arrival steps not
        yet written (counted written from here on: see :meth:`arrivals_not_persisted`)."""
        new_steps = self.planner.arrivals.steps_after(self.arrivals_persisted)
        if new_steps:
            self.arrivals_persisted = new_steps[-1][0]
        group = self.planner.settings.group
        return [(step, *arrival_message(group, step, rate)) for step, rate in new_steps]

    def arrivals_not_persisted(self, steps: list[int]) -> None:
        """The sends of ``steps`` failed: write them (and the steps after) again next time."""
        if steps and self.arrivals_persisted is not None:
            self.arrivals_persisted = min(self.arrivals_persisted, min(steps) - 1)


def add_planner(
    app: Any,
    service: LagService,
    agent: PlannerAgent,
    alerts: Any,
    history_topic: Any,
    history: HistoryTables,
) -> None:
    """The samples agent, the planner's leader timer and ``/planner``.

    * The agent takes ``ThroughputSample`` messages from the samples topic
      (:meth:`PlannerAgent.take`). With several instances of the app the samples
      topic's partitions are spread over them but only the leader plans: an instance
      that is not the leader forwards each sample, unread, to the internal
      ``<app_id>-samples`` topic (one partition, key: the job), which Faust assigns
      together with its leader topic (both have one partition and every instance
      subscribes to both), so the leader takes every sample. Samples waiting for the
      planner are bounded (``SAMPLES_PENDING_LIMIT``, the oldest dropped and counted)
      wherever they wait.
    * A leader-only timer (every ``tick_s``) hands the new samples and the group's
      newest lag to the planner in a thread (a policy may fit a forecaster) and
      publishes its ``ScaleCommand`` (key: the job) to the commands topic and its
      alerts (``CANNOT_KEEP_UP``) to the alerts topic. A command that cannot be sent is
      kept (at most ``COMMAND_OUTBOX_LIMIT``) and re-sent first on the next tick; an
      alert that cannot be sent goes to the control app's alert outbox.
    * Each complete arrival step goes through the history topic into the
      ``arrival_history`` table (:mod:`streamtrain.lag.history_tables`); after table
      recovery the planner starts from it, so a restart does not cost the forecast its
      days.
    * The forecaster's fits run in one worker process (:func:`forecast_pool`, so a fit
      never holds the app's event loop or its GIL); fitted models are kept in
      ``<data dir>/forecaster/<job>`` and reloaded after a restart
      (:mod:`streamtrain.forecast.live`); a fit that fails or is late becomes a
      ``FORECASTER`` alert and the seasonal naive answers meanwhile.
    * Every ``heartbeat_interval_s`` the leader publishes a ``PlannerHeartbeat`` (its
      plan, changed or not; key: the job) to the heartbeats topic, so a reader of the
      plan (the KEDA scaler) tells a live planner from a dead one: commands are sent
      only on a change.
    * ``/planner`` shows the planner's state (the throughput model's source among it;
      the forecaster: the model asked for, the one answering, its recent MASE and the
      naive's, fits, the quantile band).
    """
    settings = service.settings
    samples = app.topic(
        settings.samples_topic, key_serializer="raw", value_serializer="raw", partitions=None
    )
    to_leader = app.topic(
        f"{settings.app_id}-samples",
        key_serializer="raw",
        value_serializer="raw",
        partitions=1,
        internal=True,
    )
    commands = app.topic(
        settings.commands_topic, key_serializer="raw", value_serializer="raw", partitions=1
    )
    group = agent.planner.settings.group
    send, destination = command_sender(
        app, settings, commands, agent.planner.settings, agent.planner.samples.step_time_ms
    )
    heartbeats = (
        app.topic(
            settings.heartbeats_topic, key_serializer="raw", value_serializer="raw", partitions=1
        )
        if settings.heartbeats_topic
        else None
    )

    async def take_samples(stream: Any) -> None:
        async for value in stream:
            if app.is_leader() or value is None:
                agent.take(value)
                continue
            forwarded = await publish(
                [(value, to_leader.send(key=agent.planner.settings.job.encode(), value=value))],
                settings.request_timeout_s,
            )
            agent.forwarded_samples += len(forwarded.confirmed)
            if forwarded.failed:
                agent.dropped_samples += 1
                log.warning("a sample could not be forwarded to the leader (broker away?)")

    async def take_forwarded(stream: Any) -> None:
        async for value in stream:  # on the leader (see the module docstring)
            agent.take(value)

    async def plan() -> None:
        if not agent.arrivals_restored:
            if not app.tables.recovery.completed.is_set():
                return  # the arrival history is not recovered yet
            agent.restore_arrivals(history)
        batch = agent.drain_samples()
        lag = service.monitor.latest.get(group)
        now_s = time.time()
        to_send, new_alerts = await asyncio.to_thread(agent.plan, batch, lag, now_s)
        timeout = settings.request_timeout_s
        arrivals = agent.arrivals_to_persist()
        beats = []
        beat = agent.heartbeat(now_s) if heartbeats is not None else None
        if beat is not None and heartbeats is not None:
            beats.append((beat, heartbeats.send(key=beat.job.encode(), value=encode(beat))))
        sent, alerted, beaten = await asyncio.gather(
            publish([(c, send(c)) for c in to_send], timeout),
            publish(
                [(a, alerts.send(key=a.group.encode(), value=encode(a))) for a in new_alerts],
                timeout,
            ),
            publish(beats, timeout),
        )
        if beaten.failed:  # the next one is due in one interval: nothing to keep
            agent.heartbeats_failed += 1
            log.warning("planner heartbeat not sent (%s)", beaten.failed[0][1])
        for command in sent.confirmed:
            log.info("scale command %s sent to %s", command.command_id, destination)
        for command, exc in sent.failed:
            log.error("scale command %s not sent (%s); retrying", command.command_id, exc)
            agent.command_outbox.append(command)
        service.outbox.extend(alerted.failed_items)
        if arrivals:
            stored = await publish(
                [(step, history_topic.send(key=k, value=v)) for step, k, v in arrivals], timeout
            )
            if stored.failed:
                agent.arrivals_not_persisted(stored.failed_items)
                log.warning(
                    "%d arrival steps not persisted (broker away?); retrying at the next tick",
                    len(stored.failed),
                )

    async def planner_page(web: Any, request: Any) -> Any:
        body = agent.status or {"note": "the planner has not run yet"}
        return web.json(body | agent.counts() | {"leader": leads_now(app)})

    # Registered by call rather than by decorator: Faust's decorators are untyped.
    app.agent(samples)(take_samples)
    app.agent(to_leader)(take_forwarded)
    app.timer(settings.monitor.tick_s, on_leader=True)(plan)
    app.page("/planner")(planner_page)
