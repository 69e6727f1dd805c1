"""From workers' ``ThroughputSample`` messages to the throughput model the planner believes.

Owned here, pure (no I/O; the Faust app and tests feed it):

* :func:`sample_problem`: why a sample cannot be used, or ``None``. A sample is a claim
  by one worker: one whose clock runs an hour ahead, or that reports a pool of four
  billion, must not pin what the planner believes.
* :func:`job_windows`: per-worker samples to job-level :class:`JobWindow` values, so a
  worker whose sample is missing or late does not make the job look slower.
* :func:`estimate_throughput`: job windows to a :class:`ThroughputEstimate`, measured
  once enough pool sizes are seen, a scaled prior before.
* :func:`materially_different`: whether a new estimate should rebuild the policy.
* :class:`SampleBook`: the recent samples and closed windows the planner keeps. The
  worker count is the planner's (:mod:`streamtrain.roster`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from streamtrain.errors import ConfigError
from streamtrain.proto import control_plane_pb2 as cp
from streamtrain.scale.models import MODEL_KINDS, ThroughputModel, fit, modelarts_prior
from streamtrain.units import MS_PER_S

__all__ = [
    "MIN_BUSY_FRACTION",
    "JobWindow",
    "SampleBook",
    "SampleSettings",
    "Source",
    "ThroughputEstimate",
    "capacity_records_per_s",
    "estimate_throughput",
    "job_windows",
    "materially_different",
    "model_coefficients",
    "sample_problem",
]

_MAX_STEP_TIME_MS = 3_600_000.0  # an hour: beyond it a step time is not believed

Source = Literal["prior", "measured"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SampleSettings:
    """How samples become observations (see the module docstring)."""

    bucket_s: float = 10.0
    min_coverage: float = 0.5
    retention_s: float = 300.0
    windows_per_count: int = 30
    quantile: float = 0.9
    min_distinct_workers: int = 3
    model_kind: str = "sync"
    prior_single_worker_records_per_s: float | None = None
    max_clock_skew_s: float = 60.0
    max_pool_workers: int = 10_000
    max_records_per_s: float = 1e9

    def __post_init__(self) -> None:
        if not (math.isfinite(self.bucket_s) and self.bucket_s > 0):
            raise ConfigError(f"the sample bucket must be positive, got {self.bucket_s} s")
        if not 0 < self.min_coverage <= 1:
            raise ConfigError(f"min coverage is in (0, 1], got {self.min_coverage}")
        if self.retention_s < self.bucket_s:
            raise ConfigError("sample retention must be at least one bucket")
        if self.windows_per_count < 1:
            raise ConfigError("keep at least one window per worker count")
        if not 0 <= self.quantile <= 1:
            raise ConfigError(f"the quantile is in [0, 1], got {self.quantile}")
        if self.min_distinct_workers < 1:
            raise ConfigError("need at least one distinct worker count")
        if self.model_kind not in MODEL_KINDS or self.model_kind.endswith("_ps"):
            kinds = ", ".join(k for k in MODEL_KINDS if not k.endswith("_ps"))
            raise ConfigError(f"the planner's model is one of {kinds}, got {self.model_kind!r}")
        rate = self.prior_single_worker_records_per_s
        if rate is not None and not (math.isfinite(rate) and rate > 0):
            raise ConfigError(f"the prior single-worker rate must be positive, got {rate}")
        if not (math.isfinite(self.max_clock_skew_s) and self.max_clock_skew_s >= 0):
            raise ConfigError(
                f"the clock skew allowed is at least 0 s, got {self.max_clock_skew_s}"
            )
        if self.max_pool_workers < 1:
            raise ConfigError(f"max_pool_workers must be at least 1, got {self.max_pool_workers}")
        if not (math.isfinite(self.max_records_per_s) and self.max_records_per_s > 0):
            raise ConfigError(f"max_records_per_s must be positive, got {self.max_records_per_s}")


_DEFAULT_SETTINGS = SampleSettings()


@dataclass(frozen=True, slots=True)
class JobWindow:
    """The whole job's training rate over one bucket at one pool size."""

    start_s: float
    workers: int
    records_per_s: float
    reporting_workers: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ThroughputEstimate:
    """What the planner believes about F(w), and where it comes from."""

    source: Source
    observations: tuple[tuple[float, float], ...]  # (workers, records/s): the policy's
    measured: tuple[tuple[int, float], ...]  # (workers, records/s) per measured pool size
    single_worker_records_per_s: float
    need_distinct: int

    @property
    def explanation(self) -> str:
        points = ", ".join(f"{w}: {r:,.1f}" for w, r in self.measured) or "none"
        if self.source == "measured":
            return f"measured throughput at {len(self.measured)} worker counts ({points})"
        return (
            f"prior n*0.8^log2(n) x {self.single_worker_records_per_s:,.2f} records/s per "
            f"worker: {len(self.measured)} of {self.need_distinct} distinct worker counts "
            f"measured ({points})"
        )

    def model(self, kind: str) -> ThroughputModel:
        """F fitted to :attr:`observations` (NNLS, relative error)."""
        return fit(kind, [w for w, _ in self.observations], [r for _, r in self.observations])


