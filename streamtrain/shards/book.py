"""The shard coordinator's state machine (DLRover-RM §5.1), pure: the control app's book.

Owned here: :class:`ShardBook`. Per partition it keeps a *base* (everything below was
trained, reported done and is committable), a *cut* position (everything below is in
some shard) and the shards in between, each ``queued``, ``leased`` (to a worker, under an
epoch, until a deadline) or ``done``. It is responsible for:

* **cutting** (:meth:`~ShardBook.observe`, each tick, from the offsets the control app
  lists anyway): a partition's new records become shards of ``shard_records`` as soon as
  that many are available, or a smaller shard once the oldest uncut record waited
  ``max_wait_s``; a worker that asks while the queue is empty gets a shard cut on demand;
* **leasing** (:meth:`~ShardBook.request`, and :meth:`~ShardBook.serve_waiting` for
  requests that found nothing, as soon as shards are cut): up to ``max_held_shards``
  per worker; the
  continuation of a shard the worker holds first (it reads on without a seek), then the
  queue, requeued shards first; a worker whose measured rate would need longer than
  ``target_shard_s`` for a shard gets a smaller one (the queued shard is split);
* **heartbeats** (:meth:`~ShardBook.heartbeat`) extend a holder's leases (time while
  no worker at all is heard does not count: the coordinator was deaf); a queued shard
  a worker says it holds (its grant was lost when the control app restarted) is
  re-leased to it rather than handed to another; :meth:`~ShardBook.expire` requeues the
  shards of a silent holder; :meth:`~ShardBook.release` requeues shards a leaving worker
  returns;
* **done reports** (:meth:`~ShardBook.done`): a shard is done when a worker says every
  record of it was acknowledged; a report for an unknown partition, a range that is not
  a shard, a shard already done or a range outside what was cut is refused with a
  :class:`~streamtrain.shards.model.Refusal` (the caller logs it) and changes nothing;
* **the committable position** (:meth:`~ShardBook.committable`): per partition, the end
  of the contiguous prefix of done shards, never past an untrained record;
* **restore**: :meth:`~ShardBook.snapshot` (per partition, JSON-able, the changelogged
  table's values) and :meth:`~ShardBook.restore`; after restoring any partition no
  queued shard is handed out for ``lease_s``: a grant lost with the old process is
  reclaimed by its holder's heartbeat before anyone else could get it.

Time (``now_s``) is always an argument.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from streamtrain.shards.model import Grant, Refusal, ShardRange, ShardSettings
from streamtrain.shards.table import (
    DONE,
    LEASED,
    QUEUED,
    PartitionEntry,
    PartitionKey,
    ShardEntry,
    parse_partition,
    partition_snapshot,
)

__all__ = ["BookStats", "ShardBook"]

log = logging.getLogger(__name__)

_RATE_WEIGHT = 0.5  # weight of a new rate sample in a worker's running rate


@dataclass(frozen=True, slots=True)
class BookStats:
    """Counts for logs, metrics and the control app's page."""

    partitions: int
    queued_shards: int
    leased_shards: int
    done_shards: int
    uncut_records: int
    queued_records: int
    workers: int


