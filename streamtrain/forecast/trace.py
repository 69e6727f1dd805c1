"""Traffic traces: the ``timestamp,records_per_s`` CSV format, and a KALE-shaped generator.

Owned here:

* :class:`Trace`: a regular series of records/s (one value per ``step_s``, default one
  minute) starting at ``start_s`` (epoch seconds). Missing rows are ``NaN``: each
  consumer decides what a gap means (the forecasters fill it, the simulator reads it as
  no traffic).
* :func:`native_step_s`: a trace CSV's own resolution (the most common spacing of its
  timestamps, as a divisor of a day), which ``forecast eval`` uses by default.
* :func:`load_trace` / :func:`write_trace`: the CSV format shared by
  ``streamtrain forecast eval``, ``streamtrain simulate`` and ``streamtrain trace synth``:
  a header with a ``timestamp`` column (ISO 8601 or epoch seconds) and a
  ``records_per_s`` column; other columns are ignored; rows may be unsorted; rows that
  fall in the same step are averaged.
* :func:`synth_trace`: the shape of KALE Fig. 2a, per minute: working days climbing from
  ≈34k records/s in the early morning to ≈260k in the evening, weekends higher for
  longer, multiplicative noise and occasional bursts. Seeded, so tests and the demo
  are reproducible. What every synthetic series shares (also
  :mod:`streamtrain.forecast.series`): :data:`SYNTH_MONDAY_S`, the Monday midnight
  they start from, and :func:`ar1_noise`, their correlated step-to-step jitter.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

import numpy as np
from numpy.typing import NDArray

from streamtrain.errors import TraceError
from streamtrain.units import DAY_S, HOUR_S

__all__ = [
    "SYNTH_MONDAY_S",
    "Trace",
    "ar1_noise",
    "load_trace",
    "native_step_s",
    "parse_timestamp_s",
    "synth_trace",
    "write_trace",
]

# 2026-01-05 00:00 UTC, a Monday: synthetic traces start on a Monday at midnight.
SYNTH_MONDAY_S = 1_767_571_200


@dataclass(frozen=True, slots=True, eq=False)
class Trace:
    """Records/s at ``start_s + i·step_s``; ``NaN`` where the source had no row."""

    start_s: float
    step_s: int
    records_per_s: NDArray[np.float64]
    name: str = "trace"

    def __post_init__(self) -> None:
        if self.step_s <= 0:
            raise TraceError(f"a trace step must be positive, got {self.step_s} s")
        values = self.records_per_s
        if values.ndim != 1:
            raise TraceError("a trace is one-dimensional")
        finite = values[~np.isnan(values)]
        if np.any(~np.isfinite(finite)) or np.any(finite < 0):
            raise TraceError("records/s must be finite and non-negative")

    def __len__(self) -> int:
        return int(self.records_per_s.shape[0])

    @property
    def timestamps_s(self) -> NDArray[np.float64]:
        return self.start_s + self.step_s * np.arange(len(self), dtype=np.float64)

    @property
    def gaps(self) -> int:
        """Steps with no row in the source."""
        return int(np.isnan(self.records_per_s).sum())

    def steps_per(self, period_s: int) -> int:
        """Steps in ``period_s`` (a day, a week); the period must be a whole number of steps."""
        if period_s % self.step_s:
            raise TraceError(f"{period_s} s is not a whole number of {self.step_s}-s steps")
        return period_s // self.step_s

    def zero_filled(self) -> NDArray[np.float64]:
        """The values with gaps read as no traffic (what the simulator replays)."""
        return np.nan_to_num(self.records_per_s, nan=0.0)

    def slice_steps(self, start: int, stop: int | None = None) -> Trace:
        """Steps ``[start, stop)`` as a trace of their own."""
        values = self.records_per_s[start:stop]
        return Trace(self.start_s + start * self.step_s, self.step_s, values.copy(), self.name)


def parse_timestamp_s(text: str) -> float:
    """Epoch seconds from ``text``: a number (epoch seconds) or ISO 8601 (naive = UTC)."""
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(value):
            raise TraceError(f"timestamp {text!r} is not finite")
        return value
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise TraceError(f"timestamp {text!r} is neither epoch seconds nor ISO 8601") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def load_trace(path: str | Path, *, step_s: int = 60) -> Trace:
    """Read a trace CSV onto a regular ``step_s`` grid (see the module docstring)."""
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            times, values = _read_rows(handle, str(path))
    except OSError as exc:
        raise TraceError(f"cannot read trace {path}: {exc.strerror or exc}") from exc
    return _to_grid(times, values, step_s, path.stem)


def native_step_s(path: str | Path) -> int:
    """The resolution of the trace at ``path`` in seconds (module docstring): the most
    common gap between consecutive distinct timestamps, rounded to the nearest divisor
    of a day."""
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            times, _ = _read_rows(handle, str(path))
    except OSError as exc:
        raise TraceError(f"cannot read trace {path}: {exc.strerror or exc}") from exc
    stamps = np.unique(np.asarray(times, dtype=np.float64))
    if stamps.shape[0] < 2:
        raise TraceError(f"{path}: one timestamp gives no resolution")
    gaps, counts = np.unique(np.round(np.diff(stamps)), return_counts=True)
    gap = float(gaps[np.argmax(counts)])
    divisors = np.array([d for d in range(1, DAY_S + 1) if DAY_S % d == 0], dtype=np.float64)
    return int(divisors[np.argmin(np.abs(np.log(divisors) - np.log(max(gap, 1.0))))])


def _read_rows(handle: TextIO, source: str) -> tuple[list[float], list[float]]:
    reader = csv.DictReader(handle)
    header = reader.fieldnames or []
    for column in ("timestamp", "records_per_s"):
        if column not in header:
            raise TraceError(
                f"{source}: the header needs a {column!r} column "
                f"(found {', '.join(header) or 'none'})"
            )
    times: list[float] = []
    values: list[float] = []
    for row in reader:
        line = reader.line_num
        raw_time, raw_value = row["timestamp"], row["records_per_s"]
        if raw_time is None or raw_value is None:
            raise TraceError(f"{source}:{line}: the row has too few columns")
        if not raw_time.strip() and not raw_value.strip():
            continue
        try:
            times.append(parse_timestamp_s(raw_time))
        except TraceError as exc:
            raise TraceError(f"{source}:{line}: {exc.message}") from None
        try:
            value = float(raw_value)
        except ValueError:
            raise TraceError(
                f"{source}:{line}: records_per_s {raw_value!r} is not a number"
            ) from None
        if not math.isfinite(value) or value < 0:
            raise TraceError(f"{source}:{line}: records_per_s must be finite and >= 0, got {value}")
        values.append(value)
    if not times:
        raise TraceError(f"{source}: the trace has no rows")
    return times, values


def _to_grid(times: list[float], values: list[float], step_s: int, name: str) -> Trace:
    if step_s <= 0:
        raise TraceError(f"a trace step must be positive, got {step_s} s")
    stamps = np.asarray(times, dtype=np.float64)
    start_s = math.floor(stamps.min() / step_s) * step_s
    index = ((stamps - start_s) // step_s).astype(np.int64)
    length = int(index.max()) + 1
    sums = np.bincount(index, weights=np.asarray(values, dtype=np.float64), minlength=length)
    counts = np.bincount(index, minlength=length)
    grid = np.full(length, np.nan)
    present = counts > 0
    grid[present] = sums[present] / counts[present]
    return Trace(float(start_s), step_s, grid, name)


def write_trace(trace: Trace, out: TextIO) -> None:
    """Write ``trace`` as CSV (ISO 8601 UTC timestamps); gap steps are left out."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["timestamp", "records_per_s"])
    for stamp, value in zip(trace.timestamps_s, trace.records_per_s, strict=True):
        if np.isnan(value):
            continue
        moment = datetime.fromtimestamp(float(stamp), tz=UTC)
        writer.writerow([moment.strftime("%Y-%m-%dT%H:%M:%SZ"), f"{value:.1f}"])


