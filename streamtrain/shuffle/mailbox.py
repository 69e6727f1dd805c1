"""The hand-off from the threads that call the ShuffleUnit to the ForwardingUnit's thread.

Owned here: :class:`Mailbox`, the :class:`~streamtrain.shuffle.unit.ShuffleListener`
the ForwardingUnit installs on its unit. The unit calls it from the consumer's, the
trainer's or the forwarding thread, with the unit's lock held, so it only records what
happened and wakes the forwarding thread's poller through a non-blocking pipe: the
receiver state changed (the thread publishes the state current when it looks), a
peer's batch was trained (the thread answers ACKED and may grant credit), or overflow
records are ready (the thread forwards them). A wake-up already pending is not written
again, so the pipe never fills.
"""

from __future__ import annotations

import collections
import contextlib
import os

__all__ = ["Mailbox", "Trained"]

Trained = tuple[str, str, int]
"""``(origin_worker, batch_id, records)``: a peer's batch this worker has trained."""


class Mailbox:
    """Posted to from any thread; :meth:`take` and :meth:`woken` on the forwarding thread."""

    def __init__(self) -> None:
        # None: the receiver state changed; a tuple: a peer's batch was trained
        self._items: collections.deque[Trained | None] = collections.deque()
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._read_fd, False)
        os.set_blocking(self._write_fd, False)
        self._wake_pending = False

    @property
    def fd(self) -> int:
        """The pipe's reading end, for the forwarding thread's poller."""
        return self._read_fd

    # the ShuffleListener side (any thread) ---------------------------------------------

    def state_changed(self, receiving: bool, queue_records: int, sequence: int) -> None:
        self._items.append(None)
        self.wake()

    def remote_batch_trained(self, origin_worker: str, batch_id: str, records: int) -> None:
        self._items.append((origin_worker, batch_id, records))
        self.wake()

    def overflow_ready(self) -> None:
        self.wake()

    def wake(self) -> None:
        """Make the poller return (once, however often it is called before it does)."""
        if self._wake_pending or self._write_fd < 0:
            return
        self._wake_pending = True
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._write_fd, b"\x01")

    # the forwarding thread's side --------------------------------------------------------

    def woken(self) -> None:
        """The poller saw :attr:`fd` readable: empty the pipe; the next post wakes again."""
        self._wake_pending = False
        with contextlib.suppress(BlockingIOError):
            os.read(self._read_fd, 4096)

    def take(self) -> tuple[bool, list[Trained]]:
        """What was posted since the last call: whether the receiver state changed, and the
        trained peer batches in the order they were trained."""
        changed = False
        trained: list[Trained] = []
        while self._items:
            item = self._items.popleft()
            if item is None:
                changed = True
            else:
                trained.append(item)
        return changed, trained

    def close(self) -> None:
        """Close the pipe (later posts only record); idempotent."""
        for fd in (self._read_fd, self._write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._read_fd = self._write_fd = -1
