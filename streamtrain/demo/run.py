"""``streamtrain demo``'s orchestration: every part of streamtrain on one machine, one day.

Owned here: :class:`DemoSettings` (what the demo runs, validated) and :func:`run_demo`,
which, against a Kafka cluster it is given (the CLI starts the embedded broker):

1. creates the topics (the data topic with 16 partitions; reports, alerts, throughput
   samples and scale commands), and commits the job's start at the data topic's end, so
   a topic with older records (``--topic`` on a real cluster) is not replayed;
2. writes the planner's seed history (the six synthetic days before the demo's day,
   scaled like it), and starts the **control app** (``streamtrain lag run --plan-job``,
   the planner on a clock ``speed`` times faster than the wall clock) as a subprocess;
3. starts the **worker pool**: a :class:`~streamtrain.scale.executors.LocalProcessPool`
   of ``streamtrain worker --entry streamtrain.demo.trainer:demo_app`` processes, and a
   :class:`~streamtrain.scale.consumer.CommandConsumer` thread applying the planner's
   ScaleCommands to it; dead workers are replaced (and noted on the timeline);
4. starts the **traffic** (:class:`~streamtrain.demo.traffic.TrafficGenerator`) at the
   moment the seed history ends, the **observers** (topics and the workers' files into a
   :class:`~streamtrain.demo.observe.Timeline`) and the **dashboard**;
5. runs the day, then drains (until every produced id was trained, or
   ``drain_timeout_s``), and returns the summary (:mod:`streamtrain.demo.summary`).

Everything started is stopped on the way out, also on Ctrl-C or an error: workers with
SIGTERM (they commit what they acknowledged), then the control app. Every child gets
``PR_SET_PDEATHSIG``, so none outlives a demo killed outright. Subprocesses learn the
Kafka connection from ``STREAMTRAIN_*`` environment variables, never the command line.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from confluent_kafka import Consumer, TopicPartition

from streamtrain.config import KafkaSettings
from streamtrain.demo.dashboard import Dashboard
from streamtrain.demo.observe import StatsTail, Timeline, TopicFeeds, TrainedIds
from streamtrain.demo.summary import RecordCounts, summarize
from streamtrain.demo.traffic import TrafficGenerator, TrafficPlan
from streamtrain.demo.trainer import DemoWorkerConfig
from streamtrain.errors import ConfigError, KafkaError, StreamtrainError
from streamtrain.forecast.trace import synth_trace
from streamtrain.kafka import create_topic
from streamtrain.scale.consumer import CommandConsumer, ConsumerSettings
from streamtrain.scale.executors import ApplierSettings, ApplyResult, CommandApplier
from streamtrain.scale.executors.local import LocalProcessPool
from streamtrain.shuffle.policy import ShufflePolicy
from streamtrain.units import DAY_S

__all__ = ["DemoSettings", "run_demo"]

log = logging.getLogger(__name__)

_PLAN_STEP_S = 300  # the planner's step, model seconds (5 simulated minutes)
_WORKER_BATCH_RECORDS = 128
_FAST_GROUP = (("session.timeout.ms", "6000"), ("heartbeat.interval.ms", "500"))


@dataclass(frozen=True, slots=True)
class DemoSettings:
    """What the demo runs. ``speed`` compresses time: a simulated day takes
    ``86400 / speed`` wall seconds (600 s at the default 144)."""

    speed: float = 144.0
    partitions: int = 16
    peak_records_per_s: float = 1_200.0
    worker_capacity_records_per_s: float = 400.0
    min_workers: int = 1
    max_workers: int = 8
    initial_workers: int = 2
    slo_lag_s: float | None = None  # wall s; default 20 simulated minutes (KALE), >= 2 s
    seed: int = 0
    drain_timeout_s: float = 120.0
    startup_lead_s: float = 25.0
    run_dir: Path | None = None
    topic: str | None = None
    dashboard_host: str = "127.0.0.1"
    dashboard_port: int = 8765
    kill_worker_at_s: float | None = None
    burst_records: int | None = None  # per dashboard burst; default 15 s of the peak
    progress_interval_s: float = 10.0
    shuffle: str = "advanced"  # the workers' --shuffle policy
    worker_queue_records: int = 1_024

    def __post_init__(self) -> None:
        if not math.isfinite(self.speed) or self.speed <= 0:
            raise ConfigError(f"the speed must be a positive factor, got {self.speed}")
        if self.day_s < 30:
            raise ConfigError(f"a simulated day of {self.day_s:.0f} s is too short (>= 30 s)")
        if self.partitions < 1 or self.peak_records_per_s <= 0:
            raise ConfigError("the demo needs partitions and a positive peak rate")
        if self.worker_capacity_records_per_s <= 0:
            raise ConfigError("the worker capacity must be positive")
        if not 1 <= self.min_workers <= self.initial_workers <= self.max_workers:
            raise ConfigError(
                "need 1 <= --min-workers <= --initial-workers <= --max-workers, got "
                f"{self.min_workers}, {self.initial_workers}, {self.max_workers}"
            )
        if self.slo_lag_s is not None and self.slo_lag_s <= 0:
            raise ConfigError("the SLO lag must be positive")
        if self.shuffle not in {p.value for p in ShufflePolicy}:
            raise ConfigError(
                f"the shuffle policy must be none, basic or advanced: {self.shuffle!r}"
            )
        if self.worker_queue_records < _WORKER_BATCH_RECORDS:
            raise ConfigError(
                f"a worker's queue must hold a batch ({_WORKER_BATCH_RECORDS} records)"
            )

    @property
    def day_s(self) -> float:
        return DAY_S / self.speed

    @property
    def slo_s(self) -> float:
        if self.slo_lag_s is not None:
            return self.slo_lag_s
        return max(20 * 60 / self.speed, 2.0)  # lag is measured to about a wall second


@dataclass(frozen=True, slots=True)
class _Names:
    run_id: str
    topic: str

    @property
    def job(self) -> str:
        return f"streamtrain-demo-{self.run_id}"

    def control(self, kind: str) -> str:
        return f"streamtrain.demo.{self.run_id}.{kind}"


def kafka_env(settings: KafkaSettings) -> dict[str, str]:
    """The ``STREAMTRAIN_*`` variables that give a subprocess the same connection."""
    env = {"STREAMTRAIN_BOOTSTRAP": settings.bootstrap}
    fields = {
        "SECURITY_PROTOCOL": settings.security_protocol,
        "SASL_MECHANISM": settings.sasl_mechanism,
        "SASL_USERNAME": settings.sasl_username,
        "SASL_PASSWORD": settings.sasl_password,
        "SSL_CA_LOCATION": settings.ssl_ca_location,
        "SSL_CERTIFICATE_LOCATION": settings.ssl_certificate_location,
        "SSL_KEY_LOCATION": settings.ssl_key_location,
        "SSL_KEY_PASSWORD": settings.ssl_key_password,
    }
    env.update({f"STREAMTRAIN_{k}": v for k, v in fields.items() if v})
    if settings.extra:
        if any(" " in f"{k}={v}" for k, v in settings.extra.items()):
            raise ConfigError("--kafka-config values with spaces cannot be passed to the workers")
        env["STREAMTRAIN_KAFKA_CONFIG"] = " ".join(f"{k}={v}" for k, v in settings.extra.items())
    return env


def seed_history(trace_rates: np.ndarray[Any, Any], trace_step_s: int, scale: float) -> list[float]:
    """The days before the demo's day, per planning step, in records per model second."""
    day_steps = round(DAY_S / trace_step_s)
    before = np.nan_to_num(trace_rates[:-day_steps], nan=0.0) * scale
    per_step = max(1, round(_PLAN_STEP_S / trace_step_s))
    usable = before.size - before.size % per_step
    means: np.ndarray[Any, Any] = before[before.size - usable :].reshape(-1, per_step).mean(axis=1)
    return [round(float(v), 6) for v in means]