def model_coefficients(kind: str) -> int:
    """How many coefficients a model kind has (a fit needs that many distinct counts)."""
    for size in range(1, 16):
        try:
            ThroughputModel(kind, (0.0,) * size)
        except ConfigError:
            continue
        return size
    raise ConfigError(f"unknown throughput model {kind!r}")


def sample_problem(
    sample: cp.ThroughputSample,
    job: str,
    *,
    now_ms: float | None = None,
    settings: SampleSettings | None = None,
) -> str | None:
    """Why ``sample`` cannot be used for ``job``, or ``None`` when it can: wrong job, no
    worker id, a negative, non-finite or absurd rate or pool size, an observation time
    beyond the allowed clock skew in the future, ...

    ``settings`` bound the values (default :class:`SampleSettings`); with ``now_ms`` a
    sample observed more than ``max_clock_skew_s`` in the future is refused too (times
    on the book's clock: the model clock when the planner compresses time).
    """
    limits = settings or _DEFAULT_SETTINGS
    if sample.job != job:
        return f"sample for job {sample.job!r}, planning {job!r}"
    if not sample.worker_id:
        return "sample without a worker_id"
    who = sample.worker_id
    for name in ("records_per_s_trained", "records_per_s_consumed"):
        rate = getattr(sample, name)
        if not math.isfinite(rate) or not 0 <= rate <= limits.max_records_per_s:
            return f"bad {name} {rate} from {who} (0..{limits.max_records_per_s:g} accepted)"
    if not math.isfinite(sample.window_s) or sample.window_s <= 0:
        return f"bad window_s {sample.window_s} from {who}"
    if sample.workers > limits.max_pool_workers:
        return f"pool of {sample.workers} workers from {who} (at most {limits.max_pool_workers})"
    if sample.HasField("busy_fraction") and not (
        math.isfinite(sample.busy_fraction) and sample.busy_fraction >= 0
    ):
        return f"bad busy_fraction {sample.busy_fraction} from {who}"
    if sample.HasField("step_time_ms") and not (
        math.isfinite(sample.step_time_ms) and 0 <= sample.step_time_ms <= _MAX_STEP_TIME_MS
    ):
        return f"bad step_time_ms {sample.step_time_ms} from {who}"
    if sample.HasField("disturbed_s") and not (
        math.isfinite(sample.disturbed_s) and sample.disturbed_s >= 0
    ):
        return f"bad disturbed_s {sample.disturbed_s} from {who}"
    if sample.observed_at_ms <= 0:
        return f"no observed_at_ms from {who}"
    return None if now_ms is None else _from_the_future(sample, now_ms, limits)


def _from_the_future(
    sample: cp.ThroughputSample, now_ms: float, limits: SampleSettings
) -> str | None:
    """Why ``sample`` is observed too far in the future, or ``None``."""
    if sample.observed_at_ms <= now_ms + limits.max_clock_skew_s * MS_PER_S:
        return None
    ahead_s = (sample.observed_at_ms - now_ms) / MS_PER_S
    return (
        f"sample from {sample.worker_id} observed {ahead_s:,.0f} s in the future (clock skew "
        f"allowed: {limits.max_clock_skew_s:g} s)"
    )


MIN_BUSY_FRACTION = 0.1


def _bucket(sample: cp.ThroughputSample, bucket_s: float) -> int:
    """The index of the ``bucket_s`` window the sample was observed in."""
    return math.floor(sample.observed_at_ms / MS_PER_S / bucket_s)


def capacity_records_per_s(sample: cp.ThroughputSample) -> float | None:
    """What the worker trains per second when saturated, as far as its sample tells:
    the trained rate divided by its busy fraction when it reports one; ``None`` when it
    was busy less than ``MIN_BUSY_FRACTION`` of the window (an idle worker says nothing
    about its capacity); the trained rate as is from a worker that does not say."""
    rate = sample.records_per_s_trained
    if not sample.HasField("busy_fraction"):
        return rate
    if sample.busy_fraction < MIN_BUSY_FRACTION:
        return None
    return rate / min(sample.busy_fraction, 1.0)


