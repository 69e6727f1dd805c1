"""The cluster allocator (``streamtrain cluster run``): a Faust app that grants the
pool's workers to the jobs that share it.

Owned here, and only the wiring (:func:`create_allocator_app`; the CLI runs it with a
Faust worker, as ``lag run`` does the control app):

* an agent reads ``ScaleRequest`` messages from the requests topic into the
  :class:`~streamtrain.control.allocator_service.AllocatorService` (refusals are logged
  with their reason); every accepted request goes through the internal state topic
  (``<app_id>-state``) into the changelogged ``cluster_requests`` table;
* a leader-only timer (every ``tick_s``): after table recovery it restores the book
  once; when a decision is due it runs one in a worker thread (the MILP must not block
  the event loop), publishes the ``ScaleCommand`` of every job whose count changes to
  the commands topic (key: the job; one at a time, shrinks before grows; a command that
  cannot be sent is kept, with those after it, and re-sent first next tick; executors
  are idempotent on command id), the
  ``AllocationDecision`` with every grant's reason to the decisions topic, and the new
  grants to the ``cluster_grants`` table (through the state topic);
* ``/cluster`` (JSON: the newest decision, the requests, the counters) and ``/health``
  on ``web_host:web_port`` (127.0.0.1 by default).
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

from streamtrain.control.allocator_service import (
    AllocatorService,
    AllocatorSettings,
    request_to_json,
)
from streamtrain.control.faust_app import new_faust_app
from streamtrain.control.publish import publish
from streamtrain.wire import encode

__all__ = ["create_allocator_app"]

log = logging.getLogger(__name__)

_REQUEST, _GRANT = "request|", "grant|"


def create_allocator_app(settings: AllocatorSettings) -> tuple[Any, AllocatorService]:
    """The Faust app and its service (module docstring)."""

    service = AllocatorService(settings)
    data_dir = settings.data_dir or Path(tempfile.mkdtemp(prefix="streamtrain-cluster-"))
    app: Any = new_faust_app(
        settings.app_id,
        settings.kafka,
        data_dir=data_dir,
        web_host=settings.web_host,
        web_port=settings.web_port,
        request_timeout_s=settings.request_timeout_s,
    )
    raw = {"key_serializer": "raw", "value_serializer": "raw"}
    requests = app.topic(settings.requests_topic, partitions=1, **raw)
    commands = app.topic(settings.commands_topic, partitions=1, **raw)
    decisions = app.topic(settings.decisions_topic, partitions=1, **raw)
    state = app.topic(
        settings.state_topic, key_type=str, value_type=str, partitions=1, internal=True
    )
    request_table = app.Table(
        "cluster_requests", default=None, partitions=1, key_type=str, value_type=str
    )
    grant_table = app.Table(
        "cluster_grants", default=None, partitions=1, key_type=str, value_type=str
    )
    timeout = settings.request_timeout_s

    async def take_requests(stream: Any) -> None:
        async for value in stream:
            accepted = service.take(value, time.time())
            if accepted is not None:
                await state.send(key=_REQUEST + accepted.job, value=request_to_json(accepted))

    async def keep_state(stream: Any) -> None:
        async for key, value in stream.items():
            if key.startswith(_REQUEST):
                request_table[key[len(_REQUEST) :]] = value
            elif key.startswith(_GRANT):
                grant_table[key[len(_GRANT) :]] = value
            else:
                log.warning("ignoring an unknown state key %r", key)

    async def tick() -> None:
        if not service.restored:
            if not app.tables.recovery.completed.is_set():
                return
            service.restore(dict(request_table.items()), dict(grant_table.items()))
        now_s = time.time()
        outbox, service.command_outbox = service.command_outbox, []
        decided = None
        if service.due(now_s):
            decided = await asyncio.to_thread(service.decide, now_s)
        to_send = [*outbox, *(decided.commands if decided else ())]
        for index, command in enumerate(to_send):
            # One at a time, in order: the shrinks of a decision reach the topic before
            # its grows (concurrent sends may land in any order).
            sent = await publish(
                [(command, commands.send(key=command.job.encode(), value=encode(command)))],
                timeout,
            )
            if sent.failed:
                log.error(
                    "scale command %s not sent (%s); retrying it and the %d after it",
                    command.command_id,
                    sent.failed[0][1],
                    len(to_send) - index - 1,
                )
                service.command_outbox.extend(to_send[index:])
                break
        if decided is None:
            return
        key = settings.app_id.encode()
        published = await publish(
            [(decided.decision, decisions.send(key=key, value=encode(decided.decision)))],
            timeout,
        )
        if published.failed:
            log.warning("decision %s not published (broker away?)", decided.decision.decision_id)
        stored = await publish(
            [(j, state.send(key=_GRANT + j, value=v)) for j, v in decided.grants], timeout
        )
        if stored.failed:
            log.warning("%d grants not persisted (broker away?)", len(stored.failed))

    async def cluster_page(web: Any, request: Any) -> Any:
        return web.json(service.status_json())

    async def health(web: Any, request: Any) -> Any:
        ok = service.restored
        return web.json({"ok": ok, "restored": service.restored}, status=200 if ok else 503)

    # Registered by call rather than by decorator: Faust's decorators are untyped.
    app.agent(requests)(take_requests)
    app.agent(state)(keep_state)
    app.timer(settings.tick_s, on_leader=True)(tick)
    app.page("/cluster")(cluster_page)
    app.page("/health")(health)
    return app, service
