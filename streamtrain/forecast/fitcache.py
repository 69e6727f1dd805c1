"""A cache of fitted forecasters, keyed by the model and the exact history it saw.

Owned here: :class:`FitCache` and :class:`CachedFit`. Every model here is seeded and
deterministic, so fitting the same model (name, resolution, seed, options) on the same
history always gives the same fitted state: a cache can hand out copies of the first
fit instead of fitting again, and no score changes. It pays off where the same fit is
asked for repeatedly, as in the rolling-origin benchmark: ``auto``'s daily validation
folds start where the previous day's folds started, its refit on the whole history is
the fit the harness makes of the same model as a baseline, and so on.

* :meth:`FitCache.fit` returns a deep copy of the cached fit (the caller may ``update``
  it freely); the entry itself stays as fitted. The least recently used entries go
  past ``max_entries``; a failed fit is not cached (it raises as it would).
* :class:`CachedFit`: a forecaster that fits through a cache, for a harness's
  factory (``lambda: CachedFit(cache, name, make)``).

Keys: ``name`` (which must name the model and every option that changes its fit) and a
SHA-1 of the history's bytes.
"""

from __future__ import annotations

import copy
import hashlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Self

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError, ForecastError
from streamtrain.forecast.base import Forecaster, quantiles_or_point

__all__ = ["CachedFit", "FitCache"]

FloatArray = NDArray[np.float64]


class FitCache:
    """Fitted models by (key, history digest); see the module docstring."""

    def __init__(self, max_entries: int = 256) -> None:
        if max_entries < 1:
            raise ConfigError("a fit cache holds at least one entry")
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[tuple[str, str], Forecaster] = OrderedDict()

    @staticmethod
    def digest(history: FloatArray) -> str:
        values = np.ascontiguousarray(history, dtype=np.float64)
        return hashlib.sha1(values.tobytes(), usedforsecurity=False).hexdigest()

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
    the fitted model's."""

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

    def predict(self, horizon: int) -> FloatArray:
        return self._model().predict(horizon)

    def predict_quantiles(self, horizon: int, levels: Sequence[float]) -> dict[float, FloatArray]:
        return quantiles_or_point(self._model(), horizon, levels)

    def update(self, new_points: FloatArray) -> Self:
        self._model().update(new_points)
        return self

    def save(self, path: str | Path) -> None:
        self._model().save(path)
