"""Bounds on what another process may ask the cluster allocator, applied before use.

Owned here (pure: no Faust, no Kafka): :class:`RequestLimits` and :func:`bound_request`.
A ``ScaleRequest`` comes from a planner in another process (or from anyone who may write
the requests topic), is kept in a changelogged table and is solved for again after a
restart, so it is bounded before the book or the solver sees it:

* **counts are clamped to the pool's capacity**: the wanted count, the plan's entries,
  the job's own min and max (0 stays "no cap") and the count it reports. The MILP's
  size grows with a job's max: one request with ``max_workers`` = 10^6 took 28 s and
  2.7 GB, 10^7 raised MemoryError, at every decision and after every restart. The plan
  is cut to the allocator's horizon. Each clamp is said in :attr:`Bounded.clamped`.
* **refused, with the reason in words**: a request created beyond now + the clock skew
  allowed (one dated 30 days ahead made every later request of its job "stale"), a
  non-finite or negative number where the solver needs a finite one (remaining work,
  deadline, rates, step time, pause), a job or request id longer than Kafka allows a
  name to be (quoted to 200 characters).

Negative counts and bounds the wrong way round are the book's to refuse
(:meth:`streamtrain.cluster.book.RequestBook.refusal_reason`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from streamtrain.cluster.book import Request
from streamtrain.errors import ConfigError

__all__ = ["MAX_NAME_CHARS", "Bounded", "RequestLimits", "bound_request"]

MAX_NAME_CHARS = 249  # Kafka's topic-name limit: a job names topics
_QUOTE_CHARS = 200
_EXPLANATION_CHARS = 2_000


@dataclass(frozen=True, slots=True)
class RequestLimits:
    capacity_workers: int
    horizon_steps: int
    max_clock_skew_s: float = 60.0

    def __post_init__(self) -> None:
        if self.capacity_workers < 1 or self.horizon_steps < 1:
            raise ConfigError("the capacity and the horizon must be at least 1")
        if not (math.isfinite(self.max_clock_skew_s) and self.max_clock_skew_s >= 0):
            raise ConfigError(
                f"the clock skew allowed is at least 0 s, got {self.max_clock_skew_s}"
            )


@dataclass(frozen=True, slots=True)
class Bounded:
    """A request within the limits (``refusal`` None), or why it is refused."""

    request: Request | None
    refusal: str | None = None
    clamped: tuple[str, ...] = ()


def _quoted(name: str) -> str:
    if len(name) <= _QUOTE_CHARS:
        return repr(name)
    return f"{name[:_QUOTE_CHARS]!r}... ({len(name):,} characters)"


def _refusal(request: Request, now_s: float, limits: RequestLimits) -> str | None:
    for what, name in (("job", request.job), ("request id", request.request_id)):
        if len(name) > MAX_NAME_CHARS:
            return f"{what} {_quoted(name)} is longer than {MAX_NAME_CHARS} characters"
    ahead_s = request.created_at_s - now_s
    if not math.isfinite(request.created_at_s) or ahead_s > limits.max_clock_skew_s:
        return (
            f"created {ahead_s:,.0f} s in the future (clock skew allowed: "
            f"{limits.max_clock_skew_s:g} s)"
        )
    numbers = {
        "action_pause_s": request.pause_s,
        "remaining_work": request.remaining_work,
        "deadline_at_ms": request.deadline_at_s,
        "records_per_s_per_worker": request.rate_per_worker,
        "step_time_ms": request.step_time_ms,
        "traffic_records_per_s": request.traffic_records_per_s,
    }
    for name, value in numbers.items():
        if value is not None and not math.isfinite(value):
            return f"{name} is {value}, not a finite number"
    if request.remaining_work is not None and request.remaining_work < 0:
        return f"negative remaining_work {request.remaining_work}"
    return None


def bound_request(request: Request, limits: RequestLimits, now_s: float) -> Bounded:
    """``request`` within ``limits`` at ``now_s`` (module docstring)."""
    why = _refusal(request, now_s, limits)
    if why is not None:
        return Bounded(None, why)
    cap = limits.capacity_workers
    clamped: list[str] = []

    def clamp(name: str, value: int) -> int:
        if value > cap:
            clamped.append(f"{name} {value} clamped to the pool's capacity {cap}")
            return cap
        return value

    plan = request.plan
    if len(plan) > limits.horizon_steps:
        clamped.append(f"a plan of {len(plan)} steps cut to the horizon of {limits.horizon_steps}")
        plan = plan[: limits.horizon_steps]
    if any(p > cap for p in plan):
        clamped.append(f"plan entries above the pool's capacity {cap} clamped to it")
        plan = tuple(min(p, cap) for p in plan)
    bounded = replace(
        request,
        wanted_workers=clamp("wanted_workers", request.wanted_workers),
        current_workers=clamp("current_workers", request.current_workers),
        min_workers=clamp("min_workers", request.min_workers),
        max_workers=clamp("max_workers", request.max_workers),
        plan=plan,
        pause_s=max(0.0, request.pause_s),
        explanation=request.explanation[:_EXPLANATION_CHARS],
        model_type=request.model_type[:MAX_NAME_CHARS],
    )
    return Bounded(bounded, None, tuple(clamped))
