"""The Faust lag app: ticks the :class:`~streamtrain.lag.monitor.LagMonitor`, publishes.

Owned here, and only the wiring:

* a leader-only timer (every ``tick_s``) runs one monitor tick and publishes one
  ``LagReport`` per group (key: the group) to the reports topic and every alert to the
  alerts topic, to the log, and to an optional webhook (JSON POST). A send that does
  not finish within the request timeout (broker gone) is kept in a bounded outbox and
  retried on the next tick; reports are snapshots, so an undeliverable one is dropped
  and counted, alerts are not dropped until the outbox overflows.
* history that survives a restart: every ``history_step_s`` the tick's HWM snapshots and
  group summaries go through an internal topic to an agent that keeps them in two
  tables with changelogs (``hwm_history``: ``topic|step``, ``lag_history``:
  ``group|step``), pruned past ``history_max_age_s``. After table recovery the first
  tick feeds ``hwm_history`` back into the monitor, so lag seconds and CPS continue
  where the previous run stopped.
* HTTP on ``web_host:web_port`` (127.0.0.1 by default): ``/metrics`` (Prometheus text),
  ``/groups`` (JSON summary), ``/groups/{group}/lag`` (the ``lag status --json`` object
  plus status, p99, CPS and the per-step history), ``/health``.
* optionally (``settings.planner``, :mod:`streamtrain.scale.planner`): an agent takes
  ``ThroughputSample`` messages from the samples topic (decoded with
  :mod:`streamtrain.wire`; an undecodable one is logged and counted), and a leader-only
  timer (every ``tick_s``) hands them and the group's newest lag to the planner in a
  thread (a policy may fit a forecaster) and publishes its ``ScaleCommand`` (key: the
  job) to the commands topic and its alerts (``CANNOT_KEEP_UP``) to the alerts topic. A
  command that cannot be sent is kept and re-sent on the next tick. Each complete
  arrival step of the planner goes through the history topic into a third table
  (``arrival_history``: ``group|step``, the newest ``max_history_steps`` kept); after
  recovery the planner starts from it, so a restart does not cost the forecast its days.
  ``/planner`` shows the planner's state (the throughput model's source among it).
  Without a planner the app is exactly the lag app.

:func:`create_app` builds the app; ``streamtrain lag run`` runs it with a Faust worker.
Faust is imported here only, so the rest of ``streamtrain.lag`` works without it.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import math
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from streamtrain.config import KafkaSettings
from streamtrain.errors import ConfigError, SchemaError
from streamtrain.lag.monitor import GroupPoint, HwmPoint, LagMonitor, MonitorSettings, Tick
from streamtrain.lag.offsets import OffsetsReader
from streamtrain.lag.prometheus import LagCollector
from streamtrain.lag.report import group_lag_json, to_proto
from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.scale.planner import LagReading, Planner
from streamtrain.scale.planner_settings import PlannerSettings
from streamtrain.wire import decode, encode

__all__ = ["LagAppSettings", "LagService", "create_app"]

log = logging.getLogger(__name__)

_OUTBOX_LIMIT = 10_000  # alerts kept for re-sending while the broker is away
_COMMAND_OUTBOX_LIMIT = 100  # scale commands kept for re-sending


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
    data_dir: Path | None = None  # Faust's data directory; a fresh temporary one if None
    monitor: MonitorSettings = field(default_factory=MonitorSettings)
    planner: PlannerSettings | None = None
    samples_topic: str = "streamtrain.throughput"
    commands_topic: str = "streamtrain.scale.commands"

    def __post_init__(self) -> None:
        if not 0 < self.web_port < 65536:
            raise ConfigError(f"the web port must be in 1..65535, got {self.web_port}")
        if self.monitor.tick_s <= 0:
            raise ConfigError(f"the tick must be positive, got {self.monitor.tick_s} s")
        if not self.app_id.strip():
            raise ConfigError("the app id must not be empty")

    @property
    def history_topic(self) -> str:
        return f"{self.app_id}-history"


class LagService:
    """What the timer, the agent and the web views share (one per app)."""

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
        self.outbox: collections.deque[pb.Alert] = collections.deque(maxlen=_OUTBOX_LIMIT)
        self.restored = False
        self.dropped_reports = 0
        self.group_history: dict[str, dict[int, dict[str, Any]]] = {}
        self.planner = Planner(settings.planner) if settings.planner is not None else None
        self.planner_status: dict[str, Any] = {}
        self.new_samples: list[pb.ThroughputSample] = []
        self.bad_samples = 0
        self.command_outbox: collections.deque[pb.ScaleCommand] = collections.deque(
            maxlen=_COMMAND_OUTBOX_LIMIT
        )
        self.arrivals_restored = False
        self.arrivals_persisted: int | None = None  # the newest arrival step written

    def plan(
        self, samples: list[pb.ThroughputSample], now_s: float
    ) -> tuple[list[pb.ScaleCommand], list[pb.Alert]]:
        """One planner step (run in a thread): new samples, the group's lag, a decision.
        Returns the commands (with any unsent ones first) and alerts to publish."""
        planner = self.planner
        assert planner is not None  # noqa: S101 - only the planner's timer calls this
        for sample in samples:
            problem = planner.add_sample(sample, now_s)
            if problem is not None:
                log.warning("throughput sample not used: %s", problem)
        lag = self.monitor.latest.get(planner.settings.group)
        if lag is not None:
            planner.observe_lag(
                LagReading(
                    lag.observed_at_s, lag.records_per_s, lag.max_lag_s, lag.total_lag_records
                )
            )
        output = planner.tick(now_s)
        self.planner_status = planner.status() | {"bad_samples": self.bad_samples}
        commands = [*self.command_outbox, *([output.command] if output.command else [])]
        self.command_outbox.clear()
        return commands, list(output.alerts)

    def restore(self, points: Iterable[HwmPoint]) -> None:
        count = self.monitor.restore(points)
        self.restored = True
        log.info("restored %d HWM snapshots from the history table", count)

    def alerts_to_send(self, tick: Tick) -> list[pb.Alert]:
        for alert in tick.alerts:
            level = {pb.Alert.CRITICAL: logging.ERROR, pb.Alert.WARNING: logging.WARNING}
            log.log(level.get(alert.severity, logging.INFO), "alert: %s", alert.message)
        pending = [*self.outbox, *tick.alerts]
        self.outbox.clear()
        return pending

    def group_json(self, group: str) -> dict[str, Any] | None:
        lag = self.monitor.latest.get(group)
        if lag is None:
            return None
        body = group_lag_json(lag, extended=True)
        history = self.group_history.get(group, {})
        body["history"] = [history[step] for step in sorted(history)]
        return body

    def groups_json(self) -> dict[str, Any]:
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


def _credentials(kafka: KafkaSettings) -> Any:
    import faust

    conf = kafka.aiokafka_config()
    if kafka.sasl_mechanism is not None:
        return faust.SASLCredentials(
            username=kafka.sasl_username,
            password=kafka.sasl_password,
            mechanism=kafka.sasl_mechanism.upper(),
            ssl_context=conf.get("ssl_context"),
        )
    if "ssl_context" in conf:
        return faust.SSLCredentials(conf["ssl_context"])
    return None


def create_app(settings: LagAppSettings) -> tuple[Any, LagService]:
    """The Faust app and its service; run it with ``faust.Worker(app).execute_from_...``."""
    import faust
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

    service = LagService(settings)
    monitor_settings = settings.monitor
    data_dir = settings.data_dir or Path(tempfile.mkdtemp(prefix="streamtrain-lag-"))
    brokers = ";".join(f"kafka://{host}:{port}" for host, port in settings.kafka.servers)
    app: Any = faust.App(
        settings.app_id,
        broker=brokers,
        broker_credentials=_credentials(settings.kafka),
        store="memory://",
        datadir=str(data_dir),
        topic_partitions=1,
        web_enabled=True,
        web_host=settings.web_host,
        web_port=settings.web_port,
        web_bind=settings.web_host,
        producer_request_timeout=settings.request_timeout_s,
        broker_session_timeout=10.0,
        broker_heartbeat_interval=1.0,
    )
    history_topic = app.topic(
        settings.history_topic, key_type=str, value_type=str, partitions=1, internal=True
    )
    reports = app.topic(
        settings.reports_topic, key_serializer="raw", value_serializer="raw", partitions=1
    )
    alerts = app.topic(
        settings.alerts_topic, key_serializer="raw", value_serializer="raw", partitions=1
    )
    hwm_table = app.Table("hwm_history", default=None, partitions=1, key_type=str, value_type=str)
    lag_table = app.Table("lag_history", default=None, partitions=1, key_type=str, value_type=str)
    arrival_table = app.Table(
        "arrival_history", default=None, partitions=1, key_type=str, value_type=str
    )
    registry = CollectorRegistry(auto_describe=True)
    registry.register(service.collector)
    step_s = monitor_settings.history_step_s
    max_age_s = monitor_settings.history_max_age_s

    async def keep_history(stream: Any) -> None:
        async for key, value in stream.items():
            kind, _, name_step = key.partition(":")
            if kind == "arr":
                _keep_arrival(arrival_table, name_step, value, service)
                continue
            table = hwm_table if kind == "hwm" else lag_table
            table[name_step] = value
            if kind == "lag":
                point = json.loads(value)
                step = int(point["at_s"] // step_s)
                service.group_history.setdefault(point["group"], {})[step] = point
            oldest = int((time.time() - max_age_s) // step_s)
            for stale in [k for k in table if int(k.rpartition("|")[2]) < oldest]:
                del table[stale]
            for history in service.group_history.values():
                for step in [s for s in history if s < oldest]:
                    del history[step]

    async def tick() -> None:
        if not service.restored:
            if not app.tables.recovery.completed.is_set():
                return  # the history tables are not recovered yet
            service.restore(_hwm_points(hwm_table.items()))
            for key, value in lag_table.items():
                point = json.loads(value)
                group, _, step = key.rpartition("|")
                service.group_history.setdefault(group, {})[int(step)] = point
        result = await service.monitor.tick()
        timeout = settings.request_timeout_s
        sends = [
            reports.send(key=group.encode(), value=to_proto(lag).SerializeToString())
            for group, lag in result.results.items()
        ]
        pending = service.alerts_to_send(result)
        sends += [alerts.send(key=a.group.encode(), value=a.SerializeToString()) for a in pending]
        sends += [
            history_topic.send(key=f"hwm:{p.topic}|{_step(p.at_s, step_s)}", value=_hwm_json(p))
            for p in result.hwm_points
        ]
        sends += [
            history_topic.send(key=f"lag:{p.group}|{_step(p.at_s, step_s)}", value=_group_json(p))
            for p in result.group_points
        ]
        done = await asyncio.gather(
            *(asyncio.wait_for(s, timeout) for s in sends), return_exceptions=True
        )
        failed_alerts = [
            a
            for a, outcome in zip(pending, done[len(result.results) :], strict=False)
            if isinstance(outcome, BaseException)
        ]
        failed_reports = sum(isinstance(o, BaseException) for o in done[: len(result.results)])
        if failed_alerts or failed_reports:
            service.dropped_reports += failed_reports
            service.outbox.extend(failed_alerts)
            log.warning(
                "could not publish %d reports and %d alerts within %.1f s (broker away?); "
                "alerts are kept for the next tick",
                failed_reports,
                len(failed_alerts),
                timeout,
            )
        if settings.webhook_url and result.alerts:
            app.loop.create_task(_post_alerts(settings.webhook_url, result.alerts, timeout))

    async def metrics(web: Any, request: Any) -> Any:
        body = await asyncio.to_thread(generate_latest, registry)
        return web.bytes(body, content_type=CONTENT_TYPE_LATEST.split(";")[0])

    async def groups(web: Any, request: Any) -> Any:
        return web.json(service.groups_json())

    async def group_lag(web: Any, request: Any, group: str) -> Any:
        body = service.group_json(group)
        if body is None:
            return web.json({"error": f"group {group!r} is not watched"}, status=404)
        return web.json(body)

    async def health(web: Any, request: Any) -> Any:
        tick = service.monitor.last_tick
        ok = tick is not None and tick.error is None
        return web.json(
            {
                "ok": ok,
                "last_tick_at_s": tick.observed_at_s if tick else None,
                "error": service.monitor.last_error,
                "restored": service.restored,
                "dropped_reports": service.dropped_reports,
                "pending_alerts": len(service.outbox),
            },
            status=200 if ok else 503,
        )

    # Registered by call rather than by decorator: Faust's decorators are untyped.
    app.agent(history_topic)(keep_history)
    app.timer(monitor_settings.tick_s, on_leader=True)(tick)
    app.page("/metrics")(metrics)
    app.page("/groups")(groups)
    app.page("/groups/{group}/lag")(group_lag)
    app.page("/health")(health)
    if service.planner is not None:
        _add_planner(app, service, alerts, history_topic, arrival_table)
    return app, service


def _keep_arrival(table: Any, group_step: str, value: str, service: LagService) -> None:
    """One persisted arrival step; keeps the newest ``max_history_steps`` of the group."""
    table[group_step] = value
    planner = service.planner
    group, _, step = group_step.rpartition("|")
    if planner is None or group != planner.settings.group:
        return
    oldest = int(step) - planner.settings.max_history_steps
    prefix = group + "|"
    for stale in [k for k in table if k.startswith(prefix) and int(k[len(prefix) :]) <= oldest]:
        del table[stale]


def _add_planner(
    app: Any, service: LagService, alerts: Any, history_topic: Any, arrival_table: Any
) -> None:
    """The samples agent, the planner's leader timer and ``/planner`` (module docstring)."""
    settings = service.settings
    samples = app.topic(
        settings.samples_topic, key_serializer="raw", value_serializer="raw", partitions=None
    )
    commands = app.topic(
        settings.commands_topic, key_serializer="raw", value_serializer="raw", partitions=1
    )

    async def take_samples(stream: Any) -> None:
        async for value in stream:
            try:
                service.new_samples.append(decode(pb.ThroughputSample, value))
            except SchemaError as exc:
                service.bad_samples += 1
                log.warning("dropping an undecodable throughput sample: %s", exc)

    planner = service.planner
    assert planner is not None  # noqa: S101 - only called with a planner
    group = planner.settings.group

    async def plan() -> None:
        if not service.arrivals_restored:
            if not app.tables.recovery.completed.is_set():
                return  # the arrival history is not recovered yet
            prefix = group + "|"
            planner.restore_arrivals(
                {
                    int(k[len(prefix) :]): float(v)
                    for k, v in arrival_table.items()
                    if k.startswith(prefix)
                }
            )
            service.arrivals_persisted = planner.arrivals.last_step
            service.arrivals_restored = True
        batch, service.new_samples = service.new_samples, []
        to_send, new_alerts = await asyncio.to_thread(service.plan, batch, time.time())
        timeout = settings.request_timeout_s
        new_steps = planner.arrivals.steps_after(service.arrivals_persisted)
        if new_steps:
            service.arrivals_persisted = new_steps[-1][0]
        history = [
            history_topic.send(key=f"arr:{group}|{step}", value=repr(rate))
            for step, rate in new_steps
        ]
        sends = [commands.send(key=c.job.encode(), value=encode(c)) for c in to_send]
        sends += [alerts.send(key=a.group.encode(), value=encode(a)) for a in new_alerts]
        done = await asyncio.gather(
            *(asyncio.wait_for(s, timeout) for s in sends), return_exceptions=True
        )
        for command, outcome in zip(to_send, done, strict=False):
            if isinstance(outcome, BaseException):
                log.error("scale command %s not sent (%s); retrying", command.command_id, outcome)
                service.command_outbox.append(command)
            else:
                log.info(
                    "scale command %s sent to %s", command.command_id, commands.get_topic_name()
                )
        failed = [
            a
            for a, outcome in zip(new_alerts, done[len(to_send) :], strict=False)
            if isinstance(outcome, BaseException)
        ]
        service.outbox.extend(failed)
        if history:
            stored = await asyncio.gather(
                *(asyncio.wait_for(h, timeout) for h in history), return_exceptions=True
            )
            lost = sum(isinstance(outcome, BaseException) for outcome in stored)
            if lost:
                log.warning("%d arrival steps not persisted (broker away?)", lost)

    async def planner_page(web: Any, request: Any) -> Any:
        return web.json(service.planner_status or {"note": "the planner has not run yet"})

    app.agent(samples)(take_samples)
    app.timer(settings.monitor.tick_s, on_leader=True)(plan)
    app.page("/planner")(planner_page)


