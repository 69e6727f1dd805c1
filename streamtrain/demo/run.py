"""``streamtrain demo``'s orchestration: every part of streamtrain on one machine, one day.

Owned here: :func:`run_demo`, the assembly (what it runs: :class:`DemoSettings`, in
:mod:`streamtrain.demo.settings`), which, against a Kafka cluster it is given (the CLI
starts the embedded broker):

1. creates the topics and commits the job's start at the data topic's end
   (:mod:`streamtrain.demo.topics`; names from :mod:`streamtrain.demo.children`);
2. writes the planner's seed history and starts the **control app** (:meth:`_Demo.control_app`);
3. starts, with ``--engine torchft`` (the default), torchft's **lighthouse** on
   127.0.0.1 (:class:`~streamtrain.elastic.lighthouse.LighthouseProcess`), and the
   **worker pool** (:meth:`_Demo.worker_pool`) with a
   :class:`~streamtrain.executors.consumer.CommandConsumer` thread applying the planner's
   ScaleCommands to it; dead workers are replaced (and noted on the timeline);
4. starts the **traffic** (:class:`~streamtrain.demo.traffic.TrafficGenerator`) at the
   moment the seed history ends, the **observers** (topics and the workers' files into a
   :class:`~streamtrain.demo.observe.Timeline`) and the **dashboard**;
5. runs the day, then drains (until every produced id was trained, or
   ``drain_timeout_s``: :mod:`streamtrain.demo.phases`), and returns the summary
   (:mod:`streamtrain.demo.summary`).

Everything started is stopped on the way out, also on Ctrl-C or an error: workers with
SIGTERM (they commit what they acknowledged), then the control app. Every child gets
``PR_SET_PDEATHSIG``, so none outlives a demo killed outright. Subprocesses learn the
Kafka connection from ``STREAMTRAIN_*`` environment variables, never the command line.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from streamtrain.config import KafkaSettings
from streamtrain.demo.children import DemoNames, kafka_env
from streamtrain.demo.control_args import control_app_argv
from streamtrain.demo.dashboard import Dashboard
from streamtrain.demo.history import demo_seed_history, write_seed_history
from streamtrain.demo.lag_cost import LagCostCurve
from streamtrain.demo.lighthouse import check_lighthouse, start_lighthouse
from streamtrain.demo.observe import (
    StatsTail,
    Timeline,
    TopicFeeds,
    TrainedIds,
    planner_status,
    stall_lines,
    throughput_belief,
)
from streamtrain.demo.phases import DayPhases, Phase, progress_line
from streamtrain.demo.settings import BURST_PEAK_S, DEFAULT_SPEED, MIN_SLO_S, DemoSettings
from streamtrain.demo.summary import RecordCounts, action_marks, engine_summary, summarize
from streamtrain.demo.topics import create_demo_topics
from streamtrain.demo.traffic import TrafficGenerator, TrafficPlan, last_day
from streamtrain.demo.trainer import DemoWorkerConfig
from streamtrain.demo.worker_args import (
    FAST_GROUP_CONFIG,
    pool_size_path,
    states_topic,
    worker_argv,
    worker_env,
)
from streamtrain.elastic.lighthouse import LighthouseProcess
from streamtrain.errors import StreamtrainError
from streamtrain.executors import ApplierSettings, ApplyResult, CommandApplier, Outcome
from streamtrain.executors.consumer import CommandConsumer, ConsumerSettings
from streamtrain.executors.local import LocalProcessPool
from streamtrain.executors.readiness import Readiness
from streamtrain.executors.shard_release import ShardRelease
from streamtrain.forecast.trace import synth_trace
from streamtrain.scale.action_costs import measured_cost

__all__ = ["BURST_PEAK_S", "DEFAULT_SPEED", "MIN_SLO_S", "DemoSettings", "run_demo"]


class _Demo:
    """One run's state (see the module docstring); :func:`run_demo` drives it."""

    def __init__(self, kafka: KafkaSettings, settings: DemoSettings, echo: Callable[[str], None]):
        self.kafka, self.settings, self.echo = kafka, settings, echo
        self.names = DemoNames.for_run(uuid.uuid4().hex[:8], settings.topic)
        self.run_dir = settings.run_dir or Path(tempfile.mkdtemp(prefix="streamtrain-demo-"))
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.timeline = Timeline(settings.partitions)
        self.trained = TrainedIds(self.run_dir / "trained")
        self.stats = StatsTail(self.run_dir / "stats")
        trace = synth_trace(7, seed=settings.seed)
        self.plan = TrafficPlan.from_trace(
            trace,
            duration_s=settings.day_s,
            peak_records_per_s=settings.peak_records_per_s,
            partitions=settings.partitions,
            seed=settings.seed,
        )
        self.peak_offset_s = float(np.argmax(last_day(trace))) * trace.step_s / settings.speed
        self.seed_rates = demo_seed_history(
            trace, peak_records_per_s=settings.peak_records_per_s, speed=settings.speed
        )
        self.phases = DayPhases(
            start_at_s=time.time() + settings.startup_lead_s,
            drain_timeout_s=settings.drain_timeout_s,
        )
        self.generator: TrafficGenerator | None = None
        self.readiness: Readiness | None = None
        self.shard_release: ShardRelease | None = None  # shards mode: a dead worker's shards
        self.pool: LocalProcessPool | None = None
        self.control: LocalProcessPool | None = None
        self.lighthouse: LighthouseProcess | None = None  # torchft's, one model
        self.control_port = 0
        self.killed: list[int] = []
        self.throughput: dict[str, Any] | None = None  # the planner's fitted f_sync
        self.replaced = 0
        self.control_restarts = 0  # the control app, restarted when it died (at most 3)
        self.lag_cost = LagCostCurve(
            drift_turns_per_day=settings.drift_turns_per_day,
            records_per_day=self.plan.total_records,
            seed=settings.seed,
        )

    @property
    def start_at_s(self) -> float:
        """Wall time the traffic's day begins (after the children had time to start)."""
        return self.phases.start_at_s

    # -- starting --------------------------------------------------------------------

    def create_topics(self) -> None:
        create_demo_topics(self.kafka, self.names, self.settings.partitions)

    def control_app(self) -> LocalProcessPool:
        """``streamtrain lag run --plan-job`` (argv: :mod:`streamtrain.demo.control_args`),
        the planner on a clock ``speed`` times faster than the wall clock, seeded with the
        six synthetic days before the demo's day (:mod:`streamtrain.demo.history`);
        restarted if it dies (it resumes from its changelogs; three times at most)."""
        from streamtrain.ports import free_port

        history = write_seed_history(
            self.run_dir / "seed-history.json", self.seed_rates, end_at_s=self.start_at_s
        )
        self.control_port = free_port()
        argv = control_app_argv(
            self.settings,
            self.names,
            web_port=self.control_port,
            data_dir=self.run_dir / "control-data",
            history_path=history,
        )
        control = LocalProcessPool(
            argv,
            env=kafka_env(self.kafka),
            name="control-app",
            worker_id_prefix="control-app",
            replace_dead=True,
            grace_s=10.0,
            log_dir=self.run_dir / "logs",
        )
        control.scale_to(1)
        return control

    def worker_pool(self) -> LocalProcessPool:
        """``streamtrain worker --entry streamtrain.demo.trainer:demo_app`` processes (argv
        and environment: :mod:`streamtrain.demo.worker_args`; ``--assignment``, shards by
        default, with the control app as shard coordinator) training ONE model
        data-parallel, two-phase: a new worker heals the model's weights from a live peer,
        says READY and is admitted with the others of its action before it leases shards
        (:class:`~streamtrain.executors.readiness.Readiness`)."""
        s = self.settings
        config = DemoWorkerConfig(
            run_dir=self.run_dir,
            start_at_s=self.start_at_s,
            duration_s=s.day_s,
            seed=s.seed,
            capacity_records_per_s=s.worker_capacity_records_per_s,
            drift_turns=s.drift_turns_per_day,
            engine=s.engine,
        )
        argv = worker_argv(
            self.names,
            run_dir=self.run_dir,
            shuffle=s.shuffle,
            queue_records=s.worker_queue_records,
            assignment=s.assignment,
            engine=s.engine,
            lighthouse=None if self.lighthouse is None else self.lighthouse.address,
        )
        return LocalProcessPool(
            argv,
            env=worker_env(self.kafka, config),
            name="workers",
            grace_s=10.0,
            replace_dead=True,
            log_dir=self.run_dir / "logs",
            size_path=pool_size_path(self.run_dir),
            readiness=self.readiness,
            on_exit=None if self.shard_release is None else self.shard_release.worker_gone,
        )

    # -- while running ---------------------------------------------------------------

    def on_applied(self, result: ApplyResult) -> None:
        before, after = result.workers_before or 0, result.workers_after or 0
        prep_s = self.pool.last_prep_s if self.pool is not None and after > before else None
        self.timeline.add_action(
            time.time() - result.duration_s,
            result,
            assignment=self.settings.assignment,
            prep_s=prep_s,
        )
        if result.outcome is Outcome.APPLIED:
            self.echo(
                f"scaled {result.workers_before} -> {result.workers_after} workers "
                f"(command {result.command_id})"
            )

    def burst(self) -> str:
        generator = self.generator
        if generator is None or not generator.is_alive():
            raise StreamtrainError("the traffic is not running: no burst now")
        s = self.settings
        records = s.burst_records or int(BURST_PEAK_S * s.peak_records_per_s)
        generator.burst(records)
        message = f"burst of {records:,} records injected"
        self.timeline.add_event(time.time(), message)
        return message

    def supervise(self) -> None:
        check_lighthouse(self.lighthouse, self.run_dir)
        for pool, what in ((self.pool, "worker"), (self.control, "control app")):
            if pool is None:
                continue
            for exit in pool.reap():
                then, control = "not replaced", pool is self.control
                if exit.replaced_by_pid is not None:
                    self.control_restarts += control
                    self.replaced += not control
                    then = f"replaced by pid {exit.replaced_by_pid}"
                self.timeline.add_event(
                    time.time(),
                    f"{what} {exit.worker_id} (pid {exit.pid}) exited with code "
                    f"{exit.returncode}; {then}",
                )
                if control and (then == "not replaced" or self.control_restarts > 3):
                    raise StreamtrainError(
                        f"the control app exited with code {exit.returncode}; see "
                        f"{self.run_dir / 'logs' / (exit.worker_id + '.log')}"
                    )

    def kill_a_worker(self) -> None:
        assert self.pool is not None  # noqa: S101 - called only while the pool runs
        workers = self.pool.workers()
        if not workers:
            return
        victim = workers[-1]
        os.kill(victim.pid, 9)
        self.killed.append(victim.pid)
        self.timeline.add_event(
            time.time(), f"killed worker {victim.worker_id} (pid {victim.pid}) with SIGKILL"
        )

    def poll_planner(self) -> None:
        status = planner_status(self.control_port)
        self.timeline.set_forecast(None if status is None else status.get("forecast"))
        self.throughput = throughput_belief(status) or self.throughput

    def observe(self, now: float) -> None:
        if self.pool is not None:
            self.timeline.add_workers(now, self.pool.current_workers())
        if self.start_at_s <= now <= self.start_at_s + self.settings.day_s:
            self.timeline.add_planned(now, self.plan.rate_at(now - self.start_at_s))
        self.timeline.add_evaluations(self.stats.read_new())
        self.trained.refresh()
        self.timeline.add_progress(now, self.produced(), self.trained.unique)

    def produced(self) -> int:
        generator = self.generator
        return int(generator.acknowledged.sum()) if generator is not None else 0

    def state(self) -> dict[str, Any]:
        """What the dashboard's ``api/state`` returns."""
        timeline = self.timeline.to_json()
        return {
            "now_s": time.time(),
            "started_at_s": self.start_at_s,
            "day_end_s": self.start_at_s + self.settings.day_s,
            "speed": self.settings.speed,
            "slo_lag_s": self.settings.slo_s,
            "phase": self.phases.phase.value,
            "job": self.names.job,
            "topic": self.names.topic,
            "records": {
                "produced": self.produced(),
                "trained_unique": self.trained.unique,
                "trained_from_peers": self.trained.forwarded,
            },
            "timeline": timeline,
            "action_marks": action_marks(timeline),
            "engine": engine_summary(self.settings.engine, timeline["steps"]),
            **self.lag_cost.loss(
                timeline["reports"],
                started_at_s=self.start_at_s,
                ended_at_s=time.time(),
                speed=self.settings.speed,
            ),
        }

    def summary(self, ended_at_s: float) -> dict[str, Any]:
        self.trained.refresh()
        produced = self.produced()
        generator = self.generator
        result = summarize(
            self.timeline.to_json(),
            started_at_s=self.start_at_s,
            day_end_s=self.start_at_s + self.settings.day_s,
            ended_at_s=ended_at_s,
            peak_at_s=self.start_at_s + self.peak_offset_s,
            speed=self.settings.speed,
            slo_lag_s=self.settings.slo_s,
            records=RecordCounts(
                produced=produced,
                trained_unique=self.trained.covered(produced),
                trained_total=self.trained.total,
                failed_to_produce=generator.failed if generator is not None else 0,
                trained_from_peers=self.trained.forwarded,
            ),
            assumed_costs=measured_cost(self.settings.assignment, self.settings.engine),
        )
        result["engine"] = engine_summary(
            self.settings.engine,
            self.timeline.to_json()["steps"],
            started_at_s=self.start_at_s,
            ended_at_s=ended_at_s,
        )
        result["throughput_model"] = self.throughput
        result["workers"].update(killed=len(self.killed), replaced=self.replaced)
        result["control_app_restarts"] = self.control_restarts
        result["phase"] = self.phases.phase.value
        # started with the day, normally long done; a stopped run does not wait for it
        self.lag_cost.join(timeout=0 if self.phases.phase is Phase.STOPPED else 120)
        result.update(
            self.lag_cost.loss(
                self.timeline.to_json()["reports"],
                started_at_s=self.start_at_s,
                ended_at_s=ended_at_s,
                speed=self.settings.speed,
            )
        )
        result.update(run_dir=str(self.run_dir), job=self.names.job, topic=self.names.topic)
        if result["records"]["lost"]:
            result["records"]["missing_ids"] = self.trained.missing(produced)
        return result


