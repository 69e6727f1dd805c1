"""One worker's shuffle, assembled: ShuffleUnit + ForwardingUnit + membership.

Owned here: :class:`ShuffleNode`, what a worker process creates between its consumer
and its trainer. The consumer calls :meth:`ShuffleNode.put`, the trainer
:meth:`ShuffleNode.take` and :meth:`ShuffleNode.ack`; the node owns the start and stop
order (bind, announce, forward; then withdraw, broadcast LEFT, close).
"""

from __future__ import annotations

from dataclasses import dataclass

from streamtrain.heap import keep_large_buffers_in_heap
from streamtrain.records import Acknowledger, RecordColumns
from streamtrain.shuffle.forwarding import ForwardingStats, ForwardingUnit
from streamtrain.shuffle.membership import Membership, PeerInfo
from streamtrain.shuffle.settings import ShuffleSettings
from streamtrain.shuffle.unit import ShuffledBatch, ShuffleUnit, UnitStats

__all__ = ["NodeStats", "ShuffleNode"]


@dataclass(frozen=True, slots=True)
class NodeStats:
    unit: UnitStats
    forwarding: ForwardingStats


class ShuffleNode:
    """A worker's shuffle layer; use as a context manager or call start/stop."""

    def __init__(
        self,
        settings: ShuffleSettings,
        acknowledger: Acknowledger,
        membership: Membership,
        *,
        incarnation: int | None = None,
        seed: int | None = None,
    ) -> None:
        self.unit = ShuffleUnit(settings, acknowledger)
        self.forwarding = ForwardingUnit(self.unit, membership, incarnation=incarnation, seed=seed)

    @property
    def me(self) -> PeerInfo:
        return self.forwarding.me

    def start(self) -> PeerInfo:
        keep_large_buffers_in_heap()  # a frame buffer per batch: no page faults for each
        return self.forwarding.start()

    def stop(self) -> None:
        self.forwarding.stop()

    def __enter__(self) -> ShuffleNode:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def put(
        self, columns: RecordColumns, *, timeout_s: float | None = None
    ) -> RecordColumns | None:
        return self.unit.put(columns, timeout_s=timeout_s)

    def take(self, max_records: int, *, timeout_s: float | None = None) -> ShuffledBatch | None:
        return self.unit.take(max_records, timeout_s=timeout_s)

    def ack(self, batch: ShuffledBatch) -> bool:
        return self.unit.ack(batch)

    def stop_receiving(self) -> None:
        """Tell peers to send nothing more (before the trainer stops)."""
        self.unit.stop_receiving()

    def stats(self) -> NodeStats:
        return NodeStats(self.unit.stats(), self.forwarding.stats())
