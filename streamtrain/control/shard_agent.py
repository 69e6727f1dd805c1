"""The shard coordinator in the Faust control app: agent, changelogged table, timer.

Owned here: :func:`add_shards`, the wiring of
:class:`~streamtrain.control.shard_coordinator.ShardCoordinator` and
:class:`~streamtrain.control.shard_offsets.ShardOffsets` (``streamtrain lag run
--shards-job J``):

* an agent on ``<job>.shards`` applies each worker's ``ShardUpdate`` to the book and
  answers with a ``ShardGrant`` on ``<job>.shard-grants`` (key = worker id);
* a leader-only timer every ``tick_s`` reads the job's offsets (in a thread), cuts what
  arrived into shards, requeues silent holders' shards, grants the new shards to the
  workers whose request found nothing, and every ``commit_interval_s`` commits each
  partition's done prefix under the job's group id. Both run on the event loop and
  change the book without awaiting in between, so they never interleave. A tick whose
  offsets could not be read (the broker is away, the job's topic does not exist yet)
  is skipped with a warning (at most one every ``_WARN_EVERY_S``) and tried again;
* after every change the partitions that changed are written to the ``shards`` table
  (JSON per partition, changelogged; ``use_partitioner`` so the timer may write it), so
  the book survives a restart: once the table is recovered the book is restored from
  it (:meth:`~streamtrain.shards.book.ShardBook.restore`, which validates each value,
  with its grace for lost grants). A value holds a partition's leases and done ranges,
  not its backlog: a few hundred bytes, far below the broker's message size limit.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from streamtrain import wire
from streamtrain.control.service import LagAppSettings
from streamtrain.control.shard_coordinator import ShardCoordinator
from streamtrain.control.shard_offsets import ShardOffsets
from streamtrain.errors import KafkaError

__all__ = ["add_shards"]

log = logging.getLogger(__name__)

_WARN_EVERY_S = 30.0  # the same shard warning at most this often


def add_shards(app: Any, settings: LagAppSettings) -> ShardCoordinator:
    """Add the shard coordinator of ``settings.shards`` to ``app`` (module docstring)."""
    job = settings.shards
    assert job is not None  # noqa: S101 - the caller checks
    coordinator = ShardCoordinator(job)
    offsets = ShardOffsets(settings.kafka, job, settings.request_timeout_s)
    io = ThreadPoolExecutor(1, thread_name_prefix="streamtrain-shards-io")
    # use_partitioner: the timer writes it too, outside any stream (one partition anyway)
    table = app.Table(
        "shards",
        default=None,
        partitions=1,
        key_type=str,
        value_type=str,
        use_partitioner=True,
    )
    updates = app.topic(
        job.updates_topic, key_serializer="raw", value_serializer="raw", partitions=1
    )
    grants = app.topic(job.grants_topic, key_serializer="raw", value_serializer="raw", partitions=1)
    next_commit = [0.0]
    warned_at: dict[str, float] = {}

    def warn(what: str) -> None:
        now = time.monotonic()
        if now - warned_at.get(what, float("-inf")) >= _WARN_EVERY_S:
            warned_at[what] = now
            log.warning("shards of job %s: %s", job.job, what)

    def restore(now_s: float) -> None:
        entries = []
        for value in list(table.values()):
            try:
                entries.append(json.loads(value))
            except (TypeError, ValueError):
                log.warning("skipping an unreadable shard table entry: %r", value)
        count = coordinator.restore(entries, now_s)
        log.info("shard book of job %s restored: %d partition(s)", job.job, count)

    async def persist_and_send(answers: list[Any]) -> None:
        for table_key, snapshot in coordinator.book.take_dirty().items():
            table[table_key] = json.dumps(snapshot, separators=(",", ":"))
        for answer in answers:
            await grants.send(key=answer.worker_id.encode(), value=wire.encode(answer))

    async def on_update(stream: Any) -> None:
        async for value in stream:
            now_s = time.time()
            if not coordinator.restored:
                restore(now_s)
            grant = coordinator.handle(value or b"", now_s)
            await persist_and_send([] if grant is None else [grant])

    async def tick() -> None:
        if not app.tables.recovery.completed.is_set():
            return
        loop = asyncio.get_running_loop()
        try:
            highs, starts = await loop.run_in_executor(io, offsets.read)
        except KafkaError as exc:
            warn(f"{exc} (tried again every tick)")
            return
        now_s = time.time()
        if not coordinator.restored:
            restore(now_s)
        await persist_and_send(coordinator.tick(highs, dict(starts), now_s))
        if time.monotonic() >= next_commit[0]:
            next_commit[0] = time.monotonic() + job.commit_interval_s
            positions = coordinator.book.committable()
            if positions:
                try:
                    await loop.run_in_executor(io, offsets.commit, positions)
                except KafkaError as exc:
                    warn(f"{exc} (retried next time)")
                    return
                coordinator.book.mark_committed(positions)

    async def state(web: Any, request: Any) -> Any:
        return web.json(coordinator.state_json(time.time()))

    app.agent(updates)(on_update)
    app.timer(job.tick_s, on_leader=True)(tick)
    app.page("/shards")(state)
    return coordinator
