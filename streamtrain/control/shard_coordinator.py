"""The control app's shard coordinator (``streamtrain lag run --shards-job J``), minus I/O.

Owned here:

* :class:`ShardJobSettings`: which job's topics are cut into shards, the book's
  :class:`~streamtrain.shards.model.ShardSettings`, the topics, how often to cut/expire,
  commit and look for new partitions;
* :class:`ShardCoordinator`: turns a worker's ``ShardUpdate`` into book calls and the
  ``ShardGrant`` to answer with. A malformed update, one for another job, a report for
  an unknown or already-done shard, an offset range outside the partition or an epoch
  the book never issued is logged (one clear line) and ignored: never a crash, never a
  commit past untrained records. A ``leaving`` update sent before the newest update read
  from the same worker id concerns an earlier process of that id (an executor's hand-back
  delivered late, after a replacement of the same name leased shards): it is ignored, so
  it cannot take the live replacement's shards away. Each update is isolated: one that
  raises anyway is logged with its traceback and counted (``failed``), and the next one
  is served.
  :meth:`~ShardCoordinator.tick` feeds the newest offsets to the book, expires silent
  holders and serves the workers waiting for shards.

The Kafka side is :mod:`streamtrain.control.shard_offsets`; the Faust wiring
:mod:`streamtrain.control.shard_agent`.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from streamtrain import wire
from streamtrain.errors import ConfigError, SchemaError
from streamtrain.partition_key import PartitionKey
from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.shards.book import ShardBook
from streamtrain.shards.messages import default_topics, from_range, grant_range, to_range
from streamtrain.shards.model import Grant, ShardRange, ShardRefusal, ShardSettings
from streamtrain.shards.partition import MAX_WORKER_ID_CHARS
from streamtrain.units import s_to_ms

__all__ = ["ShardCoordinator", "ShardJobSettings"]

log = logging.getLogger(__name__)

_CLOCK_SKEW_MS = 1_000  # an update sent this long before a restore is read as live
_CATCH_UP_LIMIT_MS = 60_000  # ... and any update once the restore is this old
_MAX_SENDERS = 10_000  # workers whose newest send time is remembered (oldest dropped)


@dataclass(frozen=True, slots=True)
class ShardJobSettings:
    """The shard coordinator of one job. Topic names default to ``<job>.shards`` and
    ``<job>.shard-grants``; ``discover_interval_s`` is how often the job's topics are
    listed again for partitions added since."""

    job: str
    topics: tuple[str, ...]
    book: ShardSettings = field(default_factory=ShardSettings)
    tick_s: float = 0.25
    commit_interval_s: float = 1.0
    discover_interval_s: float = 30.0
    updates_topic: str = ""
    grants_topic: str = ""

    def __post_init__(self) -> None:
        if not self.job.strip():
            raise ConfigError("the shard job must not be empty")
        if not self.topics:
            raise ConfigError(f"shards for job {self.job!r} need the job's --topic")
        if min(self.tick_s, self.commit_interval_s, self.discover_interval_s) <= 0:
            raise ConfigError("the shard tick, commit and discovery intervals must be positive")
        updates, grants = default_topics(self.job)
        object.__setattr__(self, "updates_topic", self.updates_topic or updates)
        object.__setattr__(self, "grants_topic", self.grants_topic or grants)


class ShardCoordinator:
    """One job's :class:`ShardBook` behind the wire messages (module docstring)."""

    def __init__(self, settings: ShardJobSettings) -> None:
        self.settings = settings
        self.book = ShardBook(settings.book)
        self.refused: collections.Counter[str] = collections.Counter()
        self.updates = 0
        self.failed = 0  # updates and ticks that raised: logged, counted, skipped
        self.restored = False
        self._restored_at_ms = 0
        self._caught_up = True  # no restore: nothing old to read
        # the newest sent_at_ms read from each worker id (a late ``leaving`` is older)
        self._newest_sent_ms: collections.OrderedDict[str, int] = collections.OrderedDict()

    def restore(self, values: Iterable[Mapping[str, Any]], now_s: float) -> int:
        """Restore the book from the table's ``values``; returns the partitions restored.

        A restarted app first reads the updates workers sent while it was down. The
        requests among them are old (their workers ask again) and are not served, and
        the book hands out nothing queued until ``lease_s`` after the first update sent
        since the restart was read: by then every live holder's heartbeat was heard, and
        a grant the old process sent just before it died is reclaimed by its holder, not
        handed to another worker.
        """
        count = self.book.restore(values, now_s)
        self.restored = True
        self._restored_at_ms = int(s_to_ms(now_s))
        self._caught_up = count == 0
        return count

    def handle(self, data: bytes, now_s: float) -> pb.ShardGrant | None:
        """One ``ShardUpdate``; the grant to send back, if any. Never raises."""
        self.updates += 1
        try:
            return self._handle(data, now_s)
        except Exception:
            self.failed += 1
            log.exception("a shard update could not be applied; it was skipped")
            return None

    def _handle(self, data: bytes, now_s: float) -> pb.ShardGrant | None:
        try:
            update = wire.decode(pb.ShardUpdate, data)
        except SchemaError as exc:
            self._refuse(f"a malformed shard update ({exc})", ShardRefusal.MALFORMED)
            return None
        worker = update.worker_id
        if update.job != self.settings.job or not 0 < len(worker) <= MAX_WORKER_ID_CHARS:
            self._refuse(
                f"a shard update for job {update.job[:200]!r} from worker {worker[:200]!r} "
                f"(this coordinator serves {self.settings.job!r} and needs a worker id of "
                f"1-{MAX_WORKER_ID_CHARS} characters)",
                ShardRefusal.MALFORMED,
            )
            return None
        for message in update.done:
            parsed = self._parse(worker, message)
            if parsed is not None:
                refusal = self.book.done(worker, parsed[0], parsed[1], now_s)
                if refusal is not None:
                    self._refuse(f"done report of {worker} for {parsed[0]}", refusal)
        returned = [p[0] for m in update.returned if (p := self._parse(worker, m)) is not None]
        if returned:
            log.info(
                "worker %s handed back %d shard(s)", worker, self.book.release(worker, returned)
            )
        held = [p for m in update.held if (p := self._parse(worker, m)) is not None]
        if update.leaving:
            if self._stale_leaving(worker, update.sent_at_ms):
                self._refuse(f"the leaving update of {worker}", ShardRefusal.STALE_LEAVING)
                return None
            self._newest_sent_ms.pop(worker, None)
            gone = self.book.forget_worker(worker)
            log.info("worker %s left; %d shard(s) back in the queue", worker, len(gone))
            return None
        self._heard(worker, update.sent_at_ms)
        revoked = self.book.heartbeat(worker, held, now_s)
        for rng, refusal in revoked:
            self.refused[refusal.name] += 1
            level = logging.WARNING if refusal == ShardRefusal.EPOCH_NOT_ISSUED else logging.INFO
            log.log(level, "worker %s holds %s, which it must let go: %s", worker, rng, refusal)
        # ``want_shards`` is beyond what the update lists as held: leases the worker does
        # not list yet are grants on their way to it, and count against it
        listed = {rng for rng, _ in held}
        in_flight = [g for g in self.book.held_by(worker) if g.shard not in listed]
        want = max(0, update.want_shards - len(in_flight)) if self._live(update, now_s) else 0
        grants = self.book.request(worker, want, now_s)
        if not grants and not revoked:
            return None
        return self._grant_message(worker, grants, [rng for rng, _ in revoked])

    def _stale_leaving(self, worker: str, sent_at_ms: int) -> bool:
        """Whether a ``leaving`` update is older than the newest update of ``worker``."""
        return sent_at_ms < self._newest_sent_ms.get(worker, sent_at_ms)

    def _heard(self, worker: str, sent_at_ms: int) -> None:
        newest = self._newest_sent_ms.pop(worker, sent_at_ms)
        self._newest_sent_ms[worker] = max(newest, sent_at_ms)
        if len(self._newest_sent_ms) > _MAX_SENDERS:
            self._newest_sent_ms.popitem(last=False)

    def _live(self, update: pb.ShardUpdate, now_s: float) -> bool:
        """Whether the updates read are those sent since the restore (see :meth:`restore`);
        clocks may differ by ``_CLOCK_SKEW_MS``, and after ``_CATCH_UP_LIMIT_MS`` every
        update counts as live (a worker whose clock is far behind still gets shards)."""
        if not self._caught_up:
            since = self._restored_at_ms - _CLOCK_SKEW_MS
            late = s_to_ms(now_s) - self._restored_at_ms > _CATCH_UP_LIMIT_MS
            if update.sent_at_ms >= since or late:
                self._caught_up = True
                self.book.hold_queued(now_s + self.settings.book.lease_s)
                log.info("read up to the updates sent since the restore; granting again")
        return self._caught_up

    def _grant_message(
        self, worker: str, grants: list[Grant], revoked: list[ShardRange] | None = None
    ) -> pb.ShardGrant:
        return pb.ShardGrant(
            job=self.settings.job,
            worker_id=worker,
            shards=[grant_range(g) for g in grants],
            revoked=[to_range(rng) for rng in revoked or ()],
        )

    def _parse(self, worker: str, message: pb.ShardUpdate.Range) -> tuple[ShardRange, int] | None:
        parsed = from_range(message)
        if parsed is None:
            self._refuse(f"a shard of {worker} naming no partition", ShardRefusal.MALFORMED)
        return parsed

    def _refuse(self, what: str, refusal: ShardRefusal) -> None:
        self.refused[refusal.name] += 1
        log.warning("ignoring %s: %s", what, refusal.value)

    def tick(
        self,
        high_watermarks: dict[PartitionKey, int],
        starts: dict[PartitionKey, int],
        now_s: float,
    ) -> list[pb.ShardGrant]:
        """Cut what arrived, requeue the shards of silent holders, and serve the workers
        waiting for shards; returns the grants to send. Never raises (a tick that
        fails is logged and counted, and the next one tries again)."""
        try:
            return self._tick(high_watermarks, starts, now_s)
        except Exception:
            self.failed += 1
            log.exception("a shard tick failed; the next tick tries again")
            return []

    def _tick(
        self,
        high_watermarks: dict[PartitionKey, int],
        starts: dict[PartitionKey, int],
        now_s: float,
    ) -> list[pb.ShardGrant]:
        self.book.observe_all(high_watermarks, starts, now_s)
        expired = self.book.expire(now_s)
        for grant in expired:
            log.warning(
                "worker %s sent no heartbeat for %.1f s: shard %s back in the queue",
                grant.worker_id,
                self.settings.book.lease_s,
                grant.shard,
            )
        by_worker: dict[str, list[Grant]] = {}
        for grant in self.book.serve_waiting(now_s):
            by_worker.setdefault(grant.worker_id, []).append(grant)
        return [self._grant_message(w, grants) for w, grants in sorted(by_worker.items())]

    def state_json(self, now_s: float) -> dict[str, Any]:
        """The ``/shards`` page: the book's counts, and the partitions with records not
        yet done as the book sees them (``lagging``: what to read when a run stalls)."""
        stats = self.book.stats()
        return {
            "job": self.settings.job,
            "partitions": stats.partitions,
            "queued_shards": stats.queued_shards,
            "leased_shards": stats.leased_shards,
            "queued_records": stats.queued_records,
            "uncut_records": stats.uncut_records,
            "workers": sorted(self.book.workers()),
            "epoch": self.book.epoch,
            "updates": self.updates,
            "failed": self.failed,
            "refused": dict(self.refused),
            "lagging": self.book.lagging(now_s),
        }
