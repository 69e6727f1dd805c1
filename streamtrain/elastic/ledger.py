"""Which batches wait for which step to become durable: offsets follow the step.

Owned here: :class:`AckLedger`, pure. A batch trained in step ``s`` is acknowledged only
once ``s`` committed everywhere *and* is durable: a restart would resume from a model
that contains it. With torchft a committed step is durable at once (the live replicas
hold it); with torchelastic only once a checkpoint at step ``s`` or later was saved, so
the ledger holds the batch until then. A batch of a step that did not commit, and every
batch still held when the worker stops or its group restarts, is handed back (nacked)
to be trained again. Each batch leaves the ledger exactly once, acked or nacked.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["AckLedger", "Settled"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Settled(Generic[T]):
    """What to do now: acknowledge ``ack`` (trained, durable), hand back ``nack``."""

    ack: tuple[T, ...] = ()
    nack: tuple[T, ...] = ()


@dataclass
class AckLedger(Generic[T]):
    """Batches held until their step is durable (module docstring)."""

    durable_step: int = 0
    _held: deque[tuple[int, T]] = field(default_factory=deque)

    def __len__(self) -> int:
        return len(self._held)

    @property
    def held_steps(self) -> tuple[int, ...]:
        return tuple(step for step, _ in self._held)

    def committed(self, step: int, item: T) -> Settled[T]:
        """``item`` was trained in step ``step``, which committed everywhere."""
        if self._held and step < self._held[-1][0]:
            raise ValueError(f"step {step} committed after step {self._held[-1][0]}")
        if step <= self.durable_step:
            return Settled(ack=(item,))
        self._held.append((step, item))
        return Settled()

    @staticmethod
    def failed(item: T) -> Settled[T]:
        """``item``'s step did not commit: it is handed back."""
        return Settled(nack=(item,))

    def durable(self, step: int) -> Settled[T]:
        """Steps up to ``step`` are durable: acknowledge what they held."""
        if step <= self.durable_step:
            return Settled()
        self.durable_step = step
        done: list[T] = []
        while self._held and self._held[0][0] <= step:
            done.append(self._held.popleft()[1])
        return Settled(ack=tuple(done))

    def rolled_back(self, to_step: int) -> Settled[T]:
        """The model went back to step ``to_step`` (a restart from a checkpoint): what
        was held for later steps is handed back; nothing at or below it is held."""
        self.durable_step = to_step
        gone = tuple(item for _, item in self._held)
        self._held.clear()
        return Settled(nack=gone)

    def release_all(self) -> Settled[T]:
        """The worker stops: everything not yet durable is handed back."""
        gone = tuple(item for _, item in self._held)
        self._held.clear()
        return Settled(nack=gone)