def job_windows(
    samples: Iterable[cp.ThroughputSample], *, bucket_s: float, min_coverage: float
) -> list[JobWindow]:
    """Job-level windows, oldest first. Assumes usable samples.

    Samples are bucketed by ``observed_at_ms`` into ``bucket_s`` windows; within one
    bucket and one pool size (the sample's ``workers``) each worker counts once (a
    duplicate or a re-sent sample replaces the older one), and the job's rate is the
    mean per reporting worker times the pool size. A bucket where fewer than
    ``min_coverage`` of the pool reported is not used. Samples with ``workers = 0`` (the
    pool size unknown to the worker) count the distinct reporters as the pool. A
    worker's rate is its capacity (:func:`capacity_records_per_s`; a sample of a worker
    busy less than :data:`MIN_BUSY_FRACTION` is left out): a worker waiting for data
    trains what arrives, not what it can.
    """
    latest: dict[tuple[int, int, str], cp.ThroughputSample] = {}
    for sample in samples:
        key = (_bucket(sample, bucket_s), int(sample.workers), sample.worker_id)
        kept = latest.get(key)
        if kept is None or sample.observed_at_ms >= kept.observed_at_ms:
            latest[key] = sample
    rates: dict[tuple[int, int], list[float]] = {}
    for (bucket, workers, _), sample in latest.items():
        capacity = capacity_records_per_s(sample)
        if capacity is not None:
            rates.setdefault((bucket, workers), []).append(capacity)
    windows = []
    for (bucket, workers), values in sorted(rates.items()):
        pool = workers or len(values)
        reporting = min(len(values), pool)
        if reporting / pool < min_coverage:
            continue
        mean = sum(values) / len(values)
        windows.append(JobWindow(bucket * bucket_s, pool, mean * pool, reporting))
    return windows


def estimate_throughput(
    windows: Iterable[JobWindow], settings: SampleSettings, *, max_workers: int
) -> ThroughputEstimate | None:
    """One ``(workers, records/s)`` point per measured pool size; ``None`` when nothing is
    measured and no prior rate is set.

    A point is the ``quantile`` of the pool size's recent windows: a worker starved of
    data trains slower than it could, so a high quantile reads capacity rather than
    demand. With at least ``need`` distinct pool sizes (``max(min_distinct_workers,
    coefficients of the model)``: a fit with fewer is underdetermined),
    ``source="measured"`` and the points are the observations. Before that,
    ``source="prior"``: the ModelArts curve ``n · 0.8^log2(n)``
    (:func:`~streamtrain.scale.models.modelarts_prior`) at ``1..max_workers``, scaled by
    the single-worker rate the measured points imply (their median), or by a configured
    one when nothing is measured yet; a count already measured takes its measurement.
    (In ``streamtrain demo``, whose workers scale linearly, the sublinear prior fitted to
    2 and 3 workers said one worker trains 547 records/s, 1.37x its real 400, and the
    planner held one worker into the morning ramp after measuring it.)
    """
    per_count: dict[int, list[float]] = {}
    for window in windows:
        if window.records_per_s > 0:
            per_count.setdefault(window.workers, []).append(window.records_per_s)
    measured = tuple(
        (w, float(np.quantile(rates[-settings.windows_per_count :], settings.quantile)))
        for w, rates in sorted(per_count.items())
    )
    need = max(settings.min_distinct_workers, model_coefficients(settings.model_kind))
    implied = [rate / modelarts_prior(1.0, w) for w, rate in measured]
    if implied:
        single = float(np.median(implied))
    elif settings.prior_single_worker_records_per_s is not None:
        single = settings.prior_single_worker_records_per_s
    else:
        return None
    if len(measured) >= need:
        observations = tuple((float(w), r) for w, r in measured)
        return ThroughputEstimate(
            source="measured",
            observations=observations,
            measured=measured,
            single_worker_records_per_s=single,
            need_distinct=need,
        )
    top = max(max_workers, need, *(w for w, _ in measured))
    at = dict(measured)  # a count measured is its measurement, not the prior's guess
    prior = tuple((float(n), at.get(n, modelarts_prior(single, n))) for n in range(1, top + 1))
    return ThroughputEstimate(
        source="prior",
        observations=prior,
        measured=measured,
        single_worker_records_per_s=single,
        need_distinct=need,
    )


def materially_different(
    old: ThroughputEstimate | None, new: ThroughputEstimate | None, tolerance: float
) -> bool:
    """A different source or set of counts, or a point that moved by more than
    ``tolerance`` (relative)."""
    if old is None or new is None:
        return old is not new
    if old.source != new.source or len(old.observations) != len(new.observations):
        return True
    for (w_old, r_old), (w_new, r_new) in zip(old.observations, new.observations, strict=True):
        if w_old != w_new or abs(r_new - r_old) > tolerance * r_old:
            return True
    return False


