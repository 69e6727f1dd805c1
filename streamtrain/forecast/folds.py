"""One candidate's validation folds: its fits and walks, reusing the ones made before.

Owned here: :class:`Walk`, :class:`FoldPlan`, :class:`FoldResult`, :func:`run_plan`
and :func:`walk_model` (what :mod:`streamtrain.forecast.select` does per candidate,
apart from scoring and choosing, so that a candidate's folds can run in another
process: a plan and its result are plain data).

For each fold ``(start, end)`` of a history ``values``, the candidate is fitted on
``values[:start]`` and walked through the fold as the live loop runs it
(:func:`walk_model`). A plan carries the fits and walks already known (a
:class:`~streamtrain.forecast.fitcache.FitCache` found them, e.g. the previous day's
folds, which overlap today's) and computes only the missing ones.
"""

from __future__ import annotations

import copy
import importlib
import logging
import multiprocessing
import os
import pickle
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ForecastError
from streamtrain.forecast.base import BatchWalk, Forecaster, WarmStart
from streamtrain.process import die_with_parent_initializer

__all__ = [
    "FAILURES",
    "FoldPlan",
    "FoldResult",
    "Walk",
    "fold_bounds",
    "origins",
    "run_plan",
    "run_plans",
    "walk_model",
]

log = logging.getLogger(__name__)
FloatArray = NDArray[np.float64]
Maker = Callable[[str], Forecaster]
# What a model may raise when it breaks: ours, torch's RuntimeError, numpy's errors.
FAILURES = (ForecastError, RuntimeError, ValueError, ArithmeticError)
# A worker process that cannot start or a plan or result that does not pickle.
_CANNOT_SEND = (BrokenProcessPool, OSError, pickle.PicklingError, TypeError, AttributeError)


@dataclass(frozen=True, slots=True, eq=False)
class Walk:
    """A fold's concatenated forecasts, and its model told every step of the fold."""

    forecasts: FloatArray
    model: Forecaster


@dataclass(frozen=True, slots=True, eq=False)
class FoldPlan:
    """What one candidate's validation needs: ``known_fits`` by history length and
    ``known_walks`` by fold are not computed again; with ``keep_fits`` the result holds
    each new fit as it was before its walk (for the cache)."""

    name: str
    make: Maker
    values: FloatArray
    folds: tuple[tuple[int, int], ...]
    horizon_steps: int
    stride_steps: int
    keep_fits: bool = False  # return each new fit as fitted (for a cache), not walked
    # known fits are walked in place: hand over copies (a cache's are)
    known_fits: dict[int, Forecaster] = field(default_factory=dict)
    known_walks: dict[tuple[int, int], Walk] = field(default_factory=dict)


@dataclass(slots=True, eq=False)
class FoldResult:
    """The candidate's forecasts over every fold (``None`` when it failed), its last
    walked model, and what is new."""

    name: str
    forecasts: FloatArray | None = None
    last: Forecaster | None = None
    error: str | None = None  # why the candidate failed in validation
    fits: dict[int, Forecaster] = field(default_factory=dict)
    walks: dict[tuple[int, int], Walk] = field(default_factory=dict)


