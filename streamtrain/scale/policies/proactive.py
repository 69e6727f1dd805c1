"""streamtrain's own policy: KALE's proactive plan (§3.4), made downtime-aware.

Every ``decision_interval_s`` it plans the worker count for a forecast load and
acts only when the plan says holding would cost lag. What it adds to KALE:

1. **Quantile forecasts**, smoothed over ``smooth_s`` (:meth:`StreamtrainPolicy._load`).
2. **A measured F**: the NNLS fit (Eq. 6) rescaled to the training speed measured at
   the current count (a slower GPU, power capping).
3. **Act at the last safe moment, for long enough**: a fluid backlog model
   (:mod:`streamtrain.scale.gate`) says when holding the current count stops being
   safe (:meth:`StreamtrainPolicy._scale_up`, :meth:`StreamtrainPolicy._scale_down`).
4. **The traffic just measured** overrules a forecast that lags a rise
   (:func:`nowcast_floor`).
5. **The downtime-aware gate** (DLRover-RM Eq. 8): an action must save more than
   its pause costs (:func:`~streamtrain.scale.gate.gate_scale_up`,
   :func:`~streamtrain.scale.gate.gate_scale_down`).
6. **Fallback** (KALE §3.4.3) when measurements say the plan is wrong
   (:mod:`streamtrain.scale.trigger`).

The pause and prep per action come from the context (the executor's mode: two-phase
scaling shortens the pause), each replaced by the measured one once one is reported.
The defaults and why they are what they are:
:class:`~streamtrain.scale.policies.proactive_settings.StreamtrainSettings`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from streamtrain.scale.fallback import HpaSettings, hpa_desired
from streamtrain.scale.gate import (
    capacity_paths,
    estimated_lag_s,
    gate_scale_down,
    gate_scale_up,
    meets_lag_goal,
    project_backlog,
)
from streamtrain.scale.plan import stabilize
from streamtrain.scale.policies._common import capacity_table, fitted_model
from streamtrain.scale.policies.feed import ForecastFeed, default_forecaster_factory
from streamtrain.scale.policies.hpa import scale_up_limit
from streamtrain.scale.policies.proactive_settings import StreamtrainSettings
from streamtrain.scale.policy import Decision, Observation, Policy, PolicyContext, Reason
from streamtrain.scale.policy_settings import settings_from
from streamtrain.scale.trigger import TriggerState, update_trigger
from streamtrain.units import MINUTE_S

__all__ = ["StreamtrainPolicy", "nowcast_floor", "recent_median"]

FloatArray = NDArray[np.float64]


def nowcast_floor(load: FloatArray, rate_records_per_s: float, steps: int) -> FloatArray:
    """``load`` with its first ``steps`` steps raised to at least ``rate_records_per_s``
    (the traffic just measured), the rest as it was; a new array."""
    result = np.array(load, dtype=np.float64)
    head = max(0, min(steps, result.size))
    result[:head] = np.maximum(result[:head], rate_records_per_s)
    return result


def recent_median(values: FloatArray) -> float:
    """The value of ``float(np.median(values))`` (NaN when any is; 0 when there are
    none) without numpy's per-call overhead, which dwarfs sorting the few steps of a
    recent window in Python: the middle one, or the mean of the middle two."""
    items = sorted(values.tolist())
    if not items:
        return 0.0
    if any(math.isnan(x) for x in items):
        return math.nan
    mid = len(items) // 2
    return float(items[mid]) if len(items) % 2 else (items[mid - 1] + items[mid]) / 2


class StreamtrainPolicy:
    """See the module docstring."""

    name = "streamtrain"

    def __init__(
        self, context: PolicyContext, *, feed: ForecastFeed | None = None, **settings: object
    ) -> None:
        # ``trigger_<field>`` settings reach the fallback trigger (``--policy-setting
        # trigger_lag_exit_s=600``), on top of this policy's default thresholds.
        self.settings = settings_from(StreamtrainSettings, settings, policy=self.name)
        self.context = context
        self.decision_interval_s = self.settings.decision_interval_s
        self.model = fitted_model(context)
        self.table = capacity_table(self.model, context.max_workers)
        self.correction = 1.0
        # measured / fitted speed per worker count (EWMA; NaN: never measured there)
        self.ratios = np.full(context.max_workers + 1, np.nan)
        self.pause_s = context.action_pause_s
        self.prep_s = context.scale_up_prep_s
        factory = context.forecaster_factory or default_forecaster_factory(context.step_s)
        self.feed = feed or ForecastFeed(factory, max_horizon_steps=max(180, 1))
        self.trigger = TriggerState()
        self._expected: tuple[float, FloatArray] | None = None
        self._settled_at_s = -math.inf  # when the last action finished
        self._no_down_until_s = -math.inf  # scale-downs wait after a scale-up or lag
        self.hpa = HpaSettings(
            target=self.settings.fallback_target_lag_s,
            min_workers=context.min_workers,
            max_workers=context.max_workers,
        )

    def resume_from(self, previous: Policy) -> None:
        """Take over ``previous``'s running state when rebuilt on a new throughput model:
        the fallback trigger, the lag its last action's plan expects, when that action
        finished (the fallback's cooldown), until when scale-downs wait, and the pause and
        preparation it plans with. The per-count speed corrections are not taken: they
        correct the old model's table."""
        if not isinstance(previous, StreamtrainPolicy):
            return
        self.trigger = previous.trigger
        self._expected = previous._expected
        self._settled_at_s = previous._settled_at_s
        self._no_down_until_s = previous._no_down_until_s
        self.pause_s = previous.pause_s
        self.prep_s = previous.prep_s

    # -- measurements ------------------------------------------------------------------

    def _learn(self, obs: Observation) -> None:
        measured = obs.throughput_per_worker_records_per_s
        w = obs.current_workers
        if measured and 1 <= w <= self.context.max_workers and self.table[w] > 0:
            ratio = measured * w / self.table[w]
            self.correction = 0.7 * self.correction + 0.3 * ratio
            old = self.ratios[w]
            self.ratios[w] = ratio if math.isnan(old) else 0.7 * old + 0.3 * ratio
        if obs.last_pause_s is not None:
            self.pause_s = obs.last_pause_s
        if obs.last_prep_s is not None:
            self.prep_s = obs.last_prep_s

    def _measured_table(self) -> FloatArray:
        """The fitted F, corrected per count by the measured speed: where a count was
        measured, its own ratio; between measured counts, the ratio interpolated; beyond
        them, the nearest one's (stragglers make the error of Eq. 6 differ by count)."""
        seen = np.flatnonzero(~np.isnan(self.ratios))
        if seen.size == 0:
            return self.table * self.correction
        counts = np.arange(self.table.size, dtype=np.float64)
        ratio = np.interp(counts, seen.astype(np.float64), self.ratios[seen])
        result: FloatArray = self.table * ratio
        return result

    def _expected_lag_s(self, now_s: float, step_s: int) -> float:
        if self._expected is None:
            return 0.0
        start_s, path = self._expected
        index = int((now_s - start_s) // step_s)
        return float(path[index]) if 0 <= index < path.size else 0.0

    def _load(self, obs: Observation, steps: int) -> FloatArray:
        """The load to plan for over ``steps`` steps.

        The ``quantile`` forecast (:meth:`~streamtrain.scale.policies.feed.ForecastFeed.upper`:
        the model's own quantiles, else calibrated by the ratios of past actuals to
        forecasts, never below the point forecast) plus ``headroom``, averaged over
        ``smooth_s``; its first ``nowcast_span_s`` at least the mean arrival rate of the
        last ``nowcast_s`` of complete steps (plus ``headroom``). Under a forecast-error
        fallback it is rescaled by the measured ``Σ actual / Σ forecast`` of the last 10
        steps (within 0.5-3x: the level is wrong, the shape is kept); under a lag
        fallback it is at least the measured rate plus ``fallback_margin``.
        """
        s = self.settings
        upper = self.feed.upper(obs, steps, s.quantile) * (1.0 + s.headroom)
        if s.level_steps > 0:
            ratio = self.feed.recent_ratio(s.level_steps)
            if ratio is not None:
                upper = upper * min(s.level_max, max(s.level_min, ratio))
        width = max(1, round(s.smooth_s / obs.step_s))
        if width > 1:
            padded = np.concatenate([upper, np.full(width - 1, upper[-1])])
            upper = np.convolve(padded, np.ones(width) / width, mode="valid")
        if s.nowcast_s > 0 and s.nowcast_span_s > 0:
            upper = nowcast_floor(
                upper,
                obs.recent_rate_records_per_s(s.nowcast_s) * (1.0 + s.headroom),
                math.ceil(s.nowcast_span_s / obs.step_s),
            )
        if self.trigger.active and self.trigger.cause == "forecast_error":
            ratio = self.feed.recent_ratio()
            if ratio is not None:
                upper = upper * min(3.0, max(0.5, ratio))
        elif self.trigger.active:
            recent = obs.recent_rate_records_per_s(600.0)
            upper = np.maximum(upper, recent * (1.0 + s.fallback_margin))
        return upper

    # -- the decision ------------------------------------------------------------------

    def decide(self, obs: Observation) -> Decision | None:
        if obs.pending is not None:
            self._settled_at_s = obs.pending.ready_at_s
            if obs.pending.target_workers > obs.pending.from_workers:
                self._no_down_until_s = obs.pending.ready_at_s + self.settings.down_delay_s
            return None
        if obs.observed_steps == 0:
            return None
        self._learn(obs)
        if obs.max_lag_s > self.settings.tolerated_lag_s:
            self._no_down_until_s = max(
                self._no_down_until_s, obs.now_s + self.settings.down_delay_s
            )
        s, step = self.settings, obs.step_s
        steps = max(2, min(self.feed.max_horizon_steps, math.ceil(s.horizon_s / step)))
        self.trigger = update_trigger(
            self.trigger,
            now_s=obs.now_s,
            max_lag_s=obs.max_lag_s,
            expected_lag_s=self._expected_lag_s(obs.now_s, step),
            forecast_error=self.feed.recent_error(),
            settings=s.trigger,
        )
        load = self._load(obs, steps)
        table = self._measured_table()
        w = obs.current_workers
        backlog0 = obs.backlog_records
        tolerance = 1e-6 * max(1.0, float(load.max()) * step)
        catchup = math.ceil(s.catchup_s / step)
        up_resume = math.ceil((self.prep_s + self.pause_s) / step)
        cover = math.ceil(max(s.min_cover_s, s.cover_pauses * self.pause_s) / step)
        lead = up_resume + math.ceil(s.decision_interval_s / step)

        hold = project_backlog(
            load, np.full(steps, table[w]), backlog_records=backlog0, step_s=step
        )
        hold_lag = estimated_lag_s(hold, load)
        hold_ok = bool(
            meets_lag_goal(
                hold,
                hold_lag,
                resume=0,
                catchup_steps=catchup,
                end=lead,
                tolerated_lag_s=s.tolerated_lag_s,
                tolerance=tolerance,
            )
        )
        if s.hold_growth:  # holding must not grow the lag past the tolerance meanwhile
            hold_ok = hold_ok and float(hold_lag[:lead].max()) <= max(
                s.tolerated_lag_s, obs.max_lag_s
            )
        # The plan goes with a decision only: computed when one is made.
        plan = functools.partial(self._plan, load, table, step)
        lag_fallback = (
            self.trigger.active
            and self.trigger.cause == "lag"
            and obs.now_s - self._settled_at_s >= s.fallback_cooldown_s
        )
        if not hold_ok or lag_fallback:
            decision = self._scale_up(
                obs, load, table, plan, (up_resume, catchup, cover), tolerance, lag_fallback
            )
            if decision is not None or not hold_ok:
                return decision
        if (self.trigger.active and self.trigger.cause == "lag") or (
            obs.now_s < self._no_down_until_s
        ):
            return None
        down_catchup = math.ceil(s.down_catchup_s / step)
        down_load = load * (1.0 + s.down_headroom)
        return self._scale_down(obs, down_load, table, plan, down_catchup, tolerance)

    def _plan(self, load: FloatArray, table: FloatArray, step: int) -> tuple[int, ...]:
        """Eq. 10 per step on the planned load, calibrated by Algorithm 1 (for the record)."""
        lo, hi = self.context.min_workers, self.context.max_workers
        enough = table[None, lo : hi + 1] > load[:, None]
        best = lo + int(np.argmax(table[lo : hi + 1]))
        counts = np.where(enough.any(axis=1), lo + np.argmax(enough, axis=1), best)
        return tuple(stabilize(counts.tolist(), step_s=step))

    def _candidates(
        self,
        load: FloatArray,
        table: FloatArray,
        counts: NDArray[np.int64],
        backlog0: float,
        current: int,
        prep_s: float,
        pause_s: float,
        step: int,
    ) -> tuple[FloatArray, FloatArray]:
        paths = capacity_paths(
            load.size,
            current_records_per_s=float(table[current]),
            targets_records_per_s=table[counts],
            step_s=step,
            prep_s=prep_s,
            pause_s=pause_s,
        )
        backlog = project_backlog(load, paths, backlog_records=backlog0, step_s=step)
        return backlog, estimated_lag_s(backlog, load)

    def _scale_up(
        self,
        obs: Observation,
        load: FloatArray,
        table: FloatArray,
        plan: Callable[[], tuple[int, ...]],
        windows: tuple[int, int, int],
        tolerance: float,
        lag_fallback: bool,
    ) -> Decision | None:
        """Scale up if holding is not safe; ``windows = (resume, catchup, cover)`` in steps.

        Holding is fine while the backlog drains within ``catchup_s`` and the lag then
        stays within ``tolerated_lag_s`` until an action started at the next decision
        could take effect (``hold_growth`` also bounds it before the drain). Else the
        target is the smallest count that drains the pause's backlog within
        ``catchup_s`` of resuming and keeps up for ``cover`` after
        (``max(min_cover_s, cover_pauses x pause)``), if it saves more backlog than its
        pause creates. Under a lag fallback the count is at least the HPA formula on lag
        (``ceil(w · lag / fallback_target_lag_s)``, HPA's scale-up limit applied, at most
        once per ``fallback_cooldown_s`` after an action finished, so the pause of one
        fallback action does not trigger the next), and at most the count the model says
        trains fastest up to it: none when that is the current count.
        """
        s, ctx, step, w = self.settings, self.context, obs.step_s, obs.current_workers
        resume, catchup, cover = windows
        if w >= ctx.max_workers:
            return None
        counts = np.arange(w + 1, ctx.max_workers + 1)
        backlog, lag = self._candidates(
            load, table, counts, obs.backlog_records, w, self.prep_s, self.pause_s, step
        )
        good = meets_lag_goal(
            backlog,
            lag,
            resume=resume,
            catchup_steps=catchup,
            end=resume + cover,
            tolerated_lag_s=s.tolerated_lag_s,
            tolerance=tolerance,
        )
        # The smallest count that meets the goal; none does: the one with the most F.
        index = int(np.argmax(good)) if good.any() else int(np.argmax(table[counts]))
        target = int(counts[index])
        path: Reason = "proactive"
        why = f"holding {w} would lag within {resume * step / MINUTE_S:.0f} min"
        if lag_fallback:
            desired = hpa_desired(w, obs.max_lag_s, self.hpa)
            desired = min(desired, scale_up_limit(w, 100.0, 4), ctx.max_workers)
            # Lag that more workers cannot train away: no count up to the target trains
            # faster than the model's fastest among them (on a pool that shares its
            # machines, more workers can train slower).
            fastest = w + int(np.argmax(table[w : max(target, desired) + 1]))
            if fastest == w:
                return None
            target, index = fastest, fastest - w - 1
            path = "fallback"
            why = f"measured lag {obs.max_lag_s / MINUTE_S:.1f} min above the plan's"
        elif self.trigger.active:
            path = "fallback"
            why = "recent traffic far from the forecast: planning on the measured rate"
        end = min(load.size, resume + cover)
        verdict = gate_scale_up(
            load[:end],
            current_records_per_s=float(table[w]),
            target_records_per_s=float(table[target]),
            backlog_records=obs.backlog_records,
            step_s=step,
            pause_s=self.pause_s,
            prep_s=self.prep_s,
        )
        if not verdict.accept and path == "proactive":
            return None
        self._expected = (obs.now_s, lag[min(index, lag.shape[0] - 1)])
        return Decision(
            target_workers=target,
            reason=path,
            plan=plan(),
            plan_step_s=step,
            explanation=f"{why}; {target} drains the pause within {s.catchup_s / MINUTE_S:.0f} min "
            f"and covers {cover * step / MINUTE_S:.0f} min; {verdict.explanation}",
        )

    def _scale_down(
        self,
        obs: Observation,
        load: FloatArray,
        table: FloatArray,
        plan: Callable[[], tuple[int, ...]],
        catchup: int,
        tolerance: float,
    ) -> Decision | None:
        """Scale down to the smallest count that keeps up for ``down_hold_s``.

        Not below the median rate of the steps in the last ``down_recent_s`` (plus
        ``headroom`` and ``down_headroom``; never called while the lag is the fallback's
        cause): the median, so that one step that read low (a producer or broker that fell
        behind and caught up in the next step) does not pull the floor down. It must
        drain its own pause's backlog within ``down_catchup_s`` and free more
        worker-time than its pause wastes, so small scale-downs wait and merge into
        larger ones.
        """
        s, ctx, step, w = self.settings, self.context, obs.step_s, obs.current_workers
        if w <= ctx.min_workers:
            return None
        pause = self.pause_s
        resume = math.ceil(pause / step)
        hold = math.ceil(s.down_hold_s / step)
        counts = np.arange(ctx.min_workers, w)
        floor = 0.0
        if s.down_recent_s > 0:  # never below the traffic just measured
            recent = obs.recent_rates_records_per_s(s.down_recent_s)
            floor = recent_median(recent) * (1.0 + s.headroom) * (1.0 + s.down_headroom)
            counts = counts[table[counts] > floor]
            if counts.size == 0:
                return None
        # Projected only for the counts above the floor (each count's row is its own).
        backlog, lag = self._candidates(
            load, table, counts, obs.backlog_records, w, 0.0, pause, step
        )
        good = meets_lag_goal(
            backlog,
            lag,
            resume=resume,
            catchup_steps=catchup,
            end=resume + hold,
            tolerated_lag_s=s.tolerated_lag_s,
            tolerance=tolerance,
        )
        if not good.any():
            return None
        index = int(np.argmax(good))
        target = int(counts[index])
        end = min(load.size, resume + hold)
        verdict = gate_scale_down(
            load[:end],
            current_workers=w,
            target_workers=target,
            target_records_per_s=float(table[target]),
            backlog_records=obs.backlog_records,
            step_s=step,
            pause_s=pause,
            hold_s=s.down_hold_s,
            drain_s=s.down_catchup_s,
            lag_budget_s=obs.max_lag_s + pause + s.down_catchup_s,
        )
        if not verdict.accept:
            return None
        self._expected = (obs.now_s, lag[index])
        return Decision(
            target_workers=target,
            reason="proactive",
            plan=plan(),
            plan_step_s=step,
            explanation=f"{target} workers keep up for {s.down_hold_s / MINUTE_S:.0f} min "
            f"after the pause ({table[target]:.1f} records/s against a planned load of at "
            f"most {float(load[:end].max()):.1f} and a floor of {floor:.1f} from the rate just "
            f"measured); {verdict.explanation}",
        )
