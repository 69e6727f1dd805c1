"""Model selection per series by rolling-origin validation (the heart of ``auto``).

Owned here: :class:`SelectForecaster`. ``fit(history)`` holds out the last
``val_steps`` of the history (at most a quarter of it) in consecutive folds
(:func:`fold_bounds`). For each fold every candidate is fitted on the steps before it
and walked through it as the live loop uses it: a forecast of ``horizon_steps`` every
``stride_steps``, then ``update`` with the steps that arrived, so each candidate is
scored as it is run and no forecast sees a step after its origin. The choice is the
lowest mean absolute error among each candidate alone and the best ``k`` combined with
inverse-MAE weights (``ensemble``); ties go to the earlier candidate and to one model
before an ensemble, so the choice is deterministic. The kept models are then fitted
again on the whole history (``refit``).

Candidates are made by a callable (name -> unfitted model, from
:mod:`streamtrain.forecast.registry`), so this module knows no model; each candidate's
folds are run by :mod:`streamtrain.forecast.folds`, optionally through a
:class:`~streamtrain.forecast.fitcache.FitCache`. A candidate whose fit or forecasts
fail in any fold is skipped (logged); when all fail, ``fit`` raises a
:class:`~streamtrain.errors.ForecastError`. When the history is too short to hold out a
validation window, the first candidate that fits on the whole history is kept.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Self

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError, ForecastError
from streamtrain.forecast.base import (
    Forecaster,
    SeasonalNaive,
    WarmStart,
    as_history,
    as_new_points,
    check_horizon,
    check_levels,
    quantiles_or_point,
)
from streamtrain.forecast.fitcache import FitCache
from streamtrain.forecast.folds import (
    FAILURES,
    FoldPlan,
    FoldResult,
    Walk,
    fold_bounds,
    origins,
    run_plans,
    walk_model,
)

__all__ = ["ANOMALY_RATIO", "ENSEMBLE_RANGE", "SelectForecaster", "fold_bounds"]

log = logging.getLogger(__name__)
FloatArray = NDArray[np.float64]
Maker = Callable[[str], Forecaster]
_FAILURES = FAILURES
# An ensemble member's validation MAE over the best candidate's, at most: a much weaker
# model (a seasonal naive on a closed weekend) does not enter on a validation tie.
ENSEMBLE_RANGE = 1.25
ANOMALY_RATIO = 3.0  # a fold is unusual when the naive errs this many times its median fold


def inverse_mae_weights(maes: Sequence[float]) -> FloatArray:
    """Weights proportional to ``1 / mae`` (summing to one); a perfect member takes all
    the weight (shared equally when several are perfect)."""
    errors = np.asarray(maes, dtype=np.float64)
    perfect = errors <= 0.0
    weights = perfect.astype(np.float64) if perfect.any() else 1.0 / errors
    result: FloatArray = weights / weights.sum()
    return result


class SelectForecaster:
    """The best of ``candidates`` by rolling-origin validation (module docstring).

    Folds: ``folds`` equal ones, or with ``fold_steps`` the last whole folds of that many
    steps, at most ``folds`` of them (``auto``: days, like the live refits, so that one
    day's folds start where the previous day's started and a cache serves all but one).

    Reuse: a candidate with ``fit_from`` (the transformer) is trained from scratch for
    the first fold only and fine-tuned from the previous fold's fit for each later fold
    (:func:`~streamtrain.forecast.folds.run_plan`) and for the refit, which only a kept
    model gets. Through
    ``cache`` (keyed by ``cache_key(candidate)``) a daily rolling origin makes one new
    fit and one new walk per candidate; the statistical
    models choose and forecast the same with or without it, the transformer's first fold
    is then the previous day's fine-tuned fit. With ``workers`` above one, the
    ``parallel`` candidates run in a worker process (same results as in one process)
    unless the cache holds their first fold's fit; meanwhile the ``prefer`` candidate
    that validated best here is refitted on the whole history (:meth:`_refit_ahead`)
    and the modules named in ``preload`` (what their fits need here: torch) are
    imported.

    Fitted state: ``chosen_`` names what was kept (``"fedformer"``, ``"mstl+fedformer"``,
    best first), ``weights_`` its weights, ``val_mae_`` every option's validation error.
    ``trusted_`` says the kept option is made of ``prefer`` candidates only and its
    validation error is strictly below the ``baseline`` candidate's (``auto``: the
    seasonal naive); the safety net (:mod:`streamtrain.forecast.fallback`) then does not
    hand the forecast to the naive on a few hours of recent error. It is saved with the
    model. Quantiles: the kept model's own; for an ensemble, the weighted mean of the
    models' quantiles at each level."""

    def __init__(
        self,
        make: Maker,
        candidates: Sequence[str],
        *,
        step_s: int = 60,
        val_steps: int = 2880,
        horizon_steps: int = 30,
        stride_steps: int = 30,
        folds: int = 2,
        fold_steps: int = 0,
        ensemble: bool = True,
        refit: bool = True,
        name: str = "select",
        cache: FitCache | None = None,
        cache_key: Callable[[str], str] | None = None,
        prefer: Sequence[str] = (),
        baseline: str = "",
        workers: int = 1,
        parallel: Sequence[str] = (),
        preload: Sequence[str] = (),
    ) -> None:
        if not candidates:
            raise ConfigError("model selection needs at least one candidate")
        if min(val_steps, horizon_steps, stride_steps, folds) < 1 or fold_steps < 0:
            raise ConfigError(
                "val_steps, horizon_steps, stride_steps and folds must be positive, "
                "fold_steps not negative"
            )
        self.make = make
        self.candidates = tuple(candidates)
        self.step_s = step_s
        self.val_steps = val_steps
        self.horizon_steps = horizon_steps
        self.stride_steps = stride_steps
        self.folds = folds
        self.fold_steps = fold_steps
        self.ensemble = ensemble
        self.refit = refit
        self.name = name
        self.cache = cache
        self.prefer = tuple(prefer)
        self.baseline = baseline
        self.cache_key = cache_key or (lambda candidate: candidate)
        self.models_: dict[str, Forecaster] = {}
        self.chosen_: str | None = None
        self.weights_: dict[str, float] = {}
        self.val_mae_: dict[str, float] = {}
        self.trusted_ = False
        self.workers = workers
        self.parallel = tuple(parallel)
        self.preload = tuple(preload)
        self._fits: dict[tuple[str, int], Forecaster] = {}  # this fit's, by history length
        self._digests: dict[int, str] = {}
        # this fit's scored validation values (the refit ahead and the scoring share it)
        self._scoring: tuple[FloatArray, NDArray[np.bool_]] | None = None

    # -- fitting ------------------------------------------------------------------------

    def _origins(self, start: int, end: int) -> range:
        return origins(start, end, self.horizon_steps, self.stride_steps)

    def _usual(self, values: FloatArray, folds: list[tuple[int, int]]) -> NDArray[np.bool_]:
        """Per validation point: whether its fold is scored. With three folds or more, a
        fold on which the seasonal naive (weekly once the history before it holds two
        weeks) errs more than ``ANOMALY_RATIO`` times its median fold (a holiday, an
        outage) is not: it says how each model copes with a day unlike the others, not
        how well it forecasts the next one, and one such day decided the choice on a call
        centre's series (the model that adapted fastest to a closed holiday was chosen and
        then missed the day after it)."""
        sizes = [len(self._origins(s, e)) * self.horizon_steps for s, e in folds]
        keep = np.ones(len(folds), dtype=bool)
        if len(folds) >= 3:
            errors = []
            try:
                for start, end in folds:
                    naive = SeasonalNaive(0, step_s=self.step_s).fit(values[:start])
                    pred = np.concatenate(
                        walk_model(naive, values, start, end, self.horizon_steps, self.stride_steps)
                    )
                    actual = np.concatenate(
                        [values[o : o + self.horizon_steps] for o in self._origins(start, end)]
                    )
                    err = np.abs(pred - actual)
                    errors.append(float(np.nanmean(err)) if (~np.isnan(err)).any() else 0.0)
            except (ConfigError, *_FAILURES) as exc:
                log.warning("%s: no seasonal naive to spot unusual folds: %s", self.name, exc)
            else:
                typical = float(np.median(errors))
                if typical > 0:
                    keep = np.asarray(errors) <= ANOMALY_RATIO * typical
                    if not keep.all():
                        log.info(
                            "%s: not scoring %d unusual validation fold(s) (seasonal naive "
                            "MAE %s; median %.4g)",
                            self.name,
                            int((~keep).sum()),
                            ", ".join(f"{e:.4g}" for e in errors),
                            typical,
                        )
        return np.repeat(keep, sizes)

    def _fit(self, name: str, history: FloatArray) -> Forecaster:
        if self.cache is None:
            return self.make(name).fit(history)
        return self.cache.fit(self.cache_key(name), lambda: self.make(name), history)

    def _plan(self, name: str, values: FloatArray, folds: list[tuple[int, int]]) -> FoldPlan:
        """What candidate ``name``'s validation needs, with what the cache knows."""
        known_fits: dict[int, Forecaster] = {}
        known_walks: dict[tuple[int, int], Walk] = {}
        if self.cache is not None:
            key = self.cache_key(name)
            for start, end in folds:
                walk = self.cache.get_walk(key, self._digest(values, end), start)
                if walk is not None:
                    known_walks[(start, end)] = walk
            for length in [s for s, _ in folds] + [values.shape[0]]:
                fit = self.cache.get(key, self._digest(values, length))
                if fit is not None:
                    known_fits[length] = fit
        return FoldPlan(
            name,
            self.make,
            values,
            tuple(folds),
            self.horizon_steps,
            self.stride_steps,
            keep_fits=self.cache is not None,
            known_fits=known_fits,
            known_walks=known_walks,
        )

    def _digest(self, values: FloatArray, length: int) -> str:
        if length not in self._digests:
            self._digests[length] = FitCache.digest(values[:length])
        return self._digests[length]

    def _validate(self, values: FloatArray, folds: list[tuple[int, int]]) -> dict[str, FloatArray]:
        """Each candidate's validation forecasts over every fold, concatenated (the
        ``parallel`` candidates in worker processes while the others run here, when
        their first fold is not cached: a day's refit that continues the previous
        day's fits is cheaper here than a new process)."""
        plans = [self._plan(name, values, folds) for name in self.candidates]
        remote = {
            p.name
            for p in plans
            if self.workers > 1 and p.name in self.parallel and folds[0][0] not in p.known_fits
        }
        known = {p.name: p.known_fits for p in plans}

        def refit_ahead(here: Mapping[str, FoldResult]) -> None:
            self._refit_ahead(values, folds, here, known)

        results = run_plans(plans, remote, self.preload, refit_ahead)
        forecasts: dict[str, FloatArray] = {}
        for plan, result in zip(plans, results, strict=True):
            name = plan.name
            self._fits.update({(name, k): v for k, v in plan.known_fits.items()})
            self._fits.update({(name, k): v for k, v in result.fits.items()})
            if self.cache is not None:
                key = self.cache_key(name)
                for length, model in result.fits.items():
                    self.cache.put(key, self._digest(values, length), model)
                for (start, end), walk in result.walks.items():
                    self.cache.put_walk(key, self._digest(values, end), start, walk)
            if result.forecasts is None or result.last is None:
                log.warning(
                    "%s: candidate %s failed in validation: %s", self.name, name, result.error
                )
                continue
            forecasts[name] = result.forecasts
            self.models_[name] = result.last
        return forecasts

    def _refit_ahead(
        self,
        values: FloatArray,
        folds: list[tuple[int, int]],
        here: Mapping[str, FoldResult],
        known: Mapping[str, Mapping[int, Forecaster]],
    ) -> None:
        """While worker processes validate their candidates (the transformer), the
        refit of the ``prefer`` candidate that validated best here: it is kept, alone
        or in an ensemble, unless another option is no worse on every scored fold, so
        its refit is most often needed, and done now it is off the fit's critical path.
        A failure is left to the refit, which tries again."""
        done = {
            name: result.forecasts
            for name, result in here.items()
            if name in self.prefer and result.forecasts is not None
        }
        n = values.shape[0]
        if not self.refit or not done:
            return
        try:
            actual, seen = self._scored(values, folds)
        except ForecastError:
            return
        best = min(done, key=lambda name: float(np.abs(done[name] - actual)[seen].mean()))
        if n in known.get(best, {}) or (best, n) in self._fits:
            return
        try:
            self._fits[(best, n)] = self._fit_whole(best, values, folds[-1][0])
        except _FAILURES as exc:
            log.info("%s: refitting %s ahead failed (%s)", self.name, best, exc)

    def _scored(
        self, values: FloatArray, folds: list[tuple[int, int]]
    ) -> tuple[FloatArray, NDArray[np.bool_]]:
        """The validation window's actual values, and which of them are scored: the
        observed ones, of usual folds when any (:meth:`_usual`); computed once a fit."""
        if self._scoring is not None:
            return self._scoring
        actual = np.concatenate(
            [values[o : o + self.horizon_steps] for s, e in folds for o in self._origins(s, e)]
        )
        seen = ~np.isnan(actual)
        if not seen.any():
            raise ForecastError(f"{self.name}: the validation window has no observed steps")
        usual = seen & self._usual(values, folds)
        self._scoring = (actual, usual if usual.any() else seen)
        return self._scoring

    def _score(
        self, values: FloatArray, folds: list[tuple[int, int]], forecasts: dict[str, FloatArray]
    ) -> None:
        actual, seen = self._scored(values, folds)
        sizes = [len(self._origins(s, e)) * self.horizon_steps for s, e in folds]
        fold_of = np.repeat(np.arange(len(folds)), sizes)[seen]

        def by_fold(pred: FloatArray) -> FloatArray:
            err = np.abs(pred - actual)[seen]
            count = np.bincount(fold_of, minlength=len(folds))
            total = np.bincount(fold_of, weights=err, minlength=len(folds))
            result: FloatArray = total[count > 0] / count[count > 0]
            return result

        options: dict[str, dict[str, float]] = {}
        preds = dict(forecasts)
        for key, pred in forecasts.items():
            self.val_mae_[key] = float(np.abs(pred - actual)[seen].mean())
            options[key] = {key: 1.0}
        ranked = sorted(forecasts, key=self.val_mae_.__getitem__)  # stable: ties keep order
        best = self.val_mae_[ranked[0]]
        close = [m for m in ranked if self.val_mae_[m] <= ENSEMBLE_RANGE * best]
        for k in range(2, len(close) + 1 if self.ensemble else 2):
            members = close[:k]
            weights = inverse_mae_weights([self.val_mae_[m] for m in members])
            key = "+".join(members)
            preds[key] = np.sum(
                [w * forecasts[m] for w, m in zip(weights, members, strict=True)], 0
            )
            self.val_mae_[key] = float(np.abs(preds[key] - actual)[seen].mean())
            options[key] = {m: float(w) for m, w in zip(members, weights, strict=True)}
        self.chosen_ = min(self.val_mae_, key=self.val_mae_.__getitem__)
        preferred = [m for m in ranked if m in self.prefer]
        if preferred and self.chosen_ != preferred[0]:
            ahead = by_fold(preds[self.chosen_]) <= by_fold(preds[preferred[0]])
            # With ``prefer``, the best preferred candidate is the safe choice: another
            # option is kept only when it is no worse on every scored fold, not only in
            # total (a win that one or two folds carry is within what a week of
            # validation can tell apart; see docs/benchmarks.md for margins tried).
            if not ahead.all():
                log.info(
                    "%s: %s is ahead of %s on %d of %d scored folds; keeping %s",
                    self.name,
                    self.chosen_,
                    preferred[0],
                    int(ahead.sum()),
                    ahead.size,
                    preferred[0],
                )
                self.chosen_ = preferred[0]
        self.weights_ = options[self.chosen_]
        baseline = self.val_mae_.get(self.baseline)
        self.trusted_ = (
            bool(self.prefer)
            and all(m in self.prefer for m in self.weights_)
            and baseline is not None
            and self.val_mae_[self.chosen_] < baseline
        )

    def _refit(self, values: FloatArray, last_start: int) -> None:
        """The kept models fitted again on the whole history (a model fitted a week ago
        forecasts today's level worse than the one scored in the last fold), one more fit
        per kept model; when that fit fails, the last fold's model (told every step
        since) is kept."""
        for key in self.weights_:
            try:
                self.models_[key] = self._fit_whole(key, values, last_start)
            except _FAILURES as exc:
                log.warning(
                    "%s: refitting %s on the whole history failed (%s); keeping its "
                    "last validation fit",
                    self.name,
                    key,
                    exc,
                )

    def _fit_whole(self, name: str, values: FloatArray, last_start: int) -> Forecaster:
        """``name`` fitted on the whole history: made in validation, or cached, or fitted
        now (a :class:`~streamtrain.forecast.base.WarmStart` model from its last fold's
        fit)."""
        n = values.shape[0]
        made = self._fits.get((name, n))
        if made is not None:
            return made
        model = self.make(name)
        previous = self._fits.get((name, last_start))
        if isinstance(model, WarmStart) and previous is not None:
            model.fit_from(previous, values)
        else:
            model.fit(values)
        if self.cache is not None:
            self.cache.put(self.cache_key(name), self._digest(values, n), model)
        return model

    def fit(self, history: FloatArray) -> Self:
        values = as_history(history)
        self.models_, self.val_mae_, self.chosen_, self.weights_ = {}, {}, None, {}
        self.trusted_ = False
        self._fits, self._digests, self._scoring = {}, {}, None
        val = min(self.val_steps, values.shape[0] // 4)
        folds = fold_bounds(values.shape[0], val, self.folds, self.fold_steps)
        if min(e - s for s, e in folds) >= self.horizon_steps:
            forecasts = self._validate(values, folds)
            if forecasts:
                self._score(values, folds, forecasts)
                self.models_ = {k: v for k, v in self.models_.items() if k in self.weights_}
                if self.refit:
                    self._refit(values, folds[-1][0])
        self._fits, self._digests, self._scoring = {}, {}, None
        if self.chosen_ is None:  # no validation window: the first candidate that fits
            for name in self.candidates:
                try:
                    self.models_ = {name: self._fit(name, values)}
                except _FAILURES as exc:
                    log.warning("%s: candidate %s failed: %s", self.name, name, exc)
                    continue
                self.chosen_, self.weights_ = name, {name: 1.0}
                break
        if self.chosen_ is None:
            raise ForecastError(f"{self.name}: every candidate failed to fit")
        log.info(
            "%s: chose %s (weights %s; validation MAE %s)",
            self.name,
            self.chosen_,
            ", ".join(f"{k} {w:.3f}" for k, w in self.weights_.items()),
            ", ".join(f"{k} {v:.4g}" for k, v in sorted(self.val_mae_.items(), key=lambda x: x[1])),
        )
        return self

    def update(self, new_points: FloatArray) -> Self:
        values = as_new_points(new_points)
        for model, _ in self._kept():
            model.update(values)
        return self

    # -- prediction ---------------------------------------------------------------------

    def _kept(self) -> list[tuple[Forecaster, float]]:
        if self.chosen_ is None:
            raise ForecastError(f"{self.name} is not fitted")
        return [(self.models_[k], w) for k, w in self.weights_.items()]

    def predict(self, horizon_steps: int) -> FloatArray:
        check_horizon(horizon_steps)
        outs = [w * np.maximum(m.predict(horizon_steps), 0.0) for m, w in self._kept()]
        result: FloatArray = np.sum(outs, axis=0)
        return result

    def predict_quantiles(
        self, horizon_steps: int, levels: Sequence[float]
    ) -> dict[float, FloatArray]:
        check_horizon(horizon_steps)
        levels = check_levels(levels)
        parts = [(quantiles_or_point(m, horizon_steps, levels), w) for m, w in self._kept()]
        return {q: np.sum([w * p[q] for p, w in parts], axis=0) for q in levels}

    # -- persistence (streamtrain.forecast.select_store) --------------------------------

    def save(self, path: str | Path) -> None:
        """A JSON manifest at ``path``; each kept model beside it (``<path>.<name>``)."""
        from streamtrain.forecast.select_store import save_select

        save_select(self, path)
