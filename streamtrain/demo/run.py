"""``streamtrain demo``'s orchestration: every part of streamtrain on one machine, one day.

Owned here: :func:`run_demo`, the assembly, and the drive loop that runs the day (what
it runs: :class:`~streamtrain.demo.settings.DemoSettings`; one run's state and children:
:class:`~streamtrain.demo.run_state.DemoRun`; what it tells:
:mod:`streamtrain.demo.run_report`). Against a Kafka cluster it is given (the CLI starts
the embedded broker), it:

1. creates the topics and commits the job's start at the data topic's end
   (:mod:`streamtrain.demo.topics`; names from :mod:`streamtrain.demo.children`);
2. writes the planner's seed history and starts the **control app**
   (:meth:`~streamtrain.demo.run_state.DemoRun.control_app`);
3. starts, with ``--engine torchft`` (the default), torchft's **lighthouse** on
   127.0.0.1 (:class:`~streamtrain.elastic.lighthouse.LighthouseProcess`), and the
   **worker pool** (:meth:`~streamtrain.demo.run_state.DemoRun.worker_pool`) with a
   :class:`~streamtrain.executors.consumer.CommandConsumer` thread applying the planner's
   ScaleCommands to it; dead workers are replaced (and noted on the timeline);
4. starts the **traffic** (:class:`~streamtrain.demo.traffic.TrafficGenerator`) at the
   moment the seed history ends, the **observers** (topics and the workers' files into a
   :class:`~streamtrain.demo.observe.Timeline`) and the **dashboard**;
5. runs the day, then drains (until every produced id was trained, or
   ``drain_timeout_s``: :mod:`streamtrain.demo.phases`; a drain that timed out prints
   what is left, :func:`~streamtrain.demo.observe.stall_lines`), and returns the summary
   (:func:`~streamtrain.demo.run_report.run_summary`).

Everything started is stopped on the way out, also on Ctrl-C or an error: workers with
SIGTERM (they commit what they acknowledged), then the control app. Every child gets
``PR_SET_PDEATHSIG``, so none outlives a demo killed outright. Subprocesses learn the
Kafka connection from ``STREAMTRAIN_*`` environment variables, never the command line.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable
from typing import Any

from streamtrain.config import KafkaSettings
from streamtrain.demo.dashboard import Dashboard
from streamtrain.demo.lighthouse import start_lighthouse
from streamtrain.demo.observe import TopicFeeds, stall_lines
from streamtrain.demo.phases import Phase
from streamtrain.demo.run_report import dashboard_state, progress, run_summary
from streamtrain.demo.run_state import DemoRun
from streamtrain.demo.settings import DemoSettings
from streamtrain.demo.traffic import TrafficGenerator
from streamtrain.demo.worker_args import FAST_GROUP_CONFIG, states_topic
from streamtrain.executors import ApplierSettings, CommandApplier
from streamtrain.executors.consumer import CommandConsumer, ConsumerSettings
from streamtrain.executors.readiness import Readiness
from streamtrain.executors.shard_release import ShardRelease

__all__ = ["run_demo"]


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
    demo = DemoRun(kafka, settings, echo)
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
            functools.partial(dashboard_state, demo),
            demo.burst,
            host=settings.dashboard_host,
            port=settings.dashboard_port,
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
        return run_summary(demo, ended)
    raise AssertionError("unreachable")  # the with block returns or raises


def _drive(demo: DemoRun, stop: threading.Event) -> float:
    """The main loop: observe, supervise, report progress; the day, then the drain
    (:class:`~streamtrain.demo.phases.DayPhases` says when it is over)."""
    s = demo.settings
    phases = demo.phases
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
            demo.echo(progress(demo, now))
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
