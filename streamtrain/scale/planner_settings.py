"""What the live planner is configured with, and the policy it builds from it.

Owned here (pure):

* :class:`PlannerSettings`: the job and group planned for, the policy and its settings
  (checked by :func:`~streamtrain.scale.policy_settings.settings_from` when the policy
  is built), the planning step, worker bounds, expected pauses, refit and command
  timing, and the arrival history's length and seed (the fields are explained in
  :mod:`streamtrain.scale.planner`'s docstring); the forecaster, its refit interval,
  fit timeout and directory (:mod:`streamtrain.scale.planner_forecast`), and the
  forecast quantile the policy plans on (``plan_quantile``, given to the policy as its
  :data:`~streamtrain.scale.policies.QUANTILE_SETTING`).
* :func:`build_policy`: the one place a :class:`~streamtrain.scale.policy.PolicyContext`
  is made from the settings and a throughput estimate (the planner's refits use it).
* :func:`check_policy`: builds the policy once on a prior, so bad policy settings fail
  at start (``streamtrain lag run --plan-job``) rather than at the first decision.
* :func:`command_timeout_s` and :func:`sample_retention_s`: the defaults that follow
  from the measured action costs and the planner's clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamtrain.errors import ConfigError
from streamtrain.forecast.registry import FORECASTER_NAMES, make_forecaster
from streamtrain.roster import RosterSettings
from streamtrain.scale.policies import POLICY_NAMES, QUANTILE_SETTING, ForecastFeed, make_policy
from streamtrain.scale.policy import Policy, PolicyContext
from streamtrain.scale.samples import SampleBook, SampleSettings, ThroughputEstimate
from streamtrain.scale.timescale import SeedHistory, TimeScale
from streamtrain.units import DAY_S, MINUTE_S, WEEK_S

__all__ = [
    "PlannerSettings",
    "build_policy",
    "check_policy",
    "command_timeout_s",
    "sample_retention_s",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannerSettings:
    """What the planner plans for, and how (:mod:`streamtrain.scale.planner` explains)."""

    job: str
    group: str
    policy: str = "streamtrain"
    policy_settings: tuple[tuple[str, Any], ...] = ()
    step_s: int = 60
    min_workers: int = 1
    max_workers: int = 32
    initial_workers: int | None = None
    action_pause_s: float = 600.0
    min_action_pause_s: float = 0.0  # a floor under the measured pause
    lag_floor_s: float = 0.0  # lag while keeping up: the policy sees lag above it
    scale_up_prep_s: float = 0.0
    # The pool counts a new worker only once it is admitted, after its preparation, and
    # a leaving worker finishes its step and hands its shards back before it leaves,
    # the others training meanwhile (a two-phase start and drain; with one model
    # always: a joiner heals before it is admitted): the time an action takes to show
    # is a joiner's preparation or a leaver's drain, not a pause of the workers that
    # stay, and the pause stays the configured (measured) one.
    two_phase_actions: bool = False
    refit_interval_s: float = 300.0
    refit_tolerance: float = 0.1
    command_timeout_s: float = 900.0
    max_history_steps: int = 3 * WEEK_S // MINUTE_S  # three weeks of one-minute steps
    recent_window_s: float = 300.0
    samples: SampleSettings = field(default_factory=SampleSettings)
    # the worker count from the workers' own samples (wall-clock seconds: streamtrain.roster)
    workers: RosterSettings = field(default_factory=RosterSettings)
    time_scale: TimeScale = field(default_factory=TimeScale)
    history: SeedHistory | None = None
    # The forecaster (streamtrain.scale.planner_forecast): the model, how often it is
    # refitted, how long a fit may take, where fitted models are kept across restarts,
    # and the forecast quantile the policy plans on (None: the policy's own default);
    # forecaster_options: the model's own (registry) options.
    forecaster: str = "auto"
    forecaster_options: dict[str, Any] = field(default_factory=dict)
    refit_every_s: float = DAY_S
    fit_timeout_s: float = 1800.0
    forecaster_dir: Path | None = None
    plan_quantile: float | None = None

    def __post_init__(self) -> None:
        if self.history is not None and self.history.step_s != self.step_s:
            raise ConfigError(
                f"the seed history's step ({self.history.step_s} s) is not the planning "
                f"step ({self.step_s} s)"
            )
        if not self.job or not self.group:
            raise ConfigError("the planner needs a job and a consumer group")
        if self.policy not in POLICY_NAMES:
            raise ConfigError(
                f"unknown policy {self.policy!r}; use one of {', '.join(POLICY_NAMES)}"
            )
        if self.step_s < 1:
            raise ConfigError(f"the planning step must be at least 1 s, got {self.step_s}")
        if not 1 <= self.min_workers <= self.max_workers:
            raise ConfigError(
                f"need 1 <= min workers <= max workers, got {self.min_workers}, {self.max_workers}"
            )
        if self.initial_workers is not None and self.initial_workers < 0:
            raise ConfigError("the initial worker count cannot be negative")
        if self.forecaster not in FORECASTER_NAMES:
            raise ConfigError(
                f"unknown forecaster {self.forecaster!r}; use one of {', '.join(FORECASTER_NAMES)}"
            )
        if self.refit_every_s <= 0 or self.fit_timeout_s <= 0:
            raise ConfigError("the forecaster's refit interval and fit timeout must be positive")
        if self.forecaster_options:  # an unknown option is a ConfigError now, not at the fit
            make_forecaster(self.forecaster, step_s=self.step_s, **self.forecaster_options)
        if self.plan_quantile is not None:
            if not 0 < self.plan_quantile < 1:
                raise ConfigError(f"the planning quantile is in (0, 1), got {self.plan_quantile}")
            if self.policy not in QUANTILE_SETTING:
                raise ConfigError(
                    f"policy {self.policy} does not plan on a forecast quantile; "
                    f"--plan-quantile works with {', '.join(sorted(QUANTILE_SETTING))}"
                )
        spans = (self.refit_interval_s, self.command_timeout_s, self.recent_window_s)
        if self.lag_floor_s < 0:
            raise ConfigError(f"the lag floor cannot be negative, got {self.lag_floor_s}")
        if min(spans) <= 0 or self.refit_tolerance < 0 or self.max_history_steps < 1:
            raise ConfigError("intervals, timeouts and the history length must be positive")

    @property
    def settings_dict(self) -> dict[str, Any]:
        """The policy's settings, with the planning quantile under the policy's name for it."""
        settings = dict(self.policy_settings)
        if self.plan_quantile is not None:
            settings[QUANTILE_SETTING[self.policy]] = self.plan_quantile
        return settings


def build_policy(
    settings: PlannerSettings,
    estimate: ThroughputEstimate | None,
    feed: ForecastFeed | None = None,
) -> Policy:
    """The configured policy on ``estimate`` (its observations; none without one), with
    the planner's bounds, step and expected pause; proactive policies share ``feed``."""
    s = settings
    context = PolicyContext(
        min_workers=s.min_workers,
        max_workers=s.max_workers,
        step_s=s.step_s,
        throughput_observations=estimate.observations if estimate else (),
        model_kind=s.samples.model_kind,
        action_pause_s=s.action_pause_s,
        scale_up_prep_s=s.scale_up_prep_s,
    )
    extra: dict[str, Any] = {"feed": feed} if feed is not None else {}
    return make_policy(s.policy, context, **extra, **s.settings_dict)


def check_policy(settings: PlannerSettings) -> None:
    """Build the configured policy once on a prior, so bad policy settings fail at start
    (a :class:`ConfigError`) rather than at the first decision."""
    s = settings
    prior = SampleSettings(prior_single_worker_records_per_s=1.0, model_kind=s.samples.model_kind)
    estimate = SampleBook(s.job, prior).estimate(0.0, max_workers=s.max_workers)
    build_policy(s, estimate)


def command_timeout_s(clock: TimeScale, prep_s: float, pause_s: float) -> float:
    """How long an action stays pending (no new decision) until the samples show its
    size (model seconds): the measured preparation and pause (wall seconds), with room
    to spare, and at least 15 model minutes."""
    return max(15 * MINUTE_S, clock.model_duration(max(30.0, 4 * (prep_s + pause_s))))


def sample_retention_s(clock: TimeScale, bucket_s: float) -> float:
    """How late a sample may arrive and still count (model seconds): two buckets, five
    model minutes, and some wall seconds however fast the clock runs."""
    return max(5 * MINUTE_S, 2 * bucket_s, clock.model_duration(10.0))