def run_demo(
    kafka: KafkaSettings,
    settings: DemoSettings,
    *,
    echo: Callable[[str], None] = print,
    on_dashboard: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
) -> dict[str, Any]:
    """Run the demo (module docstring); returns the summary. ``stop`` ends it early (the
    summary then covers what ran)."""
    demo = _Demo(kafka, settings, echo)
    stop = stop or threading.Event()
    with contextlib.ExitStack() as stack:
        demo.lag_cost.start()  # a few CPU seconds: while the children start
        demo.create_topics()
        echo(f"demo run {demo.names.job}: files in {demo.run_dir}")
        demo.control = stack.enter_context(demo.control_app())
        if settings.engine == "torchft":
            demo.lighthouse = start_lighthouse(demo.run_dir)
            stack.callback(demo.lighthouse.stop)
            echo(f"lighthouse at {demo.lighthouse.address}")
        demo.readiness = stack.enter_context(
            Readiness(kafka, demo.names.job, states_topic(demo.names))
        )
        if settings.assignment == "shards":
            demo.shard_release = ShardRelease(kafka, demo.names.job)
            stack.callback(demo.shard_release.close)
        demo.pool = stack.enter_context(demo.worker_pool())
        dashboard = Dashboard(
            demo.state, demo.burst, host=settings.dashboard_host, port=settings.dashboard_port
        )
        stack.callback(dashboard.close)
        if on_dashboard is not None:
            on_dashboard(dashboard.url)
        demo.pool.scale_to(settings.initial_workers)
        applier = CommandApplier(
            demo.pool, ApplierSettings(job=demo.names.job, max_target_workers=settings.max_workers)
        )
        consumer = CommandConsumer(
            kafka,
            applier,
            ConsumerSettings(
                job=demo.names.job,
                commands_topic=demo.names.control("commands"),
                alerts_topic=demo.names.control("alerts"),
                outcomes_topic=demo.names.control("outcomes"),
                assignment=settings.assignment,
                consumer_config=FAST_GROUP_CONFIG,
            ),
            on_result=demo.on_applied,
        )
        stack.enter_context(consumer)
        applying = threading.Event()
        applier_thread = threading.Thread(
            target=consumer.run, args=(applying,), name="demo-applier", daemon=True
        )
        applier_thread.start()
        stack.callback(applier_thread.join, 10)  # (callbacks run last-registered first)
        stack.callback(applying.set)
        feeds = TopicFeeds(
            kafka,
            demo.timeline,
            reports_topic=demo.names.control("reports"),
            alerts_topic=demo.names.control("alerts"),
            commands_topic=demo.names.control("commands"),
            job=demo.names.job,
        )
        feeds.start()
        stack.callback(feeds.join, 10)
        stack.callback(feeds.stop)
        demo.generator = TrafficGenerator(
            kafka,
            demo.names.topic,
            demo.plan,
            seed=settings.seed,
            start_at_s=demo.start_at_s,
            drift_turns=settings.drift_turns_per_day,
        )
        demo.generator.start()
        stack.callback(demo.generator.join, 35)
        stack.callback(demo.generator.stop)
        ended = _drive(demo, stop)
        return demo.summary(ended)
    raise AssertionError("unreachable")  # the with block returns or raises


