"""The receiver's answers to forwarded batches: where they go, and retrying the ones that
could not go yet.

Owned here: :class:`Replies`, used on the ForwardingUnit's thread with its ROUTER. An
answer (``BatchAck``: RECEIVED, ACKED or REJECTED) goes back on the routing id the
sender's batch arrived with (:meth:`Replies.remember`), never on one the receiver made
up from a worker id. The ROUTER is ``ROUTER_MANDATORY``: when the sender is not
connected at that moment (its DEALER is reconnecting) the send fails instead of
vanishing; the answer is counted (``control_send_failures``) and tried again every
loop until the sender is back or an ACK timeout passed (then it is counted in
``answers_lost``, and the sender's own timeout re-routes the batch). An answer lost for
good costs a duplicate, never a record.

RECEIVED is deferred (:meth:`Replies.received`): it goes out only if the batch's ACKED
has not by :data:`RECEIVED_DELAY_S` after it was queued. A batch trained at once (the
common case on a receiver that keeps up) is answered once, not twice; one that waits in
the queue gets its RECEIVED a moment later, long before any ACK timeout.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Container
from dataclasses import dataclass

import zmq

from streamtrain.proto.data_plane_pb2 import BatchAck
from streamtrain.shuffle import codec
from streamtrain.shuffle.stats import ForwardingCounters
from streamtrain.units import NS_PER_MS

__all__ = ["RECEIVED_DELAY_S", "Replies"]

RECEIVED_DELAY_S = 0.05
"""How long a queued batch's RECEIVED waits for its ACKED to make it unnecessary."""


@dataclass(slots=True)
class _Answer:
    """An answer the ROUTER could not send yet."""

    sender: str
    batch_id: str
    status: BatchAck.Status
    reason: str
    give_up_at: float


class Replies:
    """Routes and pending answers of one receiver (see the module docstring)."""

    def __init__(
        self, job: str, worker_id: str, retry_for_s: float, counters: ForwardingCounters
    ) -> None:
        self._job = job
        self._worker_id = worker_id
        self._retry_for_s = retry_for_s
        self._count = counters
        self._routes: dict[str, bytes] = {}
        self._plain: set[str] = set()
        self._unsent: collections.deque[_Answer] = collections.deque()
        self._deferred: dict[tuple[str, str], float] = {}  # RECEIVED due, in due order

    @property
    def pending(self) -> bool:
        """Whether answers wait for a retry, or deferred RECEIVED answers for their time."""
        return bool(self._unsent) or bool(self._deferred)

    def received(self, sender: str, batch_id: str, now: float) -> None:
        """``sender``'s ``batch_id`` was queued at ``now``: answer RECEIVED at
        ``now + RECEIVED_DELAY_S`` unless its ACKED (or anything else) went first."""
        self._deferred[(sender, batch_id)] = now + RECEIVED_DELAY_S

    def remember(self, sender: str, route: bytes, *, plain: bool = False) -> None:
        """``sender``'s batches arrive on ``route`` (its latest connection); ``plain``:
        it is a worker of the first release (:mod:`~streamtrain.shuffle.legacy`), which
        is never sent RECEIVED and gets a credit grant with each ACKED."""
        self._routes[sender] = route
        if plain:
            self._plain.add(sender)
        else:
            self._plain.discard(sender)

    def grant(self, router: zmq.Socket[bytes], sender: str, records: int) -> None:
        """Give a first-release ``sender`` back the credit of ``records`` trained records
        (it regains credit from grants only); nothing for any other sender. A grant that
        cannot go is not retried: the sender's ACK timeout refunds its credit."""
        route = self._routes.get(sender)
        if sender not in self._plain or route is None or records <= 0:
            return
        grant = codec.encode_grant(
            job=self._job, receiver=self._worker_id, sender=sender, records=records
        )
        try:
            router.send_multipart([route, codec.KIND_CREDIT, grant], flags=zmq.NOBLOCK)
        except zmq.ZMQError:
            self._count.control_send_failures += 1

    def keep_only(self, members: Container[str]) -> None:
        """Forget the routes of workers that are no longer members."""
        for worker in [w for w in self._routes if w not in members]:
            del self._routes[worker]
            self._plain.discard(worker)
        for key in [k for k in self._deferred if k[0] not in members]:
            del self._deferred[key]

    def send(
        self,
        router: zmq.Socket[bytes],
        sender: str,
        batch_id: str,
        status: BatchAck.Status,
        reason: str = "",
        *,
        route: bytes | None = None,
    ) -> None:
        """Answer ``sender``'s ``batch_id`` (on ``route``, default its remembered one);
        kept for a retry if it cannot go now. A first-release sender reads RECEIVED as a
        rejection, so it is not told."""
        if status != BatchAck.RECEIVED:
            self._deferred.pop((sender, batch_id), None)  # this answer says more
        elif sender in self._plain:
            return
        if not self._try(router, sender, batch_id, status, reason, route):
            give_up_at = time.monotonic() + self._retry_for_s
            self._unsent.append(_Answer(sender, batch_id, status, reason, give_up_at))

    def resend(self, router: zmq.Socket[bytes], members: Container[str], now: float) -> None:
        """Send the deferred RECEIVED answers that are due; try the waiting answers again,
        dropping those whose sender left or whose time is up."""
        while self._deferred:
            (sender, batch_id), due = next(iter(self._deferred.items()))
            if due > now:
                break
            del self._deferred[(sender, batch_id)]
            if sender in members:
                self.send(router, sender, batch_id, BatchAck.RECEIVED)
        for _ in range(len(self._unsent)):
            answer = self._unsent.popleft()
            if answer.sender not in members or now >= answer.give_up_at:
                self._count.answers_lost += 1
                continue
            if not self._try(
                router, answer.sender, answer.batch_id, answer.status, answer.reason, None
            ):
                self._unsent.append(answer)

    def _try(
        self,
        router: zmq.Socket[bytes],
        sender: str,
        batch_id: str,
        status: BatchAck.Status,
        reason: str,
        route: bytes | None,
    ) -> bool:
        route = route if route is not None else self._routes.get(sender)
        if route is None:
            self._count.control_send_failures += 1
            return False
        ack = codec.encode_ack(
            job=self._job,
            batch_id=batch_id,
            receiver=self._worker_id,
            status=status,
            reason=reason,
            at_ms=time.time_ns() // NS_PER_MS,
        )
        try:
            router.send_multipart([route, codec.KIND_ACK, ack], flags=zmq.NOBLOCK)
        except zmq.ZMQError:  # EHOSTUNREACH (ROUTER_MANDATORY): not connected; EAGAIN: full
            self._count.control_send_failures += 1
            return False
        return True
