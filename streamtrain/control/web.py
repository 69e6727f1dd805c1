"""The control app's HTTP pages, registered on its Faust web server.

Owned here: ``/metrics`` (the Prometheus text of the service's collector, rendered in a
thread), ``/groups`` (JSON summary of every watched group), ``/groups/{group}/lag`` (the
``lag status --json`` object plus status, p99, CPS and the per-step history; 404 for a
group not watched) and ``/health`` (503 until a tick succeeds). The bodies come from
:class:`~streamtrain.control.service.LagService`; the planner's ``/planner`` page is
registered by :mod:`streamtrain.control.planner_agent`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from streamtrain.control.service import LagService
from streamtrain.lag.history_tables import HistoryTables

__all__ = ["add_pages"]


class _Extra(Collector):
    """The service's extra collectors, as the list is when scraped (added after start-up)."""

    def __init__(self, service: LagService) -> None:
        self.service = service

    def describe(self) -> Iterator[Metric]:
        return iter(())

    def collect(self) -> Iterator[Metric]:
        for collector in list(self.service.extra_collectors):
            yield from collector.collect()


def add_pages(app: Any, service: LagService, history: HistoryTables) -> None:
    """Register the pages (module docstring) on the Faust ``app``."""
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=True)
    registry.register(service.collector)
    registry.register(_Extra(service))

    async def metrics(web: Any, request: Any) -> Any:
        body = await asyncio.to_thread(generate_latest, registry)
        return web.bytes(body, content_type=CONTENT_TYPE_LATEST.split(";")[0])

    async def groups(web: Any, request: Any) -> Any:
        return web.json(service.groups_json())

    async def group_lag(web: Any, request: Any, group: str) -> Any:
        body = service.group_json(group, history.group_history.get(group, {}))
        if body is None:
            return web.json({"error": f"group {group!r} is not watched"}, status=404)
        return web.json(body)

    async def health(web: Any, request: Any) -> Any:
        body, ok = service.health_json()
        return web.json(body, status=200 if ok else 503)

    # Registered by call rather than by decorator: Faust's decorators are untyped.
    app.page("/metrics")(metrics)
    app.page("/groups")(groups)
    app.page("/groups/{group}/lag")(group_lag)
    app.page("/health")(health)
