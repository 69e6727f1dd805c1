"""The control app's settings and the state its timer, agents and web pages share.

Owned here (no Faust: :mod:`streamtrain.control.app` wires this to one):

* :class:`LagAppSettings`: what ``streamtrain lag run`` configures (Kafka, the watched
  groups and topics, the app id and topic names, the web address, the webhook, the
  request timeout, the monitor's settings, the planner's when ``--plan-job`` is set, and
  the shard coordinator's when ``--shards-job`` is set).
* :class:`LagService`: the :class:`~streamtrain.lag.monitor.LagMonitor` (over an
  :class:`~streamtrain.lag.offsets.OffsetsReader`) and its Prometheus collector (plus
  ``extra_collectors``, e.g. the planner's, served on the same ``/metrics``); the
  bounded outbox of alerts not yet delivered (re-sent on the next tick; the oldest are
  dropped past ``ALERT_OUTBOX_LIMIT``) and the count of dropped reports; and the JSON
  bodies of ``/groups`` and ``/groups/{group}/lag``.
"""

from __future__ import annotations

import collections
import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.registry import Collector

from streamtrain.config import KafkaSettings
from streamtrain.control.shard_coordinator import ShardJobSettings
from streamtrain.errors import ConfigError
from streamtrain.lag.monitor import HwmPoint, LagMonitor, MonitorSettings, Tick
from streamtrain.lag.offsets import OffsetsReader
from streamtrain.lag.prometheus import LagCollector
from streamtrain.lag.report import group_lag_json
from streamtrain.ports import check_trusted_bind
from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.scale.planner_settings import PlannerSettings

__all__ = ["ALERT_OUTBOX_LIMIT", "LagAppSettings", "LagService", "check_web_host"]

log = logging.getLogger(__name__)

ALERT_OUTBOX_LIMIT = 10_000  # alerts kept for re-sending while the broker is away
_LOG_LEVEL = {pb.Alert.CRITICAL: logging.ERROR, pb.Alert.WARNING: logging.WARNING}


@dataclass(frozen=True, slots=True)
class LagAppSettings:
    kafka: KafkaSettings
    groups: tuple[str, ...] = ()
    group_pattern: str | None = None
    topics: tuple[str, ...] = ()
    app_id: str = "streamtrain-lag"
    reports_topic: str = "streamtrain.lag.reports"
    alerts_topic: str = "streamtrain.lag.alerts"
    web_host: str = "127.0.0.1"
    web_port: int = 6066
    webhook_url: str | None = None
    request_timeout_s: float = 5.0
    # Faust's consumer-group session (faust_app.py); a join on Tansu waits about half of it
    session_timeout_s: float = 10.0
    data_dir: Path | None = None  # Faust's data directory; a fresh temporary one if None
    monitor: MonitorSettings = field(default_factory=MonitorSettings)
    planner: PlannerSettings | None = None
    samples_topic: str = "streamtrain.throughput"
    commands_topic: str = "streamtrain.scale.commands"
    # With a cluster allocator, the planner's decisions go to this topic as
    # ScaleRequests (streamtrain.control.request_route) instead of ScaleCommands.
    requests_topic: str | None = None
    job_class: str = "guarantee"
    shards: ShardJobSettings | None = None  # --shards-job: cut the job's topics into shards
    # The planner's heartbeat (its plan, whether or not it changed) for readers of the
    # plan such as the KEDA scaler; None: none sent.
    heartbeats_topic: str | None = "streamtrain.scale.heartbeats"
    heartbeat_interval_s: float = 15.0
    # The pages have no authentication: beyond loopback only on a network said to be
    # trusted; Faust's own /table and /router pages (table contents, the cluster's
    # topology) only when asked for.
    trusted_network: bool = False
    faust_pages: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.web_port < 65536:
            raise ConfigError(f"the web port must be in 1..65535, got {self.web_port}")
        check_web_host(self.web_host, trusted_network=self.trusted_network)
        if not (math.isfinite(self.heartbeat_interval_s) and self.heartbeat_interval_s > 0):
            raise ConfigError(
                f"the heartbeat interval must be positive, got {self.heartbeat_interval_s} s"
            )
        if self.monitor.tick_s <= 0:
            raise ConfigError(f"the tick must be positive, got {self.monitor.tick_s} s")
        if not self.app_id.strip():
            raise ConfigError("the app id must not be empty")

    @property
    def history_topic(self) -> str:
        return f"{self.app_id}-history"


def check_web_host(host: str, *, trusted_network: bool) -> None:
    """A control app's pages answer anyone who reaches them (no authentication): bind
    beyond loopback only when the user says the network is trusted."""
    check_trusted_bind(
        host, trusted_network=trusted_network, what="the control app's pages", flag="--web-host"
    )


class LagService:
    """What the timer, the agents and the web views share (one per app)."""

    def __init__(self, settings: LagAppSettings) -> None:
        self.settings = settings
        reader = OffsetsReader(
            settings.kafka,
            groups=settings.groups,
            group_pattern=settings.group_pattern,
            topics=settings.topics,
            request_timeout_s=settings.request_timeout_s,
        )
        self.monitor = LagMonitor(reader, settings.monitor)
        self.collector = LagCollector(self.monitor)
        self.extra_collectors: list[Collector] = []  # served on /metrics too (the planner's)
        self.outbox: collections.deque[pb.Alert] = collections.deque(maxlen=ALERT_OUTBOX_LIMIT)
        self.restored = False
        self.dropped_reports = 0

    def restore(self, points: Iterable[HwmPoint]) -> None:
        count = self.monitor.restore(points)
        self.restored = True
        log.info("restored %d HWM snapshots from the history table", count)

    def alerts_to_send(self, tick: Tick) -> list[pb.Alert]:
        """The tick's alerts (logged) after any still in the outbox, which is emptied."""
        for alert in tick.alerts:
            log.log(_LOG_LEVEL.get(alert.severity, logging.INFO), "alert: %s", alert.message)
        pending = [*self.outbox, *tick.alerts]
        self.outbox.clear()
        return pending

    def group_json(
        self, group: str, history: Mapping[int, dict[str, Any]]
    ) -> dict[str, Any] | None:
        """``/groups/{group}/lag``: the group's newest lag and its ``history`` steps."""
        lag = self.monitor.latest.get(group)
        if lag is None:
            return None
        body = group_lag_json(lag, extended=True)
        body["history"] = [history[step] for step in sorted(history)]
        return body

    def groups_json(self) -> dict[str, Any]:
        """``/groups``: every watched group without its partitions."""
        tick = self.monitor.last_tick
        return {
            "groups": [
                {k: v for k, v in group_lag_json(lag, extended=True).items() if k != "partitions"}
                | {"partition_count": len(lag.rows())}
                for _, lag in sorted(self.monitor.latest.items())
            ],
            "missing_topics": list(tick.missing_topics) if tick else [],
            "error": self.monitor.last_error,
        }

    def health_json(self) -> tuple[dict[str, Any], bool]:
        """``/health``: the body, and whether the last tick succeeded."""
        tick = self.monitor.last_tick
        ok = tick is not None and tick.error is None
        body = {
            "ok": ok,
            "last_tick_at_s": tick.observed_at_s if tick else None,
            "error": self.monitor.last_error,
            "restored": self.restored,
            "dropped_reports": self.dropped_reports,
            "pending_alerts": len(self.outbox),
        }
        return body, ok
