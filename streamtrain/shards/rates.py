"""How fast each worker trains, from its done reports, and the shard size it should get (pure).

Owned here: :class:`WorkerRates`. A worker trains its shards one after another, so a
shard's work began when it was granted or when the worker's previous shard was done,
the later; records over that time is one sample, averaged into the worker's running
rate. A worker whose rate would need longer than ``target_shard_s`` for a full shard
gets a smaller one (the rate times ``target_shard_s``, at least ``min_shard_records``).
"""

from __future__ import annotations

from streamtrain.shards.model import ShardSettings

__all__ = ["WorkerRates"]

_RATE_WEIGHT = 0.5  # weight of a new sample in a worker's running rate


class WorkerRates:
    """Running training rates per worker (module docstring)."""

    def __init__(self, settings: ShardSettings) -> None:
        self.settings = settings
        self._rates: dict[str, float] = {}
        self._last_done_s: dict[str, float] = {}

    def sample(self, worker_id: str, records: int, granted_at_s: float, now_s: float) -> None:
        """``worker_id`` reported ``records`` done at ``now_s``, granted at ``granted_at_s``."""
        began_s = max(granted_at_s, self._last_done_s.get(worker_id, 0.0))
        self._last_done_s[worker_id] = now_s
        sample = records / max(now_s - began_s, 1e-3)
        old = self._rates.get(worker_id)
        self._rates[worker_id] = (
            sample if old is None else (1 - _RATE_WEIGHT) * old + _RATE_WEIGHT * sample
        )

    def shard_records_for(self, worker_id: str) -> int:
        """A full shard, or less for a worker too slow to train one in ``target_shard_s``."""
        s = self.settings
        rate = self._rates.get(worker_id)
        if rate is None:
            return s.shard_records
        return max(s.min_shard_records, min(s.shard_records, int(rate * s.target_shard_s)))

    def forget(self, worker_id: str) -> None:
        self._rates.pop(worker_id, None)
        self._last_done_s.pop(worker_id, None)
