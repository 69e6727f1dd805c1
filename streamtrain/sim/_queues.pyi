"""Types of the optional C extension ``_queues.c`` (used by streamtrain/sim/engine.py)."""

from typing import Any

class Queues:
    def __init__(
        self,
        cumulative: Any,
        per_step: Any,
        rank: Any,
        consumed: Any,
        pointer: Any,
        tolerance: Any,
        step_s: float,
        max_workers: int,
    ) -> None: ...
    @property
    def drained(self) -> bool: ...
    def tick(
        self,
        step: int,
        fraction: float,
        training: int,
        capacity_records: float,
        shuffle: bool,
        forward_cost: float,
        now_s: float,
    ) -> tuple[float, float, float, float]: ...

def pairwise_sum(values: Any) -> float: ...
