"""The live planner's forecaster: fits in the background, a seasonal naive meanwhile.

Owned here: :class:`LiveForecaster` and :class:`LiveSettings`. The live control loop
must never wait for a fit (``auto`` takes seconds to minutes), so:

* ``fit(history)`` fits the seasonal naive at once (milliseconds) and, when a refit is
  due, hands a :class:`~streamtrain.forecast.live_store.FitJob` to ``submit`` (the
  control app's process pool runs :func:`~streamtrain.forecast.live_store.fit_and_save`)
  and returns. A refit is due when no model is live, when the live one is older than
  ``refit_every_s``, or when its recent error clearly exceeds the seasonal naive's (at
  most once per ``min_refit_gap_s``).
* Every later call first collects a finished job: the saved model is loaded, told the
  steps that arrived while it was fitting, and goes live; a manifest is written next to
  it (:mod:`streamtrain.forecast.live_store`), from which a restart resumes.
* ``predict`` answers with the live model unless there is none, it fails, or the safety
  net's rule hands the forecast to the seasonal naive; a fit that fails or runs past
  ``fit_timeout_s`` raises an alert (:meth:`take_alerts`) until a fit succeeds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError, ForecastError
from streamtrain.forecast.base import (
    Forecaster,
    SeasonalNaive,
    as_history,
    as_new_points,
    check_levels,
    hands_over,
    seasonal_scale,
    worse_than_naive,
)
from streamtrain.forecast.live_store import (
    FitJob,
    Manifest,
    Submit,
    fit_and_save,
    load_model,
    read_manifest,
    write_manifest,
)
from streamtrain.forecast.tracking import RecentErrors
from streamtrain.units import DAY_S, HOUR_S, MINUTE_S, WEEK_S, s_to_ms

# FitJob, Submit and fit_and_save live in live_store; named here for the planner's imports
__all__ = ["FitJob", "LiveForecaster", "LiveSettings", "Submit", "fit_and_save"]

log = logging.getLogger(__name__)
FloatArray = NDArray[np.float64]
_FAILURES = (ForecastError, RuntimeError, ValueError, ArithmeticError, OSError)


@dataclass(frozen=True, slots=True)
class LiveSettings:
    """How the live forecaster fits and judges its model (module docstring)."""

    name: str = "auto"
    step_s: int = 60
    seed: int = 0
    options: tuple[tuple[str, Any], ...] = ()  # the model's registry options
    refit_every_s: float = DAY_S
    fit_timeout_s: float = 1800.0
    min_refit_gap_s: float = HOUR_S
    state_dir: Path | None = None
    track_steps: int = 30
    window_steps: int = 1440
    min_tracked: int = 120
    max_history_steps: int = 5 * WEEK_S // MINUTE_S

    def __post_init__(self) -> None:
        if self.refit_every_s <= 0 or self.fit_timeout_s <= 0 or self.min_refit_gap_s < 0:
            raise ConfigError("the refit interval and the fit timeout must be positive")
        if min(self.track_steps, self.window_steps, self.min_tracked) < 1:
            raise ConfigError("track_steps, window_steps and min_tracked must be positive")


@dataclass(slots=True)
class _Running:
    future: Future[float]
    path: Path
    end_step: int
    started_s: float  # wall clock
    why: str
    late: bool = False


class LiveForecaster:
    """See the module docstring. One caller at a time (the planner's thread)."""

    def __init__(
        self,
        settings: LiveSettings,
        submit: Submit,
        *,
        clock: Callable[[], float] = time.time,
        wall_clock: Callable[[], float] | None = None,
    ) -> None:
        self.settings = settings
        self.name = settings.name
        self.step_s = settings.step_s
        self.submit = submit
        self.clock = clock
        # A fit is late on the clock it computes on: the wall's, even when the planner
        # runs on a faster model clock (`lag run --plan-time-scale`: 1,800 model seconds
        # were 12.5 wall seconds in `streamtrain demo`, and no fit of `auto` ever counted).
        self.wall_clock = wall_clock or clock
        self.naive = SeasonalNaive(0, step_s=settings.step_s)
        self.model_: Forecaster | None = None
        self.model_end_step_: int | None = None  # absolute end of the model's history
        self.fitted_at_s_: float | None = None
        self.fit_s_: float | None = None
        self.loaded_from_disk_ = False
        self.refits_ = 0
        self.fit_failures_ = 0
        self.source_: str | None = None
        self.reason_: str | None = None
        self._history = np.zeros(0)
        self._next_end: int | None = None  # told by at_step, for the next call
        self._synced_end: int | None = None  # the absolute end of _history
        self._running: _Running | None = None
        self._failed: str | None = None  # why the last fit failed or is late (alert raised)
        self._alerts: list[tuple[str, bool]] = []
        self._last_request_s = -np.inf
        self._restored = False
        self._scale = float("nan")
        self.errors = RecentErrors(
            settings.track_steps, settings.window_steps, settings.min_tracked
        )
        self.state_dir = settings.state_dir
        if self.state_dir is not None:
            self.state_dir.mkdir(parents=True, exist_ok=True)

    # -- positions ----------------------------------------------------------------------

    def at_step(self, end_step: int) -> None:
        """The history the next call passes ends just before absolute step ``end_step``,
        so that a model fitted on an older history, or saved before a restart, is told
        the steps it has not seen."""
        self._next_end = end_step

    def _end(self) -> int:
        """The absolute end of the history this forecaster holds."""
        return self._synced_end if self._synced_end is not None else self._history.shape[0]

    # -- the Forecaster contract --------------------------------------------------------

    def fit(self, history: FloatArray) -> Self:
        """Take the history (only its new steps when it continues the one held); start a
        background fit when one is due (module docstring)."""
        values = as_history(history)
        new_end = self._next_end if self._next_end is not None else values.shape[0]
        held = self._synced_end
        if held is not None and 0 <= new_end - held <= values.shape[0]:
            if new_end > held:
                self.update(values[values.shape[0] - (new_end - held) :])
        else:
            self._history = values[-self.settings.max_history_steps :].copy()
            self._synced_end = new_end
            self.naive.fit(values)
            self.errors.clear()
            self.errors.forget_origin()
            self._collect()
            if not self._restored:
                self._restored = True
                self._restore()
            self._track_origin()
        self._scale = seasonal_scale(self._history, DAY_S // self.step_s)
        due = self._due()
        if due is not None:
            self._request(due)
        return self

    def update(self, new_points: FloatArray) -> Self:
        values = as_new_points(new_points)
        self.errors.score(values)
        keep = self.settings.max_history_steps
        self._history = np.concatenate([self._history, values])[-keep:]
        self._synced_end = (
            self._next_end if self._next_end is not None else self._end() + values.shape[0]
        )
        self.naive.update(values)
        if self.model_ is not None and values.size:
            try:
                self.model_.update(values)
                self.model_end_step_ = self._end()
            except _FAILURES as exc:
                self._drop_model(f"update failed: {exc}")
        self._collect()  # a model that lands now catches up on these steps itself
        recent = self.recent_mae()
        worse = recent is not None and worse_than_naive(*recent, self._scale)
        gap_s = self.clock() - self._last_request_s
        if worse and self._running is None and gap_s >= self.settings.min_refit_gap_s:
            self._request("its recent error exceeds the seasonal naive's")
        self._check_late()
        self._track_origin()
        return self

    def predict(self, horizon_steps: int) -> FloatArray:
        """The live model's forecast, or the seasonal naive's when there is no live model,
        its prediction fails, or its recent error
        (:class:`~streamtrain.forecast.tracking.RecentErrors`: the first ``track_steps`` of
        each forecast over the last ``window_steps`` scored steps, once ``min_tracked``
        exist) clearly exceeds the naive's and the model is not trusted
        (:func:`~streamtrain.forecast.base.hands_over`, the same rule as in the
        simulator). Either way such an error requests a refit."""
        self._collect()
        self._check_late()
        forecast, reason = self._choose(horizon_steps)
        source = self.name if forecast is not None else self.naive.name
        if source != self.source_:
            if reason is not None:
                log.warning("forecaster %s: answering with %s: %s", self.name, source, reason)
            else:
                log.info("forecaster %s: live", self.name)
        self.source_, self.reason_ = source, reason
        return forecast if forecast is not None else self.naive.predict(horizon_steps)

    def predict_quantiles(
        self, horizon_steps: int, levels: Sequence[float]
    ) -> dict[float, FloatArray]:
        levels = check_levels(levels)
        point = self.predict(horizon_steps)
        model: Forecaster = self.naive
        if self.source_ == self.name and self.model_ is not None:
            model = self.model_
        try:
            return model.predict_quantiles(horizon_steps, levels)
        except _FAILURES as exc:
            log.warning("forecaster %s: quantiles failed: %s", self.name, exc)
        return {q: point.copy() for q in levels}

    def save(self, path: str | Path) -> None:
        if self.model_ is None:
            raise ForecastError(f"{self.name}: no fitted model to save")
        self.model_.save(path)

    # -- choosing -----------------------------------------------------------------------

    def _choose(self, horizon_steps: int) -> tuple[FloatArray | None, str | None]:
        if self.model_ is None:
            if self._failed is not None:
                return None, self._failed
            return None, "no fitted model yet" + (" (fitting)" if self._running else "")
        if self._failed is not None:
            return None, self._failed
        recent = self.recent_mae()
        if recent is not None and hands_over(recent, self._scale, self.model_):
            return None, (
                f"its recent MAE {recent[0]:.4g} exceeds the seasonal naive's {recent[1]:.4g}"
            )
        try:
            forecast = np.asarray(self.model_.predict(horizon_steps), dtype=np.float64)
        except _FAILURES as exc:
            return None, f"predict failed: {exc}"
        if forecast.shape != (horizon_steps,) or not np.all(np.isfinite(forecast)):
            return None, "predict returned a malformed forecast"
        return np.maximum(forecast, 0.0), None

    def _track_origin(self) -> None:
        track = self.settings.track_steps
        main = None
        if self.model_ is not None:
            try:
                main = np.asarray(self.model_.predict(track), dtype=np.float64)
            except _FAILURES:
                main = None
        self.errors.remember(main, self.naive.predict(track))

    def recent_mae(self) -> tuple[float, float] | None:
        """(model, naive) mean absolute error over the tracked window, once long enough."""
        return self.errors.mae()

    # -- background fits ----------------------------------------------------------------

    def _due(self) -> str | None:
        if self.model_ is None:
            return None if self._running else "no fitted model"
        if self._running is not None:
            return None
        age = self.clock() - (self.fitted_at_s_ or 0.0)
        if age >= self.settings.refit_every_s:
            return f"the model is {age / HOUR_S:.1f} h old"
        return None

    def _model_path(self) -> Path:
        directory = self.state_dir
        if directory is None:
            import tempfile

            directory = self.state_dir = Path(tempfile.mkdtemp(prefix="streamtrain-forecaster-"))
        return directory / f"{self.name}-{int(s_to_ms(self.clock()))}.model"

    def _request(self, why: str) -> None:
        if self._running is not None:
            return
        path = self._model_path()
        job = FitJob(
            self.name,
            self.step_s,
            self.settings.seed,
            self._history.copy(),
            str(path),
            dict(self.settings.options),
        )
        self._last_request_s = self.clock()
        try:
            future = self.submit(job)
        except (RuntimeError, OSError) as exc:  # a broken or shut-down pool
            self._fail(f"the fit could not start: {exc}")
            return
        self._running = _Running(future, path, self._end(), self.wall_clock(), why)
        log.info(
            "forecaster %s: fitting on %d steps in the background (%s)",
            self.name,
            self._history.shape[0],
            why,
        )

    def _collect(self) -> None:
        running = self._running
        if running is None or not running.future.done():
            return
        self._running = None
        try:
            fit_s = running.future.result()
            model = load_model(running.path)
        except Exception as exc:  # noqa: BLE001 - anything from the worker is a failed fit
            self._fail(f"the fit failed: {type(exc).__name__}: {exc}")
            return
        if not self._install(model, running.end_step, self.clock(), fit_s, running.path):
            return
        self.refits_ += 1
        self._write_manifest(running.path)
        log.info("forecaster %s: fitted in %.1f s, live", self.name, fit_s)

    def _install(
        self, model: Forecaster, end_step: int, fitted_at_s: float, fit_s: float, path: Path
    ) -> bool:
        missed = self._end() - end_step
        if missed > self._history.shape[0]:
            log.warning("forecaster %s: %s is too old to catch up; refitting", self.name, path)
            return False
        try:
            if missed > 0:
                model.update(self._history[-missed:])
        except _FAILURES as exc:
            self._fail(f"the fitted model could not catch up: {exc}")
            return False
        self.model_, self.model_end_step_ = model, self._end()
        self.fitted_at_s_, self.fit_s_ = fitted_at_s, fit_s
        self.errors.clear()
        if self._failed is not None:
            self._alerts.append((f"forecaster {self.name} fitted again and is live", True))
            self._failed = None
        return True

    def _check_late(self) -> None:
        running = self._running
        if running is None or running.late:
            return
        running_s = self.wall_clock() - running.started_s
        if running_s > self.settings.fit_timeout_s:
            running.late = True
            self._fail(
                f"the fit started {running_s:.0f} wall seconds ago is late "
                f"(timeout {self.settings.fit_timeout_s:.0f} s)"
            )

    def _fail(self, why: str) -> None:
        self.fit_failures_ += 1
        if self._failed is None:
            self._alerts.append(
                (f"forecaster {self.name}: {why}; planning on the seasonal naive", False)
            )
        self._failed = why
        log.warning("forecaster %s: %s; using the seasonal naive", self.name, why)

    def _drop_model(self, why: str) -> None:
        self.model_ = None
        self._fail(why)

    def take_alerts(self) -> list[tuple[str, bool]]:
        """Alerts since the last call: (message, resolved)."""
        alerts, self._alerts = self._alerts, []
        return alerts

    # -- persistence --------------------------------------------------------------------

    def _write_manifest(self, path: Path) -> None:
        if self.state_dir is None or self.model_end_step_ is None:
            return
        manifest = Manifest(
            self.name,
            self.step_s,
            path.name,
            self.model_end_step_,
            self.fitted_at_s_ or 0.0,
            self.fit_s_ or 0.0,
        )
        write_manifest(self.state_dir, manifest)

    def _restore(self) -> None:
        """Load the model a previous run's manifest names and tell it the steps since,
        instead of refitting (unless a refit is due)."""
        if self.state_dir is None:
            return
        try:
            manifest = read_manifest(self.state_dir)
            if manifest is None:
                return
            if manifest.name != self.name or manifest.step_s != self.step_s:
                log.info("forecaster %s: the saved model is another one; refitting", self.name)
                return
            path = self.state_dir / manifest.file
            model = load_model(path)
        except (*_FAILURES, KeyError, TypeError) as exc:
            log.warning("forecaster %s: cannot reload the saved model: %s", self.name, exc)
            return
        fitted_at_s, fit_s = manifest.fitted_at_s, manifest.fit_s
        if self._install(model, manifest.end_step, fitted_at_s, fit_s, path):
            self.loaded_from_disk_ = True
            self.model_end_step_ = self._end()
            log.info("forecaster %s: reloaded %s (fitted in %.1f s)", self.name, path, fit_s)

    # -- reporting ----------------------------------------------------------------------

    @property
    def fitting(self) -> bool:
        return self._running is not None

    def status(self) -> dict[str, Any]:
        """What ``/planner`` shows about the forecaster: which model is live, why, its
        recent MASE and the naive's, fit times."""
        recent = self.recent_mae()
        scale = self._scale
        ok = recent is not None and np.isfinite(scale) and scale > 0
        return {
            "model": self.name,
            "live": self.source_,
            "fallback_reason": self.reason_,
            "recent_mase": round(recent[0] / scale, 4) if ok and recent else None,
            "naive_recent_mase": round(recent[1] / scale, 4) if ok and recent else None,
            "fitted_at_ms": None if self.fitted_at_s_ is None else int(s_to_ms(self.fitted_at_s_)),
            "fit_s": None if self.fit_s_ is None else round(self.fit_s_, 2),
            "fitting": self.fitting,
            "refits": self.refits_,
            "fit_failures": self.fit_failures_,
            "loaded_from_disk": self.loaded_from_disk_,
        }