def _daily_shape(hour: NDArray[np.float64], weekend: NDArray[np.bool_]) -> NDArray[np.float64]:
    """0 at the early-morning trough (05:00), 1 at the evening peak (21:00)."""
    rising = (hour >= 5) & (hour < 21)
    phase_up = (hour - 5) / 16
    phase_down = np.mod(hour - 21, 24) / 8
    shape = np.where(
        rising, (1 - np.cos(np.pi * phase_up)) / 2, (1 + np.cos(np.pi * phase_down)) / 2
    )
    # Weekends: people are up and using the app earlier and for longer.
    return np.where(weekend, shape**0.55, shape)


def synth_trace(
    days: int = 28,
    *,
    seed: int = 0,
    step_s: int = 60,
    trough_records_per_s: float = 34_000.0,
    peak_records_per_s: float = 260_000.0,
    bursts_per_day: float = 1.5,
    noise: float = 0.04,
) -> Trace:
    """A KALE Fig. 2a-shaped trace of ``days`` days from a Monday 00:00 UTC (see module)."""
    if days < 1:
        raise TraceError(f"a synthetic trace needs at least one day, got {days}")
    if not 0 < trough_records_per_s < peak_records_per_s:
        raise TraceError("need 0 < trough < peak records/s")
    rng = np.random.default_rng(seed)
    steps = days * DAY_S // step_s
    t_s = np.arange(steps, dtype=np.float64) * step_s
    hour = np.mod(t_s, DAY_S) / HOUR_S
    weekday = (t_s // DAY_S).astype(np.int64) % 7
    weekend = weekday >= 5
    peak = np.where(weekend, peak_records_per_s * 1.08, peak_records_per_s)
    base = trough_records_per_s + (peak - trough_records_per_s) * _daily_shape(hour, weekend)
    # A slow day-to-day wander of the level (±5%), so no two weeks are the same.
    day_level = 1 + 0.05 * rng.standard_normal(days)
    base = base * np.repeat(day_level, DAY_S // step_s)
    # Multiplicative AR(1) noise: minute-to-minute jitter that is correlated, as real traffic.
    values = base * np.exp(ar1_noise(rng, steps, noise, 0.8))
    values = values * (1 + _bursts(rng, steps, step_s, bursts_per_day * days))
    return Trace(
        float(SYNTH_MONDAY_S), step_s, np.maximum(values, 0.0), f"synth-{days}d-seed{seed}"
    )


def ar1_noise(
    rng: np.random.Generator, steps: int, sigma: float, phi: float
) -> NDArray[np.float64]:
    """Stationary AR(1) noise with standard deviation ``sigma`` and step-to-step
    correlation ``phi`` (for multiplicative use: ``values * exp(noise)``)."""
    shocks = rng.standard_normal(steps) * sigma * math.sqrt(1 - phi**2)
    out = np.empty(steps)
    previous = 0.0
    for i in range(steps):
        previous = phi * previous + shocks[i]
        out[i] = previous
    return out


def _bursts(
    rng: np.random.Generator, steps: int, step_s: int, expected: float
) -> NDArray[np.float64]:
    """Relative extra traffic: bursts of +20..60% that decay over 5..30 minutes."""
    extra = np.zeros(steps)
    for _ in range(int(rng.poisson(expected))):
        start = int(rng.integers(0, steps))
        height = rng.uniform(0.2, 0.6)
        length = max(1, int(rng.uniform(300, 1800) // step_s))
        stop = min(steps, start + length)
        decay = np.linspace(1.0, 0.0, stop - start, endpoint=False)
        extra[start:stop] += height * decay
    return extra