class ShardBook:
    """The coordinator's shards (module docstring). Not thread-safe: one caller."""

    def __init__(self, settings: ShardSettings | None = None) -> None:
        self.settings = settings or ShardSettings()
        self._partitions: dict[PartitionKey, PartitionEntry] = {}
        self._queue: collections.deque[tuple[PartitionKey, int]] = collections.deque()
        self._epoch = 0
        self._rates: dict[str, float] = {}
        self._last_done_s: dict[str, float] = {}
        self._waiting: dict[str, tuple[int, float]] = {}  # worker -> (shards, asked at)
        self._grace_until_s = float("-inf")
        self._dirty: set[PartitionKey] = set()
        self._heard_s = float("-inf")  # the newest heartbeat from any worker
        self._expired_at_s: float | None = None  # the previous expire() call

    # -- cutting ----------------------------------------------------------------------

    def observe(
        self, topic: str, partition: int, high_watermark: int, start_offset: int, now_s: float
    ) -> int:
        """A partition's high watermark at ``now_s``; returns the shards cut.

        ``start_offset`` is where a partition seen for the first time begins (the job's
        committed offset, else its low watermark); later it is ignored: the book owns
        the position from then on.
        """
        key = (topic, partition)
        part = self._partitions.get(key)
        if part is None:
            start = max(0, min(start_offset, high_watermark))
            part = PartitionEntry(base=start, cut_to=start, hwm=high_watermark, committed=start)
            self._partitions[key] = part
            self._dirty.add(key)
        part.hwm = max(part.hwm, high_watermark)
        cut = 0
        size = self.settings.shard_records
        while part.hwm - part.cut_to >= size:
            self._cut(key, part, part.cut_to + size)
            cut += 1
        if part.hwm > part.cut_to:
            if part.uncut_since_s is None:
                part.uncut_since_s = now_s
            elif now_s - part.uncut_since_s >= self.settings.max_wait_s:
                self._cut(key, part, part.hwm)
                cut += 1
        return cut

    def _cut(self, key: PartitionKey, part: PartitionEntry, end: int) -> ShardEntry:
        shard = ShardEntry(part.cut_to, end)
        part.shards[shard.start] = shard
        part.cut_to = end
        part.uncut_since_s = None
        self._queue.append((key, shard.start))
        self._dirty.add(key)
        return shard

    def _cut_on_demand(self) -> tuple[PartitionKey, ShardEntry] | None:
        """Cut the partition with the most uncut records (at least ``min_shard_records``)."""
        best: tuple[int, PartitionKey] | None = None
        for key, part in self._partitions.items():
            uncut = part.hwm - part.cut_to
            if uncut >= self.settings.min_shard_records and (best is None or uncut > best[0]):
                best = (uncut, key)
        if best is None:
            return None
        key = best[1]
        part = self._partitions[key]
        shard = self._cut(key, part, min(part.hwm, part.cut_to + self.settings.shard_records))
        self._queue.pop()  # handed out at once, not queued
        return key, shard

    # -- leasing ----------------------------------------------------------------------

    def request(self, worker_id: str, want: int, now_s: float) -> list[Grant]:
        """Lease up to ``want`` shards to ``worker_id`` (never above ``max_held_shards``).

        What cannot be granted now is remembered (the worker's latest ``want`` replaces
        its earlier one) and served by :meth:`serve_waiting` as soon as shards are cut:
        a worker never waits for its next request to learn that data arrived.
        """
        self._heard_s = max(self._heard_s, now_s)
        grants = self._grant(worker_id, want, now_s)
        rest = want - len(grants)
        if rest > 0:
            self._waiting[worker_id] = (rest, now_s)
        else:
            self._waiting.pop(worker_id, None)
        return grants

    def serve_waiting(self, now_s: float) -> list[Grant]:
        """Grants for the workers still waiting (oldest request first); a wait older
        than ``lease_s`` (the worker went silent) is dropped."""
        grants: list[Grant] = []
        for worker_id, (want, asked_s) in sorted(self._waiting.items(), key=lambda w: w[1][1]):
            if now_s - asked_s > self.settings.lease_s:
                del self._waiting[worker_id]
                continue
            given = self._grant(worker_id, want, now_s)
            grants += given
            if len(given) >= want:
                del self._waiting[worker_id]
            elif given:
                self._waiting[worker_id] = (want - len(given), asked_s)
        return grants

    def _grant(self, worker_id: str, want: int, now_s: float) -> list[Grant]:
        if now_s < self._grace_until_s or want < 1:
            return []
        held = self.held_by(worker_id)
        room = min(want, self.settings.max_held_shards - len(held))
        # records held: at most max_held_full_shards of this worker's shard size (one
        # shard at least), so a burst of queued records is shared among the workers
        budget = self.settings.max_held_full_shards * self.shard_records_for(worker_id)
        held_records = sum(g.shard.records for g in held)
        grants: list[Grant] = []
        ends = {(g.shard.key, g.shard.end_offset) for g in held}
        while room > 0 and (held_records < budget or not (held or grants)):
            picked = self._continuation(ends) or self._next_queued() or self._cut_on_demand()
            if picked is None:
                break
            key, shard = picked
            grant = self._lease(key, shard, worker_id, now_s)
            grants.append(grant)
            ends.add((key, grant.shard.end_offset))
            held_records += grant.shard.records
            room -= 1
        return grants

    def _continuation(
        self, ends: set[tuple[PartitionKey, int]]
    ) -> tuple[PartitionKey, ShardEntry] | None:
        for key, end in sorted(ends):
            part = self._partitions.get(key)
            shard = part.shards.get(end) if part is not None else None
            if shard is not None and shard.state == QUEUED:
                return key, shard
        return None

    def _next_queued(self) -> tuple[PartitionKey, ShardEntry] | None:
        while self._queue:
            key, start = self._queue.popleft()
            part = self._partitions.get(key)
            shard = part.shards.get(start) if part is not None else None
            if shard is not None and shard.state == QUEUED:
                return key, shard
        return None

    def _lease(self, key: PartitionKey, shard: ShardEntry, worker_id: str, now_s: float) -> Grant:
        part = self._partitions[key]
        size = self.shard_records_for(worker_id)
        # small queued shards that follow this one go with it (a partition cut every
        # max_wait_s while a backlog built up holds many), up to the worker's shard size:
        # each grant round trip then carries a shard's worth of records, not a few dozen
        while (follower := part.shards.get(shard.end)) is not None and (
            follower.state == QUEUED and follower.end - shard.start <= size
        ):
            del part.shards[follower.start]  # its queue entry is skipped when popped
            shard.end = follower.end
        if shard.end - shard.start > size:  # a slow worker: split, the rest stays queued
            rest = ShardEntry(shard.start + size, shard.end)
            shard.end = rest.start
            part.shards[rest.start] = rest
            self._queue.appendleft((key, rest.start))
        self._epoch += 1
        shard.state, shard.worker, shard.epoch = LEASED, worker_id, self._epoch
        shard.granted_at_s, shard.deadline_s = now_s, now_s + self.settings.lease_s
        self._dirty.add(key)
        return Grant(ShardRange(key[0], key[1], shard.start, shard.end), worker_id, shard.epoch)

    def shard_records_for(self, worker_id: str) -> int:
        """A full shard, or less for a worker too slow to train one in ``target_shard_s``."""
        s = self.settings
        rate = self._rates.get(worker_id)
        if rate is None:
            return s.shard_records
        return max(s.min_shard_records, min(s.shard_records, int(rate * s.target_shard_s)))

    def heartbeat(
        self, worker_id: str, held: Iterable[tuple[ShardRange, int]], now_s: float
    ) -> list[tuple[ShardRange, Refusal]]:
        """``worker_id`` is alive and holds ``held`` (ranges and their epochs).

        Leases it holds are extended; a queued shard it holds (its grant was lost with a
        restarted control app, or its lease expired while it was slow) is leased back to
        it. Returns the ranges it should let go (leased to another, done, unknown).
        """
        refused: list[tuple[ShardRange, Refusal]] = []
        self._heard_s = max(self._heard_s, now_s)
        for rng, epoch in held:
            key = rng.key
            shard, problem = self._find(rng)
            if shard is None:
                refused.append((rng, problem or Refusal.UNKNOWN_SHARD))
                continue
            if shard.state == DONE:
                refused.append((rng, Refusal.ALREADY_DONE))
            elif shard.state == QUEUED:
                shard.state, shard.worker, shard.epoch = LEASED, worker_id, epoch
                shard.granted_at_s = now_s
                shard.deadline_s = now_s + self.settings.lease_s
                self._epoch = max(self._epoch, epoch)
                self._dirty.add(key)
                log.info("shard %s reclaimed by its holder %s (epoch %d)", rng, worker_id, epoch)
            elif shard.worker == worker_id and shard.epoch == epoch:
                shard.deadline_s = now_s + self.settings.lease_s
            else:
                refused.append((rng, Refusal.NOT_HOLDER))
        return refused

    def release(self, worker_id: str, ranges: Iterable[ShardRange]) -> int:
        """Requeue (first in line) the shards ``worker_id`` hands back; returns how many."""
        count = 0
        for rng in sorted(ranges, reverse=True):  # the earliest ends up first in line
            shard, _ = self._find(rng)
            if shard is not None and shard.state == LEASED and shard.worker == worker_id:
                self._requeue(rng.key, shard)
                count += 1
        return count

    def forget_worker(self, worker_id: str) -> list[ShardRange]:
        """Requeue every shard ``worker_id`` holds (it left or died)."""
        ranges = [g.shard for g in self.held_by(worker_id)]
        self.release(worker_id, ranges)
        self._rates.pop(worker_id, None)
        self._last_done_s.pop(worker_id, None)
        self._waiting.pop(worker_id, None)
        return ranges

    def expire(self, now_s: float) -> list[Grant]:
        """Requeue the shards whose holder sent no heartbeat within ``lease_s``.

        While the book heard from no worker at all for ``lease_s / 3`` (every live
        worker heartbeats far more often) it is the coordinator that is deaf (its
        agent or the broker stalled), not every holder dead at once: the time does not
        count against the leases. Measured in ``streamtrain demo``: the control app's
        agent stalled ~3 s twice under load and every lease of 6 live workers expired
        at the same millisecond, each shard then trained twice."""
        previous, self._expired_at_s = self._expired_at_s, now_s
        if now_s - self._heard_s > self.settings.lease_s / 3:
            deaf_s = 0.0 if previous is None else max(0.0, now_s - previous)
            for part in self._partitions.values():
                for shard in part.shards.values():
                    if shard.state == LEASED:
                        shard.deadline_s += deaf_s
            return []
        expired: list[Grant] = []
        for key, part in self._partitions.items():
            for shard in part.shards.values():
                if shard.state == LEASED and shard.deadline_s <= now_s:
                    expired.append(
                        Grant(
                            ShardRange(key[0], key[1], shard.start, shard.end),
                            shard.worker,
                            shard.epoch,
                        )
                    )
        for grant in sorted(expired, key=lambda g: g.shard, reverse=True):
            part = self._partitions[grant.shard.key]
            self._requeue(grant.shard.key, part.shards[grant.shard.start_offset])
        return expired

    def _requeue(self, key: PartitionKey, shard: ShardEntry) -> None:
        shard.state, shard.worker = QUEUED, ""
        self._queue.appendleft((key, shard.start))
        self._dirty.add(key)

    # -- done and committable ---------------------------------------------------------

    def done(self, worker_id: str, rng: ShardRange, epoch: int, now_s: float) -> Refusal | None:
        """Every record of ``rng`` was acknowledged by ``worker_id``; ``None`` if accepted.

        A report from an earlier holder (another epoch) is accepted too: its records were
        all trained, which is what done means.
        """
        self._heard_s = max(self._heard_s, now_s)
        shard, problem = self._find(rng)
        if shard is None:
            return problem
        if shard.state == DONE:
            return Refusal.ALREADY_DONE
        if shard.state == LEASED and shard.worker == worker_id and shard.epoch == epoch:
            # A worker trains its shards one after another: this one's work began when
            # it was granted or when the worker's previous shard was done, the later.
            began_s = max(shard.granted_at_s, self._last_done_s.get(worker_id, 0.0))
            self._last_done_s[worker_id] = now_s
            took_s = max(now_s - began_s, 1e-3)
            sample = rng.records / took_s
            old = self._rates.get(worker_id)
            self._rates[worker_id] = (
                sample if old is None else (1 - _RATE_WEIGHT) * old + _RATE_WEIGHT * sample
            )
        shard.state = DONE
        self._advance(rng.key)
        return None

    def _find(self, rng: ShardRange) -> tuple[ShardEntry | None, Refusal | None]:
        part = self._partitions.get(rng.key)
        if part is None:
            return None, Refusal.UNKNOWN_PARTITION
        if rng.start_offset >= rng.end_offset or rng.start_offset < 0:
            return None, Refusal.MALFORMED
        if rng.end_offset <= part.base:
            return None, Refusal.ALREADY_DONE  # done, committable and forgotten
        if rng.start_offset < part.base or rng.end_offset > part.cut_to:
            return None, Refusal.OUT_OF_RANGE
        shard = part.shards.get(rng.start_offset)
        if shard is None or shard.end != rng.end_offset:
            return None, Refusal.UNKNOWN_SHARD
        return shard, None

    def _advance(self, key: PartitionKey) -> None:
        part = self._partitions[key]
        while (shard := part.shards.get(part.base)) is not None and shard.state == DONE:
            del part.shards[part.base]
            part.base = shard.end
        self._dirty.add(key)

    def committable(self) -> dict[PartitionKey, int]:
        """Per partition, the end of its contiguous done prefix, where it moved since the
        last :meth:`mark_committed`."""
        return {key: p.base for key, p in self._partitions.items() if p.base > p.committed}

    def mark_committed(self, positions: Mapping[PartitionKey, int]) -> None:
        for key, position in positions.items():
            part = self._partitions.get(key)
            if part is not None:
                part.committed = max(part.committed, min(position, part.base))
                self._dirty.add(key)

    # -- reading the book -------------------------------------------------------------

    def held_by(self, worker_id: str) -> list[Grant]:
        return [
            Grant(ShardRange(key[0], key[1], s.start, s.end), s.worker, s.epoch)
            for key, part in sorted(self._partitions.items())
            for s in sorted(part.shards.values(), key=lambda s: s.start)
            if s.state == LEASED and s.worker == worker_id
        ]

    def leases(self) -> list[Grant]:
        """Every leased shard (for tests and the page)."""
        return [
            Grant(ShardRange(key[0], key[1], s.start, s.end), s.worker, s.epoch)
            for key, part in sorted(self._partitions.items())
            for s in part.shards.values()
            if s.state == LEASED
        ]

    def workers(self) -> set[str]:
        return {g.worker_id for g in self.leases()}

    def positions(self) -> dict[PartitionKey, tuple[int, int, int]]:
        """Per partition ``(base, cut_to, high_watermark)``."""
        return {key: (p.base, p.cut_to, p.hwm) for key, p in self._partitions.items()}

    def stats(self) -> BookStats:
        states = collections.Counter(
            s.state for p in self._partitions.values() for s in p.shards.values()
        )
        queued_records = sum(
            s.end - s.start
            for p in self._partitions.values()
            for s in p.shards.values()
            if s.state == QUEUED
        )
        return BookStats(
            partitions=len(self._partitions),
            queued_shards=states[QUEUED],
            leased_shards=states[LEASED],
            done_shards=states[DONE],
            uncut_records=sum(p.hwm - p.cut_to for p in self._partitions.values()),
            queued_records=queued_records,
            workers=len(self.workers()),
        )

    # -- snapshot and restore ---------------------------------------------------------

    @staticmethod
    def table_key(key: PartitionKey) -> str:
        return f"{key[0]}|{key[1]}"

    def take_dirty(self) -> dict[str, dict[str, Any]]:
        """The snapshots of the partitions changed since the last call (for the table)."""
        dirty, self._dirty = self._dirty, set()
        return {self.table_key(k): self._partition_snapshot(k) for k in sorted(dirty)}

    def snapshot(self) -> dict[str, dict[str, Any]]:
        self._dirty.clear()
        return {self.table_key(k): self._partition_snapshot(k) for k in sorted(self._partitions)}

    def _partition_snapshot(self, key: PartitionKey) -> dict[str, Any]:
        return partition_snapshot(key, self._partitions[key], self._epoch)

    def restore(self, snapshot: Iterable[Mapping[str, Any]], now_s: float) -> int:
        """Rebuild from :meth:`snapshot` values; returns the partitions restored.

        Leases keep their holders with a fresh deadline; for ``lease_s`` nothing queued is
        handed out (not after a first start). A malformed entry is logged and skipped.
        """
        restored = 0
        for entry in snapshot:
            try:
                key, part, epoch = parse_partition(
                    entry, now_s=now_s, lease_s=self.settings.lease_s
                )
                self._epoch = max(self._epoch, epoch)
            except (KeyError, TypeError, ValueError) as exc:
                log.warning("skipping a malformed shard table entry (%s): %r", exc, entry)
                continue
            self._partitions[key] = part
            restored += 1
        self._queue = collections.deque(
            (key, s.start)
            for key, part in sorted(self._partitions.items())
            for s in sorted(part.shards.values(), key=lambda s: s.start)
            if s.state == QUEUED
        )
        for key in list(self._partitions):
            self._advance(key)
        self._dirty.clear()
        self._grace_until_s = now_s + self.settings.lease_s if restored else float("-inf")
        return restored
