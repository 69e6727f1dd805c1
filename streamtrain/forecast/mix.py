"""Online weights of a two-model combination, from errors scored as the steps arrive.

Owned here: :class:`MixWeights` (pure numpy, no model). The FEDformer-style forecaster
combines its transformer with MSTL (:mod:`streamtrain.forecast.fedformer`); how much
each one counts follows how well each forecast the steps since the fit, with the
inverse mean-absolute-error weights that ``auto``'s ensembles use
(:func:`~streamtrain.forecast.select.inverse_mae_weights`). Nothing here sees a step
before it has arrived: a window is scored only with the steps that followed its origin.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError
from streamtrain.forecast.select import inverse_mae_weights

__all__ = ["MixWeights"]

FloatArray = NDArray[np.float64]


class MixWeights:
    """Errors of two models' forecasts, scored window by window.

    :meth:`track` remembers both models' forecasts of the next ``window`` steps, made at
    an origin; :meth:`observe` collects the steps that arrive and, once ``window`` of
    them are in, adds each model's mean absolute error over them (gaps skipped) to its
    total. One window is tracked at a time, so the windows do not overlap; :attr:`needed`
    says how many steps complete it, so that a caller with a long update (a live catch-up
    of hours) can feed it window by window and score every window it covers, as a tick of
    one step or a benchmark's stride of a horizon would. A window whose forecasts are not
    finite is not scored."""

    def __init__(self, window: int, warm: int = 4) -> None:
        if window < 1 or warm < 0:
            raise ConfigError("the window must be positive and the warm-up not negative")
        self.window = window
        self.warm = warm
        self.errors = [0.0, 0.0]
        self.scored = 0
        self._pending: tuple[FloatArray, FloatArray] | None = None
        self._arrived: list[FloatArray] = []

    @property
    def tracking(self) -> bool:
        return self._pending is not None

    @property
    def needed(self) -> int:
        """Steps that complete the tracked window (0 when none is tracked)."""
        if self._pending is None:
            return 0
        return self.window - sum(int(a.shape[0]) for a in self._arrived)

    def track(self, first: FloatArray, second: FloatArray) -> None:
        """Both models' forecasts of the next ``window`` steps, from the same origin."""
        if first.shape[0] < self.window or second.shape[0] < self.window:
            raise ValueError(f"track a forecast of at least {self.window} steps")
        pending = (first[: self.window].copy(), second[: self.window].copy())
        finite = all(np.isfinite(p).all() for p in pending)
        self._pending, self._arrived = (pending if finite else None), []

    def observe(self, values: FloatArray) -> None:
        """Steps that arrived after the tracked origin; scores the window once full."""
        if self._pending is None:
            return
        self._arrived.append(values)
        actual = np.concatenate(self._arrived)
        if actual.shape[0] < self.window:
            return
        actual = actual[: self.window]
        seen = ~np.isnan(actual)
        if seen.any():
            for i, forecast in enumerate(self._pending):
                self.errors[i] += float(np.abs(forecast - actual)[seen].mean())
            self.scored += 1
        self._pending, self._arrived = None, []

    def weight(self, prior: float) -> float:
        """The second model's share: ``prior`` until ``warm`` windows are scored (or
        while both errors are zero), then ``first_error / (first_error + second_error)``
        over every window scored since the fit."""
        if self.scored < self.warm or sum(self.errors) <= 0.0:
            return prior
        return float(inverse_mae_weights(self.errors)[1])

    def state(self) -> dict[str, Any]:
        """What a saved model keeps (a window in progress is not kept)."""
        return {"errors": list(self.errors), "scored": self.scored}

    def restore(self, state: dict[str, Any]) -> None:
        self.errors = [float(v) for v in state["errors"]]
        self.scored = int(state["scored"])
