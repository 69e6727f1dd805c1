"""The Faust control app (``streamtrain lag run``): ticks the lag monitor, publishes.

Owned here, and only the wiring (:func:`create_app`; ``streamtrain lag run`` runs it with
a Faust worker):

* the Faust app, its topics and the three history tables (``hwm_history``,
  ``lag_history``, ``arrival_history``: in-memory stores with changelogs);
* a leader-only timer (every ``tick_s``) that runs one monitor tick and publishes its
  reports and alerts (:func:`_tick`);
* history that survives a restart: the tick's HWM snapshots and group summaries kept
  in the tables and fed back into the monitor after table recovery, so lag seconds and
  CPS continue where the previous run stopped;
* the HTTP pages (:mod:`streamtrain.control.web`) on ``web_host:web_port`` (127.0.0.1 by
  default): ``/metrics``, ``/groups``, ``/groups/{group}/lag``, ``/health``;
* optionally (``settings.planner``) the planner (:mod:`streamtrain.control.planner_agent`,
  its series on ``/metrics``: :mod:`streamtrain.control.planner_metrics`); without a
  planner the app only watches lag;
* optionally (``settings.shards``) the shard coordinator of ``--assignment shards``
  (:mod:`streamtrain.control.shard_agent`): offset-range shards cut, leased, committed;
  ``/shards``.

The state the pieces share is a :class:`~streamtrain.control.service.LagService`. Faust is
imported here only (and by the modules this one wires), so the rest of
``streamtrain.lag`` works without it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from streamtrain.control.faust_app import new_faust_app
from streamtrain.control.planner_agent import (
    PlannerAgent,
    add_planner,
    forecast_pool,
    stop_forecast_pool,
)
from streamtrain.control.planner_metrics import PlannerCollector
from streamtrain.control.publish import publish
from streamtrain.control.service import LagAppSettings, LagService
from streamtrain.control.web import add_pages
from streamtrain.lag.history_tables import HistoryTables, hwm_message, lag_message
from streamtrain.lag.report import to_proto
from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.scale.planner import Planner

__all__ = ["create_app"]

log = logging.getLogger(__name__)


def create_app(settings: LagAppSettings) -> tuple[Any, LagService]:
    """The Faust app and its service; run it with ``faust.Worker(app).execute_from_...``."""

    service = LagService(settings)
    monitor_settings = settings.monitor
    data_dir = settings.data_dir or Path(tempfile.mkdtemp(prefix="streamtrain-lag-"))
    app: Any = new_faust_app(
        settings.app_id,
        settings.kafka,
        data_dir=data_dir,
        web_host=settings.web_host,
        web_port=settings.web_port,
        request_timeout_s=settings.request_timeout_s,
        faust_pages=settings.faust_pages,
        session_timeout_s=settings.session_timeout_s,
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

    def table(name: str) -> Any:
        return app.Table(name, default=None, partitions=1, key_type=str, value_type=str)

    planner = settings.planner
    history = HistoryTables(
        table("hwm_history"),
        table("lag_history"),
        table("arrival_history"),
        step_s=monitor_settings.history_step_s,
        max_age_s=monitor_settings.history_max_age_s,
        planner_group=planner.group if planner else None,
        max_arrival_steps=planner.max_history_steps if planner else 0,
    )

    async def keep_history(stream: Any) -> None:
        async for key, value in stream.items():
            history.keep(key, value, time.time())

    async def tick() -> None:
        if not service.restored:
            if not app.tables.recovery.completed.is_set():
                return  # the history tables are not recovered yet
            # lag seconds and CPS continue where the previous run stopped
            service.restore(history.hwm_points())
            history.restore_group_history()
        await _tick(service, app, reports, alerts, history_topic)

    # Registered by call rather than by decorator: Faust's decorators are untyped.
    app.agent(history_topic)(keep_history)
    app.timer(monitor_settings.tick_s, on_leader=True)(tick)
    add_pages(app, service, history)
    if planner is not None:
        if planner.forecaster_dir is None:  # fitted models live next to the app's state
            forecasts = data_dir / "forecaster" / planner.job
            planner = dataclasses.replace(planner, forecaster_dir=forecasts)
        pool, submit = forecast_pool()
        agent = PlannerAgent(Planner(planner, fit_submit=submit), settings.heartbeat_interval_s)
        add_planner(app, service, agent, alerts, history_topic, history)
        service.extra_collectors.append(PlannerCollector(agent))
        app.on_before_shutdown.connect(lambda *_args, **_kw: stop_forecast_pool(pool))
    if settings.shards is not None:
        from streamtrain.control.shard_agent import add_shards

        add_shards(app, settings)
    return app, service


async def _tick(
    service: LagService, app: Any, reports: Any, alerts: Any, history_topic: Any
) -> None:
    """One monitor tick and everything it publishes.

    One ``LagReport`` per group (key: the group) to the reports topic and every alert to
    the alerts topic, to the log, and to an optional webhook (JSON POST). A send that
    does not finish within the request timeout (broker gone) fails
    (:func:`~streamtrain.control.publish.publish`); reports are snapshots, so an
    undeliverable one is dropped and counted, alerts go to the service's bounded outbox
    and are re-sent on the next tick. Every ``history_step_s`` the tick's HWM snapshots
    and group summaries go through an internal topic (``<app_id>-history``) to an agent
    that keeps them in the tables (:mod:`streamtrain.lag.history_tables`, keys in
    :mod:`streamtrain.lag.history_keys`), pruned past ``history_max_age_s``.
    """
    settings = service.settings
    result = await service.monitor.tick()
    timeout, step_s = settings.request_timeout_s, settings.monitor.history_step_s
    pending = service.alerts_to_send(result)
    history = [hwm_message(p, step_s) for p in result.hwm_points]
    history += [lag_message(p, step_s) for p in result.group_points]
    sent, alerted, _ = await asyncio.gather(
        publish(
            [
                (group, reports.send(key=group.encode(), value=to_proto(lag).SerializeToString()))
                for group, lag in result.results.items()
            ],
            timeout,
        ),
        publish(
            [(a, alerts.send(key=a.group.encode(), value=a.SerializeToString())) for a in pending],
            timeout,
        ),
        publish([(k, history_topic.send(key=k, value=v)) for k, v in history], timeout),
    )
    failed_alerts = alerted.failed_items
    if failed_alerts or sent.failed:
        service.dropped_reports += len(sent.failed)
        service.outbox.extend(failed_alerts)
        log.warning(
            "could not publish %d reports and %d alerts within %.1f s (broker away?); "
            "alerts are kept for the next tick",
            len(sent.failed),
            len(failed_alerts),
            timeout,
        )
    if settings.webhook_url and result.alerts:
        app.loop.create_task(_post_alerts(settings.webhook_url, result.alerts, timeout))


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
