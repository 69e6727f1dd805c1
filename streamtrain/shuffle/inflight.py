"""The origin side of forwarding: batches sent to a receiver and not yet answered.

Owned here (no I/O, no threads; the ForwardingUnit's thread drives it):
:class:`InFlightBatches`, the brpc-style stream bookkeeping. Each forwarded batch gets
an id unique to this worker's incarnation and is kept, with its receiver and send time,
until one of four things happens, each handing the batch back to the caller: the
receiver answers (:meth:`~InFlightBatches.answered`: only the receiver the batch went
to can answer it; anything else is a late or stray answer), the ACK timeout passes
(:meth:`~InFlightBatches.expired`, oldest first), or the receiver leaves
(:meth:`~InFlightBatches.sent_to`). What happens to a returned batch (acknowledged to
the tracker, or back to the overflow) is the caller's decision.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamtrain.records import RecordColumns

__all__ = ["InFlight", "InFlightBatches"]


@dataclass(frozen=True, slots=True)
class InFlight:
    """One forwarded batch awaiting its answer."""

    batch_id: str
    receiver: str
    columns: RecordColumns
    sent_at: float


class InFlightBatches:
    """Batches awaiting an answer, in send order; ``ack_timeout_s`` after sending they expire."""

    def __init__(self, incarnation: int, ack_timeout_s: float) -> None:
        self._incarnation = incarnation
        self._timeout_s = ack_timeout_s
        self._sent = 0
        self._pending: dict[str, InFlight] = {}

    def __len__(self) -> int:
        return len(self._pending)

    def next_id(self) -> str:
        """The id of the next batch to send (``<incarnation hex>-<n>``)."""
        self._sent += 1
        return f"{self._incarnation:x}-{self._sent}"

    def sent(self, batch_id: str, receiver: str, columns: RecordColumns, now: float) -> None:
        """``columns`` went to ``receiver`` as ``batch_id`` at ``now``."""
        self._pending[batch_id] = InFlight(batch_id, receiver, columns, now)

    def answered(self, batch_id: str, receiver: str) -> InFlight | None:
        """The batch ``receiver`` answered, or ``None`` (unknown, already settled, or sent
        to another receiver: a late or stray answer)."""
        flight = self._pending.get(batch_id)
        if flight is None or flight.receiver != receiver:
            return None
        del self._pending[batch_id]
        return flight

    def expired(self, now: float) -> list[InFlight]:
        """The batches unanswered for ``ack_timeout_s`` at ``now``, oldest first (removed)."""
        out: list[InFlight] = []
        while self._pending:
            flight = next(iter(self._pending.values()))
            if now - flight.sent_at < self._timeout_s:
                break
            del self._pending[flight.batch_id]
            out.append(flight)
        return out

    def sent_to(self, receiver: str) -> list[InFlight]:
        """Every batch awaiting ``receiver``'s answer, in send order (removed)."""
        flights = [f for f in self._pending.values() if f.receiver == receiver]
        for flight in flights:
            del self._pending[flight.batch_id]
        return flights

    def next_deadline(self) -> float | None:
        """When the oldest batch expires (``None``: nothing in flight)."""
        if not self._pending:
            return None
        return next(iter(self._pending.values())).sent_at + self._timeout_s
