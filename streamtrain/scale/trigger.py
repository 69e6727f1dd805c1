"""When the threshold fallback takes over from the proactive plan (KALE §3.4.3).

The proactive path trusts a forecast and a throughput model; this module decides, from
what is measured, that the plan is wrong and the HPA-style fallback
(:mod:`streamtrain.scale.fallback`) should drive instead. Two rules, each with
hysteresis so the path does not flap:

* **Measured lag.** Enter when the measured lag exceeds the lag the plan expects (for
  example the pause of an action that just finished) by more than ``lag_enter_s``;
  the lag rule is satisfied again once the excess is back under ``lag_exit_s``.
* **Forecast error.** Enter when the recent relative forecast error
  (:func:`relative_error`) exceeds ``error_enter``; satisfied again under ``error_exit``.

Once entered, the fallback stays active at least ``min_active_s`` and until both rules
are satisfied. Pure: the caller keeps the :class:`TriggerState` and passes times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError

__all__ = ["TriggerCause", "TriggerSettings", "TriggerState", "relative_error", "update_trigger"]

TriggerCause = Literal["lag", "forecast_error", ""]
"""Why the fallback is active (``""`` when it is not)."""


@dataclass(frozen=True, slots=True)
class TriggerSettings:
    lag_enter_s: float = 600.0
    lag_exit_s: float = 120.0
    error_enter: float = 0.3
    error_exit: float = 0.15
    min_active_s: float = 600.0

    def __post_init__(self) -> None:
        if not 0 <= self.lag_exit_s <= self.lag_enter_s:
            raise ConfigError("need 0 <= lag_exit_s <= lag_enter_s")
        if not 0 <= self.error_exit <= self.error_enter:
            raise ConfigError("need 0 <= error_exit <= error_enter")
        if self.min_active_s < 0:
            raise ConfigError("min_active_s cannot be negative")


@dataclass(frozen=True, slots=True)
class TriggerState:
    active: bool = False
    cause: TriggerCause = ""
    since_s: float = -math.inf


def relative_error(actual: NDArray[np.float64], forecast: NDArray[np.float64]) -> float | None:
    """``|Σ actual - Σ forecast| / Σ forecast`` over matching steps: how far the recent
    traffic is from what was forecast for it, in either direction; ``None`` when there is
    nothing to compare (no steps, or both sums zero). A zero forecast of real traffic is
    an error of ``inf``."""
    a = np.asarray(actual, dtype=np.float64)
    f = np.asarray(forecast, dtype=np.float64)
    if a.shape != f.shape:
        raise ConfigError(f"{a.size} actual steps but {f.size} forecast steps")
    if a.size == 0:
        return None
    total_a, total_f = float(a.sum()), float(f.sum())
    if total_f <= 0:
        return None if total_a <= 0 else math.inf
    return abs(total_a - total_f) / total_f


def update_trigger(
    state: TriggerState,
    *,
    now_s: float,
    max_lag_s: float,
    expected_lag_s: float = 0.0,
    forecast_error: float | None = None,
    settings: TriggerSettings,
) -> TriggerState:
    """The next trigger state (see the module docstring)."""
    if max_lag_s < 0 or expected_lag_s < 0:
        raise ConfigError("lags cannot be negative")
    excess_s = max_lag_s - expected_lag_s
    lag_bad = excess_s > settings.lag_enter_s
    error_bad = forecast_error is not None and forecast_error > settings.error_enter
    if not state.active:
        if lag_bad or error_bad:
            return TriggerState(True, "lag" if lag_bad else "forecast_error", now_s)
        return state
    lag_calm = excess_s <= settings.lag_exit_s
    error_calm = forecast_error is None or forecast_error <= settings.error_exit
    if lag_calm and error_calm and now_s - state.since_s >= settings.min_active_s:
        return TriggerState()
    if lag_bad and state.cause != "lag":
        return TriggerState(True, "lag", state.since_s)
    return state