def fold_bounds(n: int, val: int, folds: int, fold_steps: int = 0) -> list[tuple[int, int]]:
    """``(start, end)`` of each validation fold: the last ``val`` of ``n`` steps in
    ``folds`` consecutive parts (the last takes the remainder); with ``fold_steps``, the
    last ``min(folds, val // fold_steps)`` whole folds of ``fold_steps`` steps (one fold
    of ``val`` steps when not even one fits)."""
    if fold_steps > 0:
        count = min(folds, val // fold_steps)
        if count == 0:
            return [(n - val, n)]
        return [(n - (k + 1) * fold_steps, n - k * fold_steps) for k in range(count - 1, -1, -1)]
    size = val // folds
    starts = [n - val + i * size for i in range(folds)]
    return [(s, e) for s, e in zip(starts, [*starts[1:], n], strict=True)]


def origins(start: int, end: int, horizon_steps: int, stride_steps: int) -> range:
    """The forecast origins of the fold ``[start, end)``."""
    return range(start, end - horizon_steps + 1, stride_steps)


def walk_model(
    model: Forecaster,
    values: FloatArray,
    start: int,
    end: int,
    horizon_steps: int,
    stride_steps: int,
) -> list[FloatArray]:
    """Forecast at each origin of ``[start, end)`` and tell ``model`` the steps between
    them; the model ends told every step up to ``end``. A
    :class:`~streamtrain.forecast.base.BatchWalk` model forecasts the origins at once."""
    if isinstance(model, BatchWalk):
        at_once = model.walk(
            values, start, origins(start, end, horizon_steps, stride_steps), end, horizon_steps
        )
        if at_once is not None:
            return at_once
    seen, outs = start, []
    for origin in origins(start, end, horizon_steps, stride_steps):
        if origin > seen:
            model.update(values[seen:origin])
            seen = origin
        outs.append(np.maximum(model.predict(horizon_steps), 0.0))
    if end > seen:
        model.update(values[seen:end])
    return outs


class _Run:
    """One plan's computation: fits by history length, made at most once."""

    def __init__(self, plan: FoldPlan, result: FoldResult) -> None:
        self.plan = plan
        self.result = result
        self.fits = dict(plan.known_fits)
        self.starts = [s for s, _ in plan.folds]

    def fit(self, length: int) -> Forecaster:
        known = self.fits.get(length)
        if known is not None:
            return known
        model = self.plan.make(self.plan.name)
        earlier = [s for s in self.starts if s < length]
        history = self.plan.values[:length]
        if isinstance(model, WarmStart) and earlier:
            model.fit_from(self.fit(max(earlier)), history)
        else:
            model.fit(history)
        self.fits[length] = model
        self.result.fits[length] = copy.deepcopy(model) if self.plan.keep_fits else model
        return model

    def walk(self, start: int, end: int) -> Walk:
        known = self.plan.known_walks.get((start, end))
        if known is not None:
            return known
        model = self.fit(start)  # walked in place: a warm start reads only its weights
        plan = self.plan
        outs = walk_model(model, plan.values, start, end, plan.horizon_steps, plan.stride_steps)
        empty = np.zeros(0)
        walk = Walk(np.concatenate(outs) if outs else empty, model)
        self.result.walks[(start, end)] = walk
        return walk


def run_plan(plan: FoldPlan) -> FoldResult:
    """Compute what ``plan`` asks for.

    Warm starts: a model with ``fit_from`` (:class:`~streamtrain.forecast.base.WarmStart`,
    the transformer) is fitted from scratch only for the first fold; each later fold
    starts from the previous fold's fit (fine-tuned on the longer history). Carrying the
    first fold's network through the later folds untrained (one training instead of
    seven) moved ``auto``'s MASE on the kale shape from just below MSTL's to just above
    it (the same choices, other weights). The fit
    on the whole history is not made here: only a kept model needs it
    (:mod:`streamtrain.forecast.select` fine-tunes it from the last fold's fit), and a
    transformer fine-tuned for nothing costs seconds. The statistical models and the
    seasonal naive are fitted anew for every fold: their fits are cheap, and a
    forward-only statsforecast model goes stale over a fold of days. A candidate that
    fails to fit or forecast in any fold has no forecasts in its result (``error`` says
    why)."""
    result = FoldResult(plan.name)
    run = _Run(plan, result)
    try:
        walks = [run.walk(start, end) for start, end in plan.folds]
    except FAILURES as exc:
        result.error = str(exc)
        return result
    result.forecasts = np.concatenate([w.forecasts for w in walks])
    result.last = walks[-1].model
    return result


def run_plans(
    plans: Sequence[FoldPlan],
    remote: Collection[str],
    preload: Sequence[str] = (),
    idle: Callable[[Mapping[str, FoldResult]], None] | None = None,
) -> list[FoldResult]:
    """Every plan's result, in order; the plans of the candidates named in ``remote``
    each in a worker process (started with ``spawn``, stopped before this returns, and
    killed with this process)
    while the others run here. A process that cannot start or a plan that cannot be
    sent (a maker that does not pickle) runs here instead (logged); an error the
    candidate raises in its process is its result's ``error``, as here.

    ``preload`` names modules that the remote results need here (torch, for the
    transformer's fits): once the plans that run here are done, they are imported while
    the workers still run, so that reading a result does not import them after the
    slowest worker has finished (1.5-3 s for torch, on the fit's critical path). A
    module that cannot be imported is logged and left to fail where it is used. Before
    that, ``idle`` (when given) is called with the results made here, also while the
    workers run (``auto``: the refit that a result here will most likely ask for)."""
    away = [p for p in plans if p.name in remote]
    if away and multiprocessing.current_process().daemon:
        away = []  # a daemonic process may not start processes: run everything here
    futures: dict[str, Future[FoldResult]] = {}
    pool: ProcessPoolExecutor | None = None
    if away:
        try:
            pool = ProcessPoolExecutor(
                len(away),
                mp_context=multiprocessing.get_context("spawn"),
                initializer=die_with_parent_initializer,  # a killed parent leaves none
                initargs=(os.getpid(),),
            )
            futures = {p.name: pool.submit(run_plan, p) for p in away}
        except (*_CANNOT_SEND, RuntimeError) as exc:
            log.warning("no worker process for %s (%s); fitting here", [p.name for p in away], exc)
    try:
        results = {p.name: run_plan(p) for p in plans if p.name not in futures}
        if futures and idle is not None:
            idle(results)
        if futures:
            _preload(preload)
        for plan in plans:
            future = futures.get(plan.name)
            if future is None:
                continue
            try:
                results[plan.name] = future.result()
            except _CANNOT_SEND as exc:
                log.warning("%s's worker process failed (%s); fitting here", plan.name, exc)
                results[plan.name] = run_plan(plan)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    return [results[p.name] for p in plans]


def _preload(modules: Sequence[str]) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            log.warning("cannot import %s ahead of the worker results: %s", name, exc)
