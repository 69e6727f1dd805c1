"""Which forecast quantiles a replay precomputes.

Owned here: :func:`shared_levels` (the levels the compared policies plan on:
:func:`~streamtrain.scale.policies.planning_level`) and :func:`check_levels` (a
comparison refused when its precomputed forecasts lack one), :func:`calibrates` (whether
a replayed feed will need to score actual/forecast ratios). A replayed feed plans
on the model's own quantile at its level, as the live planner's feed does, which asks
its model for that level; without it, it would calibrate the point forecast by its own
scoring instead (:meth:`~streamtrain.scale.policies.feed.ForecastFeed.upper`).
"""

from __future__ import annotations

from collections.abc import Sequence

from streamtrain.errors import ConfigError
from streamtrain.scale.policies import planning_level
from streamtrain.scale.policies.feed import Forecast
from streamtrain.sim.settings import Variant

__all__ = ["calibrates", "check_levels", "shared_levels"]


def shared_levels(variants: Sequence[Variant]) -> tuple[float, ...]:
    """The forecast quantiles the policies of ``variants`` plan on, in order: the ones to
    precompute. Each feed then answers as the live planner's does, which asks its model
    for the level it plans on (:meth:`ForecastFeed.upper`)."""
    asked = {planning_level(v.policy, v.settings) for v in variants}
    return tuple(sorted(level for level in asked if level is not None))


def check_levels(cache: dict[int, Forecast], variants: Sequence[Variant]) -> None:
    """A :class:`ConfigError` when a variant plans on a quantile the forecasts were
    precomputed without (its feed would silently calibrate the point forecast instead,
    which the live planner does not). Forecasts without any quantile (a model that has
    none, or none asked for) cannot tell, and pass."""
    carried = _carried(cache)
    if not carried:
        return
    missing = {
        v.label: level
        for v in variants
        if (level := planning_level(v.policy, v.settings)) is not None and level not in carried
    }
    if missing:
        raise ConfigError(
            f"the forecasts were precomputed with quantiles {sorted(carried)}, "
            f"without the levels these variants plan on: {missing}"
        )


def calibrates(variant: Variant, cache: dict[int, Forecast]) -> bool:
    """Whether ``variant``'s feed, served from ``cache``, needs its actual/forecast
    ratios: only when it plans on a quantile the cached forecasts do not carry (a policy
    that plans on none asks only for point forecasts)."""
    level = planning_level(variant.policy, variant.settings)
    carried = _carried(cache)
    return level is not None and (carried is None or level not in carried)


def _carried(cache: dict[int, Forecast]) -> frozenset[float] | None:
    """The quantile levels the cached forecasts carry (each entry was made with the
    same levels); None without forecasts."""
    entry = next(iter(cache.values()), None)
    return None if entry is None else frozenset(entry.quantiles)
