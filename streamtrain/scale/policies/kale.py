"""KALE's autoscaler as the paper describes it (§3.4), for KALE Table 3.

* **Proactive path**, every ``plan_interval_s``: a plan from the forecast by Eq. 10,
  calibrated by Algorithm 1, starting where an action started now would take effect;
  KALE scales to the plan's largest count (:meth:`Kale._plan`).
* **The samples on their way** (Eq. 10's ``L(t)``; §1 counts the 120 M samples a
  10-minute restart leaves behind at 200k samples/s): the backlog, including the one
  a restart would leave (:func:`restart_backlog_records`), is added to the plan.
* **Fallback** (§3.4.3), checked every ``decision_interval_s``: threshold scaling on
  measured lag above what KALE's own last restart explains (:meth:`Kale.decide`).

The paper gives no fallback thresholds; the defaults (:class:`KaleSettings`) are chosen
once for every trace. The point forecast is used as is: KALE plans on its
forecaster's output.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import ConfigError
from streamtrain.scale.fallback import HpaSettings, hpa_desired
from streamtrain.scale.gate import capacity_path, project_backlog
from streamtrain.scale.plan import basic_plan, stabilize
from streamtrain.scale.policies._common import fitted_model
from streamtrain.scale.policies.feed import ForecastFeed, default_forecaster_factory
from streamtrain.scale.policy import Decision, Observation, Policy, PolicyContext
from streamtrain.scale.policy_settings import settings_from
from streamtrain.scale.trigger import TriggerSettings, TriggerState, update_trigger
from streamtrain.units import MINUTE_S

__all__ = ["Kale", "KaleSettings", "restart_backlog_records"]

FloatArray = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class KaleSettings:
    """KALE's intervals (the case study's: a plan every 10 minutes, points of 10 min over
    one hour; τ = 15 min, ρ = 1 for Algorithm 1: the paper's default τ = 10 min
    calibrates nothing at 10-minute points, since a single point already lasts 10 min)
    and the fallback's thresholds (enter at 10 min of lag, leave under 1 min, 10-min
    cooldown; chosen here, the paper gives none). ``backlog_aware=False`` is the
    arrivals-only reading (for the sensitivity table: it never drains its own restarts
    and relies on the fallback all day)."""

    decision_interval_s: float = 60.0
    plan_interval_s: float = 600.0
    horizon_s: float = 3600.0
    plan_step_s: float = 600.0
    tau_s: float = 900.0
    rho: int = 1
    backlog_aware: bool = True
    fallback_lag_s: float = 600.0
    fallback_exit_lag_s: float = 60.0
    fallback_cooldown_s: float = 600.0

    def __post_init__(self) -> None:
        spans = (self.decision_interval_s, self.plan_interval_s, self.horizon_s, self.plan_step_s)
        if min(spans) <= 0:
            raise ConfigError("intervals, horizon and plan step must be positive")
        if not 0 <= self.fallback_exit_lag_s <= self.fallback_lag_s:
            raise ConfigError("need 0 <= fallback exit lag <= fallback lag")


def restart_backlog_records(
    loads_records_per_s: FloatArray,
    *,
    backlog_records: float,
    current_records_per_s: float,
    step_s: float,
    prep_s: float,
    pause_s: float,
) -> float:
    """The backlog when a restart started now ends: the current workers train during
    ``prep_s``, nobody during ``pause_s``; ``loads`` cover at least that long."""
    steps = max(1, math.ceil((prep_s + pause_s) / step_s))
    path = capacity_path(
        steps,
        current_records_per_s=current_records_per_s,
        target_records_per_s=current_records_per_s,
        step_s=step_s,
        prep_s=prep_s,
        pause_s=pause_s,
    )
    loads = np.asarray(loads_records_per_s, dtype=np.float64)[:steps]
    backlog = project_backlog(loads, path, backlog_records=backlog_records, step_s=step_s)
    return float(backlog[-1])


class Kale:
    """KALE's autoscaler (module docstring)."""

    name = "kale"

    def __init__(
        self, context: PolicyContext, *, feed: ForecastFeed | None = None, **settings: object
    ) -> None:
        self.settings = settings_from(KaleSettings, settings, policy=self.name)
        s = self.settings
        self.context = context
        self.decision_interval_s = s.decision_interval_s
        self.model = fitted_model(context)
        self.pause_s = context.action_pause_s
        self.prep_s = context.scale_up_prep_s
        factory = context.forecaster_factory or default_forecaster_factory(context.step_s)
        self.feed = feed or ForecastFeed(factory)
        self.trigger_settings = TriggerSettings(
            lag_enter_s=s.fallback_lag_s,
            lag_exit_s=s.fallback_exit_lag_s,
            error_enter=math.inf,
            error_exit=math.inf,
            min_active_s=s.plan_interval_s,
        )
        self.hpa = HpaSettings(
            target=s.fallback_lag_s,
            min_workers=context.min_workers,
            max_workers=context.max_workers,
        )
        self.trigger = TriggerState()
        self._planned_at_s = -math.inf
        self._settled_at_s = -math.inf  # when the last action finished
        self._last_pause_s = 0.0  # its pause

    def resume_from(self, previous: Policy) -> None:
        """Take over ``previous``'s running state when rebuilt on a new throughput model:
        the fallback trigger, when the last plan was made, and when the last action
        finished and how long it paused (the fallback's cooldown and expected lag), and
        the pause it plans with."""
        if not isinstance(previous, Kale):
            return
        self.trigger = previous.trigger
        self._planned_at_s = previous._planned_at_s
        self._settled_at_s = previous._settled_at_s
        self._last_pause_s = previous._last_pause_s
        self.pause_s = previous.pause_s

    def _calibrated(self, loads: FloatArray, step: int) -> list[int]:
        """Eq. 10 per step, calibrated by Algorithm 1."""
        plan = basic_plan(
            self.model,
            loads.tolist(),
            min_workers=self.context.min_workers,
            max_workers=self.context.max_workers,
        )
        s = self.settings
        return stabilize(list(plan.workers), step_s=step, tau_s=s.tau_s, rho=s.rho)

    def _expected_lag_s(self, now_s: float) -> float:
        """The lag the plan expects from its own last restart: the pause's worth at the
        restart's end, drained evenly over the horizon (how the plan sized it)."""
        since_s = now_s - self._settled_at_s
        if not 0 <= since_s < self.settings.horizon_s:
            return 0.0
        return self._last_pause_s * (1.0 - since_s / self.settings.horizon_s)

    def decide(self, obs: Observation) -> Decision | None:
        """The fallback, then the plan when one is due.

        The lag KALE's own last restart explains is expected (:meth:`_expected_lag_s`);
        once the measured lag exceeds that by ``fallback_lag_s`` (with the hysteresis of
        :mod:`streamtrain.scale.trigger`), ``desired = ceil(w · lag / fallback_lag_s)``
        as HPA computes it for a ``Value`` target, scale-up only, at most once per
        ``fallback_cooldown_s`` after an action finished. While the fallback is active
        (until the excess is under ``fallback_exit_lag_s``), or whenever the lag is more
        than ``fallback_exit_lag_s`` above the expected, the plan may raise the count but
        not lower it: the measurements say the plan is behind.
        """
        if obs.pending is not None:
            self._settled_at_s = obs.pending.ready_at_s
            self._last_pause_s = obs.pending.pause_s
            return None
        if obs.observed_steps == 0:
            return None
        if obs.last_pause_s is not None:
            self.pause_s = obs.last_pause_s
        s = self.settings
        current = obs.current_workers
        self.trigger = update_trigger(
            self.trigger,
            now_s=obs.now_s,
            max_lag_s=obs.max_lag_s,
            expected_lag_s=self._expected_lag_s(obs.now_s),
            settings=self.trigger_settings,
        )
        cooled = obs.now_s - self._settled_at_s >= s.fallback_cooldown_s
        if self.trigger.active and cooled:
            desired = hpa_desired(current, obs.max_lag_s, self.hpa)
            if desired > current:
                return Decision(
                    target_workers=desired,
                    reason="fallback",
                    explanation=(
                        f"KALE fallback: lag {obs.max_lag_s / MINUTE_S:.1f} min > "
                        f"{s.fallback_lag_s / MINUTE_S:.0f} min at {current} workers -> {desired}"
                    ),
                )
        if obs.now_s - self._planned_at_s < s.plan_interval_s:
            return None
        self._planned_at_s = obs.now_s
        return self._plan(obs)

    def _plan(self, obs: Observation) -> Decision | None:
        """The proactive path.

        KALE scales ahead of time, so the plan starts after the restart (``lead``: the
        context's prep + pause, or the measured pause once one is reported; ≈10 min,
        KALE §1). The forecast for the ``horizon_s`` after the lead is averaged into
        plan points of ``plan_step_s``; Eq. 10 gives a count per point with ``F`` fitted
        by NNLS (Eq. 6 for a synchronous job)
        (:func:`~streamtrain.scale.plan.basic_plan`), calibrated by Algorithm 1
        (:func:`~streamtrain.scale.plan.stabilize`). When the first point differs from
        the current count, KALE scales to the calibrated plan's largest count
        ("round-up": it puts real-time performance before GPU efficiency; the count is
        held for the plan).

        The backlog expected where the plan starts is spread over the horizon and added
        to every point's forecast. Whether to change is decided on the plan without a
        restart (the measured backlog, drained by the current workers meanwhile); what
        to change to, on the plan with a restart (the arrivals of the pause are backlog
        too, :func:`restart_backlog_records`). So a scale-down happens only when the
        smaller count still drains its own restart's backlog within the horizon, and a
        scale-up goes far enough to drain it.
        """
        s, step, current = self.settings, obs.step_s, obs.current_workers
        lead = max(1, math.ceil((self.prep_s + self.pause_s) / step))
        block = max(1, round(s.plan_step_s / step))  # trace steps per plan point
        span = min(math.ceil(s.horizon_s / step), self.feed.max_horizon_steps - lead)
        blocks = span // block
        if blocks < 1:
            raise ConfigError("the forecaster's horizon does not cover the restart and a plan")
        forecast = self.feed.forecast(obs, lead + blocks * block)
        ahead = forecast[lead:].reshape(blocks, block).mean(axis=1)
        plan_step = block * step
        drain_s = blocks * plan_step
        capacity = float(self.model.samples_per_s([current])[0])
        waiting = 0.0
        if s.backlog_aware:  # the backlog at the plan's start if nothing is restarted
            waiting = restart_backlog_records(
                forecast,
                backlog_records=obs.backlog_records,
                current_records_per_s=capacity,
                step_s=step,
                prep_s=lead * step,
                pause_s=0.0,
            )
        held = self._calibrated(ahead + waiting / drain_s, plan_step)
        want = held[0]
        if want == current:
            return None
        restart_backlog = 0.0
        if s.backlog_aware:
            restart_backlog = restart_backlog_records(
                forecast,
                backlog_records=obs.backlog_records,
                current_records_per_s=capacity,
                step_s=step,
                prep_s=self.prep_s if want > current else 0.0,
                pause_s=self.pause_s,
            )
        calibrated = self._calibrated(ahead + restart_backlog / drain_s, plan_step)
        target = max(calibrated)
        if want > current:
            target = max(target, want)
        if target >= current and want < current:
            return None  # the smaller count would not drain its own restart's backlog
        behind = obs.max_lag_s > self._expected_lag_s(obs.now_s) + s.fallback_exit_lag_s
        if target == current or (target < current and (self.trigger.active or behind)):
            return None  # no scale-down while the lag is above what the plan expects
        return Decision(
            target_workers=target,
            reason="proactive",
            plan=tuple(calibrated),
            plan_step_s=plan_step,
            explanation=(
                f"KALE: forecast {ahead[0]:,.0f} records/s after the "
                f"{lead * step / MINUTE_S:.0f}-min restart (peak {ahead.max():,.0f} within "
                f"{drain_s / MINUTE_S:.0f} min), plus {restart_backlog:,.0f} records waiting, "
                f"needs {target} workers (Eq. 10 + Algorithm 1)"
            ),
        )
