"""The interface every scaling policy shares with the simulator and the live control app.

Owned here, as frozen values and one protocol:

* :class:`Observation`: what a live system knows at ``now_s`` and nothing more: the
  worker count, the arrival history it has *seen* (records/s per ``step_s``, complete
  steps only, oldest first, gaps read as no traffic), measured lag (the oldest
  unconsumed record's age in seconds, and the backlog in records), utilization over
  the metrics window, measured training speed per worker, and any scaling action in
  progress. The live control app builds one from each Kafka lag report; the simulator
  builds one at every decision tick. Future arrivals are never in it.
* :class:`PendingAction`: a scaling action that started and has not finished (the job
  is preparing new workers or paused).
* :class:`Decision`: what a policy asks for: a target worker count, which path produced
  it (``proactive``, ``fallback`` or ``manual``, the ``ScaleCommand.Reason`` values),
  the plan behind it (one count per ``plan_step_s``) and a human explanation.
* :class:`Policy`: ``name``, ``decision_interval_s`` and ``decide(obs) -> Decision | None``
  (``None``: nothing to change). Policies may keep state between calls (a forecaster,
  recent recommendations); they are driven by one caller at a time.
* :class:`Resumable`: a policy whose running state (a fallback's hysteresis and
  cooldown, the lag its last plan expects) a copy rebuilt on a new throughput model
  takes over, so re-estimating the model mid-run neither re-arms a cooldown nor
  forgets an active fallback.
* :class:`PolicyContext`: what a policy is built with: worker bounds, the throughput
  observations (``(workers, records/s)`` pairs from profiling or earlier runs) that
  model-based policies fit, and a forecaster factory.

Units: seconds and records per second throughout; worker counts are whole numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol, get_args, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError
from streamtrain.forecast.base import Forecaster
from streamtrain.proto import control_plane_pb2 as cp

__all__ = [
    "REASONS",
    "Decision",
    "ForecasterFactory",
    "Observation",
    "PendingAction",
    "Policy",
    "PolicyContext",
    "Reason",
    "Resumable",
]

FloatArray = NDArray[np.float64]
Reason = Literal["proactive", "fallback", "manual"]
REASONS: tuple[Reason, ...] = get_args(Reason)
_PROTO_REASON: dict[Reason, cp.ScaleCommand.Reason] = {
    "proactive": cp.ScaleCommand.PROACTIVE,
    "fallback": cp.ScaleCommand.FALLBACK,
    "manual": cp.ScaleCommand.MANUAL,
}
ForecasterFactory = Callable[[int], Forecaster]
"""Builds a fresh forecaster given the number of history steps it will be fitted on."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingAction:
    """A scaling action in progress: new workers starting (``prep``) or the job paused."""

    from_workers: int
    target_workers: int
    started_at_s: float
    ready_at_s: float  # when the job trains again, at the target count
    pause_s: float  # the part of [started_at_s, ready_at_s) with no training at all


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Observation:
    """What the live system knows at ``now_s`` (see the module docstring).

    ``arrivals_records_per_s[i]`` is the mean arrival rate over
    ``[history_start_s + i·step_s, history_start_s + (i+1)·step_s)``; the array holds
    complete steps only, so its last step ends at or before ``now_s``. It is read-only.
    """

    now_s: float
    current_workers: int
    step_s: int
    history_start_s: float
    arrivals_records_per_s: FloatArray
    max_lag_s: float
    backlog_records: float
    utilization: float | None = None  # consumed / capacity over the metrics window
    throughput_per_worker_records_per_s: float | None = None  # measured training speed
    pending: PendingAction | None = None
    last_pause_s: float | None = None  # measured pause of the most recent finished action
    # measured preparation of the most recent two-phase scale-up (command to admitted)
    last_prep_s: float | None = None

    def __post_init__(self) -> None:
        if self.current_workers < 0:
            raise ConfigError(f"current workers cannot be negative, got {self.current_workers}")
        if self.step_s <= 0:
            raise ConfigError(f"the arrival step must be positive, got {self.step_s} s")
        if self.arrivals_records_per_s.ndim != 1:
            raise ConfigError("the arrival history is one-dimensional")
        for name in ("max_lag_s", "backlog_records"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ConfigError(f"{name} must be finite and non-negative, got {value}")

    @property
    def observed_steps(self) -> int:
        """How many complete arrival steps the history holds."""
        return int(self.arrivals_records_per_s.shape[0])

    @property
    def next_step_start_s(self) -> float:
        """Start of the first step not yet observed (the current, incomplete one)."""
        return self.history_start_s + self.observed_steps * self.step_s

    def recent_rates_records_per_s(self, window_s: float) -> FloatArray:
        """The arrival rates of the complete steps in the last ``window_s`` (at least the
        last step; empty if none is complete)."""
        steps = max(1, round(window_s / self.step_s))
        return self.arrivals_records_per_s[-steps:]

    def recent_rate_records_per_s(self, window_s: float) -> float:
        """Mean arrival rate over the last ``window_s`` of complete steps (0 if none)."""
        recent = self.recent_rates_records_per_s(window_s)
        return float(recent.mean()) if recent.size else 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """A policy's answer: scale to ``target_workers`` (see the module docstring)."""

    target_workers: int
    reason: Reason
    plan: tuple[int, ...] = ()
    plan_step_s: int = 0
    explanation: str = ""

    def __post_init__(self) -> None:
        if self.target_workers < 1:
            raise ConfigError(f"a target needs at least one worker, got {self.target_workers}")
        if self.reason not in REASONS:
            raise ConfigError(f"reason must be one of {', '.join(REASONS)}, got {self.reason!r}")
        if self.plan and self.plan_step_s <= 0:
            raise ConfigError("a plan needs a positive plan_step_s")

    @property
    def proto_reason(self) -> cp.ScaleCommand.Reason:
        """The ``ScaleCommand.Reason`` enum value for this decision's path."""
        return _PROTO_REASON[self.reason]


@runtime_checkable
class Policy(Protocol):
    """A scaling policy (see the module docstring)."""

    name: str
    decision_interval_s: float

    def decide(self, obs: Observation) -> Decision | None: ...


@runtime_checkable
class Resumable(Protocol):
    """A policy that goes on where a previous one of its kind left off (see the module
    docstring). ``resume_from`` ignores a policy of another kind."""

    def resume_from(self, previous: Policy) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyContext:
    """What policies are constructed with.

    ``throughput_observations`` are measured ``(workers, records_per_s)`` pairs: the
    training speed of the whole job at that many workers (KALE §4.2 collects such pairs
    by profiling). ``forecaster_factory`` is called with the history length in steps.
    ``model_kind`` is the throughput model family fitted to the observations.
    ``action_pause_s`` / ``scale_up_prep_s``: what the executor is expected to take per
    action (the pause, and for two-phase scale-ups the preparation before it); policies
    that care replace them with the measured ones (``Observation.last_pause_s``,
    ``Observation.last_prep_s``).
    """

    min_workers: int = 1
    max_workers: int = 32
    step_s: int = 60
    throughput_observations: tuple[tuple[float, float], ...] = ()
    model_kind: str = "sync"
    forecaster_factory: ForecasterFactory | None = field(default=None, repr=False)
    action_pause_s: float = 600.0
    scale_up_prep_s: float = 0.0

    def __post_init__(self) -> None:
        if self.min_workers < 1 or self.max_workers < self.min_workers:
            raise ConfigError(
                f"need 1 <= min workers <= max workers, got {self.min_workers}, {self.max_workers}"
            )
        if self.step_s <= 0:
            raise ConfigError(f"the step must be positive, got {self.step_s} s")
        if self.action_pause_s < 0 or self.scale_up_prep_s < 0:
            raise ConfigError("action pause and prep times cannot be negative")
        for workers, rate in self.throughput_observations:
            if workers < 1 or not math.isfinite(rate) or rate <= 0:
                raise ConfigError(f"bad throughput observation ({workers}, {rate})")

    def clamp(self, workers: int) -> int:
        return max(self.min_workers, min(self.max_workers, int(workers)))
