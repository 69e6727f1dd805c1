"""The ShuffleUnit: one worker's bounded local queue, overflow buffer and receiver state.

The ShuffleUnit is responsible for (KALE §3.5, Fig. 6):

* taking chunks from the consumer (:meth:`ShuffleUnit.put`): into the local queue while
  it has room, the rest into the overflow buffer the ForwardingUnit drains (policy
  ``advanced``), an even share into the overflow whatever the need (``basic``), or
  nothing shared at all (``none``); a full overflow pushes back on the consumer;
* handing chunks to the trainer (:meth:`ShuffleUnit.take`) and, on
  :meth:`ShuffleUnit.ack`, telling the offset tracker about the worker's own records or
  the ForwardingUnit about a peer's batch that is now fully trained;
* taking forwarded batches from peers (:meth:`ShuffleUnit.deliver_remote`) when the
  receiver state allows, and the state itself: watermark hysteresis, every transition
  reported to a listener that broadcasts it;
* the origin side of forwarding: overflow records handed to the ForwardingUnit (cut to
  fit a frame: a record too large for any frame is trained here instead), put back in
  front when a receiver rejected them or timed out, and acknowledged to the tracker only
  when the receiver's ACK arrived (:meth:`ShuffleUnit.ack_forwarded`). The overflow
  buffer itself and the frame-size bound are :mod:`streamtrain.shuffle.overflow`'s.

It is thread-safe: the consumer, the trainer and the ForwardingUnit's thread call it.
It does no I/O.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from streamtrain.errors import ConfigError
from streamtrain.records import Acknowledger, RecordColumns
from streamtrain.shuffle.overflow import Overflow
from streamtrain.shuffle.policy import ShufflePolicy
from streamtrain.shuffle.settings import ShuffleSettings
from streamtrain.shuffle.watermarks import basic_local_share, next_receiving

__all__ = ["ShuffleListener", "ShuffleUnit", "ShuffledBatch", "UnitStats"]


class ShuffleListener(Protocol):
    """What the ShuffleUnit tells the ForwardingUnit; called with the unit's lock held,
    so implementations only enqueue and wake their own thread."""

    def state_changed(self, receiving: bool, queue_records: int, sequence: int) -> None: ...

    def remote_batch_trained(self, origin_worker: str, batch_id: str, records: int) -> None: ...

    def overflow_ready(self) -> None: ...


@dataclass(frozen=True, slots=True, eq=False)
class ShuffledBatch:
    """Records handed to the trainer; ``origin_worker`` is ``None`` for the worker's own."""

    columns: RecordColumns
    origin_worker: str | None
    token: int

    def __len__(self) -> int:
        return len(self.columns)


@dataclass(frozen=True, slots=True)
class UnitStats:
    """A snapshot of the unit's queues and totals (records)."""

    queue_records: int
    overflow_records: int
    in_flight_records: int
    receiving: bool
    local_records_in: int
    remote_records_in: int
    records_trained: int
    forwarded_records_acked: int
    state_transitions: int
    oversized_records_kept: int = 0


@dataclass(slots=True)
class _Chunk:
    columns: RecordColumns
    origin_worker: str | None
    batch_key: tuple[str, str] | None


@dataclass(slots=True)
class _RemoteBatch:
    remaining: int
    records: int


