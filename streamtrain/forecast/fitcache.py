"""A cache of fitted forecasters, keyed by the model and the exact history it saw.

Owned here: :class:`FitCache` and :class:`CachedFit`. Every model here is seeded and
deterministic, so fitting the same model (name, resolution, seed, options) on the same
history always gives the same fitted state: a cache can hand out copies of the first
fit instead of fitting again, and no score changes. It pays off where the same fit is
asked for repeatedly, as in the rolling-origin benchmark: ``auto``'s daily validation
folds start where the previous day's folds started, its refit on the whole history is
the fit the harness makes of the same model as a baseline, and so on.

The one exception to "the same with or without a cache" is a model that fits from an
earlier fit of itself (the transformer's warm starts,
:class:`~streamtrain.forecast.base.WarmStart`): with a cache, ``auto``'s first
validation fold of a day is the previous day's fit of that history (itself
fine-tuned), without one it is trained from scratch.
"""

from __future__ import annotations

import copy
import hashlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError, ForecastError
from streamtrain.forecast.base import Forecaster
from streamtrain.forecast.folds import Walk

__all__ = ["CachedFit", "FitCache"]

FloatArray = NDArray[np.float64]


class FitCache:
    """Fitted models and validation walks by (key, history digest): ``key`` must name
    the model and every option that changes its fit, the digest is a SHA-1 of the
    history's bytes. Entries are handed out as deep copies (the caller may ``update``
    them freely); the least recently used go past ``max_entries``; a failed fit is not
    cached. :meth:`get` / :meth:`put` serve a caller that fits itself (``auto``'s folds,
    :mod:`streamtrain.forecast.folds`); :meth:`get_walk` / :meth:`put_walk` a
    validation fold's forecasts and walked model, by the history up to the fold's end
    and the fold's start (the previous day's folds are today's, less the oldest)."""

    def __init__(self, max_entries: int = 256) -> None:
        if max_entries < 1:
            raise ConfigError("a fit cache holds at least one entry")
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0
        self.walk_hits = 0
        self._entries: OrderedDict[tuple[str, str], Any] = OrderedDict()

    @staticmethod
    def digest(history: FloatArray) -> str:
        values = np.ascontiguousarray(history, dtype=np.float64)
        return hashlib.sha1(values.tobytes(), usedforsecurity=False).hexdigest()

    def _get(self, entry: tuple[str, str]) -> Any:
        found = self._entries.get(entry)
        if found is not None:
            self._entries.move_to_end(entry)
            return copy.deepcopy(found)
        return None

    def _put(self, entry: tuple[str, str], value: Any) -> None:
        self._entries[entry] = copy.deepcopy(value)
        self._entries.move_to_end(entry)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def get(self, key: str, digest: str) -> Forecaster | None:
        """A copy of the fit cached under ``key`` for the history of ``digest``."""
        found: Forecaster | None = self._get((key, digest))
        if found is not None:
            self.hits += 1
        return found

    def put(self, key: str, digest: str, model: Forecaster) -> None:
        """Keep a copy of ``model``, fitted on the history of ``digest``."""
        self.misses += 1
        self._put((key, digest), model)

    def get_walk(self, key: str, digest_end: str, start: int) -> Walk | None:
        """A copy of the walk of the fold from ``start`` to the end of the history of
        ``digest_end``, by the model cached under ``key``."""
        found: Walk | None = self._get((f"walk:{key}", f"{digest_end}:{start}"))
        if found is not None:
            self.walk_hits += 1
        return found

    def put_walk(self, key: str, digest_end: str, start: int, walk: Walk) -> None:
        self._put((f"walk:{key}", f"{digest_end}:{start}"), walk)

    def fit(self, key: str, make: Callable[[], Forecaster], history: FloatArray) -> Forecaster:
        """A copy of ``make().fit(history)``, fitted once per (key, history)."""
        entry = (key, self.digest(history))
        cached = self._entries.get(entry)
        if cached is None:
            self.misses += 1
            cached = make().fit(history)
            self._entries[entry] = cached
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        else:
            self.hits += 1
            self._entries.move_to_end(entry)
        return copy.deepcopy(cached)


class CachedFit:
    """A forecaster whose ``fit`` goes through a :class:`FitCache`; everything else is
    the fitted model's. For a harness's factory: ``lambda: CachedFit(cache, name, make)``."""

    def __init__(self, cache: FitCache, key: str, make: Callable[[], Forecaster]) -> None:
        self.cache = cache
        self.key = key
        self.make = make
        self.model_: Forecaster | None = None
        probe = make()
        self.name = probe.name
        self.step_s = probe.step_s

    def _model(self) -> Forecaster:
        if self.model_ is None:
            raise ForecastError(f"{self.name} is not fitted")
        return self.model_

    def fit(self, history: FloatArray) -> Self:
        self.model_ = self.cache.fit(self.key, self.make, history)
        return self

    def predict(self, horizon_steps: int) -> FloatArray:
        return self._model().predict(horizon_steps)

    def predict_quantiles(
        self, horizon_steps: int, levels: Sequence[float]
    ) -> dict[float, FloatArray]:
        return self._model().predict_quantiles(horizon_steps, levels)

    def update(self, new_points: FloatArray) -> Self:
        self._model().update(new_points)
        return self

    def save(self, path: str | Path) -> None:
        self._model().save(path)