def _commit_at_end(settings: KafkaSettings, group: str, topic: str, partitions: int) -> None:
    """Start ``group`` at the current end of ``topic`` (older records are not the demo's)."""
    consumer = Consumer(settings.confluent_config(**{"group.id": group}))
    try:
        offsets = []
        for p in range(partitions):
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            offsets.append(TopicPartition(topic, p, high))
        consumer.commit(offsets=offsets, asynchronous=False)
    except Exception as exc:
        raise KafkaError(f"cannot set the demo group's start offsets on {topic}: {exc}") from exc
    finally:
        consumer.close()


class _Demo:
    """One run's state (see the module docstring); :func:`run_demo` drives it."""

    def __init__(self, kafka: KafkaSettings, settings: DemoSettings, echo: Callable[[str], None]):
        self.kafka, self.settings, self.echo = kafka, settings, echo
        run_id = uuid.uuid4().hex[:8]
        self.names = _Names(run_id, settings.topic or f"streamtrain.demo.{run_id}.ctr")
        self.run_dir = settings.run_dir or Path(tempfile.mkdtemp(prefix="streamtrain-demo-"))
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.timeline = Timeline(settings.partitions)
        self.phase = "starting"
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
        day = np.nan_to_num(trace.records_per_s[-round(DAY_S / trace.step_s) :], nan=0.0)
        self.peak_offset_s = float(np.argmax(day)) * trace.step_s / settings.speed
        scale = settings.peak_records_per_s / float(day.max()) / settings.speed
        self.seed_rates = seed_history(trace.records_per_s, trace.step_s, scale)
        self.start_at_s = time.time() + settings.startup_lead_s
        self.generator: TrafficGenerator | None = None
        self.pool: LocalProcessPool | None = None
        self.control: LocalProcessPool | None = None
        self.control_port = 0
        self.killed: list[int] = []
        self.replaced = 0

    # -- starting --------------------------------------------------------------------

    def create_topics(self) -> None:
        n = self.names
        create_topic(self.kafka, n.topic, self.settings.partitions, timeout_s=15, exist_ok=True)
        for kind in ("throughput", "commands", "reports", "alerts"):
            create_topic(self.kafka, n.control(kind), 1, timeout_s=15, exist_ok=True)
        _commit_at_end(self.kafka, n.job, n.topic, self.settings.partitions)

    def _python(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "streamtrain", *args]

    def control_app(self) -> LocalProcessPool:
        from streamtrain.broker import free_port

        s, n = self.settings, self.names
        history = self.run_dir / "seed-history.json"
        history.write_text(
            json.dumps(
                {
                    "step_s": _PLAN_STEP_S,
                    "end_at_ms": int(self.start_at_s * 1000),
                    "records_per_s": self.seed_rates,
                }
            )
        )
        self.control_port = free_port()
        argv = self._python(
            "lag",
            "run",
            "--group",
            n.job,
            "--topic",
            n.topic,
            "--tick-s",
            "1",
            "--app-id",
            n.control("control"),
            "--reports-topic",
            n.control("reports"),
            "--alerts-topic",
            n.control("alerts"),
            "--web-port",
            str(self.control_port),
            "--slo-violation-s",
            f"{s.slo_s:.3f}",
            "--slo-warning-s",
            f"{s.slo_s / 2:.3f}",
            "--history-step-s",
            "5",
            "--cps-window-s",
            f"{max(3.0, 3 * _PLAN_STEP_S / s.speed):.3f}",
            "--data-dir",
            str(self.run_dir / "control-data"),
            "--plan-job",
            n.job,
            "--policy",
            "streamtrain",
            "--samples-topic",
            n.control("throughput"),
            "--commands-topic",
            n.control("commands"),
            "--min-workers",
            str(s.min_workers),
            "--max-workers",
            str(s.max_workers),
            "--initial-workers",
            str(s.initial_workers),
            "--plan-step-s",
            str(_PLAN_STEP_S),
            "--action-pause-s",
            f"{6 * s.speed:.0f}",  # a rebalance pauses the group ~3-6 wall seconds
            # The pool's size file moves before new workers join: measured pauses are short.
            "--min-action-pause-s",
            f"{6 * s.speed:.0f}",
            "--prior-rate",
            f"{s.worker_capacity_records_per_s:.3f}",
            "--sample-bucket-s",
            f"{max(_PLAN_STEP_S, 3 * s.speed):.0f}",
            # In wall seconds: lag is measured to about a second and a rebalance pauses
            # the group for several; on the model clock those are minutes.
            "--policy-setting",
            f"tolerated_lag_s={3 * s.speed:.0f}",
            "--policy-setting",
            f"fallback_target_lag_s={s.slo_s * s.speed:.0f}",
            "--policy-setting",
            f"fallback_cooldown_s={20 * s.speed:.0f}",
            "--policy-setting",
            f"trigger_lag_enter_s={max(s.slo_s / 2, 5.0) * s.speed:.0f}",
            "--policy-setting",
            f"trigger_lag_exit_s={2.5 * s.speed:.0f}",
            "--plan-time-scale",
            f"{s.speed:g}",
            "--plan-history",
            str(history),
        )
        control = LocalProcessPool(
            argv,
            env=kafka_env(self.kafka),
            name="control-app",
            worker_id_prefix="control-app",
            grace_s=10.0,
            log_dir=self.run_dir / "logs",
        )
        control.scale_to(1)
        return control

    def worker_pool(self) -> LocalProcessPool:
        s, n = self.settings, self.names
        config = DemoWorkerConfig(
            run_dir=self.run_dir,
            start_at_s=self.start_at_s,
            duration_s=s.day_s,
            seed=s.seed,
            capacity_records_per_s=s.worker_capacity_records_per_s,
        )
        argv = self._python(
            "worker",
            "--topic",
            n.topic,
            "--group",
            n.job,
            "--entry",
            "streamtrain.demo.trainer:demo_app",
            "--batch-records",
            str(_WORKER_BATCH_RECORDS),
            "--queue-records",
            str(s.worker_queue_records),
            "--shuffle",
            s.shuffle,
            "--shuffle-heartbeat-interval-ms",
            "500",
            "--shuffle-heartbeat-timeout-ms",
            "3000",
            "--pool-size-file",
            str(self.run_dir / "pool-size"),
            "--throughput-topic",
            n.control("throughput"),
            "--sample-interval-s",
            "1",
            "--session-timeout-ms",
            "6000",
            "--heartbeat-interval-ms",
            "500",
        )
        return LocalProcessPool(
            argv,
            env={**kafka_env(self.kafka), **config.to_env()},
            name="workers",
            grace_s=10.0,
            replace_dead=True,
            log_dir=self.run_dir / "logs",
            size_path=self.run_dir / "pool-size",
        )

    # -- while running ---------------------------------------------------------------

    def on_applied(self, result: ApplyResult) -> None:
        self.timeline.add_action(
            {
                "at_s": time.time(),
                "command_id": result.command_id,
                "outcome": result.outcome.value,
                "workers_before": result.workers_before,
                "workers_after": result.workers_after,
                "error": result.error,
            }
        )
        if result.outcome.value == "applied":
            self.echo(
                f"scaled {result.workers_before} -> {result.workers_after} workers "
                f"(command {result.command_id})"
            )

    def burst(self) -> str:
        generator = self.generator
        if generator is None or not generator.is_alive():
            raise StreamtrainError("the traffic is not running: no burst now")
        records = self.settings.burst_records or int(15 * self.settings.peak_records_per_s)
        generator.burst(records)
        message = f"burst of {records:,} records injected"
        self.timeline.add_event(time.time(), message)
        return message

    def supervise(self) -> None:
        for pool, what in ((self.pool, "worker"), (self.control, "control app")):
            if pool is None:
                continue
            for exit in pool.reap():
                then = "not replaced"
                if exit.replaced_by_pid is not None:
                    self.replaced += 1
                    then = f"replaced by pid {exit.replaced_by_pid}"
                self.timeline.add_event(
                    time.time(),
                    f"{what} {exit.worker_id} (pid {exit.pid}) exited with code "
                    f"{exit.returncode}; {then}",
                )
                if pool is self.control:
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
        url = f"http://127.0.0.1:{self.control_port}/planner"
        try:
            with urllib.request.urlopen(url, timeout=1.0) as response:
                status = json.loads(response.read())
        except (urllib.error.URLError, OSError, ValueError) as exc:
            log.debug("planner status not available yet: %s", exc)
            return
        self.timeline.set_forecast(status.get("forecast"))

    def observe(self, now: float) -> None:
        if self.pool is not None:
            self.timeline.add_workers(now, self.pool.current_workers())
        if self.start_at_s <= now <= self.start_at_s + self.settings.day_s:
            self.timeline.add_planned(now, self.plan.rate_at(now - self.start_at_s))
        self.timeline.add_evaluations(self.stats.read_new())
        self.trained.refresh()

    def produced(self) -> int:
        generator = self.generator
        return int(generator.acknowledged.sum()) if generator is not None else 0

    def state(self) -> dict[str, Any]:
        """What the dashboard's ``api/state`` returns."""
        return {
            "now_s": time.time(),
            "started_at_s": self.start_at_s,
            "day_end_s": self.start_at_s + self.settings.day_s,
            "speed": self.settings.speed,
            "slo_lag_s": self.settings.slo_s,
            "phase": self.phase,
            "job": self.names.job,
            "topic": self.names.topic,
            "records": {
                "produced": self.produced(),
                "trained_unique": self.trained.unique,
                "trained_from_peers": self.trained.forwarded,
            },
            "timeline": self.timeline.to_json(),
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
        )
        result["workers"]["killed"] = len(self.killed)
        result["workers"]["replaced"] = self.replaced
        result["phase"] = self.phase
        result["run_dir"] = str(self.run_dir)
        result["job"] = self.names.job
        result["topic"] = self.names.topic
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
        demo.create_topics()
        echo(f"demo run {demo.names.job}: files in {demo.run_dir}")
        demo.control = stack.enter_context(demo.control_app())
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
                consumer_config=_FAST_GROUP,
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
            kafka, demo.names.topic, demo.plan, seed=settings.seed, start_at_s=demo.start_at_s
        )
        demo.generator.start()
        stack.callback(demo.generator.join, 35)
        stack.callback(demo.generator.stop)
        ended = _drive(demo, stop)
        return demo.summary(ended)
    raise AssertionError("unreachable")  # the with block returns or raises