class ShuffleUnit:
    """Queue, overflow and receiver state of one worker (see the module docstring)."""

    def __init__(
        self,
        settings: ShuffleSettings,
        acknowledger: Acknowledger,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._ack = acknowledger
        self._clock = clock
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._queue: deque[_Chunk] = deque()
        self._queue_records = 0
        self._overflow = Overflow(settings.overflow_capacity_records)
        self._peer_count = 0
        self._receiving = settings.policy is not ShufflePolicy.NONE
        self._closed_to_peers = False
        self._sequence = 0
        self._listener: ShuffleListener | None = None
        self._handed_out: dict[int, _Chunk] = {}
        self._remote: dict[tuple[str, str], _RemoteBatch] = {}
        self._tokens = itertools.count(1)
        self._local_in = 0
        self._remote_in = 0
        self._trained = 0
        self._forwarded_acked = 0
        self._transitions = 0
        self._oversized_kept = 0

    @property
    def settings(self) -> ShuffleSettings:
        return self._settings

    def set_listener(self, listener: ShuffleListener | None) -> None:
        with self._lock:
            self._listener = listener

    def set_peer_count(self, peers: int) -> None:
        """How many live peers there are (the ``basic`` policy splits over them)."""
        with self._lock:
            self._peer_count = max(peers, 0)
            self._refill_locked()
            self._changed.notify_all()

    def stop_receiving(self) -> None:
        """Refuse peers' batches from now on (the trainer is stopping); broadcast it."""
        with self._lock:
            self._closed_to_peers = True
            self._set_receiving_locked(False)

    def receiver_state(self) -> tuple[bool, int, int]:
        """``(receiving, queue_records, sequence)`` for (re)broadcasting."""
        with self._lock:
            return self._receiving, self._queue_records, self._sequence

    # consumer side -------------------------------------------------------------------

    def put(
        self, columns: RecordColumns, *, timeout_s: float | None = None
    ) -> RecordColumns | None:
        """Place records read by this worker's consumer; block while there is no room.

        Returns ``None`` once every record is placed, or the records still unplaced when
        ``timeout_s`` passed (the caller offers them again; nothing is dropped).
        """
        if columns.forwarded:
            raise ConfigError(
                "put() takes records read locally; forwarded records arrive "
                "through deliver_remote()"
            )
        deadline = None if timeout_s is None else self._clock() + timeout_s
        remaining: RecordColumns | None = columns if len(columns) else None
        with self._lock:
            if self._settings.policy is ShufflePolicy.BASIC and remaining is not None:
                keep = basic_local_share(len(remaining), self._peer_count + 1)
                if keep < len(remaining):
                    shared = remaining.take(slice(keep, None))
                    local = remaining.take(slice(0, keep))
                    unshared = self._place_shared_locked(shared, deadline)
                    self._local_in += len(shared) - (0 if unshared is None else len(unshared))
                    # What the full overflow could not take is trained here: the local
                    # queue is fed either way, so a put that times out never starves it.
                    remaining = (
                        local if unshared is None else RecordColumns.concat([local, unshared])
                    )
            while remaining is not None:
                before = len(remaining)
                remaining = self._place_locked(remaining)
                self._local_in += before - (0 if remaining is None else len(remaining))
                if remaining is None or not self._wait_locked(deadline):
                    break
            return remaining

    def _place_shared_locked(
        self, shared: RecordColumns, deadline: float | None
    ) -> RecordColumns | None:
        """Put the ``basic`` policy's shared part into the overflow; return what did not fit."""
        pending = shared
        while True:
            room = self._overflow.room
            if room >= len(pending):
                self._push_overflow_locked(pending, front=False)
                return None
            if room > 0:
                self._push_overflow_locked(pending.take(slice(0, room)), front=False)
                pending = pending.take(slice(room, None))
            if not self._wait_locked(deadline):
                return pending

    def _place_locked(self, columns: RecordColumns) -> RecordColumns | None:
        """Place what fits now; return the rest. Older overflow records go first."""
        settings = self._settings
        self._refill_locked()
        room = settings.queue_capacity_records - self._queue_records
        placed = 0
        if room > 0:
            placed = min(room, len(columns))
            part = columns if placed == len(columns) else columns.take(slice(0, placed))
            self._append_locked(_Chunk(part, None, None))
        if (
            placed < len(columns)
            and settings.policy is ShufflePolicy.ADVANCED
            and self._overflow.room > 0
        ):
            extra = min(self._overflow.room, len(columns) - placed)
            self._push_overflow_locked(columns.take(slice(placed, placed + extra)), front=False)
            placed += extra
        if placed == len(columns):
            return None
        return columns.take(slice(placed, None))

    def _wait_locked(self, deadline: float | None) -> bool:
        if deadline is None:
            self._changed.wait()
            return True
        left = deadline - self._clock()
        if left <= 0:
            return False
        self._changed.wait(left)
        return True

    # trainer side ---------------------------------------------------------------------

    def take(self, max_records: int, *, timeout_s: float | None = None) -> ShuffledBatch | None:
        """The next chunk (at most ``max_records``), or ``None`` after ``timeout_s``."""
        if max_records < 1:
            raise ConfigError(f"max_records must be at least 1, got {max_records}")
        deadline = None if timeout_s is None else self._clock() + timeout_s
        with self._lock:
            while not self._queue:
                if not self._wait_locked(deadline):
                    return None
            chunk = self._queue[0]
            if len(chunk.columns) > max_records:
                head = chunk.columns.take(slice(0, max_records))
                chunk.columns = chunk.columns.take(slice(max_records, None))
                chunk = _Chunk(head, chunk.origin_worker, chunk.batch_key)
            else:
                self._queue.popleft()
            self._queue_records -= len(chunk.columns)
            self._refill_locked()
            self._update_state_locked()
            token = next(self._tokens)
            self._handed_out[token] = chunk
            self._changed.notify_all()
            return ShuffledBatch(chunk.columns, chunk.origin_worker, token)

    def ack(self, batch: ShuffledBatch) -> bool:
        """The trainer used ``batch``; ``False`` if it was acknowledged before."""
        with self._lock:
            chunk = self._handed_out.pop(batch.token, None)
            if chunk is None:
                return False
            self._trained += len(chunk.columns)
            if chunk.batch_key is not None:
                remote = self._remote.get(chunk.batch_key)
                if remote is None:
                    return True
                remote.remaining -= len(chunk.columns)
                if remote.remaining == 0:
                    del self._remote[chunk.batch_key]
                    if self._listener is not None:
                        origin, batch_id = chunk.batch_key
                        self._listener.remote_batch_trained(origin, batch_id, remote.records)
                return True
        self._ack_columns(chunk.columns)
        return True

    def _ack_columns(self, columns: RecordColumns) -> None:
        # the chunk's runs in record order (computed once per chunk, in C when built):
        # they cover exactly its records, which is all an acknowledger needs
        for partition, first, last in columns.offset_ranges():
            self._ack.ack(columns.topic, partition, first, last)

    # receiver side (ForwardingUnit thread) ------------------------------------------

    def holds_remote(self, origin_worker: str, batch_id: str) -> bool:
        """Whether a peer's batch is queued here, or handed out and not yet trained."""
        with self._lock:
            return (origin_worker, batch_id) in self._remote

    def deliver_remote(self, origin_worker: str, batch_id: str, columns: RecordColumns) -> bool:
        """Queue a peer's forwarded batch if the policy and state allow; ``False`` refuses."""
        with self._lock:
            policy = self._settings.policy
            if (
                policy is ShufflePolicy.NONE
                or self._closed_to_peers
                or (policy is ShufflePolicy.ADVANCED and not self._receiving)
            ):
                return False
            key = (origin_worker, batch_id)
            if key in self._remote:
                return True  # a duplicate of a batch already queued: one ACK answers both
            self._remote[key] = _RemoteBatch(len(columns), len(columns))
            self._remote_in += len(columns)
            self._append_locked(_Chunk(columns, origin_worker, key))
            return True

    # origin side (ForwardingUnit thread) ---------------------------------------------

    def pop_overflow(
        self, max_records: int, max_frame_bytes: float = math.inf
    ) -> RecordColumns | None:
        """Take up to ``max_records`` overflow records to forward (counted in flight), no
        more than fit a frame of ``max_frame_bytes``
        (:func:`~streamtrain.shuffle.overflow.frame_bytes`). A record too large for any
        frame goes to the local queue instead (trained here)."""
        with self._lock:
            while self._overflow and max_records >= 1:
                part = self._overflow.pop_for_frame(max_records, max_frame_bytes)
                if part is None:  # the oldest record alone does not fit a frame
                    self._oversized_kept += 1
                    self._append_locked(_Chunk(self._overflow.take_head(1), None, None))
                    continue
                self._changed.notify_all()
                return part
            return None

    def drop(self, topic: str, partitions: set[int]) -> int:
        """Remove this worker's own queued and overflow records of revoked partitions.

        Their next owner reads them again. Records a peer forwarded, records handed to
        the trainer and records in flight to a receiver stay: the first two are trained
        and acknowledged as usual, the last are acknowledged when the receiver's ACK
        comes (the tracker counts an acknowledgement of a revoked partition as stale).
        Returns how many records were removed.
        """
        if not partitions:
            return 0
        with self._lock:
            queue: deque[_Chunk] = deque()
            for chunk in self._queue:
                if chunk.origin_worker is None:
                    chunk.columns = chunk.columns.without(topic, partitions)
                if len(chunk.columns):
                    queue.append(chunk)
            from_overflow = self._overflow.drop(topic, partitions)
            queue_records = sum(len(chunk.columns) for chunk in queue)
            dropped = self._queue_records - queue_records + from_overflow
            self._queue, self._queue_records = queue, queue_records
            self._refill_locked()
            self._changed.notify_all()
            return dropped

    def has_overflow(self) -> bool:
        with self._lock:
            return bool(self._overflow)

    def return_overflow(self, columns: RecordColumns) -> None:
        """A forwarded batch came back (rejected, timed out, receiver gone): re-route it."""
        with self._lock:
            self._overflow.landed(columns)
            self._push_overflow_locked(columns, front=True)
            self._refill_locked()
            self._changed.notify_all()

    def ack_forwarded(self, columns: RecordColumns) -> None:
        """The receiver acknowledged a forwarded batch: now the tracker may count it."""
        with self._lock:
            self._overflow.landed(columns)
            self._forwarded_acked += len(columns)
            self._changed.notify_all()
        self._ack_columns(columns)

    def stats(self) -> UnitStats:
        with self._lock:
            return UnitStats(
                queue_records=self._queue_records,
                overflow_records=self._overflow.records,
                in_flight_records=self._overflow.in_flight_records,
                receiving=self._receiving,
                local_records_in=self._local_in,
                remote_records_in=self._remote_in,
                records_trained=self._trained,
                forwarded_records_acked=self._forwarded_acked,
                state_transitions=self._transitions,
                oversized_records_kept=self._oversized_kept,
            )

    # internals (lock held) -----------------------------------------------------------

    def _append_locked(self, chunk: _Chunk) -> None:
        self._queue.append(chunk)
        self._queue_records += len(chunk.columns)
        self._update_state_locked()
        self._changed.notify_all()

    def _push_overflow_locked(self, columns: RecordColumns, *, front: bool) -> None:
        self._overflow.push(columns, front=front)
        if self._listener is not None:
            self._listener.overflow_ready()

    def _refill_locked(self) -> None:
        """Overflow records go back to the local queue when it has room (``advanced``)
        or when there is nobody to share them with (``basic`` without peers)."""
        policy = self._settings.policy
        if policy is ShufflePolicy.BASIC and self._peer_count > 0:
            return
        room = self._settings.queue_capacity_records - self._queue_records
        while room > 0 and self._overflow:
            part = self._overflow.take_head(room)
            room -= len(part)
            self._queue.append(_Chunk(part, None, None))
            self._queue_records += len(part)
        self._update_state_locked()

    def _update_state_locked(self) -> None:
        if self._settings.policy is ShufflePolicy.NONE:
            return
        settings = self._settings
        receiving = not self._closed_to_peers and next_receiving(
            self._receiving,
            self._queue_records,
            settings.low_watermark_records,
            settings.high_watermark_records,
        )
        self._set_receiving_locked(receiving)

    def _set_receiving_locked(self, receiving: bool) -> None:
        if receiving == self._receiving or self._settings.policy is ShufflePolicy.NONE:
            return
        self._receiving = receiving
        self._sequence += 1
        self._transitions += 1
        if self._listener is not None:
            self._listener.state_changed(receiving, self._queue_records, self._sequence)
