"""The origin side of forwarding: batches sent to a receiver and not yet answered.

Owned here (no I/O, no threads; the ForwardingUnit's thread drives it):
:class:`InFlightBatches`, the brpc-style stream bookkeeping. Each forwarded batch gets
an id unique to this worker's incarnation and is kept, with its receiver and send time,
until one of three things happens, each handing the batch back to the caller exactly
once: the receiver answers ACKED or REJECTED (:meth:`~InFlightBatches.answered`: only
the receiver the batch went to can answer it; anything else is a late or stray answer),
its time runs out (:meth:`~InFlightBatches.expired`), or the receiver leaves
(:meth:`~InFlightBatches.sent_to`). What happens to a returned batch (acknowledged to
the tracker, or back to the overflow) is the caller's decision. The records in flight to
each receiver are counted here (:meth:`~InFlightBatches.records_to`): they are what the
sender's credit is computed from.

When a batch runs out of time depends on where it is. Until the receiver says it
queued the batch (:meth:`~InFlightBatches.received`), it has ``ack_timeout_s`` from
sending: a frame lost on the way, or a receiver that is gone or paused, costs that
long. Once queued, the batch waits for the receiver's trainer, which may take longer
than any fixed timeout at a slow trainer (that wait is not the receiver's fault, and
re-routing would only train the batch twice); it then expires only when the receiver
fell silent for ``ack_timeout_s`` (no state event, no answer: dead or paused), or when
it has been queued for ``max_queued_s`` (a trainer that stopped making progress).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from streamtrain.records import RecordColumns

__all__ = ["InFlight", "InFlightBatches"]


@dataclass(slots=True)
class InFlight:
    """One forwarded batch awaiting its answer; ``received_at`` is set once the receiver
    said it queued the batch."""

    batch_id: str
    receiver: str
    columns: RecordColumns
    sent_at: float
    received_at: float | None = None


class InFlightBatches:
    """Batches awaiting an answer, in send order (see the module docstring)."""

    def __init__(
        self, incarnation: int, ack_timeout_s: float, max_queued_s: float = float("inf")
    ) -> None:
        self._incarnation = incarnation
        self._timeout_s = ack_timeout_s
        self._max_queued_s = max_queued_s
        self._sent = 0
        self._pending: dict[str, InFlight] = {}
        self._records_to: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._pending)

    def next_id(self) -> str:
        """The id of the next batch to send (``<incarnation hex>-<n>``)."""
        self._sent += 1
        return f"{self._incarnation:x}-{self._sent}"

    def records_to(self) -> dict[str, int]:
        """Records in flight per receiver (only receivers with some)."""
        return dict(self._records_to)

    def sent(self, batch_id: str, receiver: str, columns: RecordColumns, now: float) -> None:
        """``columns`` went to ``receiver`` as ``batch_id`` at ``now``."""
        self._pending[batch_id] = InFlight(batch_id, receiver, columns, now)
        self._records_to[receiver] = self._records_to.get(receiver, 0) + len(columns)

    def received(self, batch_id: str, receiver: str, now: float) -> bool:
        """``receiver`` queued ``batch_id`` at ``now``; ``False`` for an unknown, settled or
        stray batch."""
        flight = self._pending.get(batch_id)
        if flight is None or flight.receiver != receiver:
            return False
        if flight.received_at is None:
            flight.received_at = now
        return True

    def answered(self, batch_id: str, receiver: str) -> InFlight | None:
        """The batch ``receiver`` answered, or ``None`` (unknown, already settled, or sent
        to another receiver: a late or stray answer)."""
        flight = self._pending.get(batch_id)
        if flight is None or flight.receiver != receiver:
            return None
        return self._remove(flight)

    def _remove(self, flight: InFlight) -> InFlight:
        del self._pending[flight.batch_id]
        left = self._records_to[flight.receiver] - len(flight.columns)
        if left:
            self._records_to[flight.receiver] = left
        else:
            del self._records_to[flight.receiver]
        return flight

    def _deadline(self, flight: InFlight, heard_at: Callable[[str], float]) -> float:
        if flight.received_at is None:
            return flight.sent_at + self._timeout_s
        alive_until = max(flight.received_at, heard_at(flight.receiver)) + self._timeout_s
        return min(alive_until, flight.received_at + self._max_queued_s)

    def expired(
        self, now: float, heard_at: Callable[[str], float] = lambda _: float("-inf")
    ) -> list[InFlight]:
        """The batches whose time ran out at ``now``, in send order (removed).

        ``heard_at(receiver)`` is when the receiver was last heard from (a queued batch
        lives while its receiver talks).
        """
        out = [f for f in self._pending.values() if now >= self._deadline(f, heard_at)]
        for flight in out:
            self._remove(flight)
        return out

    def sent_to(self, receiver: str) -> list[InFlight]:
        """Every batch awaiting ``receiver``'s answer, in send order (removed)."""
        flights = [f for f in self._pending.values() if f.receiver == receiver]
        for flight in flights:
            self._remove(flight)
        return flights

    def next_deadline(
        self, heard_at: Callable[[str], float] = lambda _: float("-inf")
    ) -> float | None:
        """When the next batch runs out of time (``None``: nothing in flight)."""
        if not self._pending:
            return None
        return min(self._deadline(f, heard_at) for f in self._pending.values())
