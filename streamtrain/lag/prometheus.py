"""Prometheus metrics of the control app, built at scrape time from the monitor's last tick.

Owned here: :class:`LagCollector`, a custom collector (no gauge objects to keep in sync,
no stale series for a deleted topic or a group no longer watched). Unknown values are
left out, never exported as 0 or NaN. Statuses are exported as their severity code
(0 OK, 1 UNKNOWN, 2 WARN, 3 STALL, 4 STOP, 5 REWIND: ``streamtrain.lag.Status``).

Series (labels in braces):

* ``streamtrain_lag_records{group,topic,partition}``, ``streamtrain_lag_seconds{...}``,
  ``streamtrain_lag_records_per_second{...}`` (CPS), ``streamtrain_lag_partition_status{...}``
* ``streamtrain_lag_group_records{group}``, ``streamtrain_lag_group_max_seconds{group}``,
  ``streamtrain_lag_group_p99_seconds{group}``, ``streamtrain_lag_group_records_per_second{group}``,
  ``streamtrain_lag_group_status{group}``
* ``streamtrain_lag_topic_records{group,topic}``,
  ``streamtrain_lag_topic_max_seconds{group,topic}``
* ``streamtrain_lag_slo_violation_seconds`` (the SLO threshold: lag above it violates),
* ``streamtrain_lag_up`` (1 when the last tick reached the broker),
  ``streamtrain_lag_fetch_seconds``, ``streamtrain_lag_compute_seconds`` (last tick)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from streamtrain.units import ms_to_s

if TYPE_CHECKING:
    from streamtrain.lag.monitor import LagMonitor

__all__ = ["LagCollector"]

_PARTITION = ["group", "topic", "partition"]
_TOPIC = ["group", "topic"]
_GROUP = ["group"]


class LagCollector(Collector):
    def __init__(self, monitor: LagMonitor) -> None:
        self.monitor = monitor

    def describe(self) -> Iterator[Metric]:
        return iter(())  # the series depend on what is watched: describe nothing up front

    def collect(self) -> Iterator[Metric]:
        latest = self.monitor.latest  # replaced whole each tick: a consistent view
        tick = self.monitor.last_tick
        lag_records = GaugeMetricFamily(
            "streamtrain_lag_records", "Records the group still has to read.", labels=_PARTITION
        )
        lag_seconds = GaugeMetricFamily(
            "streamtrain_lag_seconds",
            "Age of the oldest record the group still has to read (KALE lag).",
            labels=_PARTITION,
        )
        rates = GaugeMetricFamily(
            "streamtrain_lag_records_per_second",
            "Records per second arriving on the partition (CPS).",
            labels=_PARTITION,
        )
        status = GaugeMetricFamily(
            "streamtrain_lag_partition_status",
            "Burrow-style status: 0 OK, 1 UNKNOWN, 2 WARN, 3 STALL, 4 STOP, 5 REWIND.",
            labels=_PARTITION,
        )
        group_records = GaugeMetricFamily(
            "streamtrain_lag_group_records", "Total lag of the group.", labels=_GROUP
        )
        group_max = GaugeMetricFamily(
            "streamtrain_lag_group_max_seconds",
            "Max lag seconds over partitions.",
            labels=_GROUP,
        )
        group_p99 = GaugeMetricFamily(
            "streamtrain_lag_group_p99_seconds",
            "p99 lag seconds over partitions.",
            labels=_GROUP,
        )
        group_rate = GaugeMetricFamily(
            "streamtrain_lag_group_records_per_second",
            "CPS of the group's topics.",
            labels=_GROUP,
        )
        group_status = GaugeMetricFamily(
            "streamtrain_lag_group_status", "Worst partition status of the group.", labels=_GROUP
        )
        topic_records = GaugeMetricFamily(
            "streamtrain_lag_topic_records",
            "Lag of the group on one topic.",
            labels=_TOPIC,
        )
        topic_max = GaugeMetricFamily(
            "streamtrain_lag_topic_max_seconds",
            "Max lag seconds of the group on one topic.",
            labels=_TOPIC,
        )
        for group, lag in sorted(latest.items()):
            for topic, partition, _, _, records, seconds, rate, code in lag.rows():
                labels = [group, topic, str(partition)]
                if records is not None:
                    lag_records.add_metric(labels, records)
                if seconds is not None:
                    lag_seconds.add_metric(labels, seconds)
                if rate is not None:
                    rates.add_metric(labels, rate)
                status.add_metric(labels, int(code))
            group_records.add_metric([group], lag.total_lag_records)
            if lag.max_lag_s is not None:
                group_max.add_metric([group], lag.max_lag_s)
            if lag.p99_lag_s is not None:
                group_p99.add_metric([group], lag.p99_lag_s)
            if lag.records_per_s is not None:
                group_rate.add_metric([group], lag.records_per_s)
            group_status.add_metric([group], int(lag.status))
            for topic_lag in lag.topics:
                topic_records.add_metric([group, topic_lag.topic], topic_lag.total_lag_records)
                if topic_lag.max_lag_s is not None:
                    topic_max.add_metric([group, topic_lag.topic], topic_lag.max_lag_s)
        yield from (lag_records, lag_seconds, rates, status)
        yield from (group_records, group_max, group_p99, group_rate, group_status)
        yield from (topic_records, topic_max)
        slo = GaugeMetricFamily(
            "streamtrain_lag_slo_violation_seconds",
            "The SLO: lag seconds above this are a violation (KALE: 20 min).",
        )
        slo.add_metric([], self.monitor.settings.slo.violation_s)
        yield slo
        up = GaugeMetricFamily("streamtrain_lag_up", "1 when the last tick reached the broker.")
        up.add_metric([], 1.0 if tick is not None and tick.error is None else 0.0)
        yield up
        if tick is not None:
            fetch = GaugeMetricFamily("streamtrain_lag_fetch_seconds", "Last tick's fetch time.")
            fetch.add_metric([], ms_to_s(tick.fetch_ms))
            compute = GaugeMetricFamily(
                "streamtrain_lag_compute_seconds", "Last tick's compute time."
            )
            compute.add_metric([], ms_to_s(tick.compute_ms))
            yield from (fetch, compute)
