"""The planner's forecaster options of ``streamtrain lag run``: ``--forecaster``,
``--refit-every``, ``--plan-quantile``, the fit timeout and ``--forecaster-option``
(the model's own options, e.g. ``train_steps=100``), each with its
``STREAMTRAIN_PLAN_*`` variable; :func:`forecaster_settings`, their values as
:class:`~streamtrain.scale.planner_settings.PlannerSettings` keywords; and
:func:`parse_model_options`, ``KEY=VALUE`` pairs read as a model's options.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from streamtrain.commands.common import option
from streamtrain.errors import ConfigError
from streamtrain.forecast.registry import FORECASTER_NAMES
from streamtrain.units import DAY_S, HOUR_S, MINUTE_S

__all__ = ["forecaster_options", "forecaster_settings", "parse_duration_s", "parse_model_options"]

F = TypeVar("F", bound=Callable[..., Any])
_UNITS = {"": 1.0, "s": 1.0, "m": MINUTE_S, "min": MINUTE_S, "h": HOUR_S, "d": DAY_S}


def parse_duration_s(text: str, flag: str = "--refit-every") -> float:
    """``90``, ``90s``, ``30m``, ``6h``, ``1d`` -> seconds (positive)."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(s|m|min|h|d)?\s*", text)
    if match is None:
        raise ConfigError(f"{flag} {text!r} is not a duration (e.g. 1d, 6h, 30m, 900s)")
    seconds = float(match.group(1)) * _UNITS[match.group(2) or ""]
    if seconds <= 0:
        raise ConfigError(f"{flag} must be positive, got {text!r}")
    return seconds


def parse_model_options(pairs: Sequence[str], flag: str = "--forecaster-option") -> dict[str, Any]:
    """``KEY=VALUE`` pairs -> options; a value is read as JSON when it parses (``100``,
    ``0.5``, ``true``), as text otherwise. Whether the model knows the key is checked
    where the model is made."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{flag} {pair!r} is not KEY=VALUE")
        try:
            options[key.strip()] = json.loads(text)
        except ValueError:
            options[key.strip()] = text
    return options


def forecaster_options(command: F) -> F:
    """Add the forecaster options to ``command`` (module docstring)."""
    options = [
        option(
            "--forecaster",
            env="PLAN_FORECASTER",
            type=click.Choice(FORECASTER_NAMES),
            default="auto",
            show_default=True,
            help="The model the planner forecasts with (auto: the best of seasonal naive, "
            "AutoETS, MSTL and the transformer on the last week, refitted on schedule). "
            "Fits run in a worker process; the seasonal naive answers until one lands.",
        ),
        option(
            "--refit-every",
            env="PLAN_REFIT_EVERY",
            default="1d",
            show_default=True,
            help="Refit the forecaster this often (1d, 6h, 30m, 900s); also refitted when "
            "its recent error exceeds the seasonal naive's.",
        ),
        option(
            "--plan-quantile",
            env="PLAN_QUANTILE",
            type=click.FloatRange(0, 1, min_open=True, max_open=True),
            default=None,
            help="The forecast quantile the policy plans on (streamtrain: its quantile, "
            "default 0.5, the median, best in the simulator; madu: its uncertainty level).",
        ),
        option(
            "--forecaster-fit-timeout",
            env="PLAN_FORECASTER_FIT_TIMEOUT",
            default="30m",
            show_default=True,
            help="A fit still running after this long (wall clock, also under "
            "--plan-time-scale) is late: alert, seasonal naive meanwhile.",
        ),
        option(
            "--forecaster-option",
            env="PLAN_FORECASTER_OPTIONS",
            multiple=True,
            metavar="KEY=VALUE",
            help="An option of the model (repeatable), e.g. train_steps=100 for a quicker "
            "transformer; see `streamtrain forecast eval --help` for the models.",
        ),
    ]
    for add in reversed(options):
        command = add(command)
    return command


def forecaster_settings(
    forecaster: str,
    refit_every: str,
    plan_quantile: float | None,
    forecaster_fit_timeout: str,
    forecaster_option: Sequence[str] = (),
) -> dict[str, Any]:
    """The options' values as planner-settings keywords."""
    return {
        "forecaster": forecaster,
        "refit_every_s": parse_duration_s(refit_every),
        "plan_quantile": plan_quantile,
        "fit_timeout_s": parse_duration_s(forecaster_fit_timeout, "--forecaster-fit-timeout"),
        "forecaster_options": parse_model_options(forecaster_option),
    }
