"""A worker's side of the shard protocol, pure: grants in, updates out.

Owned here: :class:`ShardClient`, what the shard reader
(:class:`~streamtrain.ingest.shard_consumer.ShardConsumer`) does between the control
app and its trainer, without the Kafka I/O:

* applying a ``ShardGrant`` (:meth:`~ShardClient.apply`): shards taken back are dropped
  (their records, wherever they wait, count for nothing), granted shards are held under
  new lease ids, or handed straight back while leaving;
* tagging fetched records with their lease (:meth:`~ShardClient.accept`) and counting
  trained records (:meth:`~ShardClient.ack`);
* the next ``ShardUpdate`` (:meth:`~ShardClient.update`): done reports, the shards held
  (a heartbeat), shards handed back, and the wish for more: ``prefetch_shards`` ahead of
  the one being read, twice as many while they hold fewer than ``prefetch_shards``
  batches (one worker on 16 partitions of small shards was bound by four shards per
  grant round trip). An update is due at once when something is done or handed back or
  the wish grew, else every ``heartbeat_interval_s``;
* leaving (:meth:`~ShardClient.leave`): no more wishes, shards not started are handed
  back at once, the others are finished (:attr:`~ShardClient.drained`);
  :meth:`~ShardClient.last_update` hands back whatever is left.

Not thread-safe: the caller holds one lock around it.
"""

from __future__ import annotations

import logging

import numpy as np
from numpy.typing import NDArray

from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.shards.holdings import HeldShard, Holdings
from streamtrain.shards.messages import from_range, grant_range
from streamtrain.shards.model import Grant

__all__ = ["ShardClient"]

log = logging.getLogger(__name__)


class ShardClient:
    """One worker's shards and its messages to the control app (module docstring)."""

    def __init__(
        self,
        job: str,
        worker_id: str,
        *,
        prefetch_shards: int = 4,
        batch_records: int = 512,
        heartbeat_interval_s: float = 0.5,
    ) -> None:
        self.job, self.worker_id = job, worker_id
        self.prefetch_shards = prefetch_shards
        self.batch_records = batch_records
        self.heartbeat_interval_s = heartbeat_interval_s
        self.holdings = Holdings()
        self.leaving = False
        self.shards_done = 0
        self._done: list[HeldShard] = []
        self._returned: list[Grant] = []
        self._last_update_s = float("-inf")
        self._last_want = 0

    # -- from the control app ---------------------------------------------------------

    def apply(self, grant: pb.ShardGrant) -> int:
        """Apply a ``ShardGrant`` to this worker; returns the shards it now holds more."""
        self._last_want = 0  # what it wants now is worth saying at once
        for message in grant.revoked:
            parsed = from_range(message)
            if parsed is not None and self.holdings.drop([parsed[0]]):
                log.info("shard %s taken back by the control app", parsed[0])
        added = 0
        for message in grant.shards:
            parsed = from_range(message)
            if parsed is None:
                log.warning("ignoring a malformed shard in a grant: %s", message)
                continue
            rng, epoch = parsed
            if self.leaving:
                self._returned.append(Grant(rng, self.worker_id, epoch))
            elif self.holdings.add(Grant(rng, self.worker_id, epoch)) is None:
                # the control app does not know what this worker holds (a restart lost
                # a lease): hand it back now rather than let it wait for its lease to end
                log.warning("handing back granted shard %s: it overlaps one already held", rng)
                self._returned.append(Grant(rng, self.worker_id, epoch))
            else:
                added += 1
        return added

    # -- the reader and the trainer ---------------------------------------------------

    def accept(self, topic: str, partition: int, offsets: NDArray[np.int64]) -> NDArray[np.int64]:
        """The lease id of each fetched record (``-1``: not wanted): see
        :meth:`~streamtrain.shards.holdings.Holdings.accept`."""
        return self.holdings.accept(topic, partition, offsets)

    def holds(self, lease_ids: NDArray[np.int64]) -> NDArray[np.bool_]:
        """Whether each record's lease is still held: see
        :meth:`~streamtrain.shards.holdings.Holdings.holds`."""
        return self.holdings.holds(lease_ids)

    def ack(self, lease_ids: NDArray[np.int64]) -> int:
        """Records read under ``lease_ids`` were in a committed training step."""
        return self.holdings.ack(lease_ids)

    def leave(self) -> int:
        """Stop asking; hand back the shards not started; returns how many."""
        self.leaving = True
        unstarted = self.holdings.unstarted()
        self.holdings.drop([h.range for h in unstarted])
        self._returned.extend(h.grant for h in unstarted)
        return len(unstarted)

    @property
    def drained(self) -> bool:
        """Leaving, and every shard it held is done and reported, or handed back."""
        return self.leaving and len(self.holdings) == 0 and not self._done

    # -- to the control app -----------------------------------------------------------

    def want(self) -> int:
        """Shards wanted beyond those held and not yet read."""
        if self.leaving:
            return 0
        ahead = self.prefetch_shards
        if self.holdings.unread_records() < self.prefetch_shards * self.batch_records:
            ahead *= 2  # small shards: more of them per grant round trip
        return max(0, ahead - self.holdings.unread())

    def update(self, now_s: float) -> pb.ShardUpdate | None:
        """The update to send now, or ``None`` when none is due (module docstring).
        ``want_shards`` is the whole wish beyond the shards listed as held (the control
        app counts its grants still on their way), so a repeated wish never doubles a
        grant."""
        self._done.extend(self.holdings.take_finished())
        want = self.want()
        urgent = bool(self._done or self._returned) or want > self._last_want
        if not urgent and now_s - self._last_update_s < self.heartbeat_interval_s:
            return None
        return self._message(now_s, want, leaving=False)

    def last_update(self, now_s: float) -> pb.ShardUpdate:
        """The ``leaving`` update of a worker that stops: what is done, and every shard
        still held handed back."""
        self.leaving = True
        self._done.extend(self.holdings.take_finished())
        left = self.holdings.grants()
        self.holdings.drop([g.shard for g in left])
        self._returned.extend(left)
        return self._message(now_s, 0, leaving=True)

    def _message(self, now_s: float, want: int, *, leaving: bool) -> pb.ShardUpdate:
        done, self._done = self._done, []
        returned, self._returned = self._returned, []
        self.shards_done += len(done)
        self._last_update_s, self._last_want = now_s, want
        return pb.ShardUpdate(
            job=self.job,
            worker_id=self.worker_id,
            want_shards=want,
            done=[grant_range(h.grant) for h in done],
            held=[grant_range(g) for g in self.holdings.grants()],
            returned=[grant_range(g) for g in returned],
            leaving=leaving,
        )
