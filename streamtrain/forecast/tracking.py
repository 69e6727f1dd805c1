"""A model's recent error beside the seasonal naive's, scored as the steps arrive.

Owned here: :class:`RecentErrors`, the one tracker behind both safety nets (``auto``'s
:class:`~streamtrain.forecast.fallback.FallbackForecaster` and the live planner's
:class:`~streamtrain.forecast.live.LiveForecaster`). At each origin the caller hands
over both models' forecasts of the next ``track_steps`` (:meth:`RecentErrors.remember`);
the next steps to arrive score them (:meth:`RecentErrors.score`: one absolute error
pair per observed step, gaps skipped); :meth:`RecentErrors.mae` is the (model, naive)
mean absolute error over the last ``window_steps`` scored steps, once ``min_tracked``
exist. Whether that error hands the forecast to the naive is
:func:`~streamtrain.forecast.base.hands_over`'s rule, not this class's.
"""

from __future__ import annotations

from collections import deque

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError

__all__ = ["RecentErrors"]

FloatArray = NDArray[np.float64]


class RecentErrors:
    """(model, naive) absolute errors of the forecasts made at the last origin."""

    def __init__(self, track_steps: int, window_steps: int, min_tracked: int) -> None:
        if track_steps < 1 or window_steps < 1 or min_tracked < 1:
            raise ConfigError("track_steps, window_steps and min_tracked must be positive")
        self.track_steps = track_steps
        self.min_tracked = min_tracked
        # the window's errors as Python floats, oldest first, one deque per model: read
        # into an array at C speed (a deque of pairs of numpy scalars goes through
        # np.asarray element by element, at every scored step)
        self._model_errors: deque[float] = deque(maxlen=window_steps)
        self._naive_errors: deque[float] = deque(maxlen=window_steps)
        self._pending: tuple[FloatArray | None, FloatArray] | None = None
        # mae() until the next scored step: asked at every forecast, changed per update
        self._mae: tuple[float, float] | None = None

    def remember(self, model: FloatArray | None, naive: FloatArray) -> None:
        """Both forecasts at this origin (``model`` None: it had none; nothing is scored)."""
        self._pending = (model, naive)

    def forget_origin(self) -> None:
        """Drop the forecasts of the last origin (the history they came from was replaced)."""
        self._pending = None

    def clear(self) -> None:
        """Forget every scored step (a new model is judged on its own forecasts)."""
        self._model_errors.clear()
        self._naive_errors.clear()
        self._mae = None

    def score(self, actual: FloatArray) -> None:
        """Score the last origin's forecasts against the steps that arrived after it."""
        if self._pending is None:
            return
        model, naive = self._pending
        self._pending = None
        if model is None:
            return
        count = min(actual.shape[0], model.shape[0], self.track_steps)
        self._mae = None
        for i in range(count):
            if not np.isnan(actual[i]):
                self._model_errors.append(float(abs(model[i] - actual[i])))
                self._naive_errors.append(float(abs(naive[i] - actual[i])))

    def mae(self) -> tuple[float, float] | None:
        """(model, naive) mean absolute error over the window, once long enough."""
        count = len(self._model_errors)
        if count < self.min_tracked:
            return None
        if self._mae is None:
            model = np.fromiter(self._model_errors, dtype=np.float64, count=count)
            naive = np.fromiter(self._naive_errors, dtype=np.float64, count=count)
            self._mae = float(model.mean()), float(naive.mean())
        return self._mae
