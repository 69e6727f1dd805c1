"""Cutting what ``consume()`` returns into training-batch-sized message lists.

Owned here: :class:`MessageBatcher`, the fetch thread's carry. It hands out whole
batches' worth of messages at once (cut into batch-sized chunks while they become
columns, in one call per ``consume()``: :func:`~streamtrain.ingest.messages.to_columns`
with ``batch_records``), so the trainer gets exactly one queued chunk per batch: no
payload bytes are copied to split or join chunks later. A remainder waits for the next
``consume()`` at most ``linger_s``, and not at all when ``consume()`` came back empty;
:meth:`MessageBatcher.wait_s` tells the fetch thread how long its next ``consume()`` may
block so that the remainder is not held longer than that (``consume()`` waits for its
whole count or its timeout). The trainer's side does not wait for that batch again
(``BatchReader``'s ``source_lingers``). Pure: the caller passes the time, and the
messages can be anything (the consumer's are confluent-kafka ``Message`` objects).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from streamtrain.errors import ConfigError

__all__ = ["MessageBatcher"]

M = TypeVar("M")


class MessageBatcher(Generic[M]):
    """Messages carried until a whole batch (``batch_records``) or ``linger_s`` passed."""

    def __init__(self, batch_records: int, linger_s: float) -> None:
        if batch_records < 1:
            raise ConfigError(f"batch_records must be at least 1, got {batch_records}")
        self.batch_records = batch_records
        self.linger_s = linger_s
        self._carry: list[M] = []
        self._carry_since = 0.0

    def __len__(self) -> int:
        """Messages carried (not handed out yet)."""
        return len(self._carry)

    def add(self, messages: Sequence[M], now: float) -> list[list[M]]:
        """Take one ``consume()`` result (maybe empty); return the lists to hand out now,
        in order: one list of every whole batch back to back (to be cut every
        ``batch_records``; it may be ``messages`` itself), then the remainder if it
        lingered long enough or nothing new came."""
        carry = self._carry
        size = self.batch_records
        if messages and not carry:  # the common case: no list copies beyond the cut
            self._carry_since = now
            full = len(messages) - len(messages) % size
            whole = messages if full == len(messages) else messages[:full]
            out = [whole if isinstance(whole, list) else list(whole)] if full else []
            carry.extend(messages[full:])
        else:
            carry.extend(messages)
            if not carry:
                return []
            full = len(carry) - len(carry) % size
            out = [carry[:full]] if full else []
            if full:
                del carry[:full]
        if full:
            self._carry_since = now
        if carry and (not messages or now - self._carry_since >= self.linger_s):
            out.append(list(carry))
            carry.clear()
        return out

    def wait_s(self, now: float, longest_s: float) -> float:
        """How long the next ``consume()`` may block: ``longest_s``, or less while a
        remainder is carried (until its ``linger_s`` is up; 0 once it is)."""
        if not self._carry:
            return longest_s
        return min(longest_s, max(0.0, self._carry_since + self.linger_s - now))

    def drop(self, doomed: Callable[[M], bool]) -> int:
        """Forget the carried messages ``doomed`` says so of (revoked partitions); how many."""
        if not self._carry:
            return 0
        kept = [m for m in self._carry if not doomed(m)]
        dropped = len(self._carry) - len(kept)
        self._carry[:] = kept
        return dropped
