"""When a worker counts as idle: one clock for every "stop after so long without a record".

Owned here: :class:`IdleClock`. The idle time starts again whenever records arrive;
before the consumer's first partition assignment it does not count (a worker that has
not joined yet is not idle), nor while records are known to be on their way (for
example in the shuffle layer, or trained by a peer). ``IngestConsumer.batches()``, the
framework adapters' loop and ``streamtrain.worker.run_worker`` all stop on it. Pure: the
time comes from an injected clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["IdleClock"]


class IdleClock:
    """Idle time since the last record; :meth:`expired` once it reaches ``idle_exit_s``.

    ``idle_exit_s=None`` never expires. Not thread-safe: one loop owns it.
    """

    def __init__(
        self, idle_exit_s: float | None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.idle_exit_s = idle_exit_s
        self._clock = clock
        self._since = clock()

    def busy(self) -> None:
        """Records arrived: the idle time starts again now."""
        self._since = self._clock()

    def expired(self, *, assigned: bool = True, settled: Callable[[], bool] | None = None) -> bool:
        """After a wait that brought no record: has the worker been idle long enough?

        ``assigned=False`` (no partition assigned yet) and ``settled()`` returning
        ``False`` (records are still on their way) restart the idle time instead;
        ``settled`` is asked only once the worker is assigned.
        """
        now = self._clock()
        if not assigned or (settled is not None and not settled()):
            self._since = now
            return False
        return self.idle_exit_s is not None and now - self._since >= self.idle_exit_s
