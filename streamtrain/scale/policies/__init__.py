"""Scaling policies behind one interface (:class:`~streamtrain.scale.policy.Policy`),
shared by the simulator and the live control app.

Owned here: the registry. :data:`POLICY_NAMES` lists them in KALE Table 3's order plus
streamtrain's own; :func:`make_policy` builds one from a
:class:`~streamtrain.scale.policy.PolicyContext` and keyword settings (each policy's
settings dataclass names them). Proactive policies accept ``feed=`` to share one
:class:`~streamtrain.scale.policies.feed.ForecastFeed`; :func:`planning_level` says which
forecast quantile a policy plans on (:data:`QUANTILE_SETTING` names its setting).

* ``adequate``: a fixed maximum (:mod:`.adequate`)
* ``hpa``: Kubernetes HPA (:mod:`.hpa`)
* ``autopilot``: decayed sliding-window percentile plus margin (:mod:`.autopilot`)
* ``madu``: forecast + linear throughput model (:mod:`.madu`)
* ``kale``: forecast + NNLS F + Algorithm 1 + lag fallback (:mod:`.kale`)
* ``streamtrain``: quantile forecasts, measured F, downtime-aware gate, fallback
  trigger (:mod:`.proactive`)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from streamtrain.errors import ConfigError
from streamtrain.scale.policies.adequate import Adequate, AdequateSettings
from streamtrain.scale.policies.autopilot import Autopilot, AutopilotSettings
from streamtrain.scale.policies.feed import ForecastFeed, default_forecaster_factory
from streamtrain.scale.policies.hpa import Hpa, HpaPolicySettings
from streamtrain.scale.policies.kale import Kale, KaleSettings
from streamtrain.scale.policies.madu import Madu, MaduSettings
from streamtrain.scale.policies.proactive import StreamtrainPolicy
from streamtrain.scale.policies.proactive_settings import StreamtrainSettings
from streamtrain.scale.policy import Policy, PolicyContext
from streamtrain.scale.policy_settings import settings_from

__all__ = [
    "FORECASTING_POLICIES",
    "POLICY_NAMES",
    "QUANTILE_SETTING",
    "Adequate",
    "AdequateSettings",
    "Autopilot",
    "AutopilotSettings",
    "ForecastFeed",
    "Hpa",
    "HpaPolicySettings",
    "Kale",
    "KaleSettings",
    "Madu",
    "MaduSettings",
    "StreamtrainPolicy",
    "StreamtrainSettings",
    "default_forecaster_factory",
    "make_policy",
    "planning_level",
]

_REGISTRY: dict[str, Callable[..., Policy]] = {
    "adequate": Adequate,
    "hpa": Hpa,
    "autopilot": Autopilot,
    "madu": Madu,
    "kale": Kale,
    "streamtrain": StreamtrainPolicy,
}
POLICY_NAMES: tuple[str, ...] = tuple(_REGISTRY)
FORECASTING_POLICIES = frozenset({"madu", "kale", "streamtrain"})
# The settings class and field of the forecast quantile a policy plans on, for those that do.
_QUANTILE_FIELD: dict[str, tuple[type[Any], str]] = {
    "streamtrain": (StreamtrainSettings, "quantile"),
    "madu": (MaduSettings, "uncertainty_level"),
}
QUANTILE_SETTING = {name: field for name, (_, field) in _QUANTILE_FIELD.items()}


def make_policy(name: str, context: PolicyContext | None = None, **settings: Any) -> Policy:
    """Build policy ``name`` (default context: :class:`PolicyContext` defaults, which
    has no throughput observations, so only adequate, hpa and autopilot can use it);
    unknown names and settings are a :class:`ConfigError`
    (:func:`~streamtrain.scale.policy_settings.settings_from`)."""
    context = context or PolicyContext()
    try:
        cls = _REGISTRY[name]
    except KeyError:
        raise ConfigError(
            f"unknown policy {name!r}; use one of {', '.join(POLICY_NAMES)}"
        ) from None
    return cls(context, **settings)


def planning_level(name: str, settings: Mapping[str, object]) -> float | None:
    """The forecast quantile policy ``name`` plans on with ``settings`` (its settings
    class's default unless given there, checked as :func:`make_policy` checks it); None
    for a policy that plans on no quantile."""
    if name not in _QUANTILE_FIELD:
        return None
    cls, field = _QUANTILE_FIELD[name]
    return float(getattr(settings_from(cls, settings, policy=name), field))
