"""One ``streamtrain demo`` run: its state, the children it starts, what each tick does.

Owned here: :class:`DemoRun`, what one run knows (its names and files, the traffic
plan, the seed history, the phases of its day, the timeline the observers fill) and
does: it builds the **control app** (:meth:`DemoRun.control_app`) and the **worker
pool** (:meth:`DemoRun.worker_pool`), and, each tick of the drive loop, observes,
supervises the children (a dead worker is replaced and noted on the timeline; the
control app is restarted at most three times), polls the planner and, when asked, kills
a worker or injects a burst. The order things start and stop in is
:mod:`streamtrain.demo.run`'s; what the run tells (dashboard state, progress line,
summary) is :mod:`streamtrain.demo.run_report`'s.
"""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from streamtrain.config import KafkaSettings
from streamtrain.demo.children import DemoNames, kafka_env
from streamtrain.demo.control_args import control_app_argv
from streamtrain.demo.history import demo_seed_history, write_seed_history
from streamtrain.demo.lag_cost import LagCostCurve
from streamtrain.demo.lighthouse import check_lighthouse
from streamtrain.demo.observe import (
    StatsTail,
    Timeline,
    TrainedIds,
    planner_status,
    throughput_belief,
)
from streamtrain.demo.phases import DayPhases
from streamtrain.demo.settings import BURST_PEAK_S, DemoSettings
from streamtrain.demo.topics import create_demo_topics
from streamtrain.demo.traffic import TrafficGenerator, TrafficPlan, last_day
from streamtrain.demo.trainer import DemoWorkerConfig
from streamtrain.demo.worker_args import pool_size_path, worker_argv, worker_env
from streamtrain.elastic.lighthouse import LighthouseProcess
from streamtrain.errors import StreamtrainError
from streamtrain.executors import ApplyResult, Outcome
from streamtrain.executors.local import LocalProcessPool
from streamtrain.executors.readiness import Readiness
from streamtrain.executors.shard_release import ShardRelease
from streamtrain.forecast.trace import synth_trace

__all__ = ["DemoRun"]


class DemoRun:
    """One run's state and children (module docstring);
    :func:`~streamtrain.demo.run.run_demo` starts and drives it."""

    def __init__(self, kafka: KafkaSettings, settings: DemoSettings, echo: Callable[[str], None]):
        self.kafka = kafka
        self.settings = settings
        self.echo = echo
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
            niceness=s.worker_niceness,
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
        before = result.workers_before or 0
        after = result.workers_after or 0
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
            control = pool is self.control
            for exit in pool.reap():
                then = "not replaced"
                if exit.replaced_by_pid is not None:
                    if control:
                        self.control_restarts += 1
                    else:
                        self.replaced += 1
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
