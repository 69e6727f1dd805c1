"""Sending a batch of messages and knowing which of them the broker confirmed.

Owned here: :func:`publish` awaits every send of a batch concurrently, each within
``timeout_s`` (a send that does not finish in time, with the broker away, fails), and
a send counts as confirmed only once the broker acknowledged it: a Faust
``topic.send(...)`` returns as soon as the producer *enqueued* the message, with a
delivery future that aiokafka fails after its request timeout when the broker is gone
(counted done then, a send lost in a broker outage would never leave the outbox), so
that future is awaited too, within the same ``timeout_s``. It
returns a :class:`Published` that pairs each message's item (whatever the caller wants
back: the alert, the command, the group) with its outcome, in the batch's order. It
never raises for a failed send: the caller decides (keep it in an outbox, count it as
dropped). No Faust here: a send is any awaitable (a Faust ``topic.send(...)``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Published", "publish"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Published(Generic[T]):
    """The items whose sends were confirmed, and those that failed with the reason."""

    confirmed: tuple[T, ...]
    failed: tuple[tuple[T, BaseException], ...]

    @property
    def failed_items(self) -> list[T]:
        return [item for item, _ in self.failed]


async def publish(sends: Iterable[tuple[T, Awaitable[object]]], timeout_s: float) -> Published[T]:
    """Await every ``(item, send)`` at once, each within ``timeout_s`` (module docstring)."""
    batch = list(sends)
    outcomes = await asyncio.gather(
        *(asyncio.wait_for(_delivered(send), timeout_s) for _, send in batch),
        return_exceptions=True,
    )
    confirmed: list[T] = []
    failed: list[tuple[T, BaseException]] = []
    for (item, _), outcome in zip(batch, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            failed.append((item, outcome))
        else:
            confirmed.append(item)
    return Published(tuple(confirmed), tuple(failed))


async def _delivered(send: Awaitable[object]) -> object:
    """The send's result once the broker confirmed it: a delivery future it returns is
    awaited too (shielded: a timeout here must not cancel the producer's own future)."""
    result = await send
    if isinstance(result, asyncio.Future):
        return await asyncio.shield(result)
    return result