def _step(at_s: float, step_s: float) -> int:
    return math.floor(at_s / step_s)


def _hwm_json(point: HwmPoint) -> str:
    return json.dumps({"topic": point.topic, "at_s": point.at_s, "hwms": list(point.hwms)})


def _group_json(point: GroupPoint) -> str:
    return json.dumps(
        {
            "group": point.group,
            "at_s": point.at_s,
            "total_lag_records": point.total_lag_records,
            "max_lag_s": point.max_lag_s,
            "p99_lag_s": point.p99_lag_s,
            "records_per_s": point.records_per_s,
            "status": point.status,
        }
    )


def _hwm_points(items: Iterable[tuple[str, str]]) -> list[HwmPoint]:
    points = []
    for key, value in items:
        try:
            raw = json.loads(value)
            points.append(HwmPoint(str(raw["topic"]), float(raw["at_s"]), tuple(raw["hwms"])))
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("skipping a malformed history entry %r: %s", key, exc)
    return points


async def _post_alerts(url: str, alerts: Iterable[pb.Alert], timeout_s: float) -> None:
    import aiohttp

    body = {"alerts": [json_format.MessageToDict(a) for a in alerts]}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session,
            session.post(url, json=body) as response,
        ):
            if response.status >= 300:
                log.warning("alert webhook %s answered HTTP %d", url, response.status)
    except (aiohttp.ClientError, TimeoutError) as exc:
        log.warning("alert webhook %s failed: %s", url, exc)