class SampleBook:
    """Recent usable samples and closed windows for one job.

    The samples of the last ``retention_s`` (and from them the job's recent step time,
    :meth:`step_time_ms`; an older sample is late: dropped and counted) and the closed
    job windows before them (the last ``windows_per_count`` per pool size, however
    old). Unusable samples are dropped and counted (``rejected``; those from the future
    also in ``skewed``), and so are those observed while the pool changed
    (``handover``: they measure the hand-over, not the pool; the planner says when, from
    its actions and the workers' disturbed rounds).
    """

    def __init__(self, job: str, settings: SampleSettings | None = None) -> None:
        self.job = job
        self.settings = settings or SampleSettings()
        self._samples: dict[tuple[str, int], cp.ThroughputSample] = {}
        self._closed: dict[int, deque[JobWindow]] = {}
        self.accepted = 0
        self.rejected = 0
        self.skewed = 0
        self.late = 0
        self.handover = 0
        self.last_problem: str | None = None

    def add(
        self, sample: cp.ThroughputSample, now_s: float, *, measures_pool: bool = True
    ) -> str | None:
        """Keep ``sample``; returns the reason when it is rejected or too late. A usable
        sample that does not measure the pool (``measures_pool=False``: observed while
        the pool was changing size) is counted in ``handover`` and not kept."""
        problem = sample_problem(sample, self.job, settings=self.settings)
        if problem is None:
            problem = _from_the_future(sample, now_s * MS_PER_S, self.settings)
            self.skewed += problem is not None
        bucket_s = self.settings.bucket_s
        bucket_end_s = (_bucket(sample, bucket_s) + 1) * bucket_s
        if problem is None and bucket_end_s <= now_s - self.settings.retention_s:
            self.late += 1
            return f"late sample from {sample.worker_id} ({sample.observed_at_ms} ms)"
        if problem is not None:
            self.rejected += 1
            self.last_problem = problem
            return problem
        self.accepted += 1
        if not measures_pool:
            self.handover += 1
            return None
        self._samples[(sample.worker_id, sample.observed_at_ms)] = sample
        return None

    def discard_since(self, since_s: float) -> int:
        """Drop the kept samples observed at or after ``since_s`` (a worker reported a
        disturbed round that began then: they measured it, not the pool); they are
        counted in ``handover``. Returns how many were dropped. Closed windows stay."""
        since_ms = since_s * MS_PER_S
        doomed = [key for key, v in self._samples.items() if v.observed_at_ms >= since_ms]
        for key in doomed:
            del self._samples[key]
        self.handover += len(doomed)
        return len(doomed)

    def step_time_ms(self) -> float | None:
        """The job's recent training step (ms): each worker's newest reported step time,
        averaged over the workers; None when no kept sample reports one (AntMan's
        interference signal, passed on to the allocator)."""
        newest: dict[str, tuple[int, float]] = {}
        for sample in self._samples.values():
            if not sample.HasField("step_time_ms"):
                continue
            seen = newest.get(sample.worker_id)
            if seen is None or sample.observed_at_ms > seen[0]:
                newest[sample.worker_id] = (sample.observed_at_ms, sample.step_time_ms)
        if not newest:
            return None
        return float(np.mean([value for _, value in newest.values()]))

    def _open_windows(self) -> list[JobWindow]:
        s = self.settings
        return job_windows(self._samples.values(), bucket_s=s.bucket_s, min_coverage=s.min_coverage)

    def prune(self, now_s: float) -> None:
        """Close the buckets that ended ``retention_s`` ago: keep their job windows, drop
        their samples (a sample for them arriving later is late)."""
        s = self.settings
        cutoff_s = now_s - s.retention_s

        def closed(sample: cp.ThroughputSample) -> bool:
            return (_bucket(sample, s.bucket_s) + 1) * s.bucket_s <= cutoff_s

        old = [v for v in self._samples.values() if closed(v)]
        if not old:
            return
        for window in job_windows(old, bucket_s=s.bucket_s, min_coverage=s.min_coverage):
            kept = self._closed.setdefault(window.workers, deque(maxlen=s.windows_per_count))
            kept.append(window)
        self._samples = {k: v for k, v in self._samples.items() if not closed(v)}

    def windows(self) -> list[JobWindow]:
        """Closed and open job windows, oldest first per pool size."""
        closed = [w for windows in self._closed.values() for w in windows]
        return sorted([*closed, *self._open_windows()], key=lambda w: w.start_s)

    def estimate(self, now_s: float, *, max_workers: int) -> ThroughputEstimate | None:
        self.prune(now_s)
        return estimate_throughput(self.windows(), self.settings, max_workers=max_workers)

    def __len__(self) -> int:
        return len(self._samples)