def _drive(demo: _Demo, stop: threading.Event) -> float:
    """The main loop: observe, supervise, report progress; the day, then the drain
    (:class:`~streamtrain.demo.phases.DayPhases` says when it is over)."""
    s, phases = demo.settings, demo.phases
    generator = demo.generator
    assert generator is not None  # noqa: S101 - run_demo starts it first
    wait = demo.start_at_s - time.time()
    if wait > 0:
        demo.echo(f"traffic starts in {wait:.0f} s (the control app and workers start first)")
    next_progress = time.time() + s.progress_interval_s
    next_planner = 0.0
    while not stop.is_set():
        now = time.time()
        demo.observe(now)
        demo.supervise()
        if now >= next_planner:
            demo.poll_planner()
            next_planner = now + 1.0
        message = phases.advance(now, traffic_running=generator.is_alive())
        if message is not None:
            demo.echo(message)
        if (
            s.kill_worker_at_s is not None
            and not demo.killed
            and now >= demo.start_at_s + s.kill_worker_at_s
        ):
            demo.kill_a_worker()
        if now >= next_progress:
            next_progress = now + s.progress_interval_s
            demo.echo(_progress(demo, now))
        if phases.drain_deadline_s is not None:
            produced = demo.produced()
            trained = demo.trained.covered(produced)
            if phases.settle(now, produced=produced, trained=trained):
                if phases.phase is Phase.DRAIN_TIMED_OUT:
                    for line in stall_lines(demo.trained, produced, generator, demo.control_port):
                        demo.echo(line)
                return now
        stop.wait(0.5)
    phases.phase = Phase.STOPPED
    return time.time()


def _progress(demo: _Demo, now: float) -> str:
    reports = demo.timeline.reports
    return progress_line(
        demo.phases.phase,
        simulated_s=max(0.0, now - demo.start_at_s) * demo.settings.speed,
        workers=demo.pool.current_workers() if demo.pool is not None else 0,
        lag_s=reports[-1]["max_lag_s"] if reports else None,
        trained=demo.trained.unique,
        produced=demo.produced(),
        forwarded=demo.trained.forwarded,
    )
