"""What ``streamtrain demo`` runs: :class:`DemoSettings`, validated, and its defaults
(:data:`DEFAULT_SPEED`, :data:`MIN_SLO_S`, :data:`BURST_PEAK_S`). Pure: no process, topic
or socket is touched here (:mod:`streamtrain.demo.run` does that).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from streamtrain.config import AssignmentMode
from streamtrain.demo.worker_args import (
    ONE_MODEL_BATCH_RECORDS,
    WORKER_BATCH_RECORDS,
    WORKER_NICENESS,
)
from streamtrain.errors import ConfigError
from streamtrain.shuffle.policy import ShufflePolicy
from streamtrain.sim.metrics import SLO_LAG_S
from streamtrain.units import DAY_S

__all__ = ["BURST_PEAK_S", "DEFAULT_SPEED", "MIN_SLO_S", "TORCHELASTIC_REFUSED", "DemoSettings"]

DEFAULT_SPEED = 144.0  # simulated seconds per wall second: a day in 10 minutes
MIN_SLO_S = 2.0  # the default SLO's floor, wall seconds: lag is measured to about a second
BURST_PEAK_S = 15  # a dashboard burst is this many wall seconds of the peak rate
TORCHELASTIC_REFUSED = (
    "the demo does not run --engine torchelastic: under torchrun every join or leave "
    "restarts every worker from the newest checkpoint, measured at 13-62 s per action "
    '(docs/benchmarks.md, "Elastic training"), while the demo\'s SLO is 20 simulated '
    "minutes, 8.3 wall seconds at 144x: a day of scaling would be a day of restarts. "
    "`streamtrain worker --engine torchelastic` runs it, and `python -m "
    "benchmarks.elastic` compares it with torchft; the demo runs torchft or none"
)


@dataclass(frozen=True, slots=True)
class DemoSettings:
    """What the demo runs. ``speed`` compresses time: a simulated day takes
    ``86400 / speed`` wall seconds (600 s at the default 144)."""

    speed: float = DEFAULT_SPEED
    partitions: int = 16
    peak_records_per_s: float = 1_200.0
    worker_capacity_records_per_s: float = 400.0
    # Two at least: with one, a dead worker stops all training until its replacement is
    # ready, and one worker near its capacity lags more than two (docs/benchmarks.md,
    # "The demo").
    min_workers: int = 2
    max_workers: int = 8
    # The day starts at midnight's traffic (about 0.7 of the evening peak's, which
    # needs four workers): a pool of four, as the previous evening would leave it,
    # rather than a scale-up whose joiners prepare while two workers fall behind.
    initial_workers: int = 4
    slo_lag_s: float | None = None  # wall s; default 20 simulated minutes (KALE), >= 2 s
    seed: int = 0
    drain_timeout_s: float = 120.0
    startup_lead_s: float = 25.0
    run_dir: Path | None = None
    topic: str | None = None
    dashboard_host: str = "127.0.0.1"
    dashboard_port: int = 8765
    kill_worker_at_s: float | None = None
    burst_records: int | None = None  # per dashboard burst; default BURST_PEAK_S of the peak
    progress_interval_s: float = 10.0
    shuffle: str = "advanced"  # the workers' --shuffle policy (group, cooperative)
    worker_queue_records: int = 1_024
    assignment: str = "shards"  # the workers' --assignment (benchmarks/scaling.py: best)
    drift_turns_per_day: float = 0.5  # how far the hidden labelling model turns a day
    engine: str = "torchft"  # the workers' --engine: one model (torchft) or a copy each
    # Below the demo's own processes (worker_args.WORKER_NICENESS says why); 0 where
    # other work at nice 0 shares the cores (a test suite) and would starve the workers.
    worker_niceness: int = WORKER_NICENESS

    def __post_init__(self) -> None:
        if self.engine == "torchelastic":
            raise ConfigError(TORCHELASTIC_REFUSED)
        if self.engine not in ("none", "torchft"):
            raise ConfigError(f"the demo's engine is torchft or none, got {self.engine!r}")
        if self.engine != "none" and self.assignment != "shards":
            raise ConfigError(
                f"--engine {self.engine} trains one model on every worker: use --assignment "
                "shards (the shuffle of the group modes trains a peer's records on a "
                "worker's own copy)"
            )
        if not 0 <= self.worker_niceness <= 19:
            raise ConfigError(f"the workers' niceness must be 0..19, got {self.worker_niceness}")
        if not math.isfinite(self.drift_turns_per_day) or self.drift_turns_per_day < 0:
            raise ConfigError(f"the drift must be >= 0 turns a day, got {self.drift_turns_per_day}")
        if not math.isfinite(self.speed) or self.speed <= 0:
            raise ConfigError(f"the speed must be a positive factor, got {self.speed}")
        if self.day_s < 30:
            raise ConfigError(f"a simulated day of {self.day_s:.0f} s is too short (>= 30 s)")
        if self.partitions < 1 or self.peak_records_per_s <= 0:
            raise ConfigError("the demo needs partitions and a positive peak rate")
        if self.worker_capacity_records_per_s <= 0:
            raise ConfigError("the worker capacity must be positive")
        if not 1 <= self.min_workers <= self.initial_workers <= self.max_workers:
            raise ConfigError(
                "need 1 <= --min-workers <= --initial-workers <= --max-workers, got "
                f"{self.min_workers}, {self.initial_workers}, {self.max_workers}"
            )
        if self.slo_lag_s is not None and self.slo_lag_s <= 0:
            raise ConfigError("the SLO lag must be positive")
        if self.shuffle not in {p.value for p in ShufflePolicy}:
            raise ConfigError(
                f"the shuffle policy must be none, basic or advanced: {self.shuffle!r}"
            )
        if self.assignment not in {m.value for m in AssignmentMode}:
            raise ConfigError(
                f"the assignment must be group, cooperative or shards: {self.assignment!r}"
            )
        batch = WORKER_BATCH_RECORDS if self.engine == "none" else ONE_MODEL_BATCH_RECORDS
        if self.worker_queue_records < batch:
            raise ConfigError(f"a worker's queue must hold a batch ({batch} records)")

    @property
    def day_s(self) -> float:
        return DAY_S / self.speed

    @property
    def slo_s(self) -> float:
        """The lag SLO in wall seconds: ``slo_lag_s``, else KALE's 20 simulated minutes
        (:data:`~streamtrain.sim.metrics.SLO_LAG_S`), at least :data:`MIN_SLO_S`."""
        if self.slo_lag_s is not None:
            return self.slo_lag_s
        return max(SLO_LAG_S / self.speed, MIN_SLO_S)
