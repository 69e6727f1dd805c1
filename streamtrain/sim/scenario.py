"""A multi-job scenario (``streamtrain simulate --scenario FILE``): what shares the pool.

Owned here: the scenario's schema as frozen values (:class:`Scenario`,
:class:`OnlineSpec`, :class:`ServingSpec`, :class:`OfflineSpec`: each says what its
keys mean), :func:`load_scenario` (JSON or TOML; every missing or unknown field is
named, with where it is), :func:`parse_scenario` (the same from a mapping) and
:func:`offline_jobs` (the seeded synthetic arrivals).

A scenario (JSON shown; TOML has the same keys)::

    {"capacity_workers": 150, "days": 2, "seed": 0,
     "online": [{"name": "ads", "shape": "kale", "peak_workers": 16}, ...],
     "serving": {"name": "search", "shape": "web", "peak_workers": 40},
     "offline": {"jobs": 40}}
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from streamtrain.errors import ConfigError
from streamtrain.scale.policies.feed import forecaster_factory
from streamtrain.units import HOUR_S, MIN_PER_H, MINUTE_S

__all__ = [
    "ALLOCATORS",
    "MODEL_RATES",
    "SHARED",
    "OfflineJob",
    "OfflineSpec",
    "OnlineSpec",
    "Scenario",
    "ServingSpec",
    "load_scenario",
    "offline_jobs",
    "parse_scenario",
]

ALLOCATORS = ("milp", "milp-noforecast", "greedy", "partition", "one-way")
SHARED = frozenset({"milp", "milp-noforecast", "greedy"})  # one pool for every job
# One-worker speed of each model type, records/s (a VGG step is slower than a ResNet's).
MODEL_RATES = {"resnet": 1.0, "vgg": 0.6, "gpt2": 0.4, "vit": 0.8}


@dataclass(frozen=True, slots=True)
class OnlineSpec:
    """A job with a lag SLO (guarantee class), replayed by the existing engine with its
    scaling policy. ``shape`` (a synthetic trace: :data:`streamtrain.forecast.series.SHAPES`)
    or ``trace`` (a CSV path) is required, and ``peak_workers`` (the job is sized so its
    peak needs that many). ``max_workers``: its fixed cap when it runs alone (default 7/6
    of the peak, as ``streamtrain simulate``); ``pool_max_workers``: its cap in the
    shared pool (default: ``max_workers``)."""

    name: str
    peak_workers: int
    shape: str | None = None
    trace: str | None = None
    seed: int = 0
    max_workers: int | None = None
    pool_max_workers: int | None = None
    policy: str = "streamtrain"

    @property
    def alone_cap(self) -> int:
        return self.max_workers or math.ceil(self.peak_workers * 7 / 6)

    @property
    def pool_cap(self) -> int:
        return self.pool_max_workers or self.alone_cap


@dataclass(frozen=True, slots=True)
class ServingSpec:
    """One serving pool; its trace (``shape`` or ``trace``) gives the servers its SLO needs
    per step, ``min_scale = ceil(peak_workers · rate / peak rate)``, at least
    ``min_workers``; ``max_workers`` caps it (default ``peak_workers``)."""

    name: str
    peak_workers: int
    shape: str | None = None
    trace: str | None = None
    seed: int = 0
    min_workers: int = 1
    max_workers: int | None = None


@dataclass(frozen=True, slots=True)
class OfflineSpec:
    """``jobs`` offline training jobs arriving over the first ``arrival_window_h`` hours (a
    minute in working hours, 08:00-20:00, twice as likely as one at night: two thirds
    of a day's arrivals), each with a model type, a size of ``work_worker_hours``
    (log-uniform: the hours it takes on one worker), a deadline of ``deadline_factor``
    times its duration at ``max_workers``, the ModelArts speed curve, and powers of two
    only when ``power_of_two``."""

    jobs: int
    seed: int = 0
    arrival_window_h: float = 24.0
    work_worker_hours: tuple[float, float] = (1.0, 48.0)
    deadline_factor: tuple[float, float] = (2.0, 6.0)
    max_workers: int = 16
    power_of_two: bool = True
    pause_s: float = 60.0  # checkpoint and restart per scaling action
    start_s: float = 30.0  # before a started job trains


@dataclass(frozen=True, slots=True)
class Scenario:
    """The top level: ``capacity_workers`` (required), ``days`` simulated (2: arrivals in
    the first, the second lets the queue drain), ``seed``, ``interval_s`` (the
    allocator's round, 300: ModelArts' f), ``horizon_steps``, ``partitions`` per online
    job, ``forecaster`` and ``allocators`` (which to compare; all by default)."""

    capacity_workers: int
    online: tuple[OnlineSpec, ...]
    serving: ServingSpec
    offline: OfflineSpec
    days: int = 2
    seed: int = 0
    interval_s: int = 300
    horizon_steps: int = 5
    partitions: int = 64
    allocators: tuple[str, ...] = ALLOCATORS
    name: str = "scenario"
    forecaster: str = "auto"  # the online jobs' policies' forecaster (a registry name)

    def __post_init__(self) -> None:
        if self.capacity_workers < 1 or self.days < 1:
            raise ConfigError("scenario: capacity_workers and days must be at least 1")
        if self.interval_s < 60 or self.interval_s % 60 or self.horizon_steps < 1:
            raise ConfigError("scenario: interval_s must be a whole number of minutes >= 1")
        forecaster_factory(self.forecaster)  # a ConfigError for an unknown name
        unknown = [a for a in self.allocators if a not in ALLOCATORS]
        if unknown or not self.allocators:
            raise ConfigError(f"scenario: allocators must be some of {', '.join(ALLOCATORS)}")
        names = [o.name for o in self.online] + [self.serving.name]
        if len(set(names)) != len(names):
            raise ConfigError(f"scenario: job names must be unique, got {names}")
        static = sum(o.alone_cap for o in self.online) + self.serving.peak_workers
        if static > self.capacity_workers:
            raise ConfigError(
                f"scenario: the online caps and serving's peak need {static} workers, more "
                f"than the pool's {self.capacity_workers} (a static partition cannot exist)"
            )


_FIELDS: dict[str, tuple[set[str], set[str]]] = {  # (required, optional)
    "scenario": (
        {"capacity_workers", "online", "serving", "offline"},
        {
            *("days", "seed", "interval_s", "horizon_steps", "partitions", "allocators"),
            *("name", "forecaster"),
        },
    ),
    "online": (
        {"name", "peak_workers"},
        {"shape", "trace", "seed", "max_workers", "pool_max_workers", "policy"},
    ),
    "serving": ({"name", "peak_workers"}, {"shape", "trace", "seed", "min_workers", "max_workers"}),
    "offline": (
        {"jobs"},
        {
            "seed",
            "arrival_window_h",
            "work_worker_hours",
            "deadline_factor",
            "max_workers",
            "power_of_two",
            "pause_s",
            "start_s",
        },
    ),
}


def _checked(kind: str, where: str, value: object) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"scenario: {where} must be a table of fields, got {value!r}")
    required, optional = _FIELDS[kind]
    missing = sorted(required - value.keys())
    if missing:
        raise ConfigError(f"scenario: {where} is missing field {', '.join(map(repr, missing))}")
    unknown = sorted(value.keys() - required - optional)
    if unknown:
        raise ConfigError(f"scenario: {where} has unknown field {', '.join(map(repr, unknown))}")
    if kind in ("online", "serving") and ("shape" in value) == ("trace" in value):
        raise ConfigError(f"scenario: {where} needs exactly one of 'shape' and 'trace'")
    return dict(value)


def _pair(where: str, value: object) -> tuple[float, float]:
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise ConfigError(f"scenario: {where} must be [low, high], got {value!r}")
    low, high = (float(v) for v in value)
    if not 0 < low <= high:
        raise ConfigError(f"scenario: {where} needs 0 < low <= high, got {value!r}")
    return low, high


def parse_scenario(data: object, *, base: Path | None = None, name: str = "scenario") -> Scenario:
    """A :class:`Scenario` from a mapping; trace paths are relative to ``base``."""
    top = _checked("scenario", "the scenario", data)
    online_list = top["online"]
    if not isinstance(online_list, list):
        raise ConfigError("scenario: 'online' must be a list of jobs")

    def located(fields: dict[str, Any]) -> dict[str, Any]:
        if "trace" in fields and base is not None:
            fields["trace"] = str((base / str(fields["trace"])).resolve())
        return fields

    try:
        online = tuple(
            OnlineSpec(**located(_checked("online", f"online[{i}]", job)))
            for i, job in enumerate(online_list)
        )
        serving = ServingSpec(**located(_checked("serving", "serving", top["serving"])))
        offline_fields = _checked("offline", "offline", top["offline"])
        for key in ("work_worker_hours", "deadline_factor"):
            if key in offline_fields:
                offline_fields[key] = _pair(f"offline.{key}", offline_fields[key])
        offline = OfflineSpec(**offline_fields)
        rest = {k: top[k] for k in _FIELDS["scenario"][1] if k in top}
        if "allocators" in rest:
            rest["allocators"] = tuple(rest["allocators"])
        return Scenario(
            capacity_workers=int(top["capacity_workers"]),
            online=online,
            serving=serving,
            offline=offline,
            **({"name": name} | rest),
        )
    except TypeError as exc:  # a value of the wrong kind
        raise ConfigError(f"scenario: {exc}") from exc


def load_scenario(path: str | Path) -> Scenario:
    """Read a ``.json`` or ``.toml`` scenario (see the module docstring)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read the scenario {path}: {exc.strerror}") from exc
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(
            f"scenario {path} is not valid {path.suffix[1:] or 'JSON'}: {exc}"
        ) from exc
    return parse_scenario(data, base=path.parent, name=path.stem)


@dataclass(frozen=True, slots=True)
class OfflineJob:
    name: str
    model_type: str
    arrival_s: float  # since the simulated window's start
    work_records: float  # records to train (its size)
    rate_per_worker: float  # true one-worker records/s
    deadline_s: float  # since the window's start
    max_workers: int
    power_of_two: bool

    @property
    def worker_hours(self) -> float:
        return self.work_records / self.rate_per_worker / HOUR_S


def offline_jobs(spec: OfflineSpec) -> tuple[OfflineJob, ...]:
    """The seeded arrivals of ``spec`` (module docstring), in arrival order."""
    rng = np.random.default_rng(spec.seed)
    minutes = max(1, int(spec.arrival_window_h * MIN_PER_H))
    hour = (np.arange(minutes) / MIN_PER_H) % 24
    weight = np.where((hour >= 8) & (hour < 20), 2.0, 1.0)  # 2/3 in working hours a day
    picked = rng.choice(minutes, size=spec.jobs, p=weight / weight.sum())
    arrival = (picked + rng.random(spec.jobs)) * float(MINUTE_S)
    low, high = spec.work_worker_hours
    hours = np.exp(rng.uniform(math.log(low), math.log(high), spec.jobs))
    types = rng.choice(sorted(MODEL_RATES), spec.jobs)
    noise = rng.lognormal(0.0, 0.1, spec.jobs)
    factor = rng.uniform(*spec.deadline_factor, spec.jobs)
    speedup = spec.max_workers * 0.8 ** math.log2(spec.max_workers)
    jobs: list[OfflineJob] = []
    for i in np.argsort(arrival, kind="stable"):
        rate = MODEL_RATES[str(types[i])] * float(noise[i])
        duration_s = float(hours[i]) * HOUR_S / speedup
        jobs.append(
            OfflineJob(
                name=f"offline-{len(jobs):02d}",
                model_type=str(types[i]),
                arrival_s=float(arrival[i]),
                work_records=float(hours[i]) * HOUR_S * rate,
                rate_per_worker=rate,
                deadline_s=float(arrival[i]) + float(factor[i]) * duration_s,
                max_workers=spec.max_workers,
                power_of_two=spec.power_of_two,
            )
        )
    return tuple(jobs)
