"""Keeping a forecaster in step with what a policy observes, and scoring it as it goes.

Owned here:

* :func:`forecaster_factory`: **the** factory of forecasters, shared by the live
  planner and the simulator's forecast-based policies, so what the simulator credits
  is what the live loop runs. The live planner runs the same models through
  :class:`~streamtrain.forecast.live.LiveForecaster` (fits in a worker process).
* :class:`Forecast`: one prediction: the point forecast and any quantiles.
* :func:`precompute`: every prediction a replay will ask for, so policies replaying
  the same arrivals fit a slow model once per simulated day, not once per policy.
* :class:`ForecastFeed`: what a policy calls: fits and feeds its forecaster as steps
  are observed, predicts from the first unobserved step, and scores each prediction
  against what arrives.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError, ForecastError
from streamtrain.forecast.base import NAIVE_NAMES, Forecaster, check_levels, naive_period_s
from streamtrain.forecast.fitcache import FitCache
from streamtrain.forecast.registry import FORECASTER_NAMES, make_forecaster
from streamtrain.scale.policy import ForecasterFactory, Observation
from streamtrain.scale.trigger import relative_error
from streamtrain.units import DAY_S

__all__ = [
    "FORECASTER_CHOICES",
    "Forecast",
    "ForecastFeed",
    "default_forecaster_factory",
    "forecaster_factory",
    "precompute",
]

log = logging.getLogger(__name__)
FloatArray = NDArray[np.float64]
# Lead-time buckets (in steps) for the error ratios: near, mid and far leads differ.
_BUCKETS = (0, 10, 30, 60, 120, 10**9)
_BUCKET_EDGES = np.array(_BUCKETS, dtype=np.int64)
_BUCKET_INDICES = np.arange(len(_BUCKETS))  # bucket b's ratios: [edges[b], edges[b + 1])
FORECASTER_CHOICES: tuple[str, ...] = FORECASTER_NAMES


def forecaster_factory(
    name: str = "seasonal_naive", *, step_s: int = 60, seed: int = 0, **options: Any
) -> ForecasterFactory:
    """A model name (:data:`FORECASTER_CHOICES`, the registry's: ``seasonal_naive``,
    ``seasonal_naive_daily``, ``seasonal_naive_weekly``, ``ets``, ``mstl``,
    ``fedformer``, ``auto``), the step and the model's options -> a callable from the
    history length (steps) to a new, unfitted forecaster. ``auto``'s share one
    :class:`~streamtrain.forecast.fitcache.FitCache`, so that each day's fit reuses the
    previous day's validation folds. Unknown names and options are a
    :class:`ConfigError` (raised here, not at the first fit)."""
    if name not in FORECASTER_CHOICES:
        raise ConfigError(
            f"unknown forecaster {name!r}; use one of {', '.join(FORECASTER_CHOICES)}"
        )
    make_forecaster(name, step_s=step_s, seed=seed, **options)  # check the options now
    if name == "auto":  # one cache for every day's fit: a day's folds are the day before's
        options = {"cache": FitCache(), **options}

    def factory(history_steps: int) -> Forecaster:
        chosen = name
        if name == "seasonal_naive":
            chosen = NAIVE_NAMES[naive_period_s(history_steps, step_s)]
        return make_forecaster(chosen, step_s=step_s, seed=seed, **options)

    return factory


def default_forecaster_factory(step_s: int = 60) -> ForecasterFactory:
    """``seasonal_naive``: weekly once two weeks of history exist, daily before; cheap
    enough to replay a day in seconds."""
    return forecaster_factory("seasonal_naive", step_s=step_s)


@dataclass(slots=True)
class Forecast:
    """A prediction from one origin: records/s per step, and quantiles by level."""

    point: FloatArray
    quantiles: dict[float, FloatArray] = field(default_factory=dict)


def _quantile(values: Sequence[float] | deque[float] | FloatArray, level: float) -> float:
    """``np.quantile(values, level)`` (its default, linear interpolation) for a short
    sequence of floats, without numpy's per-call overhead (the simulator asks for one
    per lead bucket at every decision): the two order statistics it needs by a partial
    sort, not a sort of the whole window. The order of ``values`` does not matter."""
    if isinstance(values, np.ndarray):
        array = values
    else:
        array = np.fromiter(values, dtype=np.float64, count=len(values))
    h = (len(array) - 1) * level
    lo = math.floor(h)
    if lo + 1 >= len(array):
        return float(array.max())
    pair = array.copy()  # np.partition's copy and partial sort, without its wrapper
    pair.partition((lo, lo + 1))
    low, high = float(pair[lo]), float(pair[lo + 1])
    return low + (h - lo) * (high - low)


class _Recent:
    """The last ``capacity`` values appended (a ring buffer; what a bounded deque of
    floats keeps, held as one array so a quantile of them needs no copy from Python
    objects). :meth:`values` returns them in storage order, not append order: only
    order statistics are taken of them."""

    def __init__(self, capacity: int) -> None:
        self._values = np.empty(max(0, capacity))
        self._count = 0  # values ever appended

    def __len__(self) -> int:
        return min(self._count, self._values.shape[0])

    def extend(self, new: FloatArray) -> None:
        size = self._values.shape[0]
        if new.shape[0] == 0:
            return
        if size == 0:
            self._count += new.shape[0]
            return
        if new.shape[0] > size:
            self._count += new.shape[0] - size
            new = new[-size:]
        start = self._count % size
        head = min(new.shape[0], size - start)
        self._values[start : start + head] = new[:head]
        self._values[: new.shape[0] - head] = new[head:]
        self._count += new.shape[0]

    def values(self) -> FloatArray:
        return self._values[: len(self)]


class _Issued:
    """The last ``capacity`` predictions issued, as rows of one array (with their
    absolute first steps and lengths), so that scoring them against a new step is one
    array operation rather than a loop over predictions."""

    def __init__(self, capacity: int, width: int) -> None:
        self.capacity = capacity
        self.points = np.zeros((capacity, max(1, width)))
        self.starts = np.zeros(capacity, dtype=np.int64)
        self.lengths = np.zeros(capacity, dtype=np.int64)
        self.count = 0  # predictions ever issued
        # whether no start was ever below the one before (true in a replay and in the
        # live loop, whose histories only grow)
        self.ordered = True

    def append(self, start: int, point: FloatArray) -> None:
        if self.count and start < self.starts[(self.count - 1) % self.capacity]:
            self.ordered = False
        if point.shape[0] > self.points.shape[1]:
            wider = np.zeros((self.capacity, point.shape[0]))
            wider[:, : self.points.shape[1]] = self.points
            self.points = wider
        row = self.count % self.capacity
        self.points[row, : point.shape[0]] = point
        self.starts[row], self.lengths[row] = start, point.shape[0]
        self.count += 1

    def rows(self) -> NDArray[np.int64]:
        """The stored rows, oldest first."""
        n = min(self.count, self.capacity)
        return np.arange(self.count - n, self.count, dtype=np.int64) % self.capacity

    def starting_in(self, first: int, end: int) -> list[tuple[int, int]] | None:
        """``(start, row)`` of the stored predictions that start in ``[first, end)``, by
        start and then oldest first; found from the newest back to the first older start
        (one or two rows when a feed is asked once a step), or ``None`` when the starts
        were ever out of order (then only a scan of every row finds them all)."""
        if not self.ordered:
            return None
        found = []
        for age in range(min(self.count, self.capacity)):
            row = (self.count - 1 - age) % self.capacity
            start = int(self.starts[row])
            if start < first:
                break
            if start < end and self.lengths[row] > 0:
                found.append((start, row))
        found.reverse()
        return found


def _quantiles(
    model: Forecaster, horizon_steps: int, levels: Sequence[float]
) -> dict[float, FloatArray]:
    if not levels:
        return {}
    try:
        raw = model.predict_quantiles(horizon_steps, levels)
    except (ForecastError, ValueError, RuntimeError) as exc:
        log.debug("predict_quantiles failed (%s)", exc)
        return {}
    return {q: np.maximum(np.asarray(raw[q], dtype=np.float64), 0.0) for q in check_levels(levels)}


def precompute(
    factory: ForecasterFactory,
    history: FloatArray,
    first: int,
    last: int,
    *,
    max_horizon_steps: int = 180,
    refit_every_steps: int = 1440,
    levels: Sequence[float] = (),
    progress: Callable[[str], None] | None = None,
) -> dict[int, Forecast]:
    """Predictions from every origin ``n`` in ``[first, last]``, each made from
    ``history[:n]`` only.

    One model fitted on the history before the window (refitted every
    ``refit_every_steps``) and fed one step at a time; ``progress`` hears of each fit
    (``forecasting: fit k/K ...``, with the time spent and an estimate of the time
    left). Policies replaying the same arrivals share the result through a
    :class:`ForecastFeed` cache, so a slow model is fitted once per simulated day and
    predicts once per step, not once per policy.
    """
    if not 1 <= first <= last <= history.shape[0] or refit_every_steps < 1:
        raise ConfigError("need 1 <= first <= last <= len(history) and a positive refit period")
    out: dict[int, Forecast] = {}
    model: Forecaster | None = None
    fitted_at = synced = first
    fits = -(-(last - first + 1) // refit_every_steps)
    started = time.perf_counter()
    for n in range(first, last + 1):
        if model is None or n - fitted_at >= refit_every_steps:
            model = factory(n).fit(np.asarray(history[:n]))
            fitted_at = synced = n
            if progress is not None:
                done = (n - first) // refit_every_steps + 1
                spent = time.perf_counter() - started
                left = f"; about {spent / done * (fits - done):.0f} s left" if done < fits else ""
                progress(f"forecasting: fit {done}/{fits} on {n} steps ({spent:.0f} s{left})")
        elif n > synced:
            update = getattr(model, "update", None)
            if callable(update):
                update(np.asarray(history[synced:n]))
            else:
                model = model.fit(np.asarray(history[:n]))
            synced = n
        point = np.maximum(np.asarray(model.predict(max_horizon_steps), dtype=np.float64), 0.0)
        out[n] = Forecast(point, _quantiles(model, max_horizon_steps, levels))
    return out


class ForecastFeed:
    """What a policy calls. ``max_horizon_steps`` bounds every prediction.

    Without a cached entry it fits its own forecaster on the observed history at first
    use and every ``refit_interval_s`` after, feeds it each newly observed step with
    ``update`` (or refits, for models without it) and predicts from the first
    unobserved step (the live path). Steps are counted from the absolute step index of
    the history's end (``history_start_s / step_s`` plus its length), so a capped
    history that slides still delivers its new steps; a model with ``at_step`` is told
    that index first. Each prediction is kept and scored against the steps that later
    arrive: the ratios ``actual / forecast`` by lead time give an empirical upper
    quantile (split-conformal style) when the model has no quantile of its own.

    ``cache`` (optional, shareable) maps a history length to the prediction made from
    it (:func:`precompute` fills one). A cached prediction only ever used history up to
    its own length, so sharing leaks nothing from the future; each feed keeps its own
    scoring (what it has seen), so the empirical quantiles are never ahead of time.
    ``calibrate=False`` skips the ratios (the one-step-ahead pairs are still kept) for a
    feed whose predictions all carry the quantile it is asked for, or that is never asked
    for one (a replay's cache built for its policy): should :meth:`upper` need them after
    all, they are scored from then on.
    """

    def __init__(
        self,
        factory: ForecasterFactory,
        *,
        refit_interval_s: float = DAY_S,
        max_horizon_steps: int = 180,
        scored_predictions: int = 2000,
        cache: dict[int, Forecast] | None = None,
        calibrate: bool = True,
    ) -> None:
        if refit_interval_s <= 0 or max_horizon_steps < 1:
            raise ConfigError("need a positive refit interval and horizon")
        self.factory = factory
        self.refit_interval_s = refit_interval_s
        self.max_horizon_steps = max_horizon_steps
        self.cache: dict[int, Forecast] = {} if cache is None else cache
        self.model_: Forecaster | None = None
        self.fitted_at_s_ = -math.inf
        self.synced_steps_ = 0  # absolute end of the history the model has been given
        self.scored_steps_ = 0  # absolute end of the history compared with predictions
        # A shared cache (a replay's precomputed predictions, whose history only grows)
        # is keyed by history length; the feed's own by absolute end step.
        self._by_length = cache is not None
        # the predictions still being scored, and the newest one as it was issued
        self._issued = _Issued(max_horizon_steps, max_horizon_steps)
        self._newest: tuple[int, FloatArray] | None = None
        self._ratios = [_Recent(scored_predictions) for _ in _BUCKETS[:-1]]
        self.calibrate = calibrate
        self._pairs: deque[tuple[float, float]] = deque(maxlen=30)  # (actual, 1-step forecast)

    def _predict_model(self, obs: Observation, end: int) -> FloatArray:
        """Bring the own model up to the observed history; predict ``max_horizon_steps``."""
        history = np.asarray(obs.arrivals_records_per_s)
        n = history.shape[0]
        refit = self.model_ is None or obs.now_s - self.fitted_at_s_ >= self.refit_interval_s
        model = self.model_ if not refit and self.model_ is not None else self.factory(n)
        at_step = getattr(model, "at_step", None)
        if callable(at_step):
            at_step(end)
        if refit:
            self.model_ = model = model.fit(history)
            self.fitted_at_s_ = obs.now_s
        elif end > self.synced_steps_:
            update = getattr(model, "update", None)
            if callable(update):
                update(history[max(0, n - (end - self.synced_steps_)) :])
            else:
                self.model_ = model = model.fit(history)
        self.synced_steps_ = end
        return np.maximum(np.asarray(model.predict(self.max_horizon_steps)), 0.0)

    def _score(self, history: FloatArray, base: int, end: int) -> None:
        """Compare this feed's earlier predictions with the steps observed since: for
        each new step (oldest first) and each prediction that covers it (oldest first),
        the one-step-ahead pair when the lead is 0 and the ratio ``actual / forecast``
        into its lead's bucket when the forecast is positive."""
        first = max(self.scored_steps_, end - self.max_horizon_steps, base)
        self.scored_steps_ = max(self.scored_steps_, end)
        issued = self._issued
        if first >= end or issued.count == 0:
            return
        starting = None if self.calibrate else issued.starting_in(first, end)
        if starting is not None:  # only the one-step pairs: the predictions at lead 0
            points = issued.points
            self._pairs.extend(
                (float(history[start - base]), float(points[row, 0])) for start, row in starting
            )
            return
        rows = issued.rows()
        starts, lengths = issued.starts[rows], issued.lengths[rows]
        if end - first == 1:  # one new step (a decision a step after the last): 1-D
            leads_1 = first - starts
            j = np.flatnonzero((leads_1 >= 0) & (leads_1 < lengths))
            if j.size == 0:
                return
            lead = leads_1[j]
            actual = np.full(j.size, float(history[first - base]))
        else:
            steps = np.arange(first, end, dtype=np.int64)
            leads = steps[:, None] - starts[None, :]
            k, j = np.nonzero((leads >= 0) & (leads < lengths[None, :]))
            if k.size == 0:
                return
            lead = leads[k, j]
            actual = np.asarray(history, dtype=np.float64)[steps[k] - base]
        forecast = issued.points[rows[j], lead]
        now = lead == 0
        self._pairs.extend(zip(actual[now].tolist(), forecast[now].tolist(), strict=True))
        if not self.calibrate:
            return
        positive = forecast > 0
        ratio = actual[positive] / forecast[positive]
        bucket = np.searchsorted(_BUCKET_EDGES, lead[positive], side="right") - 1
        # Each bucket's ratios in their order here: a stable sort by bucket, cut at the
        # bucket boundaries (one sort, not a mask per bucket).
        order = np.argsort(bucket, kind="stable")
        edges = np.searchsorted(bucket[order], _BUCKET_INDICES).tolist()
        ordered = ratio[order]
        for b, ratios in enumerate(self._ratios):
            ratios.extend(ordered[edges[b] : edges[b + 1]])

    def _positions(self, obs: Observation) -> tuple[int, int, int]:
        """(absolute index of the history's first step, of the step after its last, the
        cache key)."""
        base = round(obs.history_start_s / obs.step_s)
        end = base + obs.observed_steps
        return base, end, obs.observed_steps if self._by_length else end

    def _entry(self, obs: Observation) -> Forecast:
        history = obs.arrivals_records_per_s
        n = obs.observed_steps
        if n == 0:
            raise ForecastError("no arrival history observed yet")
        base, end, key = self._positions(obs)
        self._score(history, base, end)
        entry = self.cache.get(key)
        if entry is None:
            try:
                point = self._predict_model(obs, end)
            except ForecastError as exc:
                log.warning("forecaster failed (%s); using the last observed rate", exc)
                self.model_ = None
                point = np.full(self.max_horizon_steps, float(history[-1]))
            entry = Forecast(point)
            if not self._by_length:
                self.cache.clear()  # the live path needs only the newest
            self.cache[key] = entry
        if self._newest is None or self._newest[0] != end:
            self._newest = (end, entry.point)
            self._issued.append(end, np.asarray(entry.point, dtype=np.float64))
        return entry

    def forecast(self, obs: Observation, horizon_steps: int) -> FloatArray:
        """Point forecast (records/s) for the ``horizon_steps`` steps from the first
        unobserved one. When the model fails, the last observed rate, flat."""
        if not 1 <= horizon_steps <= self.max_horizon_steps:
            raise ConfigError(f"horizon must be in [1, {self.max_horizon_steps}] steps")
        return self._entry(obs).point[:horizon_steps].copy()

    def upper(self, obs: Observation, horizon_steps: int, level: float) -> FloatArray:
        """The ``level`` quantile forecast: the model's own (cached, or from this feed's
        model when it made the point forecast) if it has one, never below the point
        forecast; else the point forecast times the ``level`` quantile of past
        ``actual / forecast`` ratios at the same lead (at least 1; the point forecast
        until 20 ratios exist for a lead)."""
        (level,) = check_levels([level])
        point = self.forecast(obs, horizon_steps)
        _, end, key = self._positions(obs)
        entry = self.cache[key]
        own = entry.quantiles.get(level)
        if own is None and self.model_ is not None and self.synced_steps_ == end:
            entry.quantiles.update(_quantiles(self.model_, self.max_horizon_steps, [level]))
            own = entry.quantiles.get(level)
        if own is not None:
            result: FloatArray = np.maximum(own[:horizon_steps], point)
            return result
        if not self.calibrate:
            log.debug("no %g quantile at %d steps: scoring actual/forecast ratios", level, end)
            self.calibrate = True
        factors = np.ones(horizon_steps)
        for b in range(len(_BUCKETS) - 1):
            ratios = self._ratios[b]
            if len(ratios) >= 20 and _BUCKETS[b] < horizon_steps:  # a lead in the bucket
                factors[_BUCKETS[b] : _BUCKETS[b + 1]] = max(1.0, _quantile(ratios.values(), level))
        scaled: FloatArray = point * factors
        return scaled

    def band(
        self, levels: tuple[float, float] = (0.1, 0.9)
    ) -> tuple[FloatArray, FloatArray, tuple[float, float]] | None:
        """The newest forecast's ``levels`` quantiles (the dashboard's band): the model's
        own when it has them; ``None`` before any forecast or without them."""
        if self._newest is None or self.model_ is None:
            return None
        end, point = self._newest
        if self.synced_steps_ != end:
            return None
        quantiles = _quantiles(self.model_, point.shape[0], levels)
        if len(quantiles) != len(levels):
            return None
        return quantiles[levels[0]], quantiles[levels[1]], levels

    def latest(self) -> tuple[int, FloatArray] | None:
        """The newest point forecast and the absolute index of its first step."""
        if self._newest is None:
            return None
        observed_steps, point = self._newest
        return observed_steps, point.copy()

    def recent_ratio(self, steps: int = 10) -> float | None:
        """``Σ actual / Σ forecast`` of the one-step-ahead forecasts over the last
        ``steps`` observed steps (None before any, or when nothing was forecast)."""
        pairs = np.asarray(list(self._pairs)[-steps:], dtype=np.float64).reshape(-1, 2)
        forecast = float(pairs[:, 1].sum())
        return float(pairs[:, 0].sum()) / forecast if forecast > 0 else None

    def recent_error(self, steps: int = 10) -> float | None:
        """Relative error ``|Σ actual - Σ forecast| / Σ forecast`` of the one-step-ahead
        forecasts over the last ``steps`` observed steps (None before any)."""
        pairs = np.asarray(list(self._pairs)[-steps:], dtype=np.float64).reshape(-1, 2)
        return relative_error(pairs[:, 0], pairs[:, 1])