def _drive(demo: _Demo, stop: threading.Event) -> float:
    """The main loop: observe, supervise, report progress; the day, then the drain."""
    s = demo.settings
    generator = demo.generator
    assert generator is not None  # noqa: S101 - run_demo starts it first
    wait = demo.start_at_s - time.time()
    if wait > 0:
        demo.echo(f"traffic starts in {wait:.0f} s (the control app and workers start first)")
    next_progress = time.time() + s.progress_interval_s
    next_planner = 0.0
    drain_deadline: float | None = None
    while not stop.is_set():
        now = time.time()
        demo.observe(now)
        demo.supervise()
        if now >= next_planner:
            demo.poll_planner()
            next_planner = now + 1.0
        if now < demo.start_at_s:
            demo.phase = "starting"
        elif generator.is_alive():
            demo.phase = "running"
        elif drain_deadline is None:
            demo.phase = "draining"
            drain_deadline = now + s.drain_timeout_s
            demo.echo(f"the day is over; draining (at most {s.drain_timeout_s:.0f} s)")
        if (
            s.kill_worker_at_s is not None
            and not demo.killed
            and now >= demo.start_at_s + s.kill_worker_at_s
        ):
            demo.kill_a_worker()
        if now >= next_progress:
            next_progress = now + s.progress_interval_s
            _progress(demo, now)
        if drain_deadline is not None:
            produced = demo.produced()
            if demo.trained.covered(produced) >= produced:
                demo.phase = "done"
                return now
            if now >= drain_deadline:
                demo.phase = "drain timed out"
                demo.echo(
                    f"drain timed out: {produced - demo.trained.covered(produced):,} "
                    "records not trained yet"
                )
                return now
        stop.wait(0.5)
    demo.phase = "stopped"
    return time.time()


def _progress(demo: _Demo, now: float) -> None:
    simulated = max(0.0, now - demo.start_at_s) * demo.settings.speed
    hours, minutes = divmod(int(simulated // 60), 60)
    reports = demo.timeline.reports
    lag = reports[-1]["max_lag_s"] if reports else None
    pool = demo.pool.current_workers() if demo.pool is not None else 0
    demo.echo(
        f"[{demo.phase}] simulated {hours:02d}:{minutes:02d}  workers {pool}  "
        f"lag {'n/a' if lag is None else f'{lag:.1f} s'}  "
        f"trained {demo.trained.unique:,} / produced {demo.produced():,} "
        f"({demo.trained.forwarded:,} by a peer)"
    )
