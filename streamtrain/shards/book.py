"""The shard coordinator's state machine (DLRover-RM §5.1), pure: the control app's book.

Owned here: :class:`ShardBook`, the shards of every partition of one job
(:class:`~streamtrain.shards.partition.PartitionShards` each):

* **cutting** (:meth:`~ShardBook.observe`, each tick): full shards as soon as that many
  records are there, a smaller one once the oldest uncut record waited ``max_wait_s``;
  only ``queued_shards_per_partition`` are cut ahead, the rest of a backlog stays one
  uncut range (cut as the queue drains, or on demand for a worker that finds the queue
  empty): a backlog of 10^9 records is a handful of entries;
* **leasing** (:meth:`~ShardBook.request`, :meth:`~ShardBook.serve_waiting`): the
  continuation of a shard the worker holds first, then shards that went back to the
  queue, then the partitions in turn; smaller shards for slow workers
  (:class:`~streamtrain.shards.rates.WorkerRates`); a new epoch for every lease; a shard
  leaving a queue (leased, reclaimed, done by its last holder) refills its partition;
* **holders** (:meth:`~ShardBook.heartbeat`, :meth:`~ShardBook.expire`,
  :meth:`~ShardBook.release`): leases are extended by heartbeats, requeued when their
  holder is silent or hands them back; no message can push the epoch or take a shard
  it was not given;
* **done** (:meth:`~ShardBook.done`): from the holder, or from the last holder whose
  lease expired; anything else is refused with a
  :class:`~streamtrain.shards.model.ShardRefusal` and changes nothing;
  :meth:`~ShardBook.committable` is each partition's contiguous done prefix;
* **restore**: :meth:`~ShardBook.take_dirty` gives the changed partitions' table values
  (small whatever the backlog), :meth:`~ShardBook.restore` validates them.

What the book shows (leases, positions, stats, the partitions with records not done) is
read through :class:`~streamtrain.shards.view.BookView`, the state these rules change.

A heartbeat, request or done report costs time in the worker's own shards, not in the
backlog or the partitions (leases are indexed by worker). Time is an argument. Not
thread-safe: one caller.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from streamtrain.partition_key import PartitionKey
from streamtrain.shards.model import MAX_EPOCH, Grant, ShardRange, ShardRefusal, ShardSettings
from streamtrain.shards.partition import (
    LEASED,
    QUEUED,
    PartitionShards,
    ShardEntry,
    parse_partition,
)
from streamtrain.shards.queue import ShardQueue
from streamtrain.shards.rates import WorkerRates
from streamtrain.shards.view import BookView
from streamtrain.units import s_to_ms

__all__ = ["ShardBook"]

log = logging.getLogger(__name__)


_EPOCHS_PER_MS = 1024  # a restored book starts its epochs at its start time (ms) x this


class ShardBook(BookView):
    """The coordinator's shards (module docstring); what reading them tells is
    :class:`~streamtrain.shards.view.BookView`'s."""

    def __init__(self, settings: ShardSettings | None = None) -> None:
        super().__init__(settings)
        self._queue = ShardQueue(self.settings, self._partitions)
        self._epoch = 0  # the newest epoch issued
        self._restored_epoch = 0  # epochs up to here may have been issued before a restore
        self.rates = WorkerRates(self.settings)
        self._waiting: dict[str, tuple[int, float]] = {}  # worker -> (shards, asked at)
        self._grace_until_s = float("-inf")
        self._dirty: set[PartitionKey] = set()
        self._heard_s = float("-inf")  # the newest message from any worker
        self._expired_at_s: float | None = None  # the previous expire() call

    @property
    def epoch(self) -> int:
        """The newest epoch this book issued."""
        return self._epoch

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
            part = self._partitions[key] = PartitionShards(start, high_watermark)
            self._dirty.add(key)
        part.hwm = max(part.hwm, high_watermark)
        cut = self._queue.refill(key, now_s)
        if cut:
            self._dirty.add(key)
        return cut

    def observe_all(
        self,
        high_watermarks: Mapping[PartitionKey, int],
        starts: Mapping[PartitionKey, int],
        now_s: float,
    ) -> int:
        """:meth:`observe` for the partitions that are new or whose watermark moved, then
        the time-based cuts of those waiting for one; returns the shards cut. A tick
        costs time in what changed, not in the partitions."""
        cut = 0
        for key, high in high_watermarks.items():
            part = self._partitions.get(key)
            if part is None or high > part.hwm:
                cut += self.observe(key[0], key[1], high, starts.get(key, 0), now_s)
        for key in self._queue.cuttable():
            if self._queue.refill(key, now_s):
                self._dirty.add(key)
                cut += 1
        return cut

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
        held = [self._entry(lease) for lease in self._leases.get(worker_id, ())]
        room = min(want, self.settings.max_held_shards - len(held))
        # records held: at most max_held_full_shards of this worker's shard size (one
        # shard at least), so a burst of queued records is shared among the workers
        budget = self.settings.max_held_full_shards * self.rates.shard_records_for(worker_id)
        held_records = sum(entry.records for _, entry in held)
        ends = {(key, entry.end) for key, entry in held}
        grants: list[Grant] = []
        while room > 0 and (held_records < budget or not (held or grants)):
            picked = self._continuation(ends) or self._queue.next() or self._cut_on_demand(now_s)
            if picked is None:
                break
            key, entry = picked
            grant = self._lease(key, entry, worker_id, now_s)
            grants.append(grant)
            ends.add((key, grant.shard.end_offset))
            held_records += grant.shard.records
            room -= 1
        return grants

    def _continuation(
        self, ends: set[tuple[PartitionKey, int]]
    ) -> tuple[PartitionKey, ShardEntry] | None:
        for key, end in sorted(ends):
            part = self._partitions[key]
            entry = part.entries.get(end)
            if (
                entry is not None
                and entry.state == QUEUED
                and part.leased < self.settings.max_leased_per_partition
            ):
                return key, entry
        return None

    def _cut_on_demand(self, now_s: float) -> tuple[PartitionKey, ShardEntry] | None:
        picked = self._queue.cut_on_demand(now_s)
        if picked is not None:
            self._dirty.add(picked[0])
        return picked

    def _lease(self, key: PartitionKey, entry: ShardEntry, worker_id: str, now_s: float) -> Grant:
        part = self._partitions[key]
        size = self.rates.shard_records_for(worker_id)
        # small queued shards that follow this one go with it (a partition cut every
        # max_wait_s while a backlog built up holds many), up to the worker's shard size:
        # each grant round trip then carries a shard's worth of records, not a few dozen
        part.absorb_followers(entry, entry.start + size)
        if entry.records > size:  # a slow worker: split, the rest stays queued, first
            rest = part.split(entry, entry.start + size)
            self._queue.push_front(key, rest.start)
        self._epoch += 1
        self._hold(key, entry, worker_id, self._epoch, now_s)
        return Grant(ShardRange(key[0], key[1], entry.start, entry.end), worker_id, self._epoch)

    def _hold(
        self, key: PartitionKey, entry: ShardEntry, worker_id: str, epoch: int, now_s: float
    ) -> None:
        self._partitions[key].lease(entry, worker_id, epoch, now_s, now_s + self.settings.lease_s)
        self._leases.setdefault(worker_id, {})[(key, entry.start)] = None
        self._dirty.add(key)
        self._queue.refill(key, now_s)  # the queue has room: cut what waits

    # -- heartbeats, hand-backs, expiry -----------------------------------------------

    def heartbeat(
        self, worker_id: str, held: Iterable[tuple[ShardRange, int]], now_s: float
    ) -> list[tuple[ShardRange, ShardRefusal]]:
        """``worker_id`` is alive and holds ``held`` (ranges and their epochs).

        Its leases are extended (not while the coordinator heard no one: it was deaf).
        A queued shard it holds is leased back to it only under the epoch it was last
        leased to that worker, or, for a gap of a restored table (a grant the old
        process sent before its table write), under an epoch issued before the restore.
        Returns the ranges it must let go, with the reason.
        """
        refused: list[tuple[ShardRange, ShardRefusal]] = []
        self._heard_s = max(self._heard_s, now_s)
        for rng, epoch in held:
            problem = self._held_by(worker_id, rng, epoch, now_s)
            if problem is not None:
                refused.append((rng, problem))
        return refused

    def _held_by(
        self, worker_id: str, rng: ShardRange, epoch: int, now_s: float
    ) -> ShardRefusal | None:
        entry, problem = self._find(rng)
        part = self._partitions.get(rng.key)
        if problem not in (None, ShardRefusal.UNKNOWN_SHARD) or part is None:
            return problem
        if not 1 <= epoch <= self._epoch:
            return ShardRefusal.EPOCH_NOT_ISSUED
        if entry is None:
            entry = part.queued_containing(rng.start_offset, rng.end_offset)
            if entry is None:
                return problem
        elif entry.state == LEASED:
            if entry.worker == worker_id and entry.epoch == epoch:
                entry.deadline_s = now_s + self.settings.lease_s
                return None
            return ShardRefusal.NOT_HOLDER
        assert part is not None  # noqa: S101 - _find found an entry of it
        own = (entry.last_worker, entry.last_epoch) == (worker_id, epoch)
        # no holder on record: a grant the old process sent before its table write
        lost = entry.restored and not entry.last_worker and epoch <= self._restored_epoch
        if not (own or lost) or part.leased >= self.settings.max_leased_per_partition:
            return ShardRefusal.NOT_HOLDER
        entry, rest = part.carve(entry, rng.start_offset, rng.end_offset)
        for piece in rest:
            self._queue.push_front(rng.key, piece.start)
        self._hold(rng.key, entry, worker_id, epoch, now_s)
        log.info("shard %s reclaimed by its holder %s (epoch %d)", rng, worker_id, epoch)
        return None

    def release(self, worker_id: str, ranges: Iterable[ShardRange]) -> int:
        """Requeue (first in line) the shards ``worker_id`` hands back; returns how many."""
        count = 0
        for rng in sorted(ranges, reverse=True):  # the earliest ends up first in line
            entry, _ = self._find(rng)
            if entry is not None and entry.state == LEASED and entry.worker == worker_id:
                self._requeue(rng.key, entry)
                count += 1
        return count

    def forget_worker(self, worker_id: str) -> list[ShardRange]:
        """Requeue every shard ``worker_id`` holds (it left or died)."""
        ranges = [g.shard for g in self.held_by(worker_id)]
        self.release(worker_id, ranges)
        self.rates.forget(worker_id)
        self._waiting.pop(worker_id, None)
        return ranges

    def expire(self, now_s: float) -> list[Grant]:
        """Requeue the shards whose holder sent no heartbeat within ``lease_s``.

        While the book heard from no worker at all for ``lease_s / 3`` (every live
        worker heartbeats far more often) it is the coordinator that is deaf (its agent
        or the broker stalled), not every holder dead at once: the time does not count
        against the leases (the control app's agent was seen to stall ~3 s under load,
        and every lease of every live worker expired at the same moment)."""
        previous, self._expired_at_s = self._expired_at_s, now_s
        leased = [self._entry(lease) for leases in self._leases.values() for lease in leases]
        if now_s - self._heard_s > self.settings.lease_s / 3:
            deaf_s = 0.0 if previous is None else max(0.0, now_s - previous)
            for _, entry in leased:
                entry.deadline_s += deaf_s
            return []
        expired = sorted(
            (
                Grant(ShardRange(key[0], key[1], e.start, e.end), e.worker, e.epoch)
                for key, e in leased
                if e.deadline_s <= now_s
            ),
            key=lambda g: g.shard,
            reverse=True,
        )
        for grant in expired:
            key = grant.shard.key
            self._requeue(key, self._partitions[key].entries[grant.shard.start_offset])
        return expired

    def _requeue(self, key: PartitionKey, entry: ShardEntry) -> None:
        self._unhold(key, entry)
        self._partitions[key].requeue(entry)
        self._queue.push_front(key, entry.start)
        self._dirty.add(key)

    def _unhold(self, key: PartitionKey, entry: ShardEntry) -> None:
        leases = self._leases.get(entry.worker)
        if leases is not None:
            leases.pop((key, entry.start), None)
            if not leases:
                del self._leases[entry.worker]

    # -- done and committable ---------------------------------------------------------

    def done(
        self, worker_id: str, rng: ShardRange, epoch: int, now_s: float
    ) -> ShardRefusal | None:
        """Every record of ``rng``, as granted to ``worker_id`` under ``epoch``, was
        trained; ``None`` if accepted. The report must come from the holder under its
        epoch, or from the last holder whose lease expired (slow, but its records were
        all trained, which is what done means): anyone else's is refused.
        """
        self._heard_s = max(self._heard_s, now_s)
        entry, problem = self._find(rng)
        if entry is None:
            return problem
        if not 1 <= epoch <= self._epoch:
            return ShardRefusal.EPOCH_NOT_ISSUED
        key = rng.key
        holder = entry.state == LEASED and (entry.worker, entry.epoch) == (worker_id, epoch)
        if not holder and (entry.last_worker, entry.last_epoch) != (worker_id, epoch):
            return ShardRefusal.NOT_HOLDER
        if holder:
            self.rates.sample(worker_id, rng.records, entry.granted_at_s, now_s)
        if entry.state == LEASED:
            self._unhold(key, entry)
        self._partitions[key].mark_done(entry.start, entry.end)
        self._queue.refill(key, now_s)  # a queued shard done by its last holder: room
        self._dirty.add(key)
        return None

    def _find(self, rng: ShardRange) -> tuple[ShardEntry | None, ShardRefusal | None]:
        part = self._partitions.get(rng.key)
        if part is None:
            return None, ShardRefusal.UNKNOWN_PARTITION
        if rng.start_offset >= rng.end_offset or rng.start_offset < 0:
            return None, ShardRefusal.MALFORMED
        if part.is_done(rng.start_offset, rng.end_offset):
            return None, ShardRefusal.ALREADY_DONE
        if rng.start_offset < part.base or rng.end_offset > part.cut_to:
            return None, ShardRefusal.OUT_OF_RANGE
        entry = part.entries.get(rng.start_offset)
        if entry is None or entry.end != rng.end_offset:
            return None, ShardRefusal.UNKNOWN_SHARD
        return entry, None

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

    # -- snapshot and restore ---------------------------------------------------------

    @staticmethod
    def table_key(key: PartitionKey) -> str:
        return f"{key[0]}|{key[1]}"

    def take_dirty(self) -> dict[str, dict[str, Any]]:
        """The table values of the partitions changed since the last call."""
        dirty, self._dirty = self._dirty, set()
        return {
            self.table_key(k): self._partitions[k].snapshot(k, self._epoch) for k in sorted(dirty)
        }

    def snapshot(self) -> dict[str, dict[str, Any]]:
        self._dirty.clear()
        return {
            self.table_key(k): p.snapshot(k, self._epoch)
            for k, p in sorted(self._partitions.items())
        }

    def hold_queued(self, until_s: float) -> None:
        """Hand out nothing queued before ``until_s`` (holders reclaim theirs first)."""
        self._grace_until_s = max(self._grace_until_s, until_s)

    def restore(self, snapshot: Iterable[Mapping[str, Any]], now_s: float) -> int:
        """Rebuild from :meth:`snapshot` values (each validated: one a coordinator could
        not have written is logged and skipped, its partition starts again where the
        job's group committed); returns the partitions restored. Leases keep their
        holders with a fresh deadline; for ``lease_s`` nothing queued is handed out, so a
        grant lost with the old process is reclaimed by its holder first. A restored book
        issues epochs above its start time, so none is ever issued twice."""
        restored = 0
        for value in snapshot:
            try:
                key, part, epoch = parse_partition(
                    value, now_s=now_s, lease_s=self.settings.lease_s
                )
            except (KeyError, TypeError, ValueError) as exc:
                log.warning("skipping a shard table entry it cannot trust (%s): %.200r", exc, value)
                continue
            self._epoch = max(self._epoch, epoch)
            self._partitions[key] = part
            restored += 1
        # Epochs go on above those in the table and above the time of this restore
        # (ms x 1024), so a grant an earlier process sent is never issued again, even if
        # its table write was lost; a holder may reclaim a gap under an epoch from before.
        floor = int(s_to_ms(now_s)) * _EPOCHS_PER_MS
        self._epoch = self._restored_epoch = min(max(self._epoch, floor), MAX_EPOCH)
        self._queue.rebuild()
        self._leases.clear()
        for key, part in sorted(self._partitions.items()):
            for entry in part.entries.values():
                if entry.state == LEASED:
                    self._leases.setdefault(entry.worker, {})[(key, entry.start)] = None
        self._dirty.clear()
        self._grace_until_s = now_s + self.settings.lease_s if restored else float("-inf")
        return restored
