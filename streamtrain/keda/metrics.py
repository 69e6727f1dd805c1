"""Prometheus metrics of the KEDA scaler, built at scrape time (no gauges to keep in sync).

Owned here: :class:`ScalerCollector`. The job is the label ``streamtrain_job`` (a label
named ``job`` would clash with the one Prometheus gives every target). Unknown values are
left out, never exported as 0.

Series: ``streamtrain_keda_ready`` (1 once the topics were read up to date and while
no job's plan is stale; 0 says KEDA gets errors for some job),
``streamtrain_keda_planned_workers{streamtrain_job,source}`` (what KEDA is told),
``streamtrain_keda_reported_workers{streamtrain_job}`` (the workers the job has),
``streamtrain_keda_plan_age_seconds{streamtrain_job}`` (since the planner was last heard:
its newest heartbeat or command), ``streamtrain_keda_plan_stale{streamtrain_job}`` (1
past ``--max-plan-age-s``: GetMetrics answers UNAVAILABLE),
``streamtrain_keda_requests_total{method,code}``, ``streamtrain_keda_open_streams``,
``streamtrain_keda_messages_read_total{topic}``,
``streamtrain_keda_undecodable_messages_total{topic}``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from streamtrain.keda.feed import PlanFeed
    from streamtrain.keda.service import ScalerService

__all__ = ["ScalerCollector"]

_JOB = ["streamtrain_job"]


class ScalerCollector(Collector):
    def __init__(
        self, service: ScalerService, feed: PlanFeed, clock: Callable[[], float] = time.time
    ) -> None:
        self.service = service
        self.feed = feed
        self.clock = clock

    def describe(self) -> Iterator[Metric]:
        return iter(())

    def collect(self) -> Iterator[Metric]:
        now_s = self.clock()
        plans = self.service.book.snapshot(now_s)
        ready = GaugeMetricFamily(
            "streamtrain_keda_ready",
            "1 once the plans are read up to date and while no job's plan is stale.",
        )
        fresh = not any(plan.stale for plan in plans.values())
        ready.add_metric([], 1.0 if self.feed.ready and fresh else 0.0)
        stale = GaugeMetricFamily(
            "streamtrain_keda_plan_stale",
            "1 while the job's planner has not been heard for --max-plan-age-s.",
            labels=_JOB,
        )
        planned = GaugeMetricFamily(
            "streamtrain_keda_planned_workers",
            "The planned worker count KEDA is given (source: command or pool_size).",
            labels=[*_JOB, "source"],
        )
        reported = GaugeMetricFamily(
            "streamtrain_keda_reported_workers",
            "The pool size the job's workers report in their throughput samples.",
            labels=_JOB,
        )
        age = GaugeMetricFamily(
            "streamtrain_keda_plan_age_seconds",
            "Seconds since the job's planner was last heard (heartbeat or ScaleCommand).",
            labels=_JOB,
        )
        for job, plan in sorted(plans.items()):
            stale.add_metric([job], 1.0 if plan.stale else 0.0)
            if plan.planned_workers is not None:
                planned.add_metric([job, plan.source], plan.planned_workers)
            if plan.reported_workers is not None:
                reported.add_metric([job], plan.reported_workers)
            if plan.age_s is not None:
                age.add_metric([job], plan.age_s)
        yield from (ready, planned, reported, age, stale)
        requests = CounterMetricFamily(
            "streamtrain_keda_requests",
            "KEDA's calls by method and gRPC code.",
            labels=["method", "code"],
        )
        # dict() copies in one step (the loop's thread keeps counting meanwhile)
        for (method, code), count in sorted(dict(self.service.requests).items()):
            requests.add_metric([method, code], count)
        streams = GaugeMetricFamily("streamtrain_keda_open_streams", "Open StreamIsActive streams.")
        streams.add_metric([], self.service.open_streams)
        read = CounterMetricFamily(
            "streamtrain_keda_messages_read", "Messages read from the topics.", labels=["topic"]
        )
        bad = CounterMetricFamily(
            "streamtrain_keda_undecodable_messages",
            "Messages skipped because they did not decode.",
            labels=["topic"],
        )
        messages, undecodable = dict(self.feed.messages), dict(self.feed.undecodable)
        for topic in sorted({*messages, *undecodable}):
            read.add_metric([topic], messages.get(topic, 0))
            bad.add_metric([topic], undecodable.get(topic, 0))
        yield from (requests, streams, read, bad)
